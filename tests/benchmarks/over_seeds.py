"""Shared by the fine-tuning benchmarks (bench_gpt_finetune.py, run_bert_finetune.py, run_bert_features.py,
bench_elmo_probes.py): means and standard errors over seeds, and the fixed IMDb test subset, so that the GPT and
BERT results are measured on the same reviews."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from lmlib.data import load_imdb


def mean_se(values: Sequence[float]) -> tuple[float, float | None]:
    """The mean of ``values`` and its standard error, s / sqrt(n) with the n − 1 sample deviation s; None for one
    value."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def summarise(rows: Sequence[dict], keys: Sequence[str]) -> list[dict]:
    """Mean accuracy and its standard error over seeds: one row per value of ``keys``, in sorted order."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r["accuracy"])
    out = []
    for group, accs in sorted(groups.items()):
        mean, se = mean_se(accs)
        out.append(dict(zip(keys, group), seeds=len(accs), mean=mean, se=se))
    return out


def imdb_test_subset(n: int, seed: int) -> tuple[list[str], list[int]]:
    """``n`` of IMDb's 25,000 test reviews and their labels, drawn by a seeded permutation."""
    test = load_imdb("test")
    picked = torch.randperm(len(test.texts), generator=torch.Generator().manual_seed(seed))[:n].tolist()
    return [test.texts[i] for i in picked], [test.labels[i] for i in picked]
