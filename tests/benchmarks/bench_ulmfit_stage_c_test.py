"""ULMFiT's stage (c) at the settings chosen on dev, scored on test reviews against a random init chosen the same way.

bench_ulmfit_stage_c_dev.py chose, on a dev split of IMDb *training* reviews, the epochs and peak rate η of the
paper's stage (c) (``ulmfit``: gradual unfreezing, rates divided by 2.6 per layer group, STLR) and of its ablation
(``ulmfit_flat``: every group from the start at one rate) for the staged GPU stage (b) LM. Here those settings are
trained on each seed's 100- and 1,000-label samples and scored on the 1,000 test reviews every transfer benchmark
uses (``common.imdb_test_subset``). A fair random init gets the same choice: ``scratch`` (the same classifier, every
group from the start at one rate, random weights) at the η gpu_transfer_ulmfit.json's dev sweep chose for it (at
1,000 labels, its only sweep) for 5 or 15 epochs, whichever has the better mean dev accuracy over seeds 0 and 1 at
that label count (both lengths run here).

Runs go two at a time (one thread each), the dev runs first; rows are written as they come, and a rerun with the
same checkpoint and settings keeps them, so the run can stop (``--deadline``) and go on.

    LMLIB_DATA_DIR=... nice -n 5 env OMP_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_ulmfit_stage_c_test.py

Its committed result was measured with the earlier ``train_classifier``, whose one slanted triangle spanned every
unfreezing stage (the lower groups trained only in its decay tail); a rerun now gets one triangle per stage.
bench_ulmfit_stage_c.py runs the paper's stage (c) (all layers until the dev split stops improving, whole reviews
through BPT3C where the dev split prefers them) on any checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bench_ulmfit_stage_c_dev as D
import torch
from common import dev_split, imdb_test_subset, kept_rows, load, machine, read_result, run_pool, summarise, write_result

from lmlib.data import load_imdb
from lmlib.recipes import ulmfit as U

NAME = "ulmfit_stage_c_test"
SIZES, SEEDS, TEST_REVIEWS, TEST_SEED = (1000, 100), (0, 1, 2, 3, 4), 1000, 0
SCRATCH_EPOCHS = (5, 15)  # today's length and the longest the dev study gave ULMFiT
_WORK: dict = {}  # what each worker process reads (filled before the pool forks)


def settings_from(dev: dict, transfer: dict) -> dict:
    """Per label count, the conditions' (η, epochs, m): ULMFiT's two from the dev study's choice, scratch's η from
    the transfer benchmark's dev sweep (its epochs are chosen here)."""
    scratch = [r for r in transfer["dev_rows"] if r["condition"] == "scratch"]
    eta = max(scratch, key=lambda r: r["dev_accuracy"])["lr"]
    chosen = {(c["condition"], c["n_labels"]): {k: c["chosen"][k] for k in ("eta", "epochs", "m")}
              for c in dev["choice"]}
    return {"sizes": {str(n): {"ulmfit": chosen["ulmfit", n], "ulmfit_flat": chosen["ulmfit_flat", n],
                               "scratch": {"eta": eta, "epochs": list(SCRATCH_EPOCHS), "m": 1}} for n in SIZES},
            "seeds": list(SEEDS), "test_reviews": TEST_REVIEWS, "test_seed": TEST_SEED,
            "conditions": {**D.CONDITIONS, "scratch": dict(gradual=False, factor=1.0)},
            "base": {k: D.SETTINGS[k] for k in D.BASE if k != "conditions"}}


def train_and_score(job: dict) -> dict:
    """One run in a worker: train ``job``'s condition on its seed's sample and score it on its split."""
    torch.set_num_threads(1)
    settings = {**_WORK["settings"]["base"], "conditions": _WORK["settings"]["conditions"]}
    ids, labels = _WORK["samples"][job["n_labels"], job["seed"]]
    model, trainer, seconds = D.train_stage_c(_WORK["lm"], job["condition"], ids, labels, job["n_labels"], job["eta"],
                                              job["epochs"], job["m"], job["seed"], settings,
                                              pretrained=job["condition"] != "scratch")
    accuracy = U.accuracy(model, *_WORK[job["split"]], max_len=settings["max_len"])
    return {**job, "factor": settings["conditions"][job["condition"]]["factor"], "steps": trainer.step,
            "accuracy": accuracy, "train_seconds": round(seconds, 1)}


def scratch_epochs(rows: list[dict], n: int) -> int | None:
    """The scratch length with the best mean dev accuracy over seeds 0 and 1 at ``n`` labels (ties to fewer), once
    all have run."""
    dev = {e: [r["accuracy"] for r in rows if (r["split"], r["n_labels"], r["epochs"]) == ("dev", n, e)]
           for e in SCRATCH_EPOCHS}
    if any(len(accs) < 2 for accs in dev.values()):
        return None
    return max(SCRATCH_EPOCHS, key=lambda e: (sum(dev[e]) / 2, -e))


