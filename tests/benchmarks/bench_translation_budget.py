"""The Transformer against the RNN with Bahdanau attention at the same wall-clock budget (notebook 05).

Both models are notebook 05's, with its settings, trained through the same Trainer on the same
English->French pairs for ``--seconds`` each, then scored with greedy decoding on the whole test set.
The step counts depend on the machine and on how busy it is, so the load average and thread count
are recorded beside the scores. Every setting of the data, the two models, their optimizers and the
decoding is recorded under "settings"; notebook 05 builds the same block from its own objects and
refuses a results file whose settings differ.

    python tests/benchmarks/bench_translation_budget.py --seconds 150
    python tests/benchmarks/bench_translation_budget.py --print-settings   # the settings block only, no training
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import torch
from common import write_result

import lmlib
from lmlib import Trainer
from lmlib.eval.metrics import corpus_bleu, corpus_chrf
from lmlib.models.seq2seq import Seq2Seq, Seq2SeqConfig, translate_examples
from lmlib.models.transformer import Transformer, TransformerConfig, translate
from lmlib.text.translation import (
    SIMPLE_PREFIXES,
    prepare_translation,
    translation_batches,
)
from lmlib.training.callbacks import GradientClipping, LRSchedule, TimeBudget
from lmlib.training.objectives import seq2seq_loss, translation_loss

MAX_OUTPUT = 12
DATA = dict(max_len=10, prefixes=SIMPLE_PREFIXES, min_freq=2, seed=0)
BATCH_SIZE = 64
TRANSFORMER_ADAM = dict(lr=2e-3, betas=(0.9, 0.98))
WARMUP_STEPS = 20
RNN_ADAM = dict(lr=3e-3)
GRAD_CLIP = 1.0


def adam_settings(defaults: dict) -> dict:
    """The learning rate and betas of an Adam optimizer's ``defaults``."""
    return {"lr": defaults["lr"], "betas": list(defaults["betas"])}


def settings(data_kwargs: dict, batch_size: int, transformer_config, transformer_adam: dict, warmup_steps: int,
             rnn_config, rnn_adam: dict, grad_clip: float, max_output: int) -> dict:
    """Everything but the time budget that decides the scores, as JSON values (notebook 05 builds the same)."""
    return {
        "data": {**{k: list(v) if isinstance(v, tuple) else v for k, v in data_kwargs.items()}, "batch_size": batch_size},
        "transformer": {**dataclasses.asdict(transformer_config), **adam_settings(transformer_adam),
                        "warmup_steps": warmup_steps},
        "rnn": {**dataclasses.asdict(rnn_config), **adam_settings(rnn_adam), "grad_clip": grad_clip},
        "decoding": {"method": "greedy", "max_output": max_output},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--print-settings", action="store_true", help="print the settings block and exit")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    data = prepare_translation(**DATA)
    src_vocab, tgt_vocab = data.src_vocab, data.tgt_vocab

    def batches(epoch):
        return translation_batches(data.train, src_vocab, tgt_vocab, batch_size=BATCH_SIZE, seed=epoch)

    config = TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=128, num_heads=4, num_encoder_layers=2,
                               num_decoder_layers=2, d_ff=256, dropout=0.0, max_len=32)
    rnn_config = Seq2SeqConfig(len(src_vocab), len(tgt_vocab), embed_size=64, hidden_size=128, attention="additive")

    def adam(params, kwargs):
        return torch.optim.Adam(params, **kwargs)

    probe = [torch.zeros(1, requires_grad=True)]  # only to read Adam's defaults for the record
    recorded = settings(DATA, BATCH_SIZE, config, adam(probe, TRANSFORMER_ADAM).defaults, WARMUP_STEPS,
                        rnn_config, adam(probe, RNN_ADAM).defaults, GRAD_CLIP, MAX_OUTPUT)
    if args.print_settings:
        print(json.dumps({"settings": recorded}, indent=1))
        return

    lmlib.seed_everything(0)
    transformer = Transformer(config)
    transformer_trainer = Trainer(
        transformer, adam(transformer.parameters(), TRANSFORMER_ADAM), translation_loss,
        callbacks=[LRSchedule(lambda step: min(1.0, (step + 1) / WARMUP_STEPS)), TimeBudget(args.seconds)],
        device="cpu")
    transformer_trainer.fit(batches, epochs=1000)

    lmlib.seed_everything(0)
    rnn = Seq2Seq(rnn_config)
    rnn_trainer = Trainer(rnn, adam(rnn.parameters(), RNN_ADAM), seq2seq_loss,
                          callbacks=[GradientClipping(GRAD_CLIP), TimeBudget(args.seconds)], device="cpu")
    rnn_trainer.fit(batches, epochs=1000)

    refs = [e.refs for e in data.test]
    hyps = {
        "Transformer": translate(transformer, [e.src for e in data.test], src_vocab, tgt_vocab, max_len=MAX_OUTPUT),
        "RNN + attention": translate_examples(rnn, data.test, src_vocab, tgt_vocab, max_len=MAX_OUTPUT),
    }
    steps = {"Transformer": transformer_trainer.step, "RNN + attention": rnn_trainer.step}
    report = {
        "seconds_per_model": args.seconds,
        "threads": args.threads,
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "test_sentences": len(data.test),
        "models": {name: {"steps": steps[name], "bleu": round(100 * corpus_bleu(h, refs), 2),
                          "chrf": round(100 * corpus_chrf(h, refs), 2)} for name, h in hyps.items()},
        "settings": recorded,
        "date": time.strftime("%Y-%m-%d"),
    }
    write_result("translation_budget", report)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
