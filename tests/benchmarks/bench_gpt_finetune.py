"""GPT-1 fine-tuning on IMDb: does pretraining help, and does the auxiliary LM loss (λ = 0.5) help?

Radford et al. (2018, §3.2, Table 5) fine-tune with L_3 = L_2 + λ·L_1 and report that the auxiliary objective helps
on the larger datasets and not on the smaller ones; without pretraining, performance drops by 14.8% on average.
This script measures both at this course's scale with the shipped IMDb GPT (lmlib/pretrained/gpt_imdb/):

* ``gpt_aux``: the pretrained GPT, fine-tuned with λ = 0.5;
* ``gpt``: the pretrained GPT, fine-tuned with λ = 0 (the task loss alone);
* ``scratch``: the same architecture and tokenizer from random weights, λ = 0, at its own rate: each label count's
  rate chosen on a dev split of other training reviews (``--dev``, common.py; the test set is never read);
* ``scratch_at_recipe_rate``: the same, at the recipe's rate (5e-4, set for the pretrained model), kept to show
  what an untuned baseline costs.

Each is trained on 100, 1,000 or all 25,000 labelled training reviews (a balanced seeded sample per seed) and
tested on the same seeded 1,000 of IMDb's 25,000 test reviews. Reviews are cut to 128 tokens by
``head_and_tail`` (the first 63 and last 63 BPE tokens around [start] ... [extract]). Every setting is in
``SETTINGS`` and in the JSON; runs can be split across invocations (``--sizes``, ``--seeds``, ``--conditions``):
rows of an earlier run with the same settings and checkpoint are kept. Runs side by side write to their own
``--out`` and are joined with ``--merge``.

Rows already measured with the same code are copied, each marked ``"from"``, never trained twice: the pretrained
conditions at 100 and 1,000 labels from gpu_transfer_gpt.json when it was measured with the shipped checkpoint (same
recipe, samples, test reviews and seeds, one CPU thread), and every random-init row and the dev sweep from
gpt_finetune_short_pretraining.json (the results of the GPT shipped before, whose tokenizer and config this one
shares: a random-init run never reads the pretrained weights). ``--train-again`` trains them instead.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_gpt_finetune.py --sizes 100 1000 --seeds 0 1 2
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_gpt_finetune.py --sizes all --seeds 0
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_gpt_finetune.py --dev   # scratch's dev sweep
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import (
    DEV,
    archived_random_init_rows,
    chosen_rate,
    committed_scratch,
    dev_split,
    imdb_test_subset,
    kept_rows,
    load,
    machine,
    result_path,
    summarise,
    write_result,
)

from lmlib.data import load_imdb
from lmlib.models.gpt_finetune import FinetuneTokens
from lmlib.recipes import gpt as G
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.runtime import seed_everything

RESULTS = result_path("gpt_finetune")
SHORT_PRETRAINING = RESULTS.with_name("gpt_finetune_short_pretraining.json")
CONDITIONS = {"gpt_aux": dict(pretrained=True, lam=0.5), "gpt": dict(pretrained=True, lam=0.0),
              "scratch": dict(pretrained=False, lam=0.0, lr="dev"),
              "scratch_at_recipe_rate": dict(pretrained=False, lam=0.0)}
SETTINGS = dict(n_test=1000, test_seed=0, recipe=G.FINETUNE_RECIPE, conditions=CONDITIONS, dev=DEV, threads=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["100", "1000", "all"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=list(CONDITIONS))
    parser.add_argument("--dev", action="store_true", help="only scratch's dev sweep (DEV: swept here, and copied)")
    parser.add_argument("--train-again", action="store_true",
                        help="train the rows that earlier results hold (see above) instead of copying them")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"result file (default {RESULTS.name})")
    parser.add_argument("--merge", nargs="+", type=Path, default=None,
                        help="join these result files (runs side by side, same settings and checkpoint) into --out")
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])

    report = json.loads((G.CHECKPOINT_DIR / "pretrain.json").read_text())
    sha = report["sha256"][f"{G.NAME}.safetensors"]
    rows = kept_rows(args.out, SETTINGS, sha)
    dev_rows = json.loads(args.out.read_text()).get("dev_rows", []) if rows else []
    def add_dev(more):  # a dev row (rate, seed) kept once, whichever source it came from
        swept = {(r["n_labels"], r["lr"], r["seed"]) for r in dev_rows}
        for r in more:
            if (r["n_labels"], r["lr"], r["seed"]) not in swept:
                dev_rows.append(r)
                swept.add((r["n_labels"], r["lr"], r["seed"]))

    if args.merge:
        for part in args.merge:
            have = {(r["condition"], r["size"], r["seed"]) for r in rows}
            rows.extend(r for r in kept_rows(part, SETTINGS, sha) if (r["condition"], r["size"], r["seed"]) not in have)
            add_dev(json.loads(part.read_text())["dev_rows"])
    done = {(r["condition"], r["size"], r["seed"]) for r in rows}

    _, tokenizer, _ = G.load_pretrained()
    pad = FinetuneTokens.from_tokenizer(tokenizer).pad

    def save():
        rates = {}
        for n in (100, 1000, 25000):
            try:
                rates[str(n)] = chosen_rate(dev_rows, n)
            except RuntimeError:
                pass
        write_result(args.out, dict(
            what="GPT-1 fine-tuning on IMDb: pretrained with and without the auxiliary LM loss, and from scratch at its "
                 "own dev-chosen rate and at the recipe's",
            settings=SETTINGS, checkpoint_sha256=sha, machine=machine(), load=load(),
            dev_rows=dev_rows, scratch_rates=rates, rows=rows, summary=summarise(rows, ("condition", "n_labels"))))

    if args.merge:
        save()
        return
    train = load_imdb("train")
    copied_dev, copied_tests = committed_scratch("gpt", SETTINGS["n_test"], SETTINGS["test_seed"])
    copied_tests = [{**r, "size": str(r["n_labels"])} for r in copied_tests]
    earlier_dev, earlier_tests = random_init_rows(report)
    copied_dev += earlier_dev
    copied_tests += earlier_tests + pretrained_rows(sha)
    add_dev(copied_dev)  # the same row may come from both sources
    swept = {(r["n_labels"], r["lr"], r["seed"]) for r in dev_rows}
    if args.dev:
        save()
        dev_texts, dev_labels = dev_split(list(train.texts), list(train.labels))
        dev_inputs = G.review_inputs(tokenizer, dev_texts, G.FINETUNE_RECIPE["max_len"])
        sweep = DEV["swept_here"]
        for size in [sweep["n_labels"]]:
            for seed in sweep["seeds"]:
                texts, labels = sample_balanced(train.texts, train.labels, size, seed=seed)
                assert not set(texts) & set(dev_texts), "the dev reviews must not be trained on"
                inputs = G.review_inputs(tokenizer, texts, G.FINETUNE_RECIPE["max_len"])
                for lr in sweep["rates"]:
                    if (size, lr, seed) in swept:
                        continue
                    seed_everything(seed)
                    model, _ = G.pretrained_classifier(pretrained=False)
                    start = time.perf_counter()
                    trainer = G.finetune_classifier(model, inputs, labels, 0.0, pad, seed=seed, lr=lr)
                    seconds = time.perf_counter() - start
                    accuracy = G.classifier_accuracy(model, dev_inputs, dev_labels, pad)
                    dev_rows.append(dict(condition="scratch", n_labels=size, lr=lr, seed=seed, dev_accuracy=accuracy,
                                         n_dev=len(dev_labels), steps=trainer.step, train_seconds=round(seconds, 1)))
                    print(f"dev scratch {size:5d} lr {lr:.0e} seed {seed}: dev accuracy {accuracy:.3f} ({seconds:.0f} s)",
                          flush=True)
                    save()
        return
    test_texts, test_labels = imdb_test_subset(SETTINGS["n_test"], SETTINGS["test_seed"])
    test_inputs = G.review_inputs(tokenizer, test_texts, G.FINETUNE_RECIPE["max_len"])
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
                lr = chosen_rate(dev_rows, len(labels)) if spec.get("lr") == "dev" else G.FINETUNE_RECIPE["lr"]
                same = [r for r in copied_tests if (r["condition"], r["size"], r["lr"], r["n_labels"], r["seed"])
                        == (condition, size, lr, len(labels), seed)]
                if same and not args.train_again:
                    rows.append(dict(condition=condition, size=size, **{k: same[0][k] for k in (
                        "n_labels", "seed", "lr", "accuracy", "steps", "train_seconds", "from")}))
                    print(f"{condition:8s} {size:>5s} seed {seed}: accuracy {rows[-1]['accuracy']:.3f} (lr {lr:.0e}, "
                          f"from {same[0]['from']})", flush=True)
                    save()
                    continue
                seed_everything(seed)
                model, _ = G.pretrained_classifier(pretrained=spec["pretrained"])
                start = time.perf_counter()
                trainer = G.finetune_classifier(model, inputs, labels, spec["lam"], pad, seed=seed, lr=lr)
                seconds = time.perf_counter() - start
                accuracy = G.classifier_accuracy(model, test_inputs, test_labels, pad)
                rows.append(dict(condition=condition, size=size, n_labels=len(labels), seed=seed, lr=lr,
                                 accuracy=accuracy, steps=trainer.step, train_seconds=round(seconds, 1)))
                print(f"{condition:8s} {size:>5s} seed {seed}: accuracy {accuracy:.3f} (lr {lr:.0e}, {trainer.step} "
                      f"steps, {seconds:.0f} s)", flush=True)
                save()


def random_init_rows(report: dict) -> tuple[list[dict], list[dict]]:
    """The dev sweep and the random-init rows (``scratch``, ``scratch_at_recipe_rate``) of the results of the GPT
    shipped before (SHORT_PRETRAINING), each marked ``"from"``, when that GPT had this one's config and tokenizer
    file and its results this script's settings; otherwise none."""
    return archived_random_init_rows(SHORT_PRETRAINING, report, SETTINGS,
                                     lambda r: CONDITIONS[r["condition"]]["pretrained"])


def pretrained_rows(sha: str) -> list[dict]:
    """gpu_transfer_gpt.json's rows of the pretrained conditions (λ = 0 and 0.5) at the recipe's rate, marked
    ``"from"``, when it was measured on the CPU with the checkpoint whose weights have ``sha`` and on this script's
    test reviews; otherwise none."""
    name = "gpu_transfer_gpt.json"
    data = json.loads((RESULTS.with_name(name)).read_text())
    if (data["checkpoint"]["sha256"][f"{G.NAME}.safetensors"] != sha or data["device"] != ["cpu"]
            or (data["settings"]["test_reviews"], data["settings"]["test_seed"]) != (SETTINGS["n_test"],
                                                                                      SETTINGS["test_seed"])):
        return []
    return [{**r, "size": str(r["n_labels"]), "from": name} for r in data["rows"]
            if r["condition"] in ("gpt", "gpt_aux") and r["lr"] == G.FINETUNE_RECIPE["lr"]]


if __name__ == "__main__":
    main()
