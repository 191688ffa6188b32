"""Feature-based transfer with ELMo: a small classifier on frozen biLM features against static word vectors and
against a model trained from scratch, on IMDb sentiment with 100, 1,000 and all 25,000 labels.

Peters et al. (2018) add ELMo to a task model's input with the biLM frozen (sec. 3.3) and report that it helps most
when labels are few (sec. 5.4 and its figure of SNLI and SRL against training set size). The classifiers
here share one head, a one-hidden-layer MLP (64 units, dropout 0.2, Adam, 400 steps of 256 reviews drawn at random,
or of all of them when there are fewer), and differ only in what it reads:

* **ELMo (scalar mix)**: the shipped biLM's three layers mean-pooled over a review's first 48 tokens, combined by
  a learned scalar mix (eq. 2; s and γ trained with the head);
* **static vectors (char-CNN layer)**: layer 0 alone, the biLM's context-free token vectors, mean-pooled;
* **from scratch (bag of embeddings)**: the mean of 128-dimensional word vectors learned from the labels alone,
  over the same 48 lower-cased tokens (the biLM's 10,000-word vocabulary, other words <unk>);
* **from scratch + ELMo (the paper's use)**: that same model with the ELMo mix concatenated to its own word
  vectors, [x_k; ELMo_k] (sec. 3.3: the paper adds ELMo to a task model rather than replacing its inputs), pooled
  the same way (``lmlib.recipes.elmo.BagWithELMo``).

The test set is a fixed 2,000 IMDb test reviews (1,000 per class). With 100 and 1,000 labels each seed draws a
new balanced training subset and a new initialisation; with all labels only the initialisation changes. Means and
standard errors over 3 seeds.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_elmo_transfer.py

writes tests/benchmarks/results/elmo_transfer.json (it reuses the cached features of bench_elmo_probes.py).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_elmo_probes import mean_se  # noqa: E402
from elmo_features import MAX_TOKENS, N_TEST, imdb_features  # noqa: E402
from machine import load, machine  # noqa: E402

from lmlib.recipes import elmo as R  # noqa: E402
from lmlib.text.vocab import PAD  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("ELMo (scalar mix)", "static vectors (char-CNN layer)", "from scratch (bag of embeddings)",
           "from scratch + ELMo (the paper's use)")
SETTINGS = dict(sizes=[100, 1000, "all"], seeds=[0, 1, 2], hidden=64, dropout=0.2, steps=400, batch_size=256, lr=0.01,
                weight_decay=1e-4, scratch_embed_size=128, max_tokens=MAX_TOKENS, test_reviews=N_TEST)


def balanced_subset(labels: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
    """``n`` indices, half of each class, drawn with ``g``."""
    picked = [torch.nonzero(labels == c).flatten() for c in (0, 1)]
    return torch.cat([idx[torch.randperm(len(idx), generator=g)[: n // 2]] for idx in picked])


def padded_ids(vocab, token_lists, max_tokens: int) -> torch.Tensor:
    ids = torch.full((len(token_lists), max_tokens), vocab[PAD], dtype=torch.long)
    for i, tokens in enumerate(token_lists):
        if tokens:
            ids[i, : len(tokens)] = torch.tensor(vocab.encode(tokens[:max_tokens]))
    return ids


def run_one(method: str, f: dict, idx: torch.Tensor, ids_train, ids_test, vocab, seed: int) -> float:
    S = SETTINGS
    y_train, y_test = f["train_y"][idx], f["test_y"]
    torch.manual_seed(seed)
    if method == "from scratch (bag of embeddings)":
        model = R.BagOfEmbeddings(len(vocab), S["scratch_embed_size"], 2, S["hidden"], S["dropout"], vocab[PAD])
        R.train_head(model, ids_train[idx], y_train, S["steps"], S["lr"], S["weight_decay"], S["batch_size"], seed)
        return R.probe_accuracy(model, ids_test, y_test)
    x_train, x_test = R.standardize(f["train_x"][idx], f["test_x"])
    if method == "from scratch + ELMo (the paper's use)":
        model = R.BagWithELMo(len(vocab), S["scratch_embed_size"], x_train.size(1), x_train.size(2), 2, S["hidden"],
                              S["dropout"], vocab[PAD])
        R.train_head(model, (ids_train[idx], x_train), y_train, S["steps"], S["lr"], S["weight_decay"],
                     S["batch_size"], seed)
        return R.probe_accuracy(model, (ids_test, x_test), y_test)
    layer = None if method.startswith("ELMo") else 0
    probe = R.fit_probe(x_train, y_train, layer, 2, seed, S["steps"], S["lr"], S["weight_decay"], S["hidden"],
                        S["dropout"], S["batch_size"])
    return R.probe_accuracy(probe, x_test, y_test)


def main() -> None:
    torch.set_num_threads(1)
    bilm, vocab, report = R.load_pretrained()
    sha = report["sha256"][f"{R.NAME}.safetensors"]
    result = {"settings": SETTINGS, "methods": list(METHODS), "machine": machine(), "load_before": load(),
              "pretrained": {"name": R.NAME, "sha256": sha}}
    start = time.perf_counter()
    f = imdb_features(bilm, sha)
    ids_train = padded_ids(vocab, f["train_tokens"], MAX_TOKENS)
    ids_test = padded_ids(vocab, f["test_tokens"], MAX_TOKENS)
    rows = []
    for size in SETTINGS["sizes"]:
        n = len(f["train_y"]) if size == "all" else size
        for method in METHODS:
            accs = []
            for seed in SETTINGS["seeds"]:
                g = torch.Generator().manual_seed(seed)
                idx = torch.arange(n) if size == "all" else balanced_subset(f["train_y"], n, g)
                accs.append(run_one(method, f, idx, ids_train, ids_test, vocab, seed))
            rows.append({"method": method, "n_labels": n, "n_test": len(f["test_y"]), **mean_se(accs)})
            print(f"{method:34s} {n:6d} labels: {rows[-1]['mean']:.3f} ± {rows[-1]['se']:.3f}", flush=True)
    result.update(results=rows, seconds=time.perf_counter() - start, feature_seconds=f["seconds"], load_after=load())
    (RESULTS / "elmo_transfer.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
