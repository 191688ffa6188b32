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

writes lmlib/results/elmo_transfer.json (it reuses the cached features of bench_elmo_probes.py).

**Scratch at its own rate.** ``--scratch-sweep 0.001 0.003 0.01 0.03`` re-runs only the from-scratch rows (they
need no biLM features): for each label count, the bag of embeddings is trained on seed 0's sample (with all labels:
every training review but the dev ones) at each rate and scored on a dev split of 1,000 *other* training reviews
(:func:`dev_indices`, in no labelled sample of seeds 0-2 at 100 and 1,000 labels), never on the test reviews; that
count's seeds are then trained at the rate with the best dev accuracy (ties: the smaller), and those rows replace the
committed ones (each records its ``lr``; the sweep is kept under ``scratch_sweep``).

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_elmo_transfer.py --scratch-sweep 0.001 0.003 0.01 0.03
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from bench_elmo_probes import MAX_TOKENS, N_TEST, imdb_features, mean_se, test_indices
from common import best_rate, load, machine, read_result, write_result

from lmlib.data import load_imdb
from lmlib.recipes import elmo as R
from lmlib.text.vocab import PAD

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


SCRATCH = "from scratch (bag of embeddings)"
DEV = dict(reviews=1000, seed=0, excludes_sizes=[100, 1000], excludes_seeds=[0, 1, 2])


def dev_indices(labels: torch.Tensor) -> torch.Tensor:
    """``DEV["reviews"]`` training reviews, half of each class, in none of the labelled samples of seeds 0-2 at 100
    and 1,000 labels (``balanced_subset``), drawn with a generator seeded ``DEV["seed"]``."""
    used = torch.zeros(len(labels), dtype=torch.bool)
    for n in DEV["excludes_sizes"]:
        for seed in DEV["excludes_seeds"]:
            used[balanced_subset(labels, n, torch.Generator().manual_seed(seed))] = True
    rest = torch.nonzero(~used).flatten()
    return rest[balanced_subset(labels[rest], DEV["reviews"], torch.Generator().manual_seed(DEV["seed"]))]


def tuning_indices(labels: torch.Tensor, size, dev: torch.Tensor) -> torch.Tensor:
    """The reviews a rate is tried on for ``size`` labels: seed 0's sample (``balanced_subset``), or with ``"all"``
    every training review but the ``dev`` ones, so that the dev reviews are never trained on."""
    if size != "all":
        return balanced_subset(labels, size, torch.Generator().manual_seed(0))
    outside = torch.ones(len(labels), dtype=torch.bool)
    outside[dev] = False
    return torch.nonzero(outside).flatten()


def train_scratch(ids, y, vocab, seed: int, lr: float):
    S = SETTINGS
    torch.manual_seed(seed)
    model = R.BagOfEmbeddings(len(vocab), S["scratch_embed_size"], 2, S["hidden"], S["dropout"], vocab[PAD])
    return R.train_head(model, ids, y, S["steps"], lr, S["weight_decay"], S["batch_size"], seed)


def run_one(method: str, f: dict, idx: torch.Tensor, ids_train, ids_test, vocab, seed: int) -> float:
    S = SETTINGS
    y_train, y_test = f["train_y"][idx], f["test_y"]
    torch.manual_seed(seed)
    if method == SCRATCH:
        return R.probe_accuracy(train_scratch(ids_train[idx], y_train, vocab, seed, S["lr"]), ids_test, y_test)
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


def scratch_sweep(rates: list[float]) -> None:
    """The from-scratch rows again at the rate chosen on the dev split (see the module docstring)."""
    torch.set_num_threads(1)
    _, vocab, report = R.load_pretrained()
    result = read_result("elmo_transfer")
    if result["pretrained"]["sha256"] != report["sha256"][f"{R.NAME}.safetensors"]:
        raise RuntimeError("elmo_transfer.json was measured with another biLM; rerun the whole benchmark")
    start = time.perf_counter()
    train, test = load_imdb("train"), load_imdb("test")
    keep = test_indices(test.labels)

    def tokens(texts):  # the words imdb_features keeps (bench_elmo_probes.py)
        return [[w.lower() for s in R.review_sentences(t, MAX_TOKENS) for w in s] for t in texts]

    ids_train = padded_ids(vocab, tokens(train.texts), MAX_TOKENS)
    ids_test = padded_ids(vocab, tokens([test.texts[i] for i in keep]), MAX_TOKENS)
    y_train, y_test = torch.tensor(list(train.labels)), torch.tensor([test.labels[i] for i in keep])
    dev = dev_indices(y_train)
    sweep, rows = [], []
    for size in SETTINGS["sizes"]:
        n = len(y_train) if size == "all" else size
        tune = tuning_indices(y_train, size, dev)
        scores = []
        for lr in rates:
            model = train_scratch(ids_train[tune], y_train[tune], vocab, 0, lr)
            scores.append({"n_labels": n, "lr": lr, "dev_accuracy": R.probe_accuracy(model, ids_train[dev], y_train[dev])})
            print(json.dumps(scores[-1]), flush=True)
        sweep += scores
        chosen = best_rate(scores)  # one seed per rate: the best dev accuracy, a tie to the smaller rate
        accs = []
        for seed in SETTINGS["seeds"]:
            idx = torch.arange(n) if size == "all" else balanced_subset(y_train, n, torch.Generator().manual_seed(seed))
            accs.append(R.probe_accuracy(train_scratch(ids_train[idx], y_train[idx], vocab, seed, chosen), ids_test,
                                         y_test))
        rows.append({"method": SCRATCH, "n_labels": n, "n_test": len(y_test), "lr": chosen, **mean_se(accs)})
        print(f"{SCRATCH:34s} {n:6d} labels at lr {chosen:g}: {rows[-1]['mean']:.3f} ± {rows[-1]['se']:.3f}", flush=True)
    new = {r["n_labels"]: r for r in rows}
    result["results"] = [new.get(r["n_labels"], r) if r["method"] == SCRATCH else r for r in result["results"]]
    result["scratch_sweep"] = {"dev": DEV, "seed": 0, "rates": rates, "rows": sweep,
                               "chosen": {r["n_labels"]: r["lr"] for r in rows},
                               "seconds": round(time.perf_counter() - start, 1), "machine": machine(), "load": load()}
    write_result("elmo_transfer", result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch-sweep", nargs="+", type=float, default=None,
                        help="re-run only the from-scratch rows at the rate of these chosen on the dev split")
    args = parser.parse_args()
    if args.scratch_sweep:
        return scratch_sweep(args.scratch_sweep)
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
    write_result("elmo_transfer", result)


if __name__ == "__main__":
    main()
