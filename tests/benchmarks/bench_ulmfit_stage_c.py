"""ULMFiT's stage (c) as Howard & Ruder (2018, sec. 3.3) run it, on any stage (b) checkpoint folder, against the same
classifier from random weights given the same chance and the bag of words on the same words.

The paper's stage (c) (``lmlib.recipes.ulmfit.train_classifier``): gradual unfreezing, one epoch per layer group with
a slanted triangle of its own (as the authors' ``imdb_scripts/train_clas.py`` runs each stage as one ``fit``), then
every group until the dev split stops improving ("until convergence": ``patience`` epochs without a better dev
accuracy, the best epoch's weights kept; every condition is watched from the fifth epoch on, after ULMFiT's four
partial stages, so that no run stops before it could learn), discriminative rates η/2.6 per group down; a review read whole through
BPT3C (pieces of ``bptt`` = 70 tokens, the paper's BPTT length, the state carried, every piece's hidden states
pooled) or cut to its first and last 64 tokens, whichever the dev split prefers. Beside it:

* ``ulmfit_flat``: the one-rate ablation: every group from the first step at one rate, same stopping rule, at the
  length the dev split chose for ``ulmfit`` (an ablation changes one thing);
* ``scratch``: the same classifier from random weights, one rate, the same stopping rule and epochs, its own length
  chosen on the same dev split;
* the bag of words (``lmlib.eval.bow_baseline``) on the same labelled samples and test reviews: on the words the
  classifier reads at each length (in its vocabulary) and on the full review.

Rates: ULMFiT's η = 0.01 is the paper's (sec. 4); the one-rate ablation's 0.01 and the random init's 0.003 are what
the dev sweeps on the same split chose for them (``ulmfit_stage_c_dev.json``, ``gpu_transfer_ulmfit.json``).
Labelled samples are ``sample_balanced(train, n, seed)``; the dev split is the first ``dev_reviews`` of
``common.dev_split`` (training reviews outside the 1,000-label samples of seeds 0-2), which both stops training and
chooses the length; the test reviews are ``common.imdb_test_subset(1000, 0)``. Seed 0 runs every length first (the
dev choice); its run at the chosen length is its test row, and the other seeds run at the chosen length only. Runs go
``--workers`` at a time (one thread each), most needed first; rows are written as they come, and a rerun with the
same checkpoint and settings keeps them, so a run can stop (``--deadline``) and go on.

    LMLIB_DATA_DIR=... OMP_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_ulmfit_stage_c.py
    LMLIB_DATA_DIR=... OMP_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_ulmfit_stage_c.py \\
        --checkpoint PATH/TO/STAGE_B_FOLDER   # writes lmlib/results/ulmfit_stage_c_<sha256[:12]>.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from common import RESULTS, dev_split, imdb_test_subset, kept_rows, load, machine, mean_se, run_pool, write_result

from lmlib.data import load_imdb
from lmlib.models.awd_lstm import AWDLSTMLanguageModel
from lmlib.models.ulmfit import ULMFiTClassifier
from lmlib.recipes import ulmfit as U
from lmlib.runtime import seed_everything

ROOT = Path(__file__).resolve().parents[2]
NAME = "ulmfit_stage_c"
WHOLE = "whole"  # max_len of a run that reads whole reviews through BPT3C
SETTINGS = dict(
    sizes=[1000, 100], seeds=[0, 1, 2], test_reviews=1000, test_seed=0, dev_reviews=500, batch_size=32,
    min_steps_per_epoch=10, head=dict(p1=0.25, p2=0.1), bptt=70, lengths=[128, WHOLE], all_layer_epochs=8,
    patience=2, watch_from=4, conditions=dict(
        ulmfit=dict(pretrained=True, gradual=True, factor=2.6, eta=0.01),
        scratch=dict(pretrained=False, gradual=False, factor=1.0, eta=0.003),
        ulmfit_flat=dict(pretrained=True, gradual=False, factor=1.0, eta=0.01)),
    length_from={"ulmfit": "ulmfit", "scratch": "scratch", "ulmfit_flat": "ulmfit"},
)
_WORK: dict = {}  # what each worker process reads (filled before the pool forks)


def staged_checkpoint() -> Path:
    """The staged GPU stage (b) LM."""
    return RESULTS / "gpu_pretraining" / "ulmfit_imdb"


def max_epochs(settings: dict, n_groups: int = 5) -> int:
    """The most epochs any condition may run: G − 1 partial stages of gradual unfreezing plus ``all_layer_epochs``
    (the others get as many, so the random init is given the same chance)."""
    return n_groups - 1 + settings["all_layer_epochs"]


def train_stage_c(lm: AWDLSTMLanguageModel, condition: str, ids: list, labels: list, dev: tuple, max_len,
                  seed: int, settings: dict = SETTINGS):
    """One stage (c) run of ``condition`` on ``ids``/``labels``, stopped by the dev split ``dev``; ``max_len`` 128 (the
    texts already cut to it) or ``WHOLE`` (through BPT3C). Returns ``(model, trainer, seconds, moved)``, ``moved``
    each layer group's ‖θ_after − θ_before‖ / ‖θ_before‖ (embedding first, head last): how far training took it."""
    spec = settings["conditions"][condition]
    seed_everything(seed)
    fresh = AWDLSTMLanguageModel(lm.config)
    if spec["pretrained"]:
        fresh.encoder.load_state_dict(lm.encoder.state_dict())
    model = ULMFiTClassifier(fresh.encoder, 2, **settings["head"], bptt=settings["bptt"])
    cut = None if max_len == WHOLE else max_len
    before = [[p.detach().clone() for p in g.parameters()] for g in model.layer_groups()]
    start = time.perf_counter()
    trainer = U.train_classifier(model, ids, labels, max_epochs(settings, len(model.layer_groups())), spec["eta"],
                                 gradual=spec["gradual"], factor=spec["factor"], batch_size=settings["batch_size"],
                                 max_len=cut, min_steps_per_epoch=settings["min_steps_per_epoch"], seed=seed,
                                 valid=dev, patience=settings["patience"], watch_from=settings["watch_from"],
                                 sortish=cut is None)
    seconds = time.perf_counter() - start
    moved = [round(float(torch.sqrt(sum(((p.detach() - q) ** 2).sum() for p, q in zip(g.parameters(), b)))
                         / torch.sqrt(sum((q ** 2).sum() for q in b))), 4)
             for g, b in zip(model.layer_groups(), before)]
    return model, trainer, seconds, moved


