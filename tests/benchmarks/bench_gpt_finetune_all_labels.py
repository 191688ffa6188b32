"""GPT fine-tuning with all 25,000 IMDb labels, run again with every prediction kept: are three equal accuracies real?

``gpt_finetune.json`` holds three 25,000-label runs that all read 0.835 on the benchmarks' 1,000 test reviews: the
pretrained GPT fine-tuned with λ = 0, and the same architecture from random weights at its own rate (1e-3) and at the
recipe's (5e-4). Three equal counts (835 of 1,000) from independent runs look like a copy error. This script trains
each of the three again exactly as ``bench_gpt_finetune.py`` does (same recipe, seed 0, one CPU thread, the same
code path: ``G.pretrained_classifier`` then ``G.finetune_classifier`` on every training review) and keeps, per run:

* ``accuracy_1000``: the accuracy on the 1,000 reviews (``G.classifier_accuracy``), to compare with the committed row;
* ``predictions_1000``: the predicted label of each of those reviews, as a string of 0s and 1s, so that two runs
  with the same accuracy can be told apart by *which* reviews they get wrong;
* ``accuracy_25000``: the accuracy on all 25,000 test reviews, whose standard error (about 0.002) is a fifth of the
  1,000 reviews' (about 0.012).

Each condition runs in its own process (``--condition``, one thread) and writes its own part; ``--merge`` joins the
parts into ``gpt_finetune_all_labels.json`` with the pairwise disagreements on the 1,000 reviews.

    LMLIB_DATA_DIR=... nice -n 5 .venv/bin/python tests/benchmarks/bench_gpt_finetune_all_labels.py --condition gpt
    LMLIB_DATA_DIR=... .venv/bin/python tests/benchmarks/bench_gpt_finetune_all_labels.py --merge
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import torch
from common import imdb_test_subset, load, machine, read_result, result_path, write_result

from lmlib.data import load_imdb
from lmlib.models.gpt_finetune import FinetuneTokens, finetune_batches
from lmlib.recipes import gpt as G
from lmlib.runtime import eval_mode, seed_everything

RESULTS = result_path("gpt_finetune_all_labels")
CONDITIONS = {"gpt": dict(pretrained=True, lr=G.FINETUNE_RECIPE["lr"]),
              "scratch": dict(pretrained=False, lr=1e-3),
              "scratch_at_recipe_rate": dict(pretrained=False, lr=G.FINETUNE_RECIPE["lr"])}
SETTINGS = dict(n_labels=25000, seed=0, n_test=1000, test_seed=0, lam=0.0, recipe=G.FINETUNE_RECIPE, threads=1,
                conditions=CONDITIONS)


def predictions(model, inputs, labels, pad, batch_size=64) -> list[int]:
    """The predicted class of each input (argmax of the head's logits, dropout off)."""
    out = []
    with eval_mode(model), torch.no_grad():
        for batch in finetune_batches(inputs, labels, batch_size, pad):
            out += model(batch.ids, batch.extract_pos, batch.pairs).logits.argmax(-1).tolist()
    return out


def run(condition: str) -> None:
    spec = CONDITIONS[condition]
    torch.set_num_threads(SETTINGS["threads"])
    _, tokenizer, report = G.load_pretrained()
    pad = FinetuneTokens.from_tokenizer(tokenizer).pad
    train, test = load_imdb("train"), load_imdb("test")
    inputs = G.review_inputs(tokenizer, train.texts, G.FINETUNE_RECIPE["max_len"])
    test_texts, test_labels = imdb_test_subset(SETTINGS["n_test"], SETTINGS["test_seed"])
    test_inputs = G.review_inputs(tokenizer, test_texts, G.FINETUNE_RECIPE["max_len"])
    seed_everything(SETTINGS["seed"])
    model, _ = G.pretrained_classifier(pretrained=spec["pretrained"])
    start = time.perf_counter()
    trainer = G.finetune_classifier(model, inputs, list(train.labels), SETTINGS["lam"], pad, seed=SETTINGS["seed"],
                                    lr=spec["lr"])
    seconds = time.perf_counter() - start
    accuracy = G.classifier_accuracy(model, test_inputs, test_labels, pad)
    picked = predictions(model, test_inputs, test_labels, pad)
    every_input = G.review_inputs(tokenizer, test.texts, G.FINETUNE_RECIPE["max_len"])
    every = predictions(model, every_input, list(test.labels), pad)
    row = dict(condition=condition, lr=spec["lr"], steps=trainer.step, train_seconds=round(seconds, 1),
               accuracy_1000=accuracy, correct_1000=sum(p == y for p, y in zip(picked, test_labels)),
               predictions_1000="".join(map(str, picked)),
               accuracy_25000=sum(p == y for p, y in zip(every, test.labels)) / len(every))
    write_result(RESULTS.with_name(f"gpt_finetune_all_labels_{condition}.json"),
                 dict(settings=SETTINGS, checkpoint_sha256=report["sha256"][f"{G.NAME}.safetensors"],
                      machine=machine(), load=load(), row=row))
    print(f"{condition}: {accuracy:.3f} on 1,000 ({row['correct_1000']} right), {row['accuracy_25000']:.4f} on 25,000 "
          f"({trainer.step} steps, {seconds:.0f} s)", flush=True)


def merge() -> None:
    parts = [read_result(RESULTS.with_name(f"gpt_finetune_all_labels_{c}.json")) for c in CONDITIONS]
    if any(p is None or p["settings"] != json.loads(json.dumps(SETTINGS)) for p in parts):
        raise SystemExit("every condition must be run with these settings first (--condition NAME)")
    _, labels = imdb_test_subset(SETTINGS["n_test"], SETTINGS["test_seed"])
    rows = [dict(p["row"], machine=p["machine"]) for p in parts]  # the parts may come from other processors
    pairs = []
    for a, b in itertools.combinations(rows, 2):
        pa, pb = a["predictions_1000"], b["predictions_1000"]
        pairs.append(dict(a=a["condition"], b=b["condition"], disagree=sum(x != y for x, y in zip(pa, pb)),
                          both_wrong=sum(x == y != str(t) for x, y, t in zip(pa, pb, labels))))
    write_result(RESULTS, dict(
        what="GPT fine-tuned on all 25,000 IMDb labels (λ = 0, seed 0), pretrained and from random init at two rates, "
             "again, with each run's predictions on the 1,000 benchmark test reviews and its accuracy on all 25,000",
        settings=SETTINGS, checkpoint_sha256=parts[0]["checkpoint_sha256"], rows=rows, pairs=pairs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--condition", choices=list(CONDITIONS))
    parser.add_argument("--merge", action="store_true")
    args = parser.parse_args()
    if args.merge:
        merge()
    elif args.condition:
        run(args.condition)
    else:
        parser.error("give --condition NAME or --merge")


if __name__ == "__main__":
    main()
