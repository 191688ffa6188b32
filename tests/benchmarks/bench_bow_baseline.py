"""The bag-of-words baseline beside every IMDb transfer result: TF-IDF unigrams + bigrams and logistic regression.

Same test reviews, label samples and seeds as the neural rows (bench_gpt_finetune.py, bench_bert_finetune.py):
the seeded 1,000 of IMDb's 25,000 test reviews (``imdb_test_subset(1000, 0)``), 100 or 1,000 training labels drawn
by ``sample_balanced(..., seed)`` for seeds 0-2, and all 25,000 training reviews once (seed 0 shuffles the
cross-validation folds). C is chosen by 5-fold cross-validation on the training labels only
(``lmlib.eval.bow_baseline.fit_bow``). Two truncations of every review, training and test alike:

* ``full``: the whole review (``load_imdb`` has already turned ``<br />`` into line breaks);
* ``model_view``: exactly the text the fine-tuned GPT reads, the first and last 63 tokens of the shipped GPT
  tokenizer (lmlib/pretrained/gpt_imdb/tokenizer.json) decoded back to text (``model_view``).

The truncated rows depend on that tokenizer, so the file records its sha256 (``checkpoint_sha256``) and
``lmlib.course.results.bow_baseline_rows`` refuses them for another one. Runs can be split across invocations
(``--sizes``, ``--seeds``, ``--truncations``): rows of an earlier run with the same settings and tokenizer are kept.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bow_baseline.py --sizes 100 1000 --seeds 0 1 2
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bow_baseline.py --sizes all --seeds 0

``--benchmark ulmfit_imdb`` measures the same on bench_ulmfit_imdb.py's reviews (2,500 test reviews by
``sample_balanced(test, 2500, 0)``, its labelled samples at 100 / 500 / 1,000 / 5,000 labels and all 25,000; the
truncated text is the first and last 64 of the 128 tokens its classifier reads, ``words_view``), writing
bow_ulmfit_imdb.json; ``--benchmark elmo_transfer`` on bench_elmo_transfer.py's (its 2,000 test reviews, its
``balanced_subset`` samples, a review's first 48 words), writing bow_elmo_transfer.json. ULMFiT's 25,000-label
samples are the training set in another order, so they are measured once, as ``all``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import time
from pathlib import Path

import torch
from common import imdb_test_subset, kept_rows, load, machine, summarise, write_result

from lmlib.data import load_imdb
from lmlib.eval.bow_baseline import BowConfig, bow_accuracy, fit_bow, model_view, words_view
from lmlib.recipes import gpt as G
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.text.tokenizers import ByteLevelBPE

TOKENIZER = G.CHECKPOINT_DIR / "tokenizer.json"
TRUNCATIONS = {"full": "the whole review",
               "model_view": "the first and last 63 tokens of the shipped GPT tokenizer, decoded: what the fine-tuned "
                             "GPT reads between [start] and [extract]"}
SETTINGS = dict(n_test=1000, test_seed=0, max_tokens=G.FINETUNE_RECIPE["max_len"] - 2, truncations=TRUNCATIONS,
                config=dataclasses.asdict(BowConfig()), threads=1)


class Benchmark:
    """What one neural benchmark's rows are measured on, for the bag of words to be measured on the same: its test
    reviews, each seed's labelled sample, and the text its model reads (``truncations``: name -> description, and
    ``cut(texts, name)``). ``gpt`` is the GPT and BERT benchmarks' (bow_baseline.json); ``ulmfit_imdb`` and
    ``elmo_transfer`` those of bench_ulmfit_imdb.py and bench_elmo_transfer.py."""

    def __init__(self, name: str):
        self.name, self.views, self.extra = name, {}, {}
        self.train = load_imdb("train")
        if name == "gpt":
            self.results, self.settings = "bow_baseline", SETTINGS
            self.sha = G.load_pretrained()[2]["sha256"]["tokenizer.json"]  # load_pretrained checks every sha256
            self.checkpoint_file = "lmlib/pretrained/gpt_imdb/tokenizer.json"
            tokenizer = ByteLevelBPE.load(TOKENIZER)
            self.view = lambda t: model_view(tokenizer, t, SETTINGS["max_tokens"])
            self.test = imdb_test_subset(SETTINGS["n_test"], SETTINGS["test_seed"])
            self.what = "the text the GPT reads"
        elif name == "ulmfit_imdb":
            from bench_ulmfit_imdb import SETTINGS as UL
            from bench_ulmfit_imdb import hash_words

            from lmlib.recipes import ulmfit as U
            _, vocab = U.load_pretrained(U.IMDB_DIR)  # checks the files' sha256; the scratch rows share this vocabulary
            self.results = "bow_ulmfit_imdb"
            self.settings = dict(benchmark="ulmfit_imdb", n_test=UL["test_reviews"], test_seed=UL["test_seed"],
                                 test_sample="sample_balanced(test, n_test, test_seed)", max_tokens=UL["max_len"],
                                 truncations={"full": TRUNCATIONS["full"], "model_view": (
                                     f"the first and last {UL['max_len'] // 2} tokens of review_tokens(review) in the "
                                     "ULMFiT vocabulary (other words <unk>), joined by spaces: what the classifier reads")},
                                 config=dataclasses.asdict(BowConfig()), threads=1)
            # the vocabulary ships with the stage (b) checkpoint; ulmfit_imdb.json's parts record its words' sha256 too
            self.sha = json.loads((U.IMDB_DIR / "pretrain.json").read_text())["sha256"]["ulmfit_imdb.safetensors"]
            self.extra = {"vocab_words_sha": hash_words(vocab.itos)}
            self.checkpoint_file = "lmlib/pretrained/ulmfit_imdb/ulmfit_imdb.safetensors (its vocabulary)"
            self.view = lambda t: words_view(U.review_tokens(t), UL["max_len"], "head_and_tail", vocab)
            test = load_imdb("test")
            self.test = U.sample_balanced(test.texts, test.labels, UL["test_reviews"], UL["test_seed"])
            self.what = "the text the ULMFiT classifier reads"
        elif name == "elmo_transfer":
            from bench_elmo_probes import test_indices
            from bench_elmo_transfer import SETTINGS as EL

            from lmlib.recipes import elmo as R
            self.results = "bow_elmo_transfer"
            self.settings = dict(benchmark="elmo_transfer", n_test=EL["test_reviews"], test_seed=0,
                                 test_sample="bench_elmo_probes.test_indices(test.labels)", max_tokens=EL["max_tokens"],
                                 truncations={"full": TRUNCATIONS["full"], "model_view": (
                                     f"the review's first {EL['max_tokens']} words (review_sentences), lower-cased and "
                                     "joined by spaces: what the biLM and the bag of embeddings read")},
                                 config=dataclasses.asdict(BowConfig()), threads=1)
            self.sha = json.loads((R.PRETRAINED_DIR / R.NAME / "pretrain.json").read_text())["sha256"][
                f"{R.NAME}.safetensors"]
            self.checkpoint_file = f"lmlib/pretrained/{R.NAME}/{R.NAME}.safetensors (elmo_transfer.json's)"
            self.view = lambda t: words_view([w.lower() for s in R.review_sentences(t, EL["max_tokens"]) for w in s],
                                             EL["max_tokens"], "head")
            test = load_imdb("test")
            keep = test_indices(test.labels)
            self.test = [test.texts[i] for i in keep], [test.labels[i] for i in keep]
            self.what = "the text ELMo reads"
        else:
            raise ValueError(f"unknown benchmark {name!r}; give one of {list(BENCHMARKS)}")

    def sample(self, size: str, seed: int) -> tuple[list[str], list[int]]:
        """The labelled reviews the benchmark's seed ``seed`` trains on (``size`` "all": every training review)."""
        texts, labels = list(self.train.texts), list(self.train.labels)
        if size == "all":
            return texts, labels
        if self.name == "elmo_transfer":  # bench_elmo_transfer.balanced_subset, its generator seeded by the seed
            from bench_elmo_transfer import balanced_subset
            idx = balanced_subset(torch.tensor(labels), int(size), torch.Generator().manual_seed(seed)).tolist()
            return [texts[i] for i in idx], [labels[i] for i in idx]
        return sample_balanced(texts, labels, int(size), seed=seed)  # ulmfit_imdb draws indices the same way

    def cut(self, texts: list[str], truncation: str) -> list[str]:
        if truncation == "full":
            return texts
        for t in texts:
            if t not in self.views:
                self.views[t] = self.view(t)
        return [self.views[t] for t in texts]


