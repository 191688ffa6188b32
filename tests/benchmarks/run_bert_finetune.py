"""BERT fine-tuning: does the shipped IMDb BERT help a [CLS] classifier, against the same architecture from random
weights, as the number of labels grows?

Devlin et al. (2019, §4.1) fine-tune all weights of BERT with a classification layer on the final [CLS] vector;
§5.2 shows larger pretrained models help most on small tasks. This script measures, at this course's scale, with
the checkpoint shipped in lmlib/pretrained/bert_imdb/:

* ``bert``: the pretrained BERT (pooler kept, MLM and NSP heads dropped) + dropout + a linear layer;
* ``scratch``: the same architecture and WordPiece vocabulary from a random initialisation.

Tasks: IMDb sentiment with 100 or 1,000 labelled training reviews (a balanced seeded sample per seed) or all
25,000 (one seed), tested on the same seeded 1,000 of IMDb's 25,000 test reviews (standard error of one accuracy
near 0.8 is about sqrt(0.8·0.2/1000) = 0.013); and SST-2 with 1,000 labelled training sentences (balanced, at least
8 words) tested on the whole GLUE dev set (872 sentences). Inputs are ``[CLS] text [SEP]`` with a text longer than
126 word pieces cut to its first 63 and last 63 (``lmlib.recipes.bert.encode_single``), and the fine-tuning budget
is GPT's (``FINETUNE_RECIPE``: 3 epochs, at least 80 steps, rate 5e-4), so tests/benchmarks/bench_gpt_finetune.py
compares with it. Every setting is in ``SETTINGS`` and the JSON; rows of an earlier run with the same settings and
checkpoint are kept, so runs can be split across invocations.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/run_bert_finetune.py --tasks imdb:100 sst2:1000 imdb:1000 --seeds 0 1 2
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/run_bert_finetune.py --tasks imdb:all --seeds 0
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from machine import load, machine
from over_seeds import imdb_test_subset, summarise
from result_file import kept_rows, write_result

from lmlib.data import load_imdb, load_sst2
from lmlib.recipes import bert as B
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.runtime import seed_everything

RESULTS = Path(__file__).resolve().parent / "results" / "bert_finetune.json"
CONDITIONS = {"bert": dict(pretrained=True), "scratch": dict(pretrained=False)}
SETTINGS = dict(imdb_test=1000, test_seed=0, sst2_min_words=8, recipe=B.FINETUNE_RECIPE, conditions=CONDITIONS,
                truncation="[CLS] text [SEP], text cut to its first and last pieces (head_and_tail) to fit max_len", threads=1)


def task_data(task: str):
    """(train texts, train labels, test texts, test labels) pools for ``imdb`` or ``sst2``."""
    if task == "imdb":
        train = load_imdb("train")
        return (train.texts, train.labels, *imdb_test_subset(SETTINGS["imdb_test"], SETTINGS["test_seed"]))
    train, dev = load_sst2("train"), load_sst2("dev")
    kept = [(t, y) for t, y in zip(train.texts, train.labels) if len(t.split()) >= SETTINGS["sst2_min_words"]]
    return [t for t, _ in kept], [y for _, y in kept], list(dev.texts), list(dev.labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["imdb:100", "sst2:1000", "imdb:1000"],
                        help="task:labels pairs; labels 'all' takes every training example (e.g. imdb:all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=list(CONDITIONS))
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])

    sha = B.pretrain_report()["sha256"][f"{B.NAME}.safetensors"]
    rows = kept_rows(RESULTS, SETTINGS, sha)
    done = {(r["task"], r["condition"], r["n_labels"], r["seed"]) for r in rows}

    _, tokenizer = B.load_pretrained()
    pad = tokenizer.token_to_id("[PAD]")
    max_len = B.FINETUNE_RECIPE["max_len"]
    data, test_inputs = {}, {}
    for spec in args.tasks:
        task, size = spec.split(":")
        if task not in data:
            data[task] = task_data(task)
            test_inputs[task] = B.encode_single(tokenizer, data[task][2], max_len)
        train_texts, train_labels, _, test_labels = data[task]
        for seed in args.seeds:
            if size == "all":  # every training example; only the initialisation and the order change with the seed
                texts, labels = list(train_texts), list(train_labels)
            else:
                texts, labels = sample_balanced(train_texts, train_labels, int(size), seed=seed)
            inputs = B.encode_single(tokenizer, texts, max_len)
            for condition in args.conditions:
                if (task, condition, len(labels), seed) in done:
                    continue
                seed_everything(seed)
                model, _ = B.classifier(pretrained=CONDITIONS[condition]["pretrained"])
                start = time.perf_counter()
                trainer = B.finetune(model, inputs, labels, pad, seed=seed)
                seconds = time.perf_counter() - start
                preds = B.predict(model, test_inputs[task], pad)
                accuracy = (preds == torch.tensor(test_labels)).float().mean().item()
                rows.append(dict(task=task, condition=condition, n_labels=len(labels), seed=seed, accuracy=accuracy,
                                 n_test=len(test_labels), steps=trainer.step, train_seconds=round(seconds, 1)))
                print(f"{task} {condition:8s} {size:>5s} seed {seed}: accuracy {accuracy:.3f} ({trainer.step} steps, "
                      f"{seconds:.0f} s)", flush=True)
                write_result(RESULTS, dict(
                    what="BERT [CLS] fine-tuning on IMDb and SST-2: the shipped IMDb BERT vs the same architecture "
                         "from random weights",
                    command="LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/run_bert_finetune.py",
                    settings=SETTINGS, checkpoint_sha256=sha, machine=machine(), load=load(),
                    rows=rows, summary=summarise(rows, ("task", "condition", "n_labels"))))


if __name__ == "__main__":
    main()