def run_job(job: dict) -> dict:
    """One job in a worker: a classifier run (dev accuracy at its best epoch, then test accuracy) or the bag of
    words of one labelled sample."""
    torch.set_num_threads(1)
    settings, n, seed = _WORK["settings"], job["n_labels"], job["seed"]
    if job["condition"] == "bow":
        from lmlib.eval.bow_baseline import bow_accuracy, fit_bow

        texts = _WORK["bow_train"][n, seed][job["view"]]
        start = time.perf_counter()
        pipeline = fit_bow(texts, _WORK["labels"][n, seed], seed=seed)
        return {**job, "test_accuracy": bow_accuracy(pipeline, _WORK["bow_test"][job["view"]], _WORK["test"][1]),
                "C": pipeline[-1].best_params_["C"], "seconds": round(time.perf_counter() - start, 1)}
    length = str(job["max_len"])
    dev = _WORK["dev"][length]
    model, trainer, seconds, moved = train_stage_c(_WORK["lm"], job["condition"], _WORK["ids"][n, seed][length],
                                            _WORK["labels"][n, seed], dev, job["max_len"], seed, settings)
    cut = None if job["max_len"] == WHOLE else job["max_len"]
    stop = trainer.early_stopping
    return {**job, "eta": settings["conditions"][job["condition"]]["eta"], "dev_accuracy": max(stop.scores),
            "best_epoch": stop.best_epoch, "epochs_run": trainer.epoch, "steps": trainer.step,
            "test_accuracy": U.accuracy(model, _WORK["test_ids"][length], _WORK["test"][1], max_len=cut),
            "relative_change": moved, "train_seconds": round(seconds, 1)}


def chosen_length(rows: list[dict], condition: str, n: int, settings: dict = SETTINGS):
    """The length whose seed-0 run of ``condition`` at ``n`` labels has the best dev accuracy (a tie goes to the
    first of ``settings["lengths"]``, the shorter), once every length has run; else None."""
    dev = {r["max_len"]: r["dev_accuracy"] for r in rows
           if (r["condition"], r["n_labels"], r["seed"]) == (condition, n, 0)}
    if any(length not in dev for length in settings["lengths"]):
        return None
    return max(settings["lengths"], key=lambda length: (dev[length], -settings["lengths"].index(length)))


