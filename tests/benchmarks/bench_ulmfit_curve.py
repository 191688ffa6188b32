"""Accuracy vs number of labelled examples: ULMFiT against the same classifier trained from scratch.

Howard & Ruder (2018, fig. 3) report that ULMFiT with 100 labelled examples matches training from
scratch with 10-20x more data. This script measures the same curve on movie-review sentiment with
lmlib's small PTB checkpoint (lmlib/pretrained/): the classifier is trained on 100, 300, 1,000 and all
labelled rt-polarity training snippets, and each trained classifier is tested twice, on a seeded
held-out rt-polarity split and on SST-2 dev (a second test set from the same source).

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_ulmfit_curve.py --part scratch
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_ulmfit_curve.py --part ulmfit

Each part writes lmlib/results/ulmfit_curve_<part>.json; both together give the figure in
notebook 07. "from scratch" = the same AWD-LSTM classifier (same vocabulary, head, epochs, STLR), randomly
initialised, one learning rate for all layers and no unfreezing (nothing to protect). SST is built from the
same Rotten Tomatoes snippets as rt-polarity, so every training snippet (labelled, or unlabelled for the LM)
that also appears in SST-2 dev is left out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import RESULTS, write_result

from lmlib.models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
from lmlib.models.ulmfit import ULMFiTClassifier, extend_vocab
from lmlib.recipes import ulmfit as U
from lmlib.runtime import seed_everything
from lmlib.text.vocab import PAD

OUT = RESULTS
SETTINGS = dict(
    seed=0, rt_test_frac=0.2, sizes=[100, 300, 1000, "all"], epochs=5, eta_top=0.01, batch_size=32, max_len=60,
    min_steps_per_epoch=10, lm_min_freq=2, lm_max_new=4000, lm_eta_max=4e-3, lm_max_steps=60,
    dropouts=dict(embed_p=0.05, input_p=0.25, hidden_p=0.15, weight_p=0.2, output_p=0.25), head=dict(p1=0.25, p2=0.1),
)


def data():
    rt_tr, rt_ytr, rt_te, rt_yte = U.rt_polarity_split(SETTINGS["rt_test_frac"], SETTINGS["seed"])
    _, _, sst_dev, sst_ydev = U.sst2_data()
    keep = U.overlap_free_indices(rt_tr, sst_dev)
    train = ([rt_tr[i] for i in keep], [rt_ytr[i] for i in keep])
    tests = {"rt-polarity": (rt_te, rt_yte), "sst2": (sst_dev, sst_ydev)}
    return train, tests, len(rt_tr) - len(keep)


def lm_and_vocab(lm_texts, pretrained: bool):
    if pretrained:
        lm, vocab = U.load_pretrained(**SETTINGS["dropouts"])
    else:  # the same vocabulary, built without the weights
        vocab = U.ptb_vocab()
        lm = AWDLSTMLanguageModel(AWDLSTMConfig(vocab_size=len(vocab), pad_id=vocab[PAD],
                                                **{**U.PRETRAIN_CONFIG, **SETTINGS["dropouts"]}))
    return extend_vocab(lm, vocab, lm_texts, SETTINGS["lm_min_freq"], SETTINGS["lm_max_new"])


def lm_ppl(lm, vocab, texts):
    ids = torch.tensor([i for t in texts for i in vocab.encode(t + ["<eos>"])])
    return U.evaluate_lm(lm, ids)


def run(part: str):
    seed_everything(SETTINGS["seed"])
    (train_texts, train_labels), tests, removed = data()
    out = {"settings": SETTINGS, "part": part, "lm_text_snippets": len(train_texts),
           "removed_for_sst2_dev_overlap": removed, "torch": torch.__version__, "threads": torch.get_num_threads(),
           "results": []}
    if part == "ulmfit":  # which checkpoint these rows rest on, so a reader can tell stale results from current ones
        shipped = json.loads((U.PRETRAINED_DIR / "pretrain.json").read_text())
        out["pretrained"] = {"sha256": shipped["sha256"]["awd_lstm_ptb.safetensors"], "steps": shipped["recipe"]["steps"],
                             "valid_ppl": shipped["valid_ppl"], "test_ppl": shipped["test_ppl"]}
    t0 = time.perf_counter()
    lm, vocab = lm_and_vocab(train_texts, pretrained=part == "ulmfit")
    out["vocab_size"] = len(vocab)
    if part == "ulmfit":
        lm_ids = torch.tensor([i for t in train_texts for i in vocab.encode(t + ["<eos>"])])
        out["lm_ppl_rt_test_before"] = lm_ppl(lm, vocab, tests["rt-polarity"][0])
        trainer = U.finetune_lm(lm, lm_ids, epochs=1, eta_max=SETTINGS["lm_eta_max"], max_steps=SETTINGS["lm_max_steps"])
        out["lm_finetune_steps"] = trainer.step
        out["lm_ppl_rt_test_after"] = lm_ppl(lm, vocab, tests["rt-polarity"][0])
        out["lm_finetune_seconds"] = time.perf_counter() - t0
        print(json.dumps({k: v for k, v in out.items() if k.startswith("lm_")}), flush=True)
    encoder_state = lm.encoder.state_dict()
    test_ids = {name: U.encode_texts(vocab, texts) for name, (texts, _) in tests.items()}
    for size in SETTINGS["sizes"]:
        seed_everything(SETTINGS["seed"])
        if size == "all":  # every training snippet, as the classes fall (rt-polarity is balanced overall)
            texts, labels = train_texts, train_labels
        else:
            texts, labels = U.sample_balanced(train_texts, train_labels, size, SETTINGS["seed"])
        n = len(texts)
        fresh = AWDLSTMLanguageModel(lm.config)
        if part == "ulmfit":
            fresh.encoder.load_state_dict(encoder_state)
        model = ULMFiTClassifier(fresh.encoder, 2, **SETTINGS["head"])
        start = time.perf_counter()
        trainer = U.train_classifier(
            model, U.encode_texts(vocab, texts), labels, SETTINGS["epochs"], SETTINGS["eta_top"],
            gradual=part == "ulmfit", factor=2.6 if part == "ulmfit" else 1.0, batch_size=SETTINGS["batch_size"],
            max_len=SETTINGS["max_len"], min_steps_per_epoch=SETTINGS["min_steps_per_epoch"], seed=SETTINGS["seed"])
        seconds = time.perf_counter() - start
        for name, (_, test_labels) in tests.items():
            acc = U.accuracy(model, test_ids[name], test_labels, max_len=SETTINGS["max_len"])
            row = {"dataset": name, "method": "ULMFiT" if part == "ulmfit" else "from scratch", "n_labels": n,
                   "accuracy": acc, "n_test": len(test_labels), "steps": trainer.step, "seconds": seconds}
            out["results"].append(row)
            print(json.dumps(row), flush=True)
        write_result(OUT / f"ulmfit_curve_{part}.json", out)
    out["total_seconds"] = time.perf_counter() - t0
    write_result(OUT / f"ulmfit_curve_{part}.json", out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=["scratch", "ulmfit"], required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="tiny settings to check the script runs")
    args = parser.parse_args()
    if args.smoke:
        SETTINGS.update(sizes=[16], epochs=1, lm_max_steps=2)
        OUT = Path("/tmp/ulmfit_smoke")
    torch.set_num_threads(args.threads)
    run(args.part)
