"""The bag-of-words baseline beside every IMDb transfer result: TF-IDF unigrams + bigrams and logistic regression.

Same test reviews, label samples and seeds as the neural rows (bench_gpt_finetune.py, run_bert_finetune.py):
the seeded 1,000 of IMDb's 25,000 test reviews (``imdb_test_subset(1000, 0)``), 100 or 1,000 training labels drawn
by ``sample_balanced(..., seed)`` for seeds 0-2, and all 25,000 training reviews once (seed 0 shuffles the
cross-validation folds). C is chosen by 5-fold cross-validation on the training labels only
(``lmlib.eval.bow_baseline.fit_bow``). Two truncations of every review, training and test alike:

* ``full``: the whole review (``load_imdb`` has already turned ``<br />`` into line breaks);
* ``model_view``: exactly the text the fine-tuned GPT reads, the first and last 63 tokens of the shipped GPT
  tokenizer (lmlib/pretrained/gpt_imdb/tokenizer.json) decoded back to text (``model_view``).

The truncated rows depend on that tokenizer, so the file records its sha256 (``checkpoint_sha256``) and
``lmlib.course.comparison.bow_baseline_rows`` refuses them for another one. Runs can be split across invocations
(``--sizes``, ``--seeds``, ``--truncations``): rows of an earlier run with the same settings and tokenizer are kept.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bow_baseline.py --sizes 100 1000 --seeds 0 1 2
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bow_baseline.py --sizes all --seeds 0
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch
from machine import load, machine
from over_seeds import imdb_test_subset, summarise
from result_file import kept_rows, write_result

from lmlib.data import load_imdb
from lmlib.eval.bow_baseline import BowConfig, bow_accuracy, fit_bow, model_view
from lmlib.recipes import gpt as G
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.text.tokenizers import ByteLevelBPE

RESULTS = Path(__file__).resolve().parent / "results" / "bow_baseline.json"
TOKENIZER = G.CHECKPOINT_DIR / "tokenizer.json"
TRUNCATIONS = {"full": "the whole review",
               "model_view": "the first and last 63 tokens of the shipped GPT tokenizer, decoded: what the fine-tuned "
                             "GPT reads between [start] and [extract]"}
SETTINGS = dict(n_test=1000, test_seed=0, max_tokens=G.FINETUNE_RECIPE["max_len"] - 2, truncations=TRUNCATIONS,
                config=dataclasses.asdict(BowConfig()), threads=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["100", "1000", "all"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--truncations", nargs="+", default=list(TRUNCATIONS), choices=list(TRUNCATIONS))
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])

    sha = G.load_pretrained()[2]["sha256"]["tokenizer.json"]  # load_pretrained checks every file's sha256
    rows = kept_rows(RESULTS, SETTINGS, sha)
    done = {(r["truncation"], r["size"], r["seed"]) for r in rows}
    tokenizer = ByteLevelBPE.load(TOKENIZER)
    views: dict[str, str] = {}  # review -> its model view, so each review is tokenized once

    def cut(texts: list[str], truncation: str) -> list[str]:
        if truncation == "full":
            return texts
        for t in texts:
            if t not in views:
                views[t] = model_view(tokenizer, t, SETTINGS["max_tokens"])
        return [views[t] for t in texts]

    test_texts, test_labels = imdb_test_subset(SETTINGS["n_test"], SETTINGS["test_seed"])
    test_cut = sum(cut(test_texts, "model_view")[i] != t for i, t in enumerate(test_texts))
    train = load_imdb("train")
    for size in args.sizes:
        for seed in args.seeds:
            if size == "all":
                texts, labels = list(train.texts), list(train.labels)
            else:
                texts, labels = sample_balanced(train.texts, train.labels, int(size), seed=seed)
            for truncation in args.truncations:
                if (truncation, size, seed) in done:
                    continue
                start = time.perf_counter()
                pipeline = fit_bow(cut(texts, truncation), labels, seed=seed)
                seconds = time.perf_counter() - start
                accuracy = bow_accuracy(pipeline, cut(test_texts, truncation), test_labels)
                search = pipeline[-1]
                rows.append(dict(truncation=truncation, size=size, n_labels=len(labels), seed=seed, accuracy=accuracy,
                                 C=search.best_params_["C"], cv_accuracy=round(float(search.best_score_), 4),
                                 vocabulary=len(pipeline[0].vocabulary_), fit_seconds=round(seconds, 1)))
                print(f"{truncation:10s} {size:>5s} seed {seed}: accuracy {accuracy:.3f} (C = {search.best_params_['C']:g}, "
                      f"cross-validated {search.best_score_:.3f}, {seconds:.0f} s)", flush=True)
                write_result(RESULTS, dict(
                    what="Bag-of-words baseline on IMDb: TF-IDF unigrams + bigrams and logistic regression, C by 5-fold "
                         "cross-validation on the training labels, on the full review and on the text the GPT reads",
                    command="LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bow_baseline.py",
                    settings=SETTINGS, checkpoint_sha256=sha, checkpoint_file="lmlib/pretrained/gpt_imdb/tokenizer.json",
                    test_reviews_cut=test_cut, machine=machine("sklearn", "numpy"), load=load(),
                    rows=rows, summary=summarise(rows, ("truncation", "n_labels"))))


if __name__ == "__main__":
    main()