def jobs(settings: dict, rows: list[dict]) -> list[dict]:
    """The runs still to do that can start now, most needed first: seed 0 of ULMFiT and of the random init at every
    length (the dev choice), seed 0 of the ablation at ULMFiT's length, the bag of words, then the other seeds at
    the chosen lengths; the label counts in the order of ``settings["sizes"]`` at each step."""
    first, then, bow, rest = [], [], [], []
    for n in settings["sizes"]:
        for condition, source in settings["length_from"].items():
            if source == condition:
                first += [dict(condition=condition, n_labels=n, seed=0, max_len=m) for m in settings["lengths"]]
            length = chosen_length(rows, source, n, settings)
            if length is not None:
                then.append(dict(condition=condition, n_labels=n, seed=0, max_len=length))
                rest += [dict(condition=condition, n_labels=n, seed=s, max_len=length) for s in settings["seeds"] if s]
        bow += [dict(condition="bow", view=v, n_labels=n, seed=s) for s in settings["seeds"]
                for v in ("full", *map(str, settings["lengths"]))]
    done = [{k: r[k] for k in ("condition", "n_labels", "seed", "max_len", "view") if k in r} for r in rows]
    return [j for j in first + then + bow + rest if j not in done]


def summarise(rows: list[dict], settings: dict = SETTINGS) -> list[dict]:
    """Per label count: each condition's test accuracy at its chosen length (the bag of words per view), mean and
    standard error over seeds, and ULMFiT's and the ablation's difference from the random init and from the bag of
    words on ULMFiT's words, with the standard error of the difference (the two errors in quadrature)."""
    out = []
    for n in settings["sizes"]:
        means = {}
        for condition, source in settings["length_from"].items():
            length = chosen_length(rows, source, n, settings)
            accs = [r["test_accuracy"] for r in rows if (r["condition"], r["n_labels"]) == (condition, n)
                    and r["max_len"] == length]
            if accs:
                means[condition] = (*mean_se(accs), len(accs), length)
        for view in ("full", *map(str, settings["lengths"])):
            accs = [r["test_accuracy"] for r in rows if (r["condition"], r["n_labels"], r.get("view")) == ("bow", n, view)]
            if accs:
                means[f"bow_{view}"] = (*mean_se(accs), len(accs), view)
        for name, (mean, se, seeds, length) in means.items():
            out.append({"n_labels": n, "condition": name, "max_len": length, "seeds": seeds, "mean": mean, "se": se})
        ulmfit_words = means.get("ulmfit", (0, 0, 0, None))[3]
        for a, b in [("ulmfit", "scratch"), ("ulmfit_flat", "scratch"), ("ulmfit", f"bow_{ulmfit_words}"),
                     ("ulmfit_flat", f"bow_{ulmfit_words}")]:
            if a in means and b in means and means[a][1] is not None and means[b][1] is not None:
                d, se = means[a][0] - means[b][0], (means[a][1] ** 2 + means[b][1] ** 2) ** 0.5
                out.append({"n_labels": n, "condition": f"{a} - {b}", "difference": d, "se": se,
                            "beyond_two_se": abs(d) > 2 * se})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=None, help="stage (b) LM folder (default: the staged GPU one)")
    parser.add_argument("--out", default=None, help="result name or path (default: ulmfit_stage_c for the staged "
                                                   "checkpoint, ulmfit_stage_c_<sha256[:12]> for another)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="label counts (default 1,000 and 100)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 0 1 2; 0 must be one)")
    parser.add_argument("--lengths", nargs="+", default=None, help=f"lengths the dev split chooses from (default 128 "
                        f"{WHOLE}; a number of head+tail tokens or {WHOLE})")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time, one thread each")
    parser.add_argument("--deadline", type=float, default=None, help="start nothing new after this many seconds")
    parser.add_argument("--smoke", action="store_true", help="a trial: 20 labels, 16 dev and test reviews, short runs")
    args = parser.parse_args(argv)
    checkpoint = args.checkpoint or staged_checkpoint()
    if not (checkpoint / "pretrain.json").is_file():
        parser.error(f"{checkpoint} holds no stage (b) checkpoint (pretrain.json)")
    report = json.loads((checkpoint / "pretrain.json").read_text())
    weights = next(k for k in report["sha256"] if k.endswith(".safetensors"))
    sha = report["sha256"][weights]
    settings = json.loads(json.dumps(SETTINGS))
    settings.update({k: v for k, v in (("sizes", args.sizes), ("seeds", args.seeds)) if v})
    if args.lengths:
        settings["lengths"] = [m if m == WHOLE else int(m) for m in args.lengths]
    if 0 not in settings["seeds"]:
        parser.error("--seeds must include 0 (its runs choose the lengths)")
    if args.smoke:
        settings.update(sizes=[20], seeds=[0, 1], dev_reviews=16, test_reviews=16, min_steps_per_epoch=1,
                        all_layer_epochs=2, patience=1)
    lm, vocab = U.load_pretrained(checkpoint, **U.IMDB_RECIPE["dropouts"])  # checks every file's sha256
    default = NAME if checkpoint.resolve() == staged_checkpoint().resolve() else f"{NAME}_{sha[:12]}"
    out = args.out or default
    out = Path(out) if str(out).endswith(".json") else out
    rows = kept_rows(out, settings, sha, more_seeds=True)

    from lmlib.eval.bow_baseline import words_view

    train = load_imdb("train")
    dev_texts, dev_labels = dev_split(list(train.texts), list(train.labels))
    dev_texts, dev_labels = dev_texts[:settings["dev_reviews"]], dev_labels[:settings["dev_reviews"]]
    test_texts, test_labels = imdb_test_subset(settings["test_reviews"] if not args.smoke else 1000, settings["test_seed"])
    test_texts, test_labels = test_texts[:settings["test_reviews"]], test_labels[:settings["test_reviews"]]

    def views(texts):  # per length, the ids the classifier reads
        ids = U.encode_texts(vocab, [U.review_tokens(t) for t in texts])
        return {str(m): ids if m == WHOLE else [U.head_and_tail(x, m) for x in ids] for m in settings["lengths"]}

    def bow_views(texts):  # per view, the text the bag of words reads
        tokens = [U.review_tokens(t) for t in texts]
        out = {"full": [t.replace("<br />", " ") for t in texts]}
        for m in settings["lengths"]:
            out[str(m)] = [words_view(t or ["<unk>"], 10**9 if m == WHOLE else m, vocab=vocab) for t in tokens]
        return out

    samples = {(n, s): U.sample_balanced(train.texts, train.labels, n, seed=s)
               for n in settings["sizes"] for s in settings["seeds"]}
    dev_ids = views(dev_texts)
    whole_dev = U.encode_texts(vocab, [U.review_tokens(t) for t in dev_texts])  # the <unk> rate the classifier reads
    _WORK.update(lm=lm, settings=settings, test=(test_texts, test_labels), test_ids=views(test_texts),
                 dev={k: (v, dev_labels) for k, v in dev_ids.items()},
                 ids={k: views(texts) for k, (texts, _) in samples.items()},
                 labels={k: labels for k, (_, labels) in samples.items()},
                 bow_train={k: bow_views(texts) for k, (texts, _) in samples.items()}, bow_test=bow_views(test_texts))
    folder = checkpoint.resolve()
    head = {"what": __doc__.split("\n\n")[0], "settings": settings, "checkpoint_sha256": sha,
            "checkpoint": {"folder": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder),
                           "sha256": report["sha256"], "tokens_seen": report.get("tokens_seen"),
                           "rebuild": report.get("rebuild")},
            "dev_unk_rate": sum(i == vocab.unk_id for x in whole_dev for i in x) / sum(map(len, whole_dev)),
            "machine": machine(), "load_before": load()}

    def save() -> None:
        write_result(out, {**head, "rows": rows, "chosen_lengths": {
            str(n): {c: chosen_length(rows, c, n, settings) for c in ("ulmfit", "scratch")} for n in settings["sizes"]},
            "summary": summarise(rows, settings), "load_after": load()})

    done = run_pool(lambda: jobs(settings, rows), run_job, rows, save, args.workers, args.deadline)
    print("all runs done" if done else "late: stopped at the deadline", flush=True)
    for s in summarise(rows, settings):
        print(json.dumps(s), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
