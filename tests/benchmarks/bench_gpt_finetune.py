"""GPT-1 fine-tuning on IMDb: does pretraining help, and does the auxiliary LM loss (λ = 0.5) help?

Radford et al. (2018, §3.2, Table 5) fine-tune with L_3 = L_2 + λ·L_1 and report that the auxiliary objective helps
on the larger datasets and not on the smaller ones; without pretraining, performance drops by 14.8% on average.
This script measures both at this course's scale with the shipped IMDb GPT (lmlib/pretrained/gpt_imdb/):

* ``gpt_aux``: the pretrained GPT, fine-tuned with λ = 0.5;
* ``gpt``: the pretrained GPT, fine-tuned with λ = 0 (the task loss alone);
* ``scratch``: the same architecture and tokenizer from random weights, λ = 0.

Each is trained on 100, 1,000 or all 25,000 labelled training reviews (a balanced seeded sample per seed) and
tested on the same seeded 1,000 of IMDb's 25,000 test reviews. Reviews are cut to 128 tokens by
``head_and_tail`` (the first 63 and last 63 BPE tokens around [start] ... [extract]). Every setting is in
``SETTINGS`` and in the JSON; runs can be split across invocations (``--sizes``, ``--seeds``, ``--conditions``):
rows of an earlier run with the same settings and checkpoint are kept.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_gpt_finetune.py --sizes 100 1000 --seeds 0 1 2
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_gpt_finetune.py --sizes all --seeds 0
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from machine import load, machine
from over_seeds import imdb_test_subset, summarise
from result_file import kept_rows, write_result

from lmlib.data import load_imdb
from lmlib.models.gpt_finetune import FinetuneTokens
from lmlib.recipes import gpt as G
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.runtime import seed_everything

RESULTS = Path(__file__).resolve().parent / "results" / "gpt_finetune.json"
CONDITIONS = {"gpt_aux": dict(pretrained=True, lam=0.5), "gpt": dict(pretrained=True, lam=0.0),
              "scratch": dict(pretrained=False, lam=0.0)}
SETTINGS = dict(n_test=1000, test_seed=0, recipe=G.FINETUNE_RECIPE, conditions=CONDITIONS, threads=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["100", "1000", "all"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=list(CONDITIONS))
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])

    report = json.loads((G.CHECKPOINT_DIR / "pretrain.json").read_text())
    sha = report["sha256"][f"{G.NAME}.safetensors"]
    rows = kept_rows(RESULTS, SETTINGS, sha)
    done = {(r["condition"], r["size"], r["seed"]) for r in rows}

    _, tokenizer, _ = G.load_pretrained()
    pad = FinetuneTokens.from_tokenizer(tokenizer).pad
    test_texts, test_labels = imdb_test_subset(SETTINGS["n_test"], SETTINGS["test_seed"])
    test_inputs = G.review_inputs(tokenizer, test_texts, G.FINETUNE_RECIPE["max_len"])
    train = load_imdb("train")
    all_inputs = None
    for size in args.sizes:
        for seed in args.seeds:
            if size == "all":
                if all_inputs is None:
                    all_inputs = G.review_inputs(tokenizer, train.texts, G.FINETUNE_RECIPE["max_len"])
                inputs, labels = all_inputs, list(train.labels)
            else:
                texts, labels = sample_balanced(train.texts, train.labels, int(size), seed=seed)
                inputs = G.review_inputs(tokenizer, texts, G.FINETUNE_RECIPE["max_len"])
            for condition in args.conditions:
                if (condition, size, seed) in done:
                    continue
                spec = CONDITIONS[condition]
                seed_everything(seed)
                model, _ = G.pretrained_classifier(pretrained=spec["pretrained"])
                start = time.perf_counter()
                trainer = G.finetune_classifier(model, inputs, labels, spec["lam"], pad, seed=seed)
                seconds = time.perf_counter() - start
                accuracy = G.classifier_accuracy(model, test_inputs, test_labels, pad)
                rows.append(dict(condition=condition, size=size, n_labels=len(labels), seed=seed, accuracy=accuracy,
                                 steps=trainer.step, train_seconds=round(seconds, 1)))
                print(f"{condition:8s} {size:>5s} seed {seed}: accuracy {accuracy:.3f} ({trainer.step} steps, "
                      f"{seconds:.0f} s)", flush=True)
                write_result(RESULTS, dict(
                    what="GPT-1 fine-tuning on IMDb: pretrained with and without the auxiliary LM loss, and from scratch",
                    command="LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_gpt_finetune.py",
                    settings=SETTINGS, checkpoint_sha256=sha, machine=machine(), load=load(),
                    rows=rows, summary=summarise(rows, ("condition", "n_labels"))))


if __name__ == "__main__":
    main()
