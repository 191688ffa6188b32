"""ULMFiT on IMDb (Howard & Ruder 2018, fig. 3 and tables 6-7 at this scale): accuracy against the number of
labelled reviews, for ULMFiT and for the same classifier trained from scratch, and the paper's ablations.

Stage (a) is the shipped PTB AWD-LSTM (lmlib/pretrained/), stage (b) the same LM fine-tuned on IMDb's unlabelled
and training reviews (lmlib/pretrained/ulmfit_imdb/, ``python -m lmlib pretrain ulmfit-imdb --preset full``). Stage (c)
trains the classifier on a balanced sample of 100 / 500 / 1,000 / 5,000 training reviews or on all 25,000, and
tests it on one fixed balanced sample of 2,500 test reviews (one standard error of an accuracy is at most 1 point).

Every review is cut to ``max_len`` = 128 tokens by :func:`lmlib.recipes.ulmfit.head_and_tail` (its first and last
64; the median training review has 205 tokens, 85% have more than 128), and each unfreezing stage (epoch) runs at least 10 and at most 160 steps of
32 reviews, so 5,000 and 25,000 labels both get 800 steps (all 25,000 labels are then seen once). The ``ulmfit``
variant at 1,000 labels is also run with 256 and 512 tokens to show what the cut costs.

Variants (one change each from ``ulmfit``, the paper's recipe):

* ``ulmfit``: the stage (b) LM; gradual unfreezing, discriminative rates (η/2.6 per group down), STLR;
* ``scratch``: the same architecture and vocabulary, random init, one rate, no unfreezing, STLR;
* ``no_lm_finetuning``: the PTB LM (vocabulary extended the same way) without stage (b);
* ``no_discriminative``: one rate for every group;
* ``no_stlr``: a constant rate η_top instead of STLR;
* ``no_gradual``: every group trains from the first step;
* ``neither``: one rate and no unfreezing (what fixed notebook 07's rt-polarity run, results/ulmfit_ablation.json);
* ``neither_no_lm_finetuning``: ``neither`` from the PTB LM, without stage (b).

    nice -n 10 .venv/bin/python tests/benchmarks/bench_ulmfit_imdb.py --variant scratch --seeds 0 1 2 --out PART.json
    .venv/bin/python tests/benchmarks/bench_ulmfit_imdb.py --merge PART1.json PART2.json ...

writes lmlib/results/ulmfit_imdb.json (rows, and per variant and label count the mean ± standard error
over seeds).

**Scratch at its own rate.** ``--sweep 0.001 0.003 0.01`` first trains seed 0's sample of ``--sweep-size`` (1,000)
labels at each rate and scores it on a dev split of 1,000 *other* training reviews (:func:`dev_split`, in no labelled
sample of seeds 0-2 up to 5,000 labels), never on the test reviews; the rate with the best dev accuracy (ties: the
smaller) is the one the sizes and seeds asked for are trained at, and only that run of the sweep is tested (it is the
row of seed 0 at the sweep size). ``--eta`` trains at a given rate instead of the recipe's. Each row records its
``eta_top``. ``--replace PART`` puts a part's rows into the committed file in place of that variant's rows at the
same label counts (the other variants' rows and the stage (b) checkpoint's sha256 stay as they are) and records
its sweep under ``rate_sweeps``.

    nice -n 10 .venv/bin/python tests/benchmarks/bench_ulmfit_imdb.py --variant scratch --sweep 0.001 0.003 0.01 \\
        --seeds 0 --sizes 1000 --out scratch_sweep.json
    nice -n 10 .venv/bin/python tests/benchmarks/bench_ulmfit_imdb.py --variant scratch --eta RATE --seeds 1 2 \\
        --sizes 1000 --out scratch_b.json   # ...and the other sizes and seeds
    .venv/bin/python tests/benchmarks/bench_ulmfit_imdb.py --replace scratch_sweep.json scratch_b.json ...
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import best_rate as shared_best_rate
from common import load, machine, result_path, summarise, write_result

from lmlib.data import load_imdb
from lmlib.models.awd_lstm import AWDLSTMLanguageModel
from lmlib.models.ulmfit import ULMFiTClassifier, grow_vocab
from lmlib.recipes import ulmfit as U
from lmlib.runtime import seed_everything

RESULTS = result_path("ulmfit_imdb")
SETTINGS = dict(sizes=[100, 500, 1000, 5000, 25000], test_reviews=2500, test_seed=0, max_len=128, epochs=5,
                eta_top=0.01, batch_size=32, min_steps_per_epoch=10, max_steps_per_epoch=160,
                head=dict(p1=0.25, p2=0.1))
VARIANTS = {  # name: (initial weights, gradual unfreezing, discriminative factor, schedule)
    "ulmfit": ("imdb", True, 2.6, "stlr"),
    "scratch": ("random", False, 1.0, "stlr"),
    "no_lm_finetuning": ("ptb", True, 2.6, "stlr"),
    "no_discriminative": ("imdb", True, 1.0, "stlr"),
    "no_stlr": ("imdb", True, 2.6, "constant"),
    "no_gradual": ("imdb", False, 2.6, "stlr"),
    "neither": ("imdb", False, 1.0, "stlr"),
    "neither_no_lm_finetuning": ("ptb", False, 1.0, "stlr"),
}


def labelled_data():
    """All 25,000 training reviews and the fixed test sample, tokenized."""
    train = load_imdb("train")
    test = load_imdb("test")
    test_texts, test_labels = U.sample_balanced(test.texts, test.labels, SETTINGS["test_reviews"], SETTINGS["test_seed"])
    return ([U.review_tokens(t) for t in train.texts], list(train.labels),
            [U.review_tokens(t) for t in test_texts], test_labels)


def starting_lm(init: str, checkpoint: Path = U.IMDB_DIR):
    """The LM whose encoder the classifier starts from, with the stage (b) ``checkpoint``'s vocabulary for every
    init: ``imdb`` that checkpoint; ``random`` the same architecture at random init; ``ptb`` the shipped stage (a)
    LM it was fine-tuned from, grown to its words by :func:`lmlib.models.ulmfit.grow_vocab` (a new word's row is
    the mean row), as stage (b) grew it before reading IMDb."""
    lm, vocab = U.load_pretrained(checkpoint, **U.IMDB_RECIPE["dropouts"])  # checks every file's sha256
    if init == "imdb":
        return lm, vocab
    if init == "random":
        return AWDLSTMLanguageModel(lm.config), vocab
    stage_a = json.loads((U.PRETRAINED_DIR / "pretrain.json").read_text())["sha256"]["awd_lstm_ptb.safetensors"]
    began = json.loads((checkpoint / "pretrain.json").read_text()).get("stage_a", {}).get("sha256")
    ptb_lm, ptb_vocab = U.load_pretrained(U.PRETRAINED_DIR, **U.IMDB_RECIPE["dropouts"])
    if began != stage_a or vocab.itos[:len(ptb_vocab)] != ptb_vocab.itos:
        raise SystemExit(f"{checkpoint} was not fine-tuned from the shipped stage (a) LM; its ptb variants cannot be run")
    return grow_vocab(ptb_lm, ptb_vocab, vocab.itos[len(ptb_vocab):], vocab.counts)


def encode(vocab, texts, max_len):
    return [U.head_and_tail(ids, max_len) for ids in U.encode_texts(vocab, texts)]


DEV = dict(reviews=1000, seed=0, excludes_sizes=[100, 500, 1000, 5000], excludes_seeds=[0, 1, 2])


def dev_split(train_labels: list[int]) -> list[int]:
    """Indices of ``DEV["reviews"]`` balanced training reviews in none of the labelled samples of seeds 0-2 at
    100 to 5,000 labels (at 25,000 every review is labelled), drawn by ``sample_balanced`` seeded ``DEV["seed"]``."""
    everything = list(range(len(train_labels)))
    used = {i for size in DEV["excludes_sizes"] for seed in DEV["excludes_seeds"]
            for i in U.sample_balanced(everything, train_labels, size, seed)[0]}
    rest = [i for i in everything if i not in used]
    return U.sample_balanced(rest, [train_labels[i] for i in rest], DEV["reviews"], DEV["seed"])[0]


def best_rate(dev_rows: list[dict]) -> float:
    """The rate of the sweep with the highest dev accuracy; a tie goes to the smaller rate (common.best_rate)."""
    return shared_best_rate(dev_rows, rate="eta_top")


def run(variant: str, seeds: list[int], sizes: list[int], max_len: int, out: Path, eta: float | None = None,
        sweep: list[float] | None = None, sweep_size: int = 1000, checkpoint: Path = U.IMDB_DIR) -> None:
    init, gradual, factor, schedule = VARIANTS[variant]
    torch.set_num_threads(1)
    lm, vocab = starting_lm(init, checkpoint)
    train_texts, train_labels, test_texts, test_labels = labelled_data()
    imdb = json.loads((checkpoint / "pretrain.json").read_text())
    result = {"what": __doc__.split("\n")[0], "settings": {**SETTINGS, "max_len": max_len}, "variant": variant,
              "vocab_size": len(vocab), "vocab_words_sha": hash_words(vocab.itos), "stage_b_folder": str(checkpoint),
              "checkpoint": {"imdb_sha256": imdb["sha256"]["ulmfit_imdb.safetensors"]} if init == "imdb" else None,
              "machine": machine(), "load_before": load(), "threads": torch.get_num_threads(), "rows": []}
    train_ids, test_ids = encode(vocab, train_texts, max_len), encode(vocab, test_texts, max_len)

    def train(seed: int, size: int, rate: float):
        seed_everything(seed)
        idx, labels = U.sample_balanced(list(range(len(train_ids))), train_labels, size, seed)
        fresh = AWDLSTMLanguageModel(lm.config)
        if init != "random":
            fresh.encoder.load_state_dict(lm.encoder.state_dict())
        model = ULMFiTClassifier(fresh.encoder, 2, **SETTINGS["head"])
        start = time.perf_counter()
        trainer = U.train_classifier(
            model, [train_ids[i] for i in idx], labels, SETTINGS["epochs"], rate, gradual=gradual,
            factor=factor, batch_size=SETTINGS["batch_size"], max_len=max_len,
            min_steps_per_epoch=SETTINGS["min_steps_per_epoch"], max_steps_per_epoch=SETTINGS["max_steps_per_epoch"],
            schedule=schedule, seed=seed)
        return model, trainer.step, time.perf_counter() - start

    def add(model, seed, size, rate, steps, seconds):
        acc = U.accuracy(model, test_ids, test_labels, max_len=max_len)
        row = {"variant": variant, "seed": seed, "n_labels": size, "max_len": max_len, "eta_top": rate,
               "accuracy": acc, "n_test": len(test_labels), "steps": steps,
               "examples_seen": steps * SETTINGS["batch_size"], "train_seconds": round(seconds, 1)}
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        result["load_after"] = load()
        write_result(out, result)

    rate = SETTINGS["eta_top"] if eta is None else eta
    kept = None
    if sweep:
        dev = dev_split(train_labels)
        dev_ids, dev_labels = [train_ids[i] for i in dev], [train_labels[i] for i in dev]
        result["sweep"] = {"dev": DEV, "size": sweep_size, "seed": 0, "rates": sweep, "rows": []}
        models = {}
        for r in sweep:
            model, steps, seconds = train(0, sweep_size, r)
            models[r] = (model, steps, seconds)
            dev_acc = U.accuracy(model, dev_ids, dev_labels, max_len=max_len)
            result["sweep"]["rows"].append({"eta_top": r, "dev_accuracy": dev_acc, "steps": steps,
                                            "train_seconds": round(seconds, 1)})
            print(json.dumps(result["sweep"]["rows"][-1]), flush=True)
            write_result(out, result)
        rate = result["sweep"]["chosen"] = best_rate(result["sweep"]["rows"])
        kept = (0, sweep_size)
        add(models[rate][0], 0, sweep_size, rate, *models[rate][1:])  # the chosen run is seed 0's row
        del models
    for seed in seeds:
        for size in sizes:
            if (seed, size) == kept:
                continue
            model, steps, seconds = train(seed, size, rate)
            add(model, seed, size, rate, steps, seconds)


def hash_words(words) -> str:
    import hashlib
    return hashlib.sha256("\n".join(words).encode()).hexdigest()


def summarize(rows: list[dict]) -> list[dict]:
    """Mean and standard error over seeds per (variant, labels, max_len) (common.summarise; the se is None for
    one seed), in the order of VARIANTS."""
    return sorted(summarise(rows, ("variant", "n_labels", "max_len")),
                  key=lambda s: (list(VARIANTS).index(s["variant"]), s["max_len"], s["n_labels"]))


def merge(paths: list[Path]) -> None:
    parts = [json.loads(p.read_text()) for p in paths]
    if len({p["vocab_words_sha"] for p in parts}) != 1:
        raise ValueError("the parts were run with different vocabularies; rerun them from one checkpoint")
    shas = {p["checkpoint"]["imdb_sha256"] for p in parts if p["checkpoint"]}
    if len(shas) > 1:
        raise ValueError("the parts used different stage (b) checkpoints; rerun the stale ones")
    rows = {(r["variant"], r["seed"], r["n_labels"], r["max_len"]): r for p in parts for r in p["rows"]}
    rows = [rows[k] for k in sorted(rows, key=lambda k: (list(VARIANTS).index(k[0]), k[3], k[2], k[1]))]
    result = {"what": parts[0]["what"], "settings": SETTINGS, "variants": {
                  k: dict(zip(("init", "gradual", "factor", "schedule"), v)) for k, v in VARIANTS.items()},
              "checkpoint": {"imdb_sha256": shas.pop() if shas else None}, "vocab_size": parts[0]["vocab_size"],
              "summary": summarize(rows), "rows": rows,
              "parts": [{k: v for k, v in p.items() if k not in ("rows", "what", "sweep")} for p in parts],
              "rate_sweeps": {p["variant"]: p["sweep"] for p in parts if "sweep" in p}}
    write_result(RESULTS, result)
    print(f"wrote {RESULTS}: {len(rows)} rows")


def replace(paths: list[Path]) -> None:
    """Put the rows of ``paths`` (parts of one variant) into the committed result in place of that variant's rows
    at the same label counts and max_len, recompute the summary, and keep the parts' settings and sweeps (in place
    of the committed parts of the same variant and max_len)."""
    result = json.loads(RESULTS.read_text())
    parts = [json.loads(p.read_text()) for p in paths]
    words = {p["vocab_words_sha"] for p in result["parts"]} | {p["vocab_words_sha"] for p in parts}
    if len(words) != 1:
        raise ValueError("the parts were run with another vocabulary than the committed rows; rerun them")
    shas = {p["checkpoint"]["imdb_sha256"] for p in parts if p["checkpoint"]}
    if shas - {result["checkpoint"]["imdb_sha256"]}:
        raise ValueError("a part used another stage (b) checkpoint than the committed rows; rerun it")
    new = {(r["variant"], r["seed"], r["n_labels"], r["max_len"]): r for p in parts for r in p["rows"]}
    replaced = {(k[0], k[2], k[3]) for k in new}
    rows = [r for r in result["rows"] if (r["variant"], r["n_labels"], r["max_len"]) not in replaced] + list(new.values())
    rows.sort(key=lambda r: (list(VARIANTS).index(r["variant"]), r["max_len"], r["n_labels"], r["seed"]))
    result.update(summary=summarize(rows), rows=rows)
    redone = {(p["variant"], p["settings"]["max_len"]) for p in parts}  # the committed parts of other cuts stay
    result["parts"] = [p for p in result["parts"] if (p["variant"], p["settings"]["max_len"]) not in redone] + [
        {k: v for k, v in p.items() if k not in ("rows", "what", "sweep")} for p in parts]
    sweeps = {p["variant"]: p["sweep"] for p in parts if "sweep" in p}
    result["rate_sweeps"] = {**result.get("rate_sweeps", {}), **sweeps}
    write_result(RESULTS, result)
    print(f"wrote {RESULTS}: {len(new)} rows replaced or added")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--sizes", nargs="+", type=int, default=SETTINGS["sizes"])
    parser.add_argument("--max-len", type=int, default=SETTINGS["max_len"])
    parser.add_argument("--out", type=Path, help="this part's file")
    parser.add_argument("--merge", nargs="+", type=Path, help="part files to merge into the results file")
    parser.add_argument("--replace", nargs="+", type=Path, help="part files whose rows replace the committed ones")
    parser.add_argument("--eta", type=float, default=None, help="eta_top for every run (default: the recipe's)")
    parser.add_argument("--sweep", nargs="+", type=float, default=None, help="rates scored on the dev split first")
    parser.add_argument("--sweep-size", type=int, default=1000)
    parser.add_argument("--checkpoint", type=Path, default=U.IMDB_DIR,
                        help="stage (b) folder (default: the shipped one); every variant reads its vocabulary")
    args = parser.parse_args()
    if args.variant and not (args.checkpoint / "pretrain.json").is_file():
        parser.error(f"{args.checkpoint} holds no stage (b) checkpoint (pretrain.json)")
    if args.merge:
        merge(args.merge)
    elif args.replace:
        replace(args.replace)
    elif args.variant and args.out:
        run(args.variant, args.seeds, args.sizes, args.max_len, args.out, args.eta, args.sweep, args.sweep_size,
            args.checkpoint)
    else:
        parser.error("give --variant and --out to run, or --merge PARTS")


if __name__ == "__main__":
    main()
