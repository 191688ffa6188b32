"""Starting a script in several local processes under torchrun, for the tests and benchmarks that compare such runs
with one process: a free port, the command line, and an environment with none of torchrun's own variables.

Benchmarks import it as ``local_launch``, tests as ``benchmarks.local_launch``.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from lmlib.training.distributed import TORCHRUN_VARIABLES

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the rendezvous of one launch)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(threads: int = 1, **extra: str) -> dict[str, str]:
    """This process's environment less torchrun's variables (a launch inside a torchrun job must not inherit its
    rank), with lmlib importable from the checkout, ``threads`` threads per process, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES}
    return {**env, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(threads), **extra}


def torchrun_command(processes: int, *args: str) -> list[str]:
    """``python -m torch.distributed.run`` starting ``args`` (a script and its arguments, or ``-m module ...``) in
    ``processes`` local processes, on a fresh port."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}", "--master_addr=127.0.0.1",
            f"--master_port={free_port()}", *args]
