"""AWD-LSTM ablation on the Penn Treebank at a small, fixed CPU budget: one regularizer removed at a time.

    nice -n 10 .venv/bin/python tests/benchmarks/bench_awd_ablation.py      (LMLIB_DATA_DIR set, one thread)

Every variant trains the same small AWD-LSTM (3 layers, emb 64, hidden 128, tied) with the same seed
for the same number of steps on the first TRAIN_TOKENS tokens of PTB train. The slice is small so that
overfitting could set in within the budget, but in the recorded run it did not get that far: the
unregularized model ends at a training loss of 6.59 nats (perplexity about 720), nothing like a memorised
slice. At this budget the table therefore measures mostly how each piece affects optimization at
learning rate 30.
The NT-ASGD check runs every epoch on the first 8,000 validation tokens; the table reports the
perplexity of the final weights (the average when NT-ASGD switched) on the *whole* validation set,
and the full model's test perplexity. Writes lmlib/results/awd_ablation.json.

These numbers say what each regularizer does at this budget, not what it does after the paper's
hundreds of epochs on a GPU (57.3 test perplexity with 24M parameters).
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict, replace

import torch
from common import write_result

from lmlib import Trainer, Vocab, seed_everything
from lmlib.data import load_ptb
from lmlib.models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
from lmlib.text.batching import batchify, bptt_batches
from lmlib.training.awd_training import NTASGD, SeqLenLRScale, ar_regularizer, tar_regularizer, variable_bptt_batches
from lmlib.training.callbacks import GradientClipping
from lmlib.training.objectives import StatefulLMLoss

TRAIN_TOKENS = 20_000
CHECK_TOKENS = 8_000
BATCH, BPTT, EVAL_BATCH = 20, 35, 10
EPOCHS = 6
LR, CLIP, ALPHA, BETA, NONMONO, WEIGHT_DECAY = 30.0, 0.25, 2.0, 1.0, 2, 1.2e-6
SEED = 141
BASE = dict(embed_size=64, hidden_size=128, num_layers=3)

VARIANTS = {
    "all regularizers": {},
    "- embedding dropout": {"embed_p": 0.0},
    "- input dropout": {"input_p": 0.0},
    "- hidden dropout": {"hidden_p": 0.0},
    "- weight dropout (W_hh)": {"weight_p": 0.0},
    "- output dropout": {"output_p": 0.0},
    "- AR/TAR": {"ar_tar": False},
    "- variable BPTT": {"variable_bptt": False},
    "- NT-ASGD (plain SGD)": {"nt_asgd": False},
    "no regularization at all": {"embed_p": 0.0, "input_p": 0.0, "hidden_p": 0.0, "weight_p": 0.0,
                                 "output_p": 0.0, "ar_tar": False, "variable_bptt": False, "nt_asgd": False},
}


def run_variant(name, overrides, vocab_size, train_ids, check, valid, test=None):
    training = {"ar_tar": True, "variable_bptt": True, "nt_asgd": True}
    dropouts = {k: v for k, v in overrides.items() if k not in training}
    training.update({k: v for k, v in overrides.items() if k in training})
    cfg = replace(AWDLSTMConfig(vocab_size, **BASE), **dropouts)
    seed_everything(SEED)
    model = AWDLSTMLanguageModel(cfg)
    streams = batchify(train_ids, BATCH)
    if training["variable_bptt"]:
        data = variable_bptt_batches(streams, BPTT, seed=SEED)
    else:
        fixed = list(bptt_batches(streams, BPTT))
        data = lambda epoch: fixed  # noqa: E731
    callbacks = [GradientClipping(CLIP)]
    if training["variable_bptt"]:
        callbacks.append(SeqLenLRScale(BPTT))
    if training["ar_tar"]:
        callbacks += [ar_regularizer(ALPHA), tar_regularizer(BETA)]
    nt = NTASGD(n=NONMONO) if training["nt_asgd"] else None
    if nt is not None:
        callbacks.append(nt)
    opt = torch.optim.SGD(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    trainer = Trainer(model, opt, StatefulLMLoss(), callbacks, device="cpu")
    start = time.perf_counter()
    history = trainer.fit(data, epochs=EPOCHS, valid=check)
    train_seconds = time.perf_counter() - start
    result = {
        "variant": name,
        "config": asdict(cfg),
        "training": training,
        "steps": trainer.step,
        "train_seconds": round(train_seconds, 1),
        "check_ppl_per_epoch": [round(h["valid_ppl"], 2) for h in history],
        "train_loss_per_epoch": [round(h["train_loss"], 4) for h in history],
        "nt_asgd_switch_epoch": nt.switch_epoch if nt is not None else None,
        "valid_ppl": round(trainer.evaluate(valid).perplexity, 2),
    }
    if test is not None:
        result["test_ppl"] = round(trainer.evaluate(test).perplexity, 2)
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def main() -> None:
    torch.set_num_threads(1)
    train, valid, test = load_ptb("train"), load_ptb("valid"), load_ptb("test")
    vocab = Vocab((tok for line in train for tok in line), unk="<unk>")
    ids = {split: torch.tensor(vocab.encode([t for line in lines for t in line]))
           for split, lines in (("train", train), ("valid", valid), ("test", test))}
    train_ids = ids["train"][:TRAIN_TOKENS]
    check = list(bptt_batches(batchify(ids["valid"][:CHECK_TOKENS], EVAL_BATCH), 70))
    valid_batches = list(bptt_batches(batchify(ids["valid"], EVAL_BATCH), 70))
    test_batches = list(bptt_batches(batchify(ids["test"], EVAL_BATCH), 70))
    rows = []
    for name, overrides in VARIANTS.items():
        row = run_variant(name, overrides, len(vocab), train_ids, check, valid_batches,
                          test_batches if name == "all regularizers" else None)
        rows.append(row)
        print(f"{name:28s} valid ppl {row['valid_ppl']:8.2f}  switch {row['nt_asgd_switch_epoch']}  "
              f"{row['seconds']:6.1f} s  check ppl {row['check_ppl_per_epoch']}", flush=True)
    out = {
        "what": "AWD-LSTM ablation on PTB at a small fixed budget (one regularizer removed at a time)",
        "settings": {"train_tokens": TRAIN_TOKENS, "check_tokens": CHECK_TOKENS, "batch": BATCH, "bptt": BPTT,
                     "epochs": EPOCHS, "lr": LR, "clip": CLIP, "alpha": ALPHA, "beta": BETA,
                     "nonmono": NONMONO, "weight_decay": WEIGHT_DECAY, "seed": SEED, **BASE},
        "machine": {"python": sys.version.split()[0], "torch": torch.__version__, "threads": 1,
                    "platform": platform.platform()},
        "rows": rows,
    }
    write_result("awd_ablation", out)


if __name__ == "__main__":
    main()
