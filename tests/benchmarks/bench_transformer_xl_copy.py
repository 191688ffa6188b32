"""Transformer-XL on a task that needs its memory: copying a block of symbols one segment back (notebook 11).

On Tiny Shakespeare (``bench_transformer_xl.py``) a model trained with a memory ends no better than the same model
trained without one: at that size a 64-character segment holds most of what predicts the next character. Here the
text is built so that half of it is predictable only from one segment back (``lmlib.recipes.transformer_xl.
copy_stream``: random blocks of 16 symbols out of 16, each followed by its copy; segments of 16). Two models of
``COPY_TASK``'s size train alike on the same stream (seed 0), one with a memory of one segment (Transformer-XL), one
without (relative positions only), each from 3 initial seeds, and read held-out blocks with memories of 0, 16 and 32.
Random symbols cost ln 16 = 2.77 nats whatever the model; a perfect copier pays nothing on the copies, so the floor
of the mean is about 1.39 nats.

    nice -n 10 .venv/bin/python tests/benchmarks/bench_transformer_xl_copy.py     # one thread, about a minute

writes lmlib/results/transformer_xl_copy.json.
"""

from __future__ import annotations

import datetime
import math
import statistics
import time

import torch
from common import load, machine, result_path, write_result

from lmlib.recipes import transformer_xl as X

RESULTS = result_path("transformer_xl_copy")
SEEDS = (0, 1, 2)
VARIANTS = ("xl", "relative_no_memory")
EVAL_MEMORIES = (0, 16, 32)
SKIP = 2 * X.COPY_TASK["segment_len"]  # the first two segments of each stream unscored: every memory has filled


def main() -> None:
    torch.set_num_threads(1)
    load_before, started = load(), time.time()
    train, held_out = X.copy_task(seed=0)
    runs = []
    for variant in VARIANTS:
        for seed in SEEDS:
            model = X.build_copy_model(variant, seed=seed)
            start = time.perf_counter()
            X.train(model, train, X.COPY_TASK["steps"], recipe=X.COPY_TASK["recipe"])
            seconds = time.perf_counter() - start
            losses = {str(m): X.evaluate_with_memory(model, held_out, m, streams=8, skip=SKIP) for m in EVAL_MEMORIES}
            runs.append(dict(variant=variant, seed=seed, train_seconds=round(seconds, 1), losses=losses))
            print(variant, seed, {m: round(v, 3) for m, v in losses.items()}, f"{seconds:.0f} s", flush=True)
    summary = {}
    for variant in VARIANTS:
        rows = []
        for m in EVAL_MEMORIES:
            values = [r["losses"][str(m)] for r in runs if r["variant"] == variant]
            rows.append(dict(mem_len=m, mean=statistics.mean(values),
                             se=statistics.stdev(values) / math.sqrt(len(values)), values=values))
        summary[variant] = rows
    write_result(RESULTS, dict(
        what="held-out loss (nats per symbol) on the copy task, Transformer-XL (trained with a memory of one segment) "
             "and the same model trained without memory, each read with memories of 0, 16 and 32",
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        task=X.COPY_TASK, seeds=list(SEEDS), eval_memories=list(EVAL_MEMORIES), skip=SKIP, streams=8,
        floor=math.log(X.COPY_TASK["vocab_size"]) / 2, chance=math.log(X.COPY_TASK["vocab_size"]),
        runs=runs, summary=summary, machine=machine(), load_before=load_before, load_after=load(),
        seconds=round(time.time() - started, 1)))


if __name__ == "__main__":
    main()
