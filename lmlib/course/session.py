"""The first call of a notebook: seed every generator and run PyTorch on one thread.

One thread, because a course notebook runs where other work shares the cores: on Binder, on a busy laptop, and in
the test run, where two notebooks run at once on two cores. There PyTorch's threads spin-wait for each other and two
of them are slower than one. On a machine of your own, ``torch.set_num_threads(n)`` after this call gives a
notebook more cores (the numbers of a seeded run can then differ in their last digits).
"""

from __future__ import annotations

import torch

from ..runtime import seed_everything
from .presets import current


def start(seed: int = 0, threads: int = 1) -> str:
    """Seed Python's, NumPy's and PyTorch's generators with ``seed``, let PyTorch use ``threads`` threads, and
    return the active preset's name (``teach`` or ``full``)."""
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    seed_everything(seed)
    torch.set_num_threads(threads)
    return current()