BENCHMARKS = ("gpt", "ulmfit_imdb", "elmo_transfer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", default="gpt", choices=BENCHMARKS)
    parser.add_argument("--sizes", nargs="+", default=["100", "1000", "all"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--truncations", nargs="+", default=list(TRUNCATIONS), choices=list(TRUNCATIONS))
    parser.add_argument("--fit-cache", type=Path, default=None,
                        help="a folder where the fit on every full training review (size all, full) is kept, so the "
                             "benchmarks share it: their training texts, order and fold seed are then the same")
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])

    bench = Benchmark(args.benchmark)
    rows = kept_rows(bench.results, bench.settings, bench.sha)
    done = {(r["truncation"], r["size"], r["seed"]) for r in rows}
    test_texts, test_labels = bench.test
    test_cut = sum(bench.cut(test_texts, "model_view")[i] != t for i, t in enumerate(test_texts))
    for size in args.sizes:
        for seed in args.seeds:
            if size == "all" and seed != args.seeds[0]:
                continue  # every training review: the seeds would differ only in how the folds are shuffled
            texts, labels = bench.sample(size, seed)
            for truncation in args.truncations:
                if (truncation, size, seed) in done:
                    continue
                start = time.perf_counter()
                cache = args.fit_cache and (size, truncation) == ("all", "full") and \
                    args.fit_cache / f"bow_full_all_seed{seed}.pkl"
                if cache and cache.is_file():
                    pipeline = pickle.loads(cache.read_bytes())
                    seconds = json.loads(cache.with_suffix(".json").read_text())["fit_seconds"]
                else:
                    pipeline = fit_bow(bench.cut(texts, truncation), labels, seed=seed)
                    seconds = time.perf_counter() - start
                    if cache:
                        cache.with_suffix(".json").write_text(json.dumps({"fit_seconds": seconds}))
                        cache.with_suffix(".tmp").write_bytes(pickle.dumps(pipeline))
                        os.replace(cache.with_suffix(".tmp"), cache)
                accuracy = bow_accuracy(pipeline, bench.cut(test_texts, truncation), test_labels)
                search = pipeline[-1]
                rows.append(dict(truncation=truncation, size=size, n_labels=len(labels), seed=seed, accuracy=accuracy,
                                 C=search.best_params_["C"], cv_accuracy=round(float(search.best_score_), 4),
                                 vocabulary=len(pipeline[0].vocabulary_), fit_seconds=round(seconds, 1)))
                print(f"{truncation:10s} {size:>5s} seed {seed}: accuracy {accuracy:.4f} (C = {search.best_params_['C']:g}, "
                      f"cross-validated {search.best_score_:.3f}, {seconds:.0f} s)", flush=True)
                write_result(bench.results, dict(
                    what="Bag-of-words baseline on IMDb: TF-IDF unigrams + bigrams and logistic regression, C by 5-fold "
                         f"cross-validation on the training labels, on the full review and on {bench.what}",
                    settings=bench.settings, checkpoint_sha256=bench.sha, checkpoint_file=bench.checkpoint_file,
                    **bench.extra, test_reviews_cut=test_cut, machine=machine("sklearn", "numpy"), load=load(),
                    rows=rows, summary=summarise(rows, ("truncation", "n_labels"))))


if __name__ == "__main__":
    main()
