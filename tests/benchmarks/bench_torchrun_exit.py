"""How often a two-process torchrun script aborts after its work is done, ending normally or through
:func:`lmlib.training.distributed.exit_distributed`.

The worker joins the process group, takes a few DDP steps of a small linear model, agrees on a number with
``all_reduce_mean`` (the Trainer's reported loss does the same), and rank 0 then spends a moment alone, as it does
when it evaluates and writes the checkpoint. It ends in one of two ways:

* ``normal``: ``close_distributed()`` and a normal return, so the interpreter shuts down as usual;
* ``exit_distributed``: ``exit_distributed(0)``, which leaves the group and skips the shutdown.

A run counts as aborted when torchrun reports a worker killed by SIGABRT (the message is "terminate called without
an active exception": a gloo thread that could not take the interpreter's lock while it shut down). The two
endings alternate, ``RUNS`` times each.

    .venv/bin/python tests/benchmarks/bench_torchrun_exit.py   # writes lmlib/results/torchrun_exit.json
"""

from __future__ import annotations

import datetime
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

from common import child_env, load, machine, result_path, torchrun_command, write_result

RESULTS = result_path("torchrun_exit")
RUNS = 60
ENDINGS = ("normal", "exit_distributed")

WORKER = textwrap.dedent("""
    import sys, time
    import torch
    from lmlib.training import distributed

    torch.set_num_threads(1)
    torch.manual_seed(0)
    distributed.init_distributed()
    model = distributed.wrap_model(torch.nn.Linear(64, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        loss = model(torch.randn(8, 64)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    distributed.all_reduce_mean(loss.detach())
    if distributed.rank() == 0:
        time.sleep(0.2)  # rank 0 alone: evaluating and writing, in a real run
    if sys.argv[1] == "exit_distributed":
        distributed.exit_distributed(0)
    distributed.close_distributed()
""")


def run(script: Path, ending: str) -> str:
    """One two-process run: ``"ok"``, ``"aborted"`` or ``"failed"`` (anything else)."""
    done = subprocess.run(torchrun_command(2, str(script), ending), env=child_env(), capture_output=True, text=True,
                          timeout=120)
    if done.returncode == 0:
        return "ok"
    return "aborted" if "SIGABRT" in done.stderr else "failed"


def main() -> None:
    load_before, started = load(), time.time()
    counts = {ending: {"ok": 0, "aborted": 0, "failed": 0} for ending in ENDINGS}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        for i in range(RUNS):
            for ending in ENDINGS:
                counts[ending][run(script, ending)] += 1
            print(f"{i + 1:3d}/{RUNS}  " + "  ".join(f"{e}: {c['aborted']} aborted" for e, c in counts.items()),
                  flush=True)
    write_result(RESULTS, dict(
        what="two-process torchrun runs (gloo, CPU) of a small DDP script that end with a normal interpreter "
             "shutdown or with exit_distributed: how many abort after their work is done",
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        settings=dict(runs_per_ending=RUNS, order="the endings alternate"),
        machine=machine(), load_before=load_before, load_after=load(), seconds=round(time.time() - started, 1),
        counts=counts))


if __name__ == "__main__":
    main()
