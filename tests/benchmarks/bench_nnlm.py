"""Train notebook 02's `full` NNLM preset on PTB and write lmlib/results/nnlm.json.

The model of Bengio et al. (2003) with the settings of notebook 02's `full` preset: order n = 5, m = 60
features per word, h = 100 tanh units, direct connections W on, batches of 256 shuffled windows, Adam at
lr 1e-3, 5 epochs. Validation (every epoch) and test score every token of their split once, with the first
n-1 contexts padded by <eos> (lmlib.models.nnlm.ngram_windows), so the perplexities compare with notebook 01's.

    LMLIB_DATA_DIR=... nice -n 5 .venv/bin/python tests/benchmarks/bench_nnlm.py --threads 1
    ... --max-batches 100 --epochs 1 --out /tmp/probe.json      # time a hundred batches first

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
from lmlib.models.nnlm import (
    NNLM,
    NNLMConfig,
    ngram_windows,
    perplexity,
    window_batches,
)
from lmlib.training.callbacks import Checkpoint, MaxSteps
from lmlib.training.objectives import next_token_loss


def main() -> None:
    args = command_line(__doc__.splitlines()[0], "nnlm", 5, "notebook 02's full preset trains 5")

    torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    train, valid, test = (load_ptb(split) for split in ("train", "valid", "test"))
    vocab = Vocab((tok for line in train for tok in line), unk="<unk>")
    eos = vocab["<eos>"]

    def windows(split, order):
        return ngram_windows(vocab.encode(tok for line in split for tok in line), order, pad_id=eos)

    config = NNLMConfig(len(vocab), order=5, embed_size=60, hidden_size=100, direct=True)
    batch_size, lr = 256, 1e-3
    train_x, train_y = windows(train, config.order)
    valid_x, valid_y = windows(valid, config.order)
    test_x, test_y = windows(test, config.order)
    model = NNLM(config)
    result = {
        "model": "NNLM (Bengio et al. 2003), 5-gram window, direct connections (notebook 02 'full' preset)",
        "config": vars(config) | {"parameters": sum(p.numel() for p in model.parameters())},
        "settings": {"batch_size": batch_size, "optimizer": "Adam", "lr": lr, "epochs": args.epochs, "seed": args.seed},
        "threads": args.threads, "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs (shared)",
        "load_average_at_start": os.getloadavg()[0],
        "steps_per_epoch": math.ceil(len(train_y) / batch_size),
        "tokens": {"train": len(train_y), "valid": len(valid_y), "test": len(test_y)},
        "epochs": [], "finished": False,
    }

    def row(trainer, logs):
        return ({k: logs[k] for k in ("epoch", "train_loss", "valid_ppl", "seconds")}
                | {"train_ppl": math.exp(logs["train_loss"]), "batches": trainer.step, "load_average": os.getloadavg()[0]})

    report = EpochReport(result, args.out, row)
    callbacks = [report, Checkpoint(args.checkpoint)]
    if args.max_batches:
        callbacks.append(MaxSteps(args.max_batches))
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=lr), next_token_loss, callbacks, device="cpu")
    if args.resume:
        report.resume(trainer, args.checkpoint)
    if trainer.epoch < args.epochs:
        # The shuffle is seeded by the epoch number, as in notebook 02, so a resumed run sees the same batches.
        trainer.fit(lambda epoch: window_batches(train_x, train_y, batch_size, torch.Generator().manual_seed(epoch)),
                    epochs=args.epochs - trainer.epoch, valid=lambda epoch: window_batches(valid_x, valid_y, 4096))
    start = time.perf_counter()
    test_ppl = perplexity(model, test_x, test_y)
    report.finish(test_ppl, time.perf_counter() - start, args.epochs, bool(args.max_batches),
                  load_average_at_end=os.getloadavg()[0])
    print(f"test perplexity {test_ppl:.2f} after {result['seconds']:.0f} s on {args.threads} thread(s)")


if __name__ == "__main__":
    main()
