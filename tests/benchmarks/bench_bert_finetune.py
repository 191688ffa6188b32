"""BERT fine-tuning: does the shipped IMDb BERT help a [CLS] classifier, against the same architecture from random
weights, as the number of labels grows?

Devlin et al. (2019, §4.1) fine-tune all weights of BERT with a classification layer on the final [CLS] vector;
§5.2 shows larger pretrained models help most on small tasks. This script measures, at this course's scale, with
the checkpoint shipped in lmlib/pretrained/bert_imdb/:

* ``bert``: the pretrained BERT (pooler kept, MLM and NSP heads dropped) + dropout + a linear layer;
* ``scratch``: the same architecture and WordPiece vocabulary from a random initialisation, at its own rate: each
  task and label count's rate chosen on a dev split of other training examples (``--dev``, common.py; the test
  set is never read);
* ``scratch_at_recipe_rate``: the same at the recipe's rate (5e-4), kept to show what an untuned baseline costs.

Tasks: IMDb sentiment with 100 or 1,000 labelled training reviews (a balanced seeded sample per seed) or all
25,000 (one seed), tested on the same seeded 1,000 of IMDb's 25,000 test reviews (standard error of one accuracy
near 0.8 is about sqrt(0.8·0.2/1000) = 0.013); and SST-2 with 1,000 labelled training sentences (balanced, at least
8 words) tested on the whole GLUE dev set (872 sentences). Inputs are ``[CLS] text [SEP]`` with a text longer than
126 word pieces cut to its first 63 and last 63 (``lmlib.recipes.bert.encode_single``), and the fine-tuning budget
is GPT's (``FINETUNE_RECIPE``: 3 epochs, at least 80 steps, rate 5e-4), so tests/benchmarks/bench_gpt_finetune.py
compares with it. Every setting is in ``SETTINGS`` and the JSON; rows of an earlier run with the same settings and
checkpoint are kept, so runs can be split across invocations.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bert_finetune.py --tasks imdb:100 sst2:1000 imdb:1000 --seeds 0 1 2
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bert_finetune.py --tasks imdb:all --seeds 0
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bert_finetune.py --dev  # scratch's dev sweep

Every random-init row (``scratch``, ``scratch_at_recipe_rate``) and the dev sweep are copied, marked ``"from"``, from
bert_finetune_short_pretraining.json, the results of the BERT shipped before, whose WordPiece and config this one
shares (a random-init run never reads the pretrained weights), when its settings are these. Before that archive,
the dev rows at 1,000 IMDb labels were bert_finetune_rates.json's and gpu_transfer_bert.json's scratch rows (the
same split, samples, recipe and code), and IMDb scratch rows at a rate gpu_transfer_bert.json tested are its rows,
copied with ``"from"`` naming the file rather than trained twice (``--train-again`` trains them); where the chosen
rate is the recipe's, the scratch row is the scratch_at_recipe_rate run of the same seed (``"from"`` names it).
``--train-again`` trains every one of these instead.
"""

from __future__ import annotations

import argparse
import json
import time

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

from lmlib.data import load_imdb, load_sst2
from lmlib.recipes import bert as B
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.runtime import seed_everything

RESULTS = result_path("bert_finetune")
RATES_FILE = RESULTS.with_name("bert_finetune_rates.json")
SHORT_PRETRAINING = RESULTS.with_name("bert_finetune_short_pretraining.json")
CONDITIONS = {"bert": dict(pretrained=True), "scratch": dict(pretrained=False, lr="dev"),
              "scratch_at_recipe_rate": dict(pretrained=False)}
