"""Notebook 04's two translation models at a longer budget: does attention keep long sentences better?

Bahdanau et al. (2015, fig. 2) found that an encoder-decoder that squeezes the source into one fixed
vector C loses quality quickly as sentences grow, and that soft attention largely removes the drop.
Notebook 04 can only train for seconds on short sentences; this script gives each model the same
wall-clock budget on English->French pairs of up to 16 tokens (any opening, not only "i am ..."),
then scores greedy translations of the whole test set by source length.

    LMLIB_DATA_DIR=... nice -n 10 python tests/benchmarks/bench_attention_by_length.py --model fixed --seconds 360
    LMLIB_DATA_DIR=... nice -n 10 python tests/benchmarks/bench_attention_by_length.py --model additive --seconds 360

Each run writes lmlib/results/attention_by_length_<model>.json (the two can run side by
side, one thread each). Step counts depend on the machine, so the load average is recorded too.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from common import write_result

import lmlib
from lmlib import Trainer
from lmlib.eval.metrics import corpus_bleu, corpus_chrf, scores_by_length
from lmlib.models.seq2seq import Seq2Seq, Seq2SeqConfig, translate_examples
from lmlib.text.translation import (
    example_pairs,
    prepare_translation,
    translation_batches,
)
from lmlib.training.callbacks import GradientClipping, TimeBudget
from lmlib.training.objectives import seq2seq_loss

SETTINGS = dict(max_len=16, max_pairs=60_000, min_freq=3, test_frac=0.1, seed=0, emb_dim=128, hidden=256,
                batch_size=64, lr=2e-3, clip=1.0, edges=[3, 5, 7, 9, 11, 17], max_output=24)


def run(model_name: str, seconds: float, threads: int) -> dict:
    torch.set_num_threads(threads)
    s = SETTINGS
    data = prepare_translation(max_len=s["max_len"], max_pairs=s["max_pairs"], min_freq=s["min_freq"],
                               test_frac=s["test_frac"], seed=s["seed"])
    lmlib.seed_everything(s["seed"])
    config = Seq2SeqConfig(len(data.src_vocab), len(data.tgt_vocab), embed_size=s["emb_dim"], hidden_size=s["hidden"],
                           attention=None if model_name == "fixed" else model_name)
    model = Seq2Seq(config)
    valid = translation_batches(example_pairs(data.valid), data.src_vocab, data.tgt_vocab, 256, shuffle=False)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=s["lr"]), seq2seq_loss,
                      [GradientClipping(s["clip"]), TimeBudget(seconds)], device="cpu")
    start = time.perf_counter()
    trainer.fit(lambda epoch: translation_batches(data.train, data.src_vocab, data.tgt_vocab, s["batch_size"],
                                                  seed=epoch), epochs=1000, valid=valid)
    train_seconds = time.perf_counter() - start
    refs = [e.refs for e in data.test]
    hyps = translate_examples(model, data.test, data.src_vocab, data.tgt_vocab, max_len=s["max_output"])
    buckets = scores_by_length(hyps, refs, [len(e.src) for e in data.test], s["edges"])
    return {
        "model": "fixed context" if model_name == "fixed" else f"{model_name} attention",
        "settings": s, "data": data.summary(), "seconds_budget": seconds, "train_seconds": round(train_seconds, 1),
        "steps": trainer.step, "epochs_seen": round(trainer.step * s["batch_size"] / len(data.train), 2),
        "valid_loss_per_epoch": [round(h["valid_loss"], 4) for h in trainer.history if "valid_loss" in h],
        "bleu": round(100 * corpus_bleu(hyps, refs), 2), "chrf": round(100 * corpus_chrf(hyps, refs), 2),
        "buckets": [{**b, "bleu": round(100 * b["bleu"], 2), "chrf": round(100 * b["chrf"], 2)} for b in buckets],
        "threads": threads, "torch": torch.__version__, "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "date": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["fixed", "additive"], required=True)
    parser.add_argument("--seconds", type=float, default=360.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="result file (default lmlib/results/attention_by_length_<model>.json)")
    args = parser.parse_args()
    report = run(args.model, args.seconds, args.threads)
    write_result(args.out or f"attention_by_length_{args.model}", report)
    print(json.dumps({k: report[k] for k in ("model", "steps", "epochs_seen", "bleu", "chrf", "buckets")}, indent=1))
