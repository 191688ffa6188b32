"""ELMo's lesson at the token level: part-of-speech tagging from few labelled sentences, on frozen features.

Peters et al. (2018, sec. 5.3, Table 5) tag the Penn Treebank with a linear classifier on each frozen biLM layer and
find the first biLSTM layer the most syntactic (97.3% against 96.8% for the second). This script asks the same of a
biLM checkpoint (default the shipped lmlib/pretrained/elmo_imdb) on UD English-EWT's 17 universal tags, with 100
and 1,000 labelled sentences: one linear softmax tagger per word (lmlib.eval.pos_probe.TAGGER: Adam, 300 steps of
512 words drawn at random, standardized features) on

* (a) the scalar mix of all the biLM's layers (w and γ learned with the tagger), and each LSTM layer alone;
* (b) the character-CNN layer alone (layer 0: the token vector before any context);
* (c) a biLM of the same architecture at random init (one init per seed), its scalar mix;
* (d) static word2vec vectors (lmlib.recipes.word2vec, the course's skip-gram defaults) trained on as many words of
  the same IMDb text the biLM was pretrained on as it read (its pretrain.json's tokens_seen, the first sentences of
  its training reviews, at most --w2v-max-tokens), looked up lower-cased, zeros for words they do not know;

and, needing no features, each word's most frequent tag in the labelled sentences. Each seed draws its labelled
sentences from a fixed pool of training sentences (its 100 are the start of its 1,000); every tagger is scored on
every word of the UD test split. Means and standard errors over the seeds; the differences (a) − (b) and (a) − (c)
are paired by seed (same sentences).

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_elmo_pos.py
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_elmo_pos.py --checkpoint DIR --out FILE

The first writes lmlib/results/elmo_pos.json; with --checkpoint (any folder holding a biLM's pretrain.json, e.g. a
pretraining milestone) the result goes to DIR/elmo_pos.json unless --out names another file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from common import load, machine, mean_se, write_result

from lmlib.data import load_ud_pos
from lmlib.models.elmo import BiLM
from lmlib.recipes import elmo as R
from lmlib.recipes import pos_probe as P

SETTINGS = dict(sizes=[100, 1000], pool_sentences=3000, pool_seed=1234, test_split="test", tagger=P.TAGGER,
                word2vec=dict(epochs=5, vector_size=100, window=5, negative=5, min_count=5, seed=0))
BARS = {"scalar mix − character CNN": 0.03, "scalar mix − random-init biLM": 0.05}  # issue 43, at 100 sentences
METHODS = {  # (features, init, layer) -> the name a table shows
    ("bilm", "pretrained", None): "(a) ELMo biLM, scalar mix of all layers",
    ("bilm", "pretrained", 1): "ELMo biLM, LSTM layer 1 alone",
    ("bilm", "pretrained", 2): "ELMo biLM, LSTM layer 2 alone",
    ("bilm", "pretrained", 0): "(b) ELMo biLM, character-CNN layer alone",
    ("bilm", "random", None): "(c) same biLM at random init, scalar mix",
    ("word2vec", "pretrained", 0): "(d) word2vec static vectors, same IMDb text",
    ("counts", None, None): "most frequent tag of each word (no features)",
}
SHIPPED = R.CHECKPOINT_DIR


def arguments(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=SHIPPED, help="a biLM folder with pretrain.json (default: shipped)")
    ap.add_argument("--out", type=Path, default=None, help="result file (default: lmlib/results/elmo_pos.json for the "
                                                            "shipped biLM, else CHECKPOINT/elmo_pos.json)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sizes", type=int, nargs="+", default=SETTINGS["sizes"], help="labelled sentences")
    ap.add_argument("--test-sentences", type=int, default=None, help="score on the first N test sentences (a dry run)")
    ap.add_argument("--w2v-max-tokens", type=int, default=2_000_000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    # every option checked before any data is read or any model built
    if not (args.checkpoint / "pretrain.json").is_file():
        ap.error(f"--checkpoint {args.checkpoint}: no pretrain.json there; name a biLM folder (e.g. {SHIPPED})")
    if len(set(args.seeds)) < 2:
        ap.error("--seeds: give at least two different seeds (three or more for the committed result): a standard "
                 "error needs them")
    if min(args.sizes) < 1 or max(args.sizes) > SETTINGS["pool_sentences"]:
        ap.error(f"--sizes must lie in 1..{SETTINGS['pool_sentences']} (the pool of training sentences)")
    if args.test_sentences is not None and args.test_sentences < 1:
        ap.error("--test-sentences must be at least 1")
    if args.w2v_max_tokens < 1000 or args.threads < 1:
        ap.error("--w2v-max-tokens must be at least 1000 and --threads at least 1")
    if args.out is None:  # the shipped biLM's result is the committed lmlib/results/elmo_pos.json
        args.out = "elmo_pos" if args.checkpoint.resolve() == SHIPPED.resolve() else args.checkpoint / "elmo_pos.json"
    return args


def imdb_text(report: dict, max_tokens: int) -> tuple[list[list[str]], int]:
    """The first sentences of the biLM's training reviews (its recipe's split and sentence rule), lower-cased, until
    they hold as many words as the biLM read (``tokens_seen``, at most ``max_tokens``)."""
    from lmlib.recipes.pretraining import unsup_split

    recipe = report["recipe"]
    want = min(int(report["tokens_seen"]), max_tokens)
    out, words = [], 0
    for review in unsup_split(recipe["valid_reviews"])[0]:
        for s in R.sentences_of(review, recipe["max_words"], recipe["min_words"]):
            out.append([w.lower() for w in s])
            words += len(s)
        if words >= want:
            break
    return out, words


def main(argv=None) -> None:
    args = arguments(argv)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    bilm, _, report = R.load_pretrained(args.checkpoint)  # sha256 of every file checked
    result = {"what": "ELMo's token-level transfer (Peters et al. 2018, Table 5): UPOS tagging on UD English-EWT "
                      "with few labelled sentences, a linear tagger on frozen features of the biLM's scalar mix, its "
                      "character-CNN layer, the same biLM at random init, and word2vec vectors of the same text",
              "settings": {**SETTINGS, "sizes": args.sizes, "seeds": args.seeds, "test_sentences": args.test_sentences,
                           "w2v_max_tokens": args.w2v_max_tokens, "threads": args.threads},
              "checkpoint": {"folder": str(args.checkpoint), "sha256": report["sha256"],
                             "tokens_seen": report["tokens_seen"], "config": report["config"]},
              "methods": list(METHODS.values()), "machine": machine(), "load_before": load()}

    splits = {split: load_ud_pos(split) for split in ("train", "dev", "test")}
    tags = sorted({t for sentences in splits.values() for s in sentences for _, t in s})
    train, test = splits["train"], splits[SETTINGS["test_split"]][: args.test_sentences]
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(SETTINGS["pool_seed"])).tolist()
    pool = [train[i] for i in order[: SETTINGS["pool_sentences"]]]
    # each seed's labelled sentences; features are computed for the sentences some seed uses, in pool order
    drawn = {seed: P.sample_sentences(len(pool), args.sizes, seed) for seed in args.seeds}
    used = sorted({i for samples in drawn.values() for chosen in samples.values() for i in chosen})
    at = {i: k for k, i in enumerate(used)}
    pool = [pool[i] for i in used]
    drawn = {seed: {n: [at[i] for i in chosen] for n, chosen in samples.items()} for seed, samples in drawn.items()}
    pool_words, test_words = P.words_of(pool), P.words_of(test)
    pool_y, test_y = P.tag_ids(pool, tags), P.tag_ids(test, tags)
    result["data"] = {"tags": tags, "pool_sentences": SETTINGS["pool_sentences"], "sentences_used": len(pool),
                      "test_split": SETTINGS["test_split"], "test_sentences": len(test), "test_words": len(test_y)}

    t0 = time.perf_counter()
    features = {"pretrained": (P.bilm_features(bilm, pool_words), P.bilm_features(bilm, test_words))}
    seconds = {"bilm_features": time.perf_counter() - t0}
    print(f"biLM features: {len(pool_y) + len(test_y):,} words in {seconds['bilm_features']:.0f} s", flush=True)

    from lmlib.models.word2vec import Word2VecConfig
    from lmlib.recipes.word2vec import train_word2vec

    t0 = time.perf_counter()
    text, text_words = imdb_text(report, args.w2v_max_tokens)
    w2v = train_word2vec(text, Word2VecConfig(**SETTINGS["word2vec"]))
    w2v_pool, _ = P.static_features(w2v.vectors.detach(), w2v.vocab.stoi, pool_words)
    w2v_test, known = P.static_features(w2v.vectors.detach(), w2v.vocab.stoi, test_words)
    seconds["word2vec"] = time.perf_counter() - t0
    result["word2vec"] = {"train_sentences": len(text), "train_words": text_words, "vocab_size": len(w2v.vocab),
                          "test_words_known": float(known.float().mean()), "epoch_losses": w2v.epoch_losses,
                          "seconds": w2v.seconds}
    print(f"word2vec: {text_words:,} words, {len(w2v.vocab):,} types, {known.float().mean():.1%} of test words "
          f"known, {seconds['word2vec']:.0f} s", flush=True)

    rows = []
    t0 = time.perf_counter()
    for seed in args.seeds:
        torch.manual_seed(seed)  # the random-init biLM of this seed: the same architecture, never trained
        random_bilm = BiLM(bilm.config).eval()
        features["random"] = (P.bilm_features(random_bilm, pool_words), P.bilm_features(random_bilm, test_words))
        for n, chosen in drawn[seed].items():
            idx = P.word_rows(pool_words, chosen)
            y = pool_y[idx]
            for (kind, init, layer), method in METHODS.items():
                if kind == "counts":
                    acc, mix = P.most_frequent_tag_accuracy([pool[i] for i in chosen], test), None
                else:
                    x_pool, x_test = features[init] if kind == "bilm" else (w2v_pool, w2v_test)
                    tr, te = R.standardize(x_pool[idx], x_test)
                    tagger = P.fit_tagger(tr, y, len(tags), layer, seed)
                    acc, mix = P.tagger_accuracy(tagger, te, test_y), P.mix_weights(tagger)
                rows.append({"method": method, "seed": seed, "n_labels": n, "n_words": len(y), "accuracy": acc,
                             **({"mix": mix} if mix else {})})
                print(json.dumps(rows[-1]), flush=True)
    seconds["random_features_and_taggers"] = time.perf_counter() - t0

    summary = []
    for method in METHODS.values():
        for n in args.sizes:
            values = [r["accuracy"] for r in rows if r["method"] == method and r["n_labels"] == n]
            mean, se = mean_se(values)
            summary.append({"method": method, "n_labels": n, "mean": mean, "se": se, "seeds": len(values),
                            "values": values})
    differences = []
    names = {"scalar mix − character CNN": (METHODS["bilm", "pretrained", None], METHODS["bilm", "pretrained", 0]),
             "scalar mix − random-init biLM": (METHODS["bilm", "pretrained", None], METHODS["bilm", "random", None])}
    for check, (a, b) in names.items():
        for n in args.sizes:
            per_seed = {r["seed"]: r["accuracy"] for r in rows if r["method"] == a and r["n_labels"] == n}
            paired = [per_seed[r["seed"]] - r["accuracy"] for r in rows if r["method"] == b and r["n_labels"] == n]
            d, se = mean_se(paired)
            differences.append({"check": check, "n_labels": n, "difference": d, "se": se, "bar": BARS[check],
                                "holds": bool(d >= BARS[check] and se is not None and d - 2 * se > 0)})
    seconds["total"] = time.perf_counter() - started
    seconds["cpu_total"] = time.process_time()  # this process's CPU time: the cost, whatever else the machine ran
    result.update(rows=rows, summary=summary, differences=differences, seconds=seconds, load_after=load())
    write_result(args.out, result)
    for s in summary:
        print(f"{s['method']:55s} {s['n_labels']:5d}: {s['mean']:.3f} ± {s['se']:.3f}")
    for d in differences:
        print(f"{d['check']:35s} {d['n_labels']:5d}: {d['difference']:+.3f} ± {d['se']:.3f} (bar {d['bar']}, "
              f"holds: {d['holds']})")


if __name__ == "__main__":
    main(sys.argv[1:])
