"""Why the ablation's "no regularization at all" run took about seven times as long as the others: its time again.

``bench_awd_ablation.py`` records wall-clock seconds only. This script reruns two of its variants, the one with every
regularizer and the one with none, with the same code, seeds and data (``run_variant``), and records for each the
CPU time of this process (``time.process_time``: what the run itself computed, whatever else the shared machine
ran) beside the wall-clock time and the machine's load, and whether it reproduces the committed validation
perplexity. Writes lmlib/results/awd_ablation_timing.json.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_awd_ablation_timing.py
"""

from __future__ import annotations

import time

import bench_awd_ablation as A
import torch
from common import load, machine, write_result

from lmlib import Vocab
from lmlib.course import results
from lmlib.data import load_ptb
from lmlib.text.batching import batchify, bptt_batches

VARIANTS = ("all regularizers", "no regularization at all")


def main() -> None:
    torch.set_num_threads(1)
    committed = {row["variant"]: row for row in results.load("awd_ablation")["rows"]}
    train, valid = load_ptb("train"), load_ptb("valid")
    vocab = Vocab((tok for line in train for tok in line), unk="<unk>")
    ids = {split: torch.tensor(vocab.encode([t for line in lines for t in line]))
           for split, lines in (("train", train), ("valid", valid))}
    check = list(bptt_batches(batchify(ids["valid"][: A.CHECK_TOKENS], A.EVAL_BATCH), 70))
    valid_batches = list(bptt_batches(batchify(ids["valid"], A.EVAL_BATCH), 70))
    rows = []
    for name in VARIANTS:
        before, cpu, wall = load(), time.process_time(), time.perf_counter()
        row = A.run_variant(name, A.VARIANTS[name], len(vocab), ids["train"][: A.TRAIN_TOKENS], check, valid_batches)
        rows.append({"variant": name, "steps": row["steps"], "cpu_seconds": time.process_time() - cpu,
                     "wall_seconds": time.perf_counter() - wall, "load_before": before, "load_after": load(),
                     "valid_ppl": row["valid_ppl"], "committed_valid_ppl": committed[name]["valid_ppl"],
                     "committed_seconds": committed[name]["seconds"], "committed_steps": committed[name]["steps"]})
        print(rows[-1], flush=True)
    write_result("awd_ablation_timing", {
        "what": "the AWD-LSTM ablation's runs with every regularizer and with none, timed again: CPU time of the "
                "process beside wall-clock time and load, one thread",
        "variants": list(VARIANTS), "machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
