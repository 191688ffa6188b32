"""What each layer of the shipped ELMo biLM knows: a probe per layer for part of speech and for sentiment.

Peters et al. (2018, sec. 5.3) found the first biLSTM layer better than the second for syntax (POS tagging) and
the second better for word sense. This script measures the same question on lmlib's small IMDb biLM
(lmlib/pretrained/elmo_imdb/): for each layer (0 = the character CNN's token vector, 1 = LSTM 1, 2 = LSTM 2,
each [forward; backward], 256 wide) and for the learned scalar mix of all three, a probe on frozen features:

* UPOS tags (17 classes) on UD English-EWT: a linear classifier per word, trained on a seeded random subset of
  ``pos_train_sentences`` training sentences (a new subset per seed), tested on every word of the dev split;
* sentiment on IMDb: a linear classifier on the mean of a layer over a review's first 48 tokens, trained on a
  seeded random ``sentiment_train_reviews`` of the 25,000 training reviews, tested on a fixed 2,000 test reviews
  (:func:`imdb_features`).

Each probe is trained with Adam (300 steps of 512 rows drawn at random) on standardized features; means and
standard errors over 3 seeds.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_elmo_probes.py

writes lmlib/results/elmo_probes.json. The IMDb features (shared with bench_elmo_transfer.py) are computed once
and cached: every review is read to its first ``MAX_TOKENS`` tokens (``lmlib.recipes.elmo.review_sentences``) and
every biLM layer is mean-pooled over those words (``pooled_features``); the cache file is named by the checkpoint's
sha256, so features of another checkpoint are never reused. The fixed test subset is ``N_TEST`` reviews of IMDb's
test split drawn at seeded random (half per class); the training pool is all 25,000 training reviews.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import common
import torch
from common import load, machine, write_result

from lmlib.data import load_imdb, load_ud_pos
from lmlib.recipes import elmo as R

MAX_TOKENS = 48
N_TEST = 2000
TEST_SEED = 0
LAYERS = {"character CNN (layer 0)": 0, "LSTM 1": 1, "LSTM 2": 2, "scalar mix": None}
SETTINGS = dict(seeds=[0, 1, 2], pos_train_sentences=2000, pos_test="dev", probe_steps=300, probe_batch_size=512,
                probe_lr=0.01,
                weight_decay=1e-4, sentiment_train_reviews=5000, sentiment_max_tokens=MAX_TOKENS,
                sentiment_test_reviews=N_TEST)


def mean_se(values: list[float]) -> dict:
    mean, se = common.mean_se(values)
    return {"mean": mean, "se": se if se is not None else 0.0, "values": values}


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


def probe_rows(train_x, train_y, test_x, test_y, num_classes, subset, seeds) -> tuple[dict, dict]:
    """Accuracy (mean, se over seeds) per layer, and the mix weights softmax(w), γ learned per seed."""
    accs = {name: [] for name in LAYERS}
    mixes = []
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        idx = subset(g)
        tr, te = R.standardize(train_x[idx], test_x)
        for name, layer in LAYERS.items():
            probe = R.fit_probe(tr, train_y[idx], layer, num_classes, seed=seed, steps=SETTINGS["probe_steps"],
                                lr=SETTINGS["probe_lr"], weight_decay=SETTINGS["weight_decay"],
                                batch_size=SETTINGS["probe_batch_size"])
            accs[name].append(R.probe_accuracy(probe, te, test_y))
            if layer is None:
                mixes.append({"s": torch.softmax(probe.mix.w.detach(), 0).tolist(), "gamma": probe.mix.gamma.item()})
    return {name: mean_se(v) for name, v in accs.items()}, mixes


def pos_probe(bilm) -> dict:
    start = time.perf_counter()
    train, test = load_ud_pos("train"), load_ud_pos(SETTINGS["pos_test"])
    tags = sorted({t for s in train for _, t in s})
    # the pool: every seed's subset of training sentences comes from here (features computed once)
    pool = torch.randperm(len(train), generator=torch.Generator().manual_seed(1234))[: 2 * SETTINGS["pos_train_sentences"]]
    pool_sents = [train[i] for i in pool.tolist()]
    x_train = R.token_features(bilm, [[w for w, _ in s] for s in pool_sents])
    y_train = torch.tensor([tags.index(t) for s in pool_sents for _, t in s])
    owner = torch.tensor([k for k, s in enumerate(pool_sents) for _ in s])
    x_test = R.token_features(bilm, [[w for w, _ in s] for s in test])
    y_test = torch.tensor([tags.index(t) if t in tags else -1 for s in test for _, t in s])
    feature_seconds = time.perf_counter() - start

    def subset(g):
        chosen = torch.randperm(len(pool_sents), generator=g)[: SETTINGS["pos_train_sentences"]]
        keep = torch.zeros(len(pool_sents), dtype=torch.bool)
        keep[chosen] = True
        return keep[owner].nonzero().flatten()

    rows, mixes = probe_rows(x_train, y_train, x_test, y_test, len(tags), subset, SETTINGS["seeds"])
    counts = torch.bincount(y_train, minlength=len(tags))
    return {"task": "UPOS, UD English-EWT", "tags": tags, "train_words_per_seed": "about "
            f"{int(len(y_train) * SETTINGS['pos_train_sentences'] / len(pool_sents)):,}",
            "train_sentences_per_seed": SETTINGS["pos_train_sentences"], "test_split": SETTINGS["pos_test"],
            "test_sentences": len(test), "test_words": len(y_test),
            "majority_baseline": float((y_test == int(counts.argmax())).float().mean()),
            "accuracy": rows, "mix": mixes, "feature_seconds": feature_seconds,
            "seconds": time.perf_counter() - start}


def sentiment_probe(bilm, sha) -> dict:
    start = time.perf_counter()
    f = imdb_features(bilm, sha)
    n = SETTINGS["sentiment_train_reviews"]
    rows, mixes = probe_rows(f["train_x"], f["train_y"], f["test_x"], f["test_y"], 2,
                             lambda g: torch.randperm(len(f["train_y"]), generator=g)[:n], SETTINGS["seeds"])
    return {"task": "sentiment, IMDb (mean-pooled)", "train_reviews_per_seed": n,
            "test_reviews": len(f["test_y"]), "max_tokens": MAX_TOKENS, "accuracy": rows, "mix": mixes,
            "feature_seconds": f["seconds"], "seconds": time.perf_counter() - start}


def main() -> None:
    torch.set_num_threads(1)
    bilm, _, report = R.load_pretrained()
    sha = report["sha256"][f"{R.NAME}.safetensors"]
    result = {"settings": SETTINGS, "layers": list(LAYERS), "machine": machine(), "load_before": load(),
              "pretrained": {"name": R.NAME, "sha256": sha}}
    result["pos"] = pos_probe(bilm)
    print(json.dumps(result["pos"]["accuracy"], indent=1), flush=True)
    result["sentiment"] = sentiment_probe(bilm, sha)
    result["load_after"] = load()
    write_result("elmo_probes", result)
    for task in ("pos", "sentiment"):
        print(task, {k: f"{v['mean']:.3f} ± {v['se']:.3f}" for k, v in result[task]["accuracy"].items()})


if __name__ == "__main__":
    main()
