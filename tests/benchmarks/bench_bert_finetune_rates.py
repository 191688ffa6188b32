"""BERT fine-tuning: is the learning rate the reason the shipped IMDb BERT trails a randomly initialised one?

bench_bert_finetune.py fine-tunes both with one recipe (``lmlib.recipes.bert.FINETUNE_RECIPE``, rate 5e-4), a rate
chosen because lower ones left the random initialisation at chance. Devlin et al. (2019, §A.3) pick the rate per
task on the dev set, from {5e-5, 3e-5, 2e-5} for BERT-base; small BERTs are usually fine-tuned faster
(Turc et al. 2019 search up to 1e-4 for their smallest models). A pretrained model may simply want a lower rate.

This script asks that question without touching the test set: each condition, at each rate, is fine-tuned on
1,000 labelled training reviews (the balanced sample bench_bert_finetune.py draws for that seed) and scored on 1,000
*other* training reviews (balanced, drawn once with ``DEV_SEED`` from the reviews no seed's sample uses).
Everything else is FINETUNE_RECIPE. Results go to results/bert_finetune_rates.json; rows of an earlier run with the
same settings and checkpoint are kept. The random-init rows are copied, marked ``"from"``, from
bert_finetune_rates_short_pretraining.json, the results of the BERT shipped before, whose WordPiece and config this
one shares (a random-init run never reads the pretrained weights); ``--train-again`` trains them instead.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bert_finetune_rates.py --rates 5e-5 1e-4 2e-4 5e-4
"""

from __future__ import annotations

import argparse
import time

import torch
from common import archived_random_init_rows, kept_rows, load, machine, result_path, summarise, write_result

from lmlib.data import load_imdb
from lmlib.recipes import bert as B
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.runtime import seed_everything

RESULTS = result_path("bert_finetune_rates")
SHORT_PRETRAINING = RESULTS.with_name("bert_finetune_rates_short_pretraining.json")
REPORT_ARCHIVE = RESULTS.with_name("bert_finetune_short_pretraining.json")  # holds that BERT's pretrain.json
CONDITIONS = {"bert": True, "scratch": False}  # name: pretrained
SETTINGS = dict(n_labels=1000, dev_reviews=1000, dev_seed=99, split="IMDb train: the labelled sample of each seed vs "
                "1,000 other training reviews (the test split is never read)", recipe=B.FINETUNE_RECIPE, threads=1,
                dev_excludes_samples_of_seeds=[0, 1, 2])


def dev_split(texts: list[str], labels: list[int]) -> tuple[list[str], list[int]]:
    """1,000 balanced training reviews that none of the labelled samples of seeds 0, 1 and 2 contains."""
    used = set()
    for seed in SETTINGS["dev_excludes_samples_of_seeds"]:
        used.update(sample_balanced(texts, labels, SETTINGS["n_labels"], seed=seed)[0])
    rest = [(t, y) for t, y in zip(texts, labels) if t not in used]
    return sample_balanced([t for t, _ in rest], [y for _, y in rest], SETTINGS["dev_reviews"], seed=SETTINGS["dev_seed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", nargs="+", type=float, default=[5e-5, 1e-4, 2e-4, 5e-4])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=list(CONDITIONS))
    parser.add_argument("--train-again", action="store_true",
                        help="train the random-init rows that the archived results hold instead of copying them")
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])

    report = B.pretrain_report()
    sha = report["sha256"][f"{B.NAME}.safetensors"]
    rows = kept_rows(RESULTS, SETTINGS, sha)
    done = {(r["condition"], r["lr"], r["seed"]) for r in rows}
    earlier = [] if args.train_again else random_init_rows(report)

    _, tokenizer = B.load_pretrained()
    pad, max_len = tokenizer.token_to_id("[PAD]"), B.FINETUNE_RECIPE["max_len"]
    train = load_imdb("train")
    dev_texts, dev_labels = dev_split(list(train.texts), list(train.labels))
    dev_inputs = B.encode_single(tokenizer, dev_texts, max_len)
    for seed in args.seeds:
        texts, labels = sample_balanced(train.texts, train.labels, SETTINGS["n_labels"], seed=seed)
        assert not set(texts) & set(dev_texts), "the dev reviews must not be trained on"
        inputs = B.encode_single(tokenizer, texts, max_len)
        for lr in args.rates:
            for condition in args.conditions:
                if (condition, lr, seed) in done:
                    continue
                copied = [r for r in earlier if (r["condition"], r["lr"], r["seed"]) == (condition, lr, seed)]
                if copied:
                    rows.append(copied[0])
                    print(f"{condition:8s} lr {lr:.0e} seed {seed}: dev accuracy {copied[0]['dev_accuracy']:.3f} "
                          f"(from {copied[0]['from']})", flush=True)
                    save(rows, sha)
                    continue
                seed_everything(seed)
                model, _ = B.classifier(pretrained=CONDITIONS[condition])
                start = time.perf_counter()
                trainer = B.finetune(model, inputs, labels, pad, seed=seed, lr=lr)
                seconds = time.perf_counter() - start
                accuracy = (B.predict(model, dev_inputs, pad) == torch.tensor(dev_labels)).float().mean().item()
                rows.append(dict(condition=condition, lr=lr, seed=seed, dev_accuracy=accuracy, n_dev=len(dev_labels),
                                 steps=trainer.step, train_seconds=round(seconds, 1)))
                print(f"{condition:8s} lr {lr:.0e} seed {seed}: dev accuracy {accuracy:.3f} ({seconds:.0f} s)", flush=True)
                save(rows, sha)


def save(rows: list[dict], sha: str) -> None:
    write_result(RESULTS, dict(
        what="BERT [CLS] fine-tuning on 1,000 IMDb reviews at several learning rates, scored on 1,000 other "
             "training reviews: the shipped IMDb BERT vs the same architecture from random weights",
        settings=SETTINGS, checkpoint_sha256=sha, machine=machine(), load=load(), rows=rows,
        summary=summarise([{**r, "accuracy": r["dev_accuracy"]} for r in rows], ("condition", "lr"))))


def random_init_rows(report: dict) -> list[dict]:
    """The random-init rows of the results of the BERT shipped before (SHORT_PRETRAINING; that BERT's pretrain.json
    is REPORT_ARCHIVE's ``checkpoint_report``), each marked ``"from"``, when that BERT had this one's config and
    WordPiece file and its results this script's settings; otherwise none."""
    _, rows = archived_random_init_rows(SHORT_PRETRAINING, report, SETTINGS, lambda r: CONDITIONS[r["condition"]],
                                        report_archive=REPORT_ARCHIVE)
    return rows


if __name__ == "__main__":
    main()
