"""ULMFiT's stage (c) settings chosen on a dev split of IMDb *training* reviews, never the test set.

Howard & Ruder (2018, sec. 3.3) fine-tune the classifier with gradual unfreezing (one more layer group per epoch),
discriminative rates (η^{l-1} = η^l / factor, factor 2.6) and STLR. How long each unfreezing stage lasts, how many
epochs there are and the peak rate η were set for their GPU runs on the full data; here they are chosen for the
staged GPU stage (b) LM (``gpu_pretraining/ulmfit_imdb``) at 100 and 1,000 labels. Conditions:

* ``ulmfit``: the paper's schedule (gradual unfreezing, rates divided by ``factor`` per group), the headline;
* ``ulmfit_flat``: its ablation, every group trained from the first step at one rate (factor 1).

Each setting is trained on the balanced sample of ``sample_balanced(train, n, seed)`` (the samples of every
transfer benchmark) and scored on ``common.dev_split``: 1,000 training reviews that none of the 1,000-label
samples of seeds 0-2 contains (the split of bench_gpu_transfer.py's rate sweep). Reviews are cut to 128 head+tail tokens.
A setting is (η, epochs, stage multiplier m): each epoch, i.e. each unfreezing stage, lasts m times today's
length (``min_steps_per_epoch = m * max(10, batches in one pass)``, capped at ``m * 160`` steps).
Today's setting (bench_gpu_transfer.py) is 5 epochs, m = 1, factor 2.6, η chosen on the same dev split.

The runs go in the order of ``RUNS``, most telling first, until ``--deadline``; today's schedule at 1,000 labels
was already swept on the same split, sample and checkpoint by bench_gpu_transfer.py, so its dev rows are copied (marked
``"from"``) once the one row run here again reproduces its number. Rows are written as they come (through
common.write_result), and a rerun with the same checkpoint and settings keeps them, so the run can stop and
go on. Then, per condition and label count, the setting with the
best mean dev accuracy over the seeds it ran with is ``chosen`` (ties to fewer steps, then the smaller η).

    LMLIB_DATA_DIR=... nice -n 5 env OMP_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_ulmfit_stage_c_dev.py

Its committed result was measured with the earlier ``train_classifier``, whose one slanted triangle spanned every
unfreezing stage (the lower groups trained only in its decay tail); a rerun now gets one triangle per stage.
bench_ulmfit_stage_c.py runs the paper's stage (c) (all layers until the dev split stops improving, whole reviews
through BPT3C where the dev split prefers them) on any checkpoint.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from common import RESULTS, dev_split, load, machine, write_result  # noqa: E402

from lmlib.data import load_imdb  # noqa: E402
from lmlib.models.awd_lstm import AWDLSTMLanguageModel  # noqa: E402
from lmlib.models.ulmfit import ULMFiTClassifier  # noqa: E402
from lmlib.recipes import ulmfit as U  # noqa: E402
from lmlib.runtime import seed_everything  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NAME = "ulmfit_stage_c_dev.json"
CONDITIONS = {"ulmfit": dict(gradual=True, factor=2.6), "ulmfit_flat": dict(gradual=False, factor=1.0)}
# (condition, n_labels, seed, η, epochs, m), most telling first: the shared 2-core machine allows a few thousand steps,
# and a run that reaches its deadline keeps what it measured
RUNS = [("ulmfit", 1000, 0, 0.01, 5, 1), ("ulmfit", 1000, 0, 0.03, 10, 1),
        ("ulmfit", 100, 0, 0.01, 5, 1), ("ulmfit", 100, 0, 0.03, 5, 1), ("ulmfit", 100, 0, 0.03, 10, 1),
        ("ulmfit", 100, 0, 0.01, 10, 1), ("ulmfit", 1000, 0, 0.03, 5, 2), ("ulmfit_flat", 1000, 0, 0.01, 10, 1),
        ("ulmfit", 100, 0, 0.03, 5, 2), ("ulmfit_flat", 100, 0, 0.003, 5, 1), ("ulmfit_flat", 100, 0, 0.01, 5, 1),
        ("ulmfit_flat", 100, 0, 0.01, 10, 1), ("ulmfit", 1000, 0, 0.01, 10, 1), ("ulmfit", 1000, 0, 0.03, 15, 1),
        ("ulmfit_flat", 1000, 0, 0.01, 15, 1), ("ulmfit", 100, 1, 0.01, 5, 1), ("ulmfit", 100, 1, 0.03, 5, 1),
        ("ulmfit", 100, 1, 0.03, 10, 1), ("ulmfit", 100, 1, 0.01, 10, 1), ("ulmfit", 1000, 0, 0.01, 5, 2),
        # a second seed for the contenders at 1,000 labels, and for the ablation at 100
        ("ulmfit", 1000, 1, 0.03, 10, 1), ("ulmfit", 1000, 1, 0.03, 5, 1), ("ulmfit_flat", 1000, 1, 0.01, 10, 1),
        ("ulmfit_flat", 1000, 1, 0.01, 5, 1), ("ulmfit_flat", 100, 1, 0.003, 5, 1), ("ulmfit_flat", 100, 1, 0.01, 5, 1),
        ("ulmfit_flat", 100, 1, 0.01, 10, 1), ("ulmfit", 1000, 1, 0.03, 15, 1), ("ulmfit_flat", 1000, 1, 0.01, 15, 1)]
# today's schedule at 1,000 labels, seed 0, was swept by bench_gpu_transfer.py on the same split, samples, checkpoint and code
# (its dev rows); they are copied, marked "from", once the row this script runs again (η = 0.01) gives the same number
COPIED = "gpu_transfer_ulmfit.json"
SETTINGS = dict(
    max_len=128, batch_size=32, base_min_steps=10, base_max_steps=160, head=dict(p1=0.25, p2=0.1),
    conditions=CONDITIONS, runs=RUNS, copied=COPIED,
    dev="dev_rates.dev_split: 1,000 balanced training reviews outside the 1,000-label samples of seeds 0-2",
    today=dict(epochs=5, m=1, factor=2.6, source="bench_gpu_transfer.py's ulmfit settings; its η was chosen on the same dev "
               "split (gpu_transfer_ulmfit.json dev_rows)"),
)
BASE = ("max_len", "batch_size", "base_min_steps", "base_max_steps", "head", "conditions", "dev")


def results_dir() -> Path:
    """Where the committed results live (a test points it elsewhere)."""
    return RESULTS


def staged_checkpoint() -> Path:
    """The staged GPU stage (b) LM."""
    return RESULTS / "gpu_pretraining" / "ulmfit_imdb"


def stage_steps(n_labels: int, m: int, settings: dict = SETTINGS) -> tuple[int, int]:
    """``(min_steps_per_epoch, max_steps_per_epoch)`` for an unfreezing stage m times as long as today's."""
    passes = math.ceil(n_labels / settings["batch_size"])
    return m * max(settings["base_min_steps"], passes), m * settings["base_max_steps"]


