"""Seeding, device choice and evaluation mode: what every layer of lmlib needs to run a model repeatably.

It sits below all of them (it imports no other lmlib module), so models, training and recipes can all
use it without pointing upward.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

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
