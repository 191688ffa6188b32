"""Train the "small" PTB LSTM of Zaremba et al. (2014) and write lmlib/results/zaremba_small.json.

2 layers x 200 units, BPTT 20, batch 20, SGD lr 1 halved every epoch after epoch 4, 13 epochs, gradient
norm clipped at 5, every parameter initialised U(-0.1, 0.1), no dropout. Published test perplexity: 114.5.
The loss here is the per-token mean, so the same updates use lr 1 * 20 and clip 5 / 20 (see
lmlib.models.rnn_lm.TrainSettings). Validation and test are read as one stream (batch 1), like the paper's code.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_zaremba_small.py --threads 1
    ... --max-batches 300 --epochs 1 --out /tmp/probe.json      # time a few hundred batches first

The JSON is rewritten and a resumable checkpoint saved after every epoch, so an interrupted run leaves its
per-epoch numbers behind and ``--resume`` continues it from the last finished epoch with the same next step.
"""

from __future__ import annotations

import math
import os
import platform
import time

import torch
from common import EpochReport, command_line

from lmlib import Trainer, Vocab, seed_everything
from lmlib.data import load_ptb
from lmlib.models.rnn_lm import RNNLM, zaremba_lr_factor, zaremba_small
from lmlib.text.batching import batchify, bptt_batches
from lmlib.training.callbacks import Checkpoint, GradientClipping, LRSchedule, MaxSteps
from lmlib.training.objectives import StatefulLMLoss


def main() -> None:
    args = command_line(__doc__.splitlines()[0], "zaremba_small", None, "default: the paper's 13")

    torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    train_tokens = [t for line in load_ptb("train") for t in line]
    vocab = Vocab(train_tokens, unk="<unk>")
    train = batchify(vocab.encode(train_tokens), 20)
    valid = batchify(vocab.encode([t for line in load_ptb("valid") for t in line]), 1)
    test = batchify(vocab.encode([t for line in load_ptb("test") for t in line]), 1)

    config, settings = zaremba_small(len(vocab))
    epochs = args.epochs or settings.epochs
    model = RNNLM(config)
    steps_per_epoch = math.ceil((train.size(1) - 1) / settings.bptt)
    result = {
        "model": "LSTM 2x200, no dropout (Zaremba et al. 2014 'small')",
        "config": vars(config), "settings": vars(settings) | {"mean_lr": settings.mean_lr, "mean_clip": settings.mean_clip},
        "published_test_ppl": 114.5, "threads": args.threads, "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs (shared)", "steps_per_epoch": steps_per_epoch,
        "epochs": [], "finished": False,
    }

    def row(trainer, logs):
        return ({k: logs[k] for k in ("epoch", "lr", "train_loss", "valid_ppl", "seconds")}
                | {"train_ppl": math.exp(logs["train_loss"]), "batches": len(trainer.batch_losses)})

    report = EpochReport(result, args.out, row)
    callbacks = [LRSchedule(lambda step: zaremba_lr_factor(step // steps_per_epoch + 1, settings.max_epoch, settings.decay)),
                 GradientClipping(settings.mean_clip), report, Checkpoint(args.checkpoint)]
    if args.max_batches:
        callbacks.append(MaxSteps(args.max_batches))
    optimizer = torch.optim.SGD(model.parameters(), lr=settings.mean_lr)
    trainer = Trainer(model, optimizer, StatefulLMLoss(), callbacks, device="cpu")
    if args.resume:
        report.resume(trainer, args.checkpoint)
    if trainer.epoch < epochs:
        trainer.fit(lambda epoch: bptt_batches(train, settings.bptt), epochs=epochs - trainer.epoch,
                    valid=lambda epoch: bptt_batches(valid, 200))
    start = time.perf_counter()
    test_result = trainer.evaluate(lambda epoch: bptt_batches(test, 200))
    report.finish(test_result.perplexity, time.perf_counter() - start, epochs, bool(args.max_batches))
    print(f"test perplexity {test_result.perplexity:.2f} after {result['seconds']:.0f} s on {args.threads} thread(s)")


if __name__ == "__main__":
    main()