def train_stage_c(lm: AWDLSTMLanguageModel, condition: str, ids: list, labels: list, n_labels: int, eta: float,
                  epochs: int, m: int, seed: int, settings: dict = SETTINGS, pretrained: bool = True):
    """One stage (c) run: the classifier on ``lm``'s encoder (or, not ``pretrained``, the same architecture from
    random weights) trained on ``ids``/``labels`` with ``condition``'s schedule for ``epochs`` stages m times
    today's length. Returns ``(model, trainer, training seconds)``."""
    spec = settings["conditions"][condition]
    seed_everything(seed)
    fresh = AWDLSTMLanguageModel(lm.config)
    if pretrained:
        fresh.encoder.load_state_dict(lm.encoder.state_dict())
    model = ULMFiTClassifier(fresh.encoder, 2, **settings["head"])
    low, high = stage_steps(n_labels, m, settings)
    start = time.perf_counter()
    trainer = U.train_classifier(model, ids, labels, epochs, eta, gradual=spec["gradual"], factor=spec["factor"],
                                 batch_size=settings["batch_size"], max_len=settings["max_len"],
                                 min_steps_per_epoch=low, max_steps_per_epoch=high, seed=seed)
    return model, trainer, time.perf_counter() - start


def choose(rows: list[dict]) -> list[dict]:
    """Per condition and label count, the setting with the best mean dev accuracy over its seeds; ties go to fewer
    steps, then to the smaller η. Also today's setting's mean where it ran (η the best of today's schedule)."""
    out = []
    for condition, n in sorted({(r["condition"], r["n_labels"]) for r in rows}):
        groups: dict[tuple, list[dict]] = {}
        for r in rows:
            if (r["condition"], r["n_labels"]) == (condition, n):
                groups.setdefault((r["eta"], r["epochs"], r["m"]), []).append(r)
        scored = [{"eta": eta, "epochs": epochs, "m": m, "seeds": sorted(r["seed"] for r in rs),
                   "dev_accuracy": sum(r["dev_accuracy"] for r in rs) / len(rs), "steps": rs[0]["steps"]}
                  for (eta, epochs, m), rs in groups.items()]
        # only settings run with every seed this block ran are compared
        full = max(len(s["seeds"]) for s in scored)
        scored = [s for s in scored if len(s["seeds"]) == full]
        best = min(scored, key=lambda s: (-s["dev_accuracy"], s["steps"], s["eta"]))
        today = [s for s in scored if (s["epochs"], s["m"]) == (SETTINGS["today"]["epochs"], SETTINGS["today"]["m"])]
        out.append({"condition": condition, "n_labels": n, "chosen": best,
                    "today_schedule_best": max(today, key=lambda s: s["dev_accuracy"]) if today else None,
                    "settings_compared": len(scored)})
    return out


