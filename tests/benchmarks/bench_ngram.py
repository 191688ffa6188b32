"""lmlib.models.ngram against nltk.lm on the same PTB sentences, same order, same smoothing: perplexity and speed.

Run from the repository root:  LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_ngram.py

nltk.lm is pure Python, and its Kneser-Ney scans every higher-order context for each continuation count,
so it gets the first sentences of PTB train and valid (the same subset for lmlib). Both models count exactly
the same n-grams (lmlib.models.ngram.ngrams; building them is included in nltk's fit time) and share one vocabulary
size (training types + an unknown word). nltk's KneserNeyInterpolated is lmlib's KN with discounts
[0, d, d, ...] and padding="full" (see tests/test_ngram.py). Then lmlib alone on all of PTB, KN5 and MKN5.
Results go to lmlib/results/ngram.json.
"""

from __future__ import annotations

import platform
import time

import numpy as np
from common import write_result
from nltk.lm import KneserNeyInterpolated, Laplace, Lidstone
from nltk.lm.vocabulary import Vocabulary

from lmlib.data import load_ptb
from lmlib.models.ngram import BOS, NGramLM, ngrams

CASES = [
    # name, nltk class + kwargs, lmlib kwargs, order, padding, train sentences, valid sentences
    ("Laplace (add-1) trigram", Laplace, {}, dict(smoothing="add_k", k=1.0), 3, "single", 5000, 500),
    ("Lidstone (add-0.01) trigram", Lidstone, {"gamma": 0.01}, dict(smoothing="add_k", k=0.01), 3, "single", 5000, 500),
    ("Kneser-Ney interpolated trigram, d=0.1", KneserNeyInterpolated, {"discount": 0.1},
     dict(smoothing="kn", discount=[0.0, 0.1, 0.1]), 3, "full", 300, 30),
]


def history(sentence, i, order, padding):
    pad = 1 if padding == "single" else max(order - 1, 1)
    return tuple(([BOS] * pad + list(sentence[:i]))[-(order - 1):])


class PredictedTypes(Vocabulary):
    """nltk's Vocabulary, except that len() is a given number of types: the V that Lidstone divides by."""

    def __init__(self, *args, size: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.size = size

    def __len__(self) -> int:
        return self.size


def run_nltk(cls, kwargs, order, padding, train, valid):
    start = time.perf_counter()
    # PTB's own "<unk>" is nltk's unknown label, and "<s>" is made a known word so that nltk does not read it
    # as "<unk>" in contexts. nltk's Vocabulary then counts both "<s>" (never predicted) and, a second time,
    # its unknown label (it appears in the text) in len(vocab); giving it the number of predicted types as its
    # length gives Lidstone the same V as lmlib (without it, V is 2 larger).
    words = [t for s in train for t in s] + [BOS]
    types = len({t for s in train for t in s} | {"<unk>"})
    vocab = PredictedTypes(words, unk_cutoff=1, unk_label="<unk>", size=types)
    assert Vocabulary.__len__(vocab) == types + 2, (Vocabulary.__len__(vocab), types)
    lm = cls(order=order, vocabulary=vocab, **kwargs)
    lm.fit([ngrams(s, order, padding) for s in train])
    fitted = time.perf_counter()
    logs = [lm.logscore(s[i], history(s, i, order, padding)) for s in valid for i in range(len(s))]
    ppl = 2.0 ** (-np.mean(logs))
    return ppl, fitted - start, time.perf_counter() - fitted


def run_lmlib(kwargs, order, padding, train, valid):
    start = time.perf_counter()
    model = NGramLM(order, padding=padding, **kwargs).fit(train)
    fitted = time.perf_counter()
    ppl = model.perplexity(valid)
    return ppl, fitted - start, time.perf_counter() - fitted


def main() -> None:
    train_all, valid_all, test_all = load_ptb("train"), load_ptb("valid"), load_ptb("test")
    results = {"machine": f"{platform.machine()}, {platform.python_version()}, 2 shared CPU cores", "cases": []}
    for name, cls, nltk_kw, ours_kw, order, padding, n_train, n_valid in CASES:
        train, valid = train_all[:n_train], valid_all[:n_valid]
        theirs = run_nltk(cls, nltk_kw, order, padding, train, valid)
        ours = run_lmlib(ours_kw, order, padding, train, valid)
        row = {"case": name, "order": order, "padding": padding, "train_sentences": n_train,
               "valid_sentences": n_valid, "valid_tokens": sum(map(len, valid)),
               "nltk_perplexity": theirs[0], "lmlib_perplexity": ours[0],
               "relative_difference": abs(ours[0] - theirs[0]) / theirs[0],
               "nltk_fit_s": theirs[1], "nltk_eval_s": theirs[2], "lmlib_fit_s": ours[1], "lmlib_eval_s": ours[2],
               "speedup_fit_plus_eval": (theirs[1] + theirs[2]) / (ours[1] + ours[2])}
        results["cases"].append(row)
        print(f"{name}: ppl nltk {theirs[0]:.4f} lmlib {ours[0]:.4f} (rel. diff {row['relative_difference']:.1e}); "
              f"fit+eval nltk {theirs[1] + theirs[2]:.2f} s, lmlib {ours[1] + ours[2]:.3f} s, "
              f"lmlib {row['speedup_fit_plus_eval']:.0f}x faster")
    full = []
    for smoothing in ("kn", "mkn"):
        ppl_test, fit_s, eval_s = run_lmlib(dict(smoothing=smoothing), 5, "single", train_all, test_all)
        full.append({"model": f"{smoothing.upper()}5, all of PTB", "test_perplexity": ppl_test, "fit_s": fit_s,
                     "eval_s": eval_s, "test_tokens": sum(map(len, test_all))})
        print(f"lmlib {smoothing.upper()}5 on all PTB: test ppl {ppl_test:.2f} (Mikolov et al. 2011: 141.2), "
              f"fit {fit_s:.2f} s, evaluate {eval_s:.2f} s")
    results["full_ptb"] = full
    write_result("ngram", results)


if __name__ == "__main__":
    main()
