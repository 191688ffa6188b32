"""Transformer-XL's memory on Tiny Shakespeare (characters): does it help, how far back does the model read, and
how much faster is cached evaluation than a sliding window?

Three models of the same size (4 layers, 4 heads, d_model 128, segments of 64 characters; ``lmlib.recipes.
transformer_xl.MODEL``) train on the same consecutive segments of the first 90% of the text, for the same steps,
batch and optimizer (``RECIPE``): equal training compute in tokens (wall-clock seconds are recorded too, since
attending to the memory costs time):

* ``xl``: relative positions and a memory of one segment (64 positions per layer);
* ``relative_no_memory``: relative positions, no memory;
* ``vanilla``: the plain decoder of notebooks 05/09 (sinusoids added to the embeddings, no memory).

Then, on the last 10% (8 parallel streams; the first 512 targets of each stream are not scored, so every setting
scores the same ~107k characters), the held-out loss against the memory used at evaluation time (0 to 512
positions per layer), which is how far back a model can usefully read; the vanilla model is also run with a
memory, where its absolute positions collide (the "temporal confusion" of §3.3). Last, the speed of cached
evaluation against a sliding window that gives each token the same context (batch 1, 256 targets, the ``xl`` model of
the first seed). Seeds change the initial weights; the held-out losses are reported per seed and as mean ± standard
error.

    nice -n 10 .venv/bin/python tests/benchmarks/bench_transformer_xl.py             # 3 seeds, one thread
    nice -n 10 .venv/bin/python tests/benchmarks/bench_transformer_xl.py --seeds 1 2 --add   # more seeds, same file

writes lmlib/results/transformer_xl.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time

import torch
from common import load, machine, mean_se, result_path, write_result

from lmlib.recipes import transformer_xl as X
from lmlib.recipes.gpt import shakespeare_chars

RESULTS = result_path("transformer_xl")
EVAL_MEMORIES = {"xl": [0, 32, 64, 128, 256, 512], "relative_no_memory": [0, 32, 64, 128, 256, 512],
                 "vanilla": [0, 64]}
EVAL_STREAMS, EVAL_SKIP = 8, 512
SPEED_CONTEXTS, SPEED_TARGETS = [64, 128, 256, 512], 256


def train_and_evaluate(variant: str, seed: int, steps: int, itos, train, valid) -> tuple[dict, object]:
    model = X.build(variant, len(itos), seed=seed)
    start = time.perf_counter()
    trainer = X.train(model, train, steps)
    seconds = time.perf_counter() - start
    losses = trainer.batch_losses
    curve = [{"step": s, "train_loss": round(sum(losses[s - 100:s]) / 100, 4)} for s in range(100, len(losses) + 1, 100)]
    evaluations = []
    for mem in EVAL_MEMORIES[variant]:
        t0 = time.perf_counter()
        loss = X.evaluate_with_memory(model, valid, mem, streams=EVAL_STREAMS, skip=EVAL_SKIP)
        evaluations.append({"mem_len": mem, "valid_loss": round(loss, 4), "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{variant:20s} seed {seed} memory {mem:4d}: held-out loss {loss:.4f}", flush=True)
    print(f"{variant} seed {seed}: {trainer.step} steps in {seconds:.0f} s", flush=True)
    run = {"seed": seed, "config": dict(model.config.__dict__), "parameters": model.num_parameters(), "steps": trainer.step,
           "tokens_seen": trainer.step * X.RECIPE["batch_size"] * model.config.segment_len,
           "train_seconds": round(seconds, 1), "ms_per_step": round(1000 * seconds / trainer.step, 1),
           "final_train_loss_mean_last_100": curve[-1]["train_loss"], "curve": curve, "eval": evaluations}
    return run, model


def summarise(runs: dict[str, list[dict]]) -> dict:
    """Per variant and evaluation memory: mean held-out loss over seeds and its standard error."""
    summary = {}
    for variant, seeds in runs.items():
        by_mem = {}
        for run in seeds:
            for e in run["eval"]:
                by_mem.setdefault(e["mem_len"], []).append(e["valid_loss"])
        summary[variant] = []
        for mem, values in sorted(by_mem.items()):
            mean, se = mean_se(values)
            summary[variant].append({"mem_len": mem, "mean": round(mean, 4), "se": None if se is None else round(se, 4),
                                     "seeds": len(values)})
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--add", action="store_true",
                        help="add these seeds to the runs already in the results file (same settings), "
                             "instead of starting a new file; the speed section is kept")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before, started = load(), time.perf_counter()
    itos, train, valid = shakespeare_chars()
    previous = json.loads(RESULTS.read_text()) if args.add else None
    if previous is not None and previous["settings"]["steps"] != args.steps:
        raise SystemExit(f"--add: the file has runs of {previous['settings']['steps']} steps, not {args.steps}")
    runs = {v: [r for r in (previous or {}).get("runs", {}).get(v, []) if r["seed"] not in args.seeds] for v in X.VARIANTS}
    speed = previous["speed"] if previous is not None else None
    for seed in args.seeds:
        for variant in X.VARIANTS:
            run, model = train_and_evaluate(variant, seed, args.steps, itos, train, valid)
            runs[variant].append(run)
            if variant == "xl" and speed is None:
                speed = [X.evaluation_speed(model, valid, context, SPEED_TARGETS) for context in SPEED_CONTEXTS]
                for row in speed:
                    print(f"context {row['context']}: cached {row['cached_tokens_per_s']:.0f} tok/s, sliding "
                          f"{row['sliding_tokens_per_s']:.0f} tok/s, speed-up {row['speedup']:.1f}x", flush=True)
    for variant in runs:
        runs[variant].sort(key=lambda r: r["seed"])

    scored = (valid.numel() // EVAL_STREAMS - 1 - EVAL_SKIP) * EVAL_STREAMS
    result = {
        "what": "Transformer-XL (relative positions + memory) vs the same model without memory and vs a vanilla "
                "decoder, trained alike on Tiny Shakespeare characters; held-out loss against evaluation memory "
                "(mean and standard error over seeds); cached vs sliding-window evaluation speed (seed 0's xl model)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"model": X.MODEL, "recipe": X.RECIPE, "variants": X.VARIANTS, "steps": args.steps,
                     "data": "Tiny Shakespeare, first 90% for training (12 contiguous streams), last 10% held out",
                     "eval": f"{EVAL_STREAMS} contiguous streams of the held-out text in segments of 64; the first "
                             f"{EVAL_SKIP} targets of each stream unscored; {scored:,} characters scored",
                     "seeds": "the seed sets the initial weights; the data order is the same for every run",
                     "speed": f"batch 1, {SPEED_TARGETS} targets; cached: segments of 64 with mem_len = context (the "
                              f"time includes filling the memory); sliding: one forward over exactly `context` "
                              f"tokens per target", "threads": torch.get_num_threads()},
        "runs": runs, "summary": summarise(runs), "speed": speed, "scored_characters": scored,
        "machine": machine(), "load_before": load_before, "load_after": load(),
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    if previous is not None:
        result["earlier_runs"] = {"date": previous["date"], "load_before": previous["load_before"],
                                  "load_after": previous["load_after"], "total_seconds": previous["total_seconds"]}
    write_result(RESULTS, result)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