def key(row: dict) -> tuple:
    return row["condition"], row["n_labels"], row["seed"], row["eta"], row["epochs"], row["m"]


def kept(path: Path, settings: dict, sha: str) -> list[dict]:
    """The rows of an earlier run at ``path`` measured with the same checkpoint and the same settings (the run list
    aside), so that a stopped run goes on, and a longer or reordered run list keeps what was measured."""
    if not path.is_file():
        return []
    previous = json.loads(path.read_text())
    def base(s: dict) -> dict:  # the conditions by their schedule alone (an earlier version listed grids there too)
        return {**{k: s.get(k) for k in BASE}, "conditions": {c: {k: v[k] for k in ("gradual", "factor")}
                                                              for c, v in s["conditions"].items()}}

    same = base(previous["settings"]) == base(json.loads(json.dumps(settings)))
    return previous["rows"] if same and previous["checkpoint_sha256"] == sha else []


def copied_rows(rows: list[dict], sha: str) -> list[dict]:
    """gpu_transfer_ulmfit.json's dev rows (today's schedule: 5 epochs, m = 1, at 1,000 labels, seed 0) that this
    run did not measure, marked ``"from"``; none unless that file measured this checkpoint and a row measured here
    again (same condition and η) gave the same dev accuracy, i.e. the same split, sample, code and checkpoint."""
    theirs = json.loads((results_dir() / COPIED).read_text())
    if theirs["checkpoint"]["sha256"].get("ulmfit_imdb.safetensors") != sha:
        return []
    settings = theirs["settings"]["ulmfit"]
    if (settings["epochs"], settings["max_len"], settings["batch_size"], settings["min_steps_per_epoch"],
            settings["max_steps_per_epoch"]) != (5, SETTINGS["max_len"], SETTINGS["batch_size"],
                                                 SETTINGS["base_min_steps"], SETTINGS["base_max_steps"]):
        return []
    ours = {key(r): r for r in rows if "from" not in r}
    out, checked = [], False
    for r in theirs["dev_rows"]:
        if r["condition"] not in CONDITIONS:
            continue
        row = {"condition": r["condition"], "n_labels": r["n_labels"], "seed": r["seed"], "eta": r["lr"],
               "factor": CONDITIONS[r["condition"]]["factor"], "epochs": 5, "m": 1,
               "steps_per_stage": r["steps"] // 5, "steps": r["steps"], "dev_accuracy": r["dev_accuracy"]}
        again = ours.get(key(row))
        if again is not None:
            if round(again["dev_accuracy"], 3) != round(row["dev_accuracy"], 3):
                return []
            checked = True
        else:
            out.append({**row, "from": COPIED})
    return out if checked else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=None, help="stage (b) LM folder (default: the staged GPU one)")
    parser.add_argument("--out", type=Path, default=None, help=f"result file (default: the results folder's {NAME})")
    parser.add_argument("--deadline", type=float, default=None, help="start nothing new after this many seconds")
    parser.add_argument("--smoke", action="store_true", help="a trial: 16 labels, 32 dev reviews, one short setting")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    checkpoint = args.checkpoint or staged_checkpoint()
    report = json.loads((checkpoint / "pretrain.json").read_text())
    sha = report["sha256"]["ulmfit_imdb.safetensors"]
    lm, vocab = U.load_pretrained(checkpoint, **U.IMDB_RECIPE["dropouts"])  # checks every file's sha256
    settings = json.loads(json.dumps(SETTINGS))
    if args.smoke:
        settings.update(runs=[["ulmfit", 16, 0, 0.01, 1, 1]], copied=None, base_min_steps=1, base_max_steps=2)
    out = args.out or (results_dir() / NAME)
    rows = kept(out, settings, sha)
    train = load_imdb("train")
    dev_texts, dev_labels = dev_split(list(train.texts), list(train.labels))
    if args.smoke:
        dev_texts, dev_labels = dev_texts[:32], dev_labels[:32]

    def encode(texts):
        return [U.head_and_tail(ids, settings["max_len"]) for ids in
                U.encode_texts(vocab, [U.review_tokens(t) for t in texts])]

    dev_ids = encode(dev_texts)
    head = {"what": __doc__.split("\n\n")[0], "command": "nice -n 5 env OMP_NUM_THREADS=1 .venv/bin/python "
            "tests/benchmarks/bench_ulmfit_stage_c_dev.py", "settings": settings, "checkpoint_sha256": sha,
            "checkpoint": {"folder": str(checkpoint.relative_to(ROOT)) if checkpoint.is_relative_to(ROOT) else str(checkpoint),
                           "sha256": report["sha256"], "tokens_seen": report.get("tokens_seen"),
                           "rebuild": report.get("rebuild")},
            "dev_reviews": len(dev_ids), "machine": machine(), "load_before": load()}

    def save() -> None:
        write_result(out, {**head, "rows": rows, "choice": choose(rows) if rows else [], "load_after": load()})

    start = time.perf_counter()
    samples = {}
    for condition, n, seed, eta, epochs, m in settings["runs"]:
        if any(key(r) == (condition, n, seed, eta, epochs, m) and "from" not in r for r in rows):
            continue
        if args.deadline is not None and time.perf_counter() - start > args.deadline:
            print("deadline reached", flush=True)
            break
        if (n, seed) not in samples:
            texts, labels = U.sample_balanced(train.texts, train.labels, n, seed=seed)
            samples[n, seed] = (encode(texts), labels)
        ids, labels = samples[n, seed]
        spec = settings["conditions"][condition]
        model, trainer, seconds = train_stage_c(lm, condition, ids, labels, n, eta, epochs, m, seed, settings)
        acc = U.accuracy(model, dev_ids, dev_labels, max_len=settings["max_len"])
        row = {"condition": condition, "n_labels": n, "seed": seed, "eta": eta, "factor": spec["factor"],
               "epochs": epochs, "m": m, "steps_per_stage": trainer.step // epochs, "steps": trainer.step,
               "dev_accuracy": acc, "train_seconds": round(seconds, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if settings["copied"]:
            rows[:] = [r for r in rows if "from" not in r] + copied_rows(rows, sha)
        save()
    save()
    for c in choose(rows):
        print(json.dumps(c), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