DEV_TASKS = ("imdb:100", "sst2:1000")  # swept here; imdb:1000 is copied
SETTINGS = dict(imdb_test=1000, test_seed=0, sst2_min_words=8, recipe=B.FINETUNE_RECIPE, conditions=CONDITIONS,
                truncation="[CLS] text [SEP], text cut to its first and last pieces (head_and_tail) to fit max_len", threads=1,
                dev={**DEV, "tasks": list(DEV_TASKS)})


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
    parser.add_argument("--dev", action="store_true", help="only scratch's dev sweep (DEV_TASKS, every rate and seed)")
    parser.add_argument("--train-again", action="store_true",
                        help="train the random-init rows that earlier results hold (see above) instead of copying them")
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])

    sha = B.pretrain_report()["sha256"][f"{B.NAME}.safetensors"]
    rows = kept_rows(RESULTS, SETTINGS, sha)
    dev_rows = json.loads(RESULTS.read_text()).get("dev_rows", []) if rows else []
    done = {(r["task"], r["condition"], r["n_labels"], r["seed"]) for r in rows}
    earlier_dev, earlier_tests = ([], []) if args.train_again else random_init_rows(B.pretrain_report())
    swept = {(r["task"], r["n_labels"], r["lr"], r["seed"]) for r in dev_rows}
    dev_rows += [r for r in earlier_dev if (r["task"], r["n_labels"], r["lr"], r["seed"]) not in swept]

    _, tokenizer = B.load_pretrained()
    pad = tokenizer.token_to_id("[PAD]")
    max_len = B.FINETUNE_RECIPE["max_len"]
    data, test_inputs = {}, {}

    def save():
        rates = {}
        for spec in ("imdb:100", "imdb:1000", "imdb:25000", "sst2:1000"):
            task, n = spec.split(":")
            try:
                rates[spec] = chosen_rate(dev_rows, int(n), task=task)
            except RuntimeError:
                pass
        write_result(RESULTS, dict(
            what="BERT [CLS] fine-tuning on IMDb and SST-2: the shipped IMDb BERT vs the same architecture from random "
                 "weights at its own dev-chosen rate and at the recipe's",
            settings=SETTINGS, checkpoint_sha256=sha, machine=machine(), load=load(), dev_rows=dev_rows,
            scratch_rates=rates, rows=rows, summary=summarise(rows, ("task", "condition", "n_labels"))))

    copied_dev, copied_tests = committed_scratch("bert", SETTINGS["imdb_test"], SETTINGS["test_seed"])
    if args.dev:
        rated = json.loads(RATES_FILE.read_text())
        assert rated["checkpoint_sha256"] == sha and rated["settings"]["recipe"] == B.FINETUNE_RECIPE
        swept = {(r["task"], r["n_labels"], r["lr"], r["seed"]) for r in dev_rows}
        for r in rated["rows"]:
            if r["condition"] == "scratch" and r["lr"] in (2e-4, 5e-4, 1e-3, 2e-3) and ("imdb", 1000, r["lr"], r["seed"]) not in swept:
                dev_rows.append(dict(task="imdb", condition="scratch", n_labels=1000, lr=r["lr"], seed=r["seed"],
                                     dev_accuracy=r["dev_accuracy"], n_dev=r["n_dev"], steps=r["steps"],
                                     train_seconds=r["train_seconds"], **{"from": RATES_FILE.name}))
                swept.add(("imdb", 1000, r["lr"], r["seed"]))
        for r in copied_dev:
            if ("imdb", 1000, r["lr"], r["seed"]) not in swept:
                dev_rows.append({"task": "imdb", **r})
                swept.add(("imdb", 1000, r["lr"], r["seed"]))
        save()
        for spec in DEV_TASKS:
            task, size = spec.split(":")
            if task not in data:
                data[task] = task_data(task)
            train_texts, train_labels = list(data[task][0]), list(data[task][1])
            dev_texts, dev_labels = dev_split(train_texts, train_labels)
            dev_inputs = B.encode_single(tokenizer, dev_texts, max_len)
            for seed in DEV["swept_here"]["seeds"]:
                texts, labels = sample_balanced(train_texts, train_labels, int(size), seed=seed)
                assert not set(texts) & set(dev_texts), "the dev examples must not be trained on"
                inputs = B.encode_single(tokenizer, texts, max_len)
                for lr in DEV["swept_here"]["rates"]:
                    if (task, int(size), lr, seed) in swept:
                        continue
                    seed_everything(seed)
                    model, _ = B.classifier(pretrained=False)
                    start = time.perf_counter()
                    trainer = B.finetune(model, inputs, labels, pad, seed=seed, lr=lr)
                    seconds = time.perf_counter() - start
                    accuracy = (B.predict(model, dev_inputs, pad) == torch.tensor(dev_labels)).float().mean().item()
                    dev_rows.append(dict(task=task, condition="scratch", n_labels=int(size), lr=lr, seed=seed,
                                         dev_accuracy=accuracy, n_dev=len(dev_labels), steps=trainer.step,
                                         train_seconds=round(seconds, 1)))
                    print(f"dev {task} scratch {size:>5s} lr {lr:.0e} seed {seed}: dev accuracy {accuracy:.3f} "
                          f"({seconds:.0f} s)", flush=True)
                    save()
        return
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
                spec_ = CONDITIONS[condition]
                lr = chosen_rate(dev_rows, len(labels), task=task) if spec_.get("lr") == "dev" else B.FINETUNE_RECIPE["lr"]
                earlier = [r for r in earlier_tests if (r["task"], r["condition"], r["n_labels"], r["seed"], r["lr"])
                           == (task, condition, len(labels), seed, lr)]
                if earlier:
                    rows.append(earlier[0])
                    print(f"{task} {condition:8s} {size:>5s} seed {seed}: accuracy {earlier[0]['accuracy']:.3f} "
                          f"(lr {lr:.0e}, from {earlier[0]['from']})", flush=True)
                    save()
                    continue
                same = [r for r in copied_tests if (r["lr"], r["n_labels"], r["seed"]) == (lr, len(labels), seed)]
                if lr == B.FINETUNE_RECIPE["lr"]:  # the recipe-rate run is this very run (same seed, sample and code)
                    same = [{**r, "from": "scratch_at_recipe_rate"} for r in rows if r["condition"] == "scratch_at_recipe_rate"
                            and (r["task"], r["n_labels"], r["seed"]) == (task, len(labels), seed)]
                if condition == "scratch" and same and not args.train_again and (task == "imdb" or lr == B.FINETUNE_RECIPE["lr"]):
                    rows.append(dict(task=task, condition=condition, **{k: same[0][k] for k in (
                        "n_labels", "seed", "lr", "accuracy")}, n_test=len(test_labels),
                        **{k: same[0][k] for k in ("steps", "train_seconds", "from")}))
                    print(f"{task} {condition:8s} {size:>5s} seed {seed}: accuracy {rows[-1]['accuracy']:.3f} "
                          f"(lr {lr:.0e}, from {same[0]['from']})", flush=True)
                    save()
                    continue
                seed_everything(seed)
                model, _ = B.classifier(pretrained=spec_["pretrained"])
                start = time.perf_counter()
                trainer = B.finetune(model, inputs, labels, pad, seed=seed, lr=lr)
                seconds = time.perf_counter() - start
                preds = B.predict(model, test_inputs[task], pad)
                accuracy = (preds == torch.tensor(test_labels)).float().mean().item()
                rows.append(dict(task=task, condition=condition, n_labels=len(labels), seed=seed, lr=lr,
                                 accuracy=accuracy, n_test=len(test_labels), steps=trainer.step,
                                 train_seconds=round(seconds, 1)))
                print(f"{task} {condition:8s} {size:>5s} seed {seed}: accuracy {accuracy:.3f} (lr {lr:.0e}, "
                      f"{trainer.step} steps, {seconds:.0f} s)", flush=True)
                save()


def random_init_rows(report: dict) -> tuple[list[dict], list[dict]]:
    """The dev sweep and the random-init rows (``scratch``, ``scratch_at_recipe_rate``) of the results of the BERT
    shipped before (SHORT_PRETRAINING), each marked ``"from"``, when that BERT had this one's config and WordPiece
    file and its results this script's settings; otherwise none. A row the archive copied from the rates file came
    from that file as it stood then, archived beside it."""
    return archived_random_init_rows(SHORT_PRETRAINING, report, SETTINGS,
                                     lambda r: CONDITIONS[r["condition"]]["pretrained"],
                                     moved={RATES_FILE.name: RATES_FILE.name.replace(".json", "_short_pretraining.json")})


if __name__ == "__main__":
    main()
