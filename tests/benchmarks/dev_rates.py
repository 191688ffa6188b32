"""A learning rate for each from-scratch condition, chosen on a dev split of the training labels (never the test set).

Shared by bench_gpt_finetune.py and run_bert_finetune.py. A randomly initialised model wants another rate than the
fine-tuning recipe's (which was set for the pretrained model), and with 100 labels (80 steps) another rate than
with 1,000, so each label count gets its own: each rate is trained on the seed's labelled sample and scored on 1,000 other
training examples; the rate with the best mean dev accuracy wins. The dev split is run_bert_finetune_rates.py's
(same seed, same exclusions), so on IMDb it is the split of bert_finetune_rates.json and of gpu_transfer.py, whose
scratch sweeps at 1,000 labels (same architecture, tokenizer, recipe and code) are reused rather than run again;
the sweep at 100 labels is run here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lmlib.recipes.ulmfit import sample_balanced

RATES = (5e-4, 1e-3, 2e-3)
RESULTS = Path(__file__).resolve().parents[2] / "lmlib" / "results"
DEV = dict(reviews=1000, seed=99, excludes="the labelled samples of seeds 0-2 at 1,000 labels (those at 100 are inside "
           "them)", swept_here={"n_labels": 100, "rates": list(RATES), "seeds": [0, 1, 2]},
           copied={"n_labels": 1000, "from": "the committed sweeps on the same split with the same recipe and code: "
                   "gpu_transfer_<model>.json's scratch dev rows (seed 0) and, for BERT, bert_finetune_rates.json's "
                   "(seeds 0-2)"},
           choice="per task and label count, the rate with the best mean dev accuracy over the seeds it was run with; "
                  "the 25,000-label run (every training review, the dev split included) takes the rate chosen at 1,000")


def dev_split(texts: Sequence[str], labels: Sequence[int]) -> tuple[list[str], list[int]]:
    """``DEV["reviews"]`` balanced training examples that none of the 1,000-label samples of seeds 0-2 contains."""
    used = set()
    for seed in (0, 1, 2):
        used.update(sample_balanced(texts, labels, 1000, seed=seed)[0])
    rest = [(t, y) for t, y in zip(texts, labels) if t not in used]
    return sample_balanced([t for t, _ in rest], [y for _, y in rest], DEV["reviews"], seed=DEV["seed"])


def best_rate(rows: Sequence[dict], rate: str = "lr", score: str = "dev_accuracy") -> float:
    """The rate (``row[rate]``) whose rows have the best mean ``score`` over the seeds it was run with; a tie goes
    to the smaller rate (the cautious choice). The one rule of every benchmark's learning-rate sweep."""
    by_rate: dict[float, list[float]] = {}
    for r in rows:
        by_rate.setdefault(r[rate], []).append(r[score])
    if not by_rate:
        raise ValueError("no sweep rows: give at least one rate to sweep")
    return min(by_rate, key=lambda lr: (-sum(by_rate[lr]) / len(by_rate[lr]), lr))


def chosen_rate(dev_rows: Sequence[dict], n_labels: int, **match) -> float:
    """The rate with the best mean ``dev_accuracy`` (over the seeds it was run with; :func:`best_rate`) among
    ``dev_rows`` at ``n_labels`` whose other fields equal ``match``; 25,000 labels take the rate chosen at 1,000."""
    n = 1000 if n_labels > 1000 else n_labels
    rows = [r for r in dev_rows if r["n_labels"] == n and all(r.get(k) == v for k, v in match.items())]
    by_rate: dict[float, dict[int, float]] = {}
    for r in rows:
        by_rate.setdefault(r["lr"], {})[r["seed"]] = r["dev_accuracy"]
    swept = DEV["swept_here"]
    if n == swept["n_labels"] and any(set(by_rate.get(rate, {})) != set(swept["seeds"]) for rate in swept["rates"]):
        raise RuntimeError(f"the dev sweep at {n} labels for {match or 'scratch'} is not complete; run with --dev first")
    if len(by_rate) < 2:
        raise RuntimeError(f"no dev rows at {n} labels for {match or 'scratch'} that compare two rates")
    one_per_seed = {(r["lr"], r["seed"]): r for r in rows}  # a row copied twice counts once
    return best_rate(list(one_per_seed.values()))


def same_scratch_model(model: str) -> None:
    """Refuse to reuse gpu_transfer_<model>.json's scratch rows unless its random-init model is the shipped one's: the
    same config and tokenizer file (the pretrained weights, the only difference, are not read by a scratch run). The
    checkpoint it was measured with is staged in gpu_pretraining/ or, once shipped, is the shipped one."""
    import hashlib

    shipped = Path(__file__).resolve().parents[2] / "lmlib" / "pretrained" / f"{model}_imdb"
    measured = json.loads((RESULTS / f"gpu_transfer_{model}.json").read_text())["checkpoint"]["sha256"]
    weights = f"{model}_imdb.safetensors"
    reports = [json.loads((d / "pretrain.json").read_text())
               for d in (shipped, RESULTS / "gpu_pretraining" / f"{model}_imdb") if (d / "pretrain.json").is_file()]
    theirs = [r for r in reports if r["sha256"][weights] == measured[weights]]
    ours = hashlib.sha256((shipped / "tokenizer.json").read_bytes()).hexdigest()
    if not theirs or theirs[0]["config"] != reports[0]["config"] or measured["tokenizer.json"] != ours:
        raise RuntimeError(f"gpu_transfer_{model}.json's scratch model differs from the shipped {model}'s; run it here")


def committed_scratch(model: str, n_test: int, test_seed: int) -> tuple[list[dict], list[dict]]:
    """gpu_transfer_<model>.json's scratch dev rows at 1,000 labels and its scratch test rows, each marked with
    ``"from"``: the same split, samples, test reviews, recipe and code as this course's scripts, so training them
    again gives the same numbers (one thread on the CPU; checked by rerunning one row)."""
    same_scratch_model(model)
    name = f"gpu_transfer_{model}.json"
    data = json.loads((RESULTS / name).read_text())
    if (data["settings"]["test_reviews"], data["settings"]["test_seed"]) != (n_test, test_seed) or data["device"] != ["cpu"]:
        raise RuntimeError(f"{name} was measured on other test reviews or another device")
    dev = [{**r, "n_dev": 1000, "from": name}  # gpu_transfer.py's dev split is dev_split's 1,000 reviews
           for r in data["dev_rows"] if r["condition"] == "scratch" and r["n_labels"] == 1000]
    tests = [{**r, "from": name} for r in data["rows"] if r["condition"] == "scratch"]
    return dev, tests
