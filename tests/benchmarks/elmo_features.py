"""Shared by bench_elmo_probes.py and bench_elmo_transfer.py: the shipped biLM's frozen features of IMDb reviews,
computed once and cached.

The fixed test subset is 2,000 reviews of IMDb's test split drawn at seeded random (1,000 per class); the training
pool is all 25,000 reviews of the train split. Each review is read to its first ``MAX_TOKENS`` tokens
(``lmlib.recipes.elmo.review_sentences``: its sentences in order, the last one cut), and every biLM layer is
mean-pooled over those words (``pooled_features``). The cache file is named by the checkpoint's sha256, so
features of another checkpoint are never reused.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

from lmlib.data import load_imdb
from lmlib.recipes import elmo as R

MAX_TOKENS = 48
N_TEST = 2000
TEST_SEED = 0


def test_indices(labels, n: int = N_TEST, seed: int = TEST_SEED) -> list[int]:
    """``n`` indices of IMDb test reviews, half of each class, drawn at seeded random."""
    g = torch.Generator().manual_seed(seed)
    picked = []
    for c in (0, 1):
        idx = [i for i, y in enumerate(labels) if y == c]
        picked += [idx[i] for i in torch.randperm(len(idx), generator=g)[: n // 2].tolist()]
    return sorted(picked)


def imdb_features(bilm, sha: str) -> dict:
    """``{"train_x" (25000, L + 1, 2d), "train_y", "train_tokens" (lists of lower-cased tokens), "test_x", "test_y",
    "test_tokens", "seconds"}``, from the cache when present."""
    cache = Path(os.environ.get("LMLIB_CACHE", tempfile.gettempdir())) / f"elmo_imdb_features_{sha[:16]}_{MAX_TOKENS}.pt"
    if cache.is_file():
        return torch.load(cache, weights_only=False)
    train, test = load_imdb("train"), load_imdb("test")
    keep = test_indices(test.labels)
    test_texts, test_labels = [test.texts[i] for i in keep], [test.labels[i] for i in keep]
    start = time.perf_counter()
    out = {}
    for part, texts, labels in (("test", test_texts, test_labels), ("train", train.texts, train.labels)):
        out[f"{part}_x"] = R.pooled_features(bilm, texts, MAX_TOKENS)
        out[f"{part}_y"] = torch.tensor(labels)
        out[f"{part}_tokens"] = [[w.lower() for s in R.review_sentences(t, MAX_TOKENS) for w in s] for t in texts]
        print(f"{part}: {len(texts):,} reviews pooled, {time.perf_counter() - start:.0f} s", flush=True)
    out["seconds"] = time.perf_counter() - start
    torch.save(out, cache)
    return out
