"""Why does ULMFiT lose to training from scratch with all labels? An ablation of notebook 07's recorded run.

With all 7,938 labelled rt-polarity snippets, the recorded ULMFiT run (lmlib/results/
ulmfit_curve_ulmfit.json) reaches .629 on rt-polarity test and .671 on SST-2 dev, while the same classifier from
scratch reaches .760 and .783. The suspicion: gradual unfreezing over 5 epochs, with rates divided by 2.6 per layer
group, barely trains the lowest groups (the embedding, which holds ~4,000 new word vectors, trains only in the last
epoch, at 1/2.6^4 of the top rate). Each variant below changes one thing of the recorded recipe (same seed, same
LM fine-tuning unless the variant says otherwise, same data, same epochs unless it says otherwise):

* ``recorded``: the recipe of ulmfit_curve_ulmfit.json, rerun (it must reproduce the recorded accuracies);
* ``no_gradual``: every group trains from the first epoch (discriminative rates kept);
* ``no_discriminative``: one rate for every group (gradual unfreezing kept);
* ``neither``: one rate, every group from the start (the scratch run's schedule, on pretrained weights);
* ``more_epochs``: 10 epochs instead of 5 (gradual unfreezing ends after epoch 5, so 6 epochs train everything);
* ``no_vocab_extension``: the LM keeps PTB's 10,000 words; review words outside it stay ``<unk>``;
* ``no_lm_finetuning``: stage (b) skipped (Howard & Ruder's Table 6 ablation);
* ``no_discriminative_10_epochs``, ``neither_10_epochs``: the two best single changes with 10 epochs.

    nice -n 10 .venv/bin/python tests/benchmarks/bench_ulmfit_ablation.py --variants recorded no_gradual ... --out PART
    nice -n 10 .venv/bin/python tests/benchmarks/bench_ulmfit_ablation.py --variants neither --sizes 100 300 1000 --out PART
    .venv/bin/python tests/benchmarks/bench_ulmfit_ablation.py --merge PART1 PART2 ...

writes lmlib/results/ulmfit_ablation.json (one thread; each row records its seconds).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import bench_ulmfit_curve as C
import torch
from common import load, machine, result_path, write_result

from lmlib.models.awd_lstm import AWDLSTMLanguageModel
from lmlib.models.ulmfit import ULMFiTClassifier, extend_vocab
from lmlib.recipes import ulmfit as U
from lmlib.runtime import seed_everything

RESULTS = result_path("ulmfit_ablation")
WHAT = ("ULMFiT (PTB-pretrained AWD-LSTM) on rt-polarity, one change to notebook 07's recorded recipe at a time, with "
        "all labelled snippets (and the best changes also at 100, 300 and 1,000 balanced labels); tested on the "
        "rt-polarity test split and SST-2 dev; one seed")
VARIANTS = {  # name: (gradual, factor, epochs, extend vocabulary, fine-tune the LM)
    "recorded": (True, 2.6, 5, True, True),
    "no_gradual": (False, 2.6, 5, True, True),
    "no_discriminative": (True, 1.0, 5, True, True),
    "neither": (False, 1.0, 5, True, True),
    "more_epochs": (True, 2.6, 10, True, True),
    "no_vocab_extension": (True, 2.6, 5, False, True),
    "no_lm_finetuning": (True, 2.6, 5, True, False),
    "no_discriminative_10_epochs": (True, 1.0, 10, True, True),
    "neither_10_epochs": (False, 1.0, 10, True, True),
}


def pretrained_lm(train_texts, extend: bool, finetune: bool):
    """Stages (a) and (b) exactly as bench_ulmfit_curve.py runs them (same calls, same order after the seed)."""
    lm, vocab = U.load_pretrained(**C.SETTINGS["dropouts"])
    lm, vocab = extend_vocab(lm, vocab, train_texts, C.SETTINGS["lm_min_freq"], C.SETTINGS["lm_max_new"] if extend else 0)
    if finetune:
        lm_ids = torch.tensor([i for t in train_texts for i in vocab.encode(t + ["<eos>"])])
        U.finetune_lm(lm, lm_ids, epochs=1, eta_max=C.SETTINGS["lm_eta_max"], max_steps=C.SETTINGS["lm_max_steps"])
    return lm, vocab


def run_variant(name: str, size: int | None = None) -> dict:
    """One variant trained on all labelled snippets, or on a balanced sample of ``size`` (as the curve samples)."""
    gradual, factor, epochs, extend, finetune = VARIANTS[name]
    seed = C.SETTINGS["seed"]
    seed_everything(seed)
    (all_texts, all_labels), tests, _ = C.data()
    start = time.perf_counter()
    lm, vocab = pretrained_lm(all_texts, extend, finetune)  # the LM reads every snippet's text, as in the curve
    seed_everything(seed)
    train_texts, train_labels = ((all_texts, all_labels) if size is None
                                 else U.sample_balanced(all_texts, all_labels, size, seed))
    fresh = AWDLSTMLanguageModel(lm.config)
    fresh.encoder.load_state_dict(lm.encoder.state_dict())
    model = ULMFiTClassifier(fresh.encoder, 2, **C.SETTINGS["head"])
    trainer = U.train_classifier(model, U.encode_texts(vocab, train_texts), train_labels, epochs, C.SETTINGS["eta_top"],
                                 gradual=gradual, factor=factor, batch_size=C.SETTINGS["batch_size"],
                                 max_len=C.SETTINGS["max_len"], min_steps_per_epoch=C.SETTINGS["min_steps_per_epoch"],
                                 seed=seed)
    row = {"variant": name, "gradual_unfreezing": gradual, "factor": factor, "epochs": epochs,
           "vocab_extension": extend, "lm_finetuning": finetune, "vocab_size": len(vocab), "n_labels": len(train_texts),
           "steps": trainer.step, "seconds": round(time.perf_counter() - start, 1)}
    for test, (texts, labels) in tests.items():
        row[f"accuracy_{test}"] = U.accuracy(model, U.encode_texts(vocab, texts), labels, max_len=C.SETTINGS["max_len"])
        row[f"n_test_{test}"] = len(labels)
    print(json.dumps(row), flush=True)
    return row


def described() -> dict:
    return {k: dict(zip(("gradual", "factor", "epochs", "extend", "lm_finetune"), v)) for k, v in VARIANTS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS))
    parser.add_argument("--out", type=Path, help="where this part's rows go (default: the results file)")
    parser.add_argument("--sizes", nargs="+", type=int, help="balanced label counts to run (default: all labels)")
    parser.add_argument("--merge", nargs="+", type=Path, help="part files to merge into the results file")
    args = parser.parse_args()
    if args.merge:
        parts = [json.loads(p.read_text()) for p in args.merge]
        rows = {(r["variant"], r["n_labels"]): r for part in parts for r in part["rows"]}
        result = {**parts[0], "what": WHAT, "variants": described(),
                  "rows": [rows[k] for k in sorted(rows, key=lambda k: (list(VARIANTS).index(k[0]), k[1]))],
                  "parts": [{k: v for k, v in part.items() if k not in ("rows", "variants")} for part in parts]}
        write_result(RESULTS, result)
        print(f"wrote {RESULTS} ({len(rows)} rows)")
        return
    torch.set_num_threads(1)
    shipped = json.loads((U.PRETRAINED_DIR / "pretrain.json").read_text())
    result = {"what": WHAT,
              "settings": C.SETTINGS, "variants": described(),
              "pretrained": {"sha256": shipped["sha256"]["awd_lstm_ptb.safetensors"]},
              "machine": machine(), "load_before": load(), "threads": torch.get_num_threads(), "rows": []}
    for name in args.variants or list(VARIANTS):
        for size in args.sizes or [None]:
            result["rows"].append(run_variant(name, size))
        result["load_after"] = load()
        write_result(args.out or RESULTS, result)


if __name__ == "__main__":
    main()