def jobs(settings: dict, rows: list[dict]) -> list[dict]:
    """The runs still to do that can start now, most needed first."""
    todo = []
    for n in SIZES:
        size, late = settings["sizes"][str(n)], []
        eta = size["scratch"]["eta"]
        todo += [dict(split="dev", condition="scratch", n_labels=n, seed=s, eta=eta, epochs=e, m=1)
                 for e in SCRATCH_EPOCHS for s in (0, 1)]
        for seed in SEEDS:
            late += [dict(split="test", condition=c, n_labels=n, seed=seed, **size[c]) for c in ("ulmfit", "ulmfit_flat")]
        epochs = scratch_epochs(rows, n)
        if epochs is not None:
            late += [dict(split="test", condition="scratch", n_labels=n, seed=s, eta=eta, epochs=epochs, m=1)
                     for s in SEEDS]
        todo += late
    done = [{k: r[k] for k in ("split", "condition", "n_labels", "seed", "eta", "epochs", "m")} for r in rows]
    return [j for j in todo if j not in done]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deadline", type=float, default=None, help="start nothing new after this many seconds")
    parser.add_argument("--smoke", action="store_true", help="a trial: 8 labels, 32 dev and test reviews, 2 steps a stage")
    parser.add_argument("--out", default=NAME, help="result name or path")
    parser.add_argument("--checkpoint", type=Path, default=None, help="stage (b) LM folder (default: the staged GPU one)")
    parser.add_argument("--dev", default="ulmfit_stage_c_dev",
                        help="the dev study's result (name or path) that chose the settings, run on the same checkpoint")
    args = parser.parse_args(argv)
    checkpoint = args.checkpoint or D.staged_checkpoint()
    report = json.loads((checkpoint / "pretrain.json").read_text())
    sha = report["sha256"]["ulmfit_imdb.safetensors"]
    dev = read_result(Path(args.dev) if args.dev.endswith(".json") else args.dev)
    if dev["checkpoint_sha256"] != sha:
        parser.error(f"{args.dev} chose its settings on another checkpoint than {checkpoint}; run "
                     "bench_ulmfit_stage_c_dev.py --checkpoint on it first")
    settings = settings_from(dev, read_result("gpu_transfer_ulmfit"))
    if args.smoke:
        settings["base"].update(base_min_steps=1, base_max_steps=2)
        for size in settings["sizes"].values():
            size["ulmfit"]["epochs"] = size["ulmfit_flat"]["epochs"] = 1
    lm, vocab = U.load_pretrained(checkpoint, **U.IMDB_RECIPE["dropouts"])  # checks every file's sha256
    out = Path(args.out) if args.out.endswith(".json") else args.out
    rows = kept_rows(out, settings, sha, more_seeds=True)

    def encode(texts):
        return [U.head_and_tail(x, settings["base"]["max_len"]) for x in
                U.encode_texts(vocab, [U.review_tokens(t) for t in texts])]

    train = load_imdb("train")
    dev_texts, dev_labels = dev_split(list(train.texts), list(train.labels))
    test_texts, test_labels = imdb_test_subset(TEST_REVIEWS, TEST_SEED)
    cut = 32 if args.smoke else None

    def sample(n: int, seed: int) -> tuple[list, list[int]]:
        texts, labels = U.sample_balanced(train.texts, train.labels, 8 if args.smoke else n, seed=seed)
        return encode(texts), labels

    _WORK.update(lm=lm, settings=settings, dev=(encode(dev_texts[:cut]), dev_labels[:cut]),
                 test=(encode(test_texts[:cut]), test_labels[:cut]),
                 samples={(n, s): sample(n, s) for n in SIZES for s in SEEDS})
    folder = checkpoint.relative_to(D.ROOT) if checkpoint.is_relative_to(D.ROOT) else checkpoint
    head = {"what": __doc__.split("\n\n")[0], "settings": settings, "checkpoint_sha256": sha,
            "checkpoint": {"folder": str(folder), "sha256": report["sha256"],
                           "tokens_seen": report.get("tokens_seen"), "rebuild": report.get("rebuild")},
            "machine": machine(), "load_before": load()}

    def save() -> None:
        tested = [r for r in rows if r["split"] == "test"]
        write_result(out, {**head, "rows": rows, "scratch_epochs": {str(n): scratch_epochs(rows, n) for n in SIZES},
                           "summary": summarise(tested, ("condition", "n_labels")) if tested else [],
                           "load_after": load()})

    done = run_pool(lambda: jobs(settings, rows), train_and_score, rows, save, 2, args.deadline)
    print("all runs done" if done else "late: stopped at the deadline", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
