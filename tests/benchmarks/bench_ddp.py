"""Pretraining throughput in one process and in two under torchrun: ``python -m lmlib pretrain`` as a user runs it.

For GPT and BERT (teach preset: the tiny models and short sequences of the live notebooks), ``STEPS`` steps of the
same global batches in three set-ups on the same cores:

* one process, one thread;
* one process, two threads (intra-op parallelism: PyTorch splits each matrix product);
* two processes of one thread each under ``torchrun --nproc_per_node=2`` (data parallelism: each takes half of every
  global batch, and DDP averages the gradients over gloo).

Tokens per second = the run's ``tokens_seen`` / ``train_seconds`` from its ``pretrain.json`` (the training loop only:
no start-up, tokenizer or evaluation). Each set-up runs ``ROUNDS`` times in rotating order and the median is kept,
with the load before and after. The final losses are recorded too: two processes must train the same model.

    .venv/bin/python tests/benchmarks/bench_ddp.py     # writes lmlib/results/ddp.json
"""

from __future__ import annotations

import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, child_env, load, machine, result_path, torchrun_command, write_result

RESULTS = result_path("ddp")
STEPS = {"gpt": 300, "bert": 200}
SETUPS = {"1 process x 1 thread": (1, 1), "1 process x 2 threads": (1, 2), "2 processes x 1 thread": (2, 1)}
ROUNDS = 3


def run(model: str, processes: int, threads: int, out: Path) -> dict:
    """One teach-preset run; its pretrain.json."""
    args = ["-m", "lmlib", "pretrain", model, "--preset", "teach", "--device", "cpu", "--steps", str(STEPS[model]),
            "--threads", str(threads), "--out", str(out)]
    cmd = torchrun_command(processes, *args) if processes > 1 else [sys.executable, *args]
    done = subprocess.run(cmd, env=child_env(threads), capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{model} with {processes} process(es) failed:\n{done.stderr[-3000:]}")
    return json.loads((out / "pretrain.json").read_text())


def main() -> None:
    load_before, started = load(), time.time()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in STEPS:
            seconds = {name: [] for name in SETUPS}
            reports = {}
            names = list(SETUPS)
            for r in range(ROUNDS):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    out = Path(tmp) / f"{model}-{r}-{name.replace(' ', '')}"
                    reports[name] = run(model, *SETUPS[name], out)
                    seconds[name].append(reports[name]["train_seconds"])
            for name, (processes, threads) in SETUPS.items():
                tokens = reports[name]["tokens_seen"]
                median = statistics.median(seconds[name])
                rows.append(dict(model=model, setup=name, processes=processes, threads_per_process=threads,
                                 steps=STEPS[model], tokens=tokens, train_seconds=[round(s, 2) for s in seconds[name]],
                                 tokens_per_s=round(tokens / median), final_train_loss=reports[name]["final_train_loss"]))
                print(f"{model:4s} {name:24s} {tokens / median:9.0f} tokens/s  (final loss "
                      f"{reports[name]['final_train_loss']:.5f})", flush=True)
    write_result(RESULTS, dict(
        what="python -m lmlib pretrain {gpt,bert} --preset teach: training tokens per second in one process (1 or 2 "
             "threads) and in two one-thread processes under torchrun (gloo, DDP), on the same cores",
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        settings=dict(steps=STEPS, rounds=ROUNDS, timing="median train_seconds of the rounds, rotating order",
                      tokens="tokens_seen of the global batches (BERT: real tokens, padding left out)"),
        machine=machine(), load_before=load_before, load_after=load(), seconds=round(time.time() - started, 1),
        rows=rows))


if __name__ == "__main__":
    main()
