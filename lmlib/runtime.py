"""Seeding, device choice, evaluation mode and atomic writes: what every layer of lmlib needs to run a model
repeatably and keep what it writes whole.

It sits below all of them (it imports no other lmlib module), so models, training and recipes can all
use it without pointing upward.
"""

from __future__ import annotations

import dataclasses
import os
import random
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int = 0) -> int:
    """Seed Python's, NumPy's and PyTorch's generators (CUDA's too) so a rerun gives the same numbers."""
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    return seed


def pick_device(preference: str = "auto") -> torch.device:
    """``"auto"`` picks CUDA when present, else the CPU; ``"cpu"``/``"cuda"`` force one."""
    if preference == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if preference == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but PyTorch sees no CUDA GPU; use 'auto' or 'cpu'")
    return torch.device(preference)


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Switch ``model`` to evaluation mode (dropout and batch-norm statistics frozen) inside the block and
    restore the mode it had afterwards, even if the block raises."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``batch`` with ``fn`` applied to every tensor in it, also inside tuples, named tuples, lists, dicts and
    dataclasses; anything else is returned as it is. Moving a batch to a device and cutting a rank's share of it
    (:mod:`lmlib.training.distributed`) are both this walk."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(batch, **{f.name: map_tensors(getattr(batch, f.name), fn)
                                             for f in dataclasses.fields(batch) if f.init})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(map_tensors(b, fn) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_tensors(b, fn) for b in batch)
    if isinstance(batch, dict):
        return {k: map_tensors(v, fn) for k, v in batch.items()}
    return batch


def atomic_write(path: str | Path, write: Callable[[str], None], mode: int = 0o644) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it into place: a run killed halfway
    leaves the old file or none, never a truncated one. ``mode`` replaces mkstemp's private permissions."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
