"""Checkpoints that are safe to load and complete enough to resume exactly.

A training checkpoint holds the model and optimizer state, the trainer's counters and history, the
callbacks' state and every random generator's state, so that training resumed from it takes the same
next step as a run that was never interrupted. It is written to a temporary file and renamed into place,
so a crash mid-write never leaves a half checkpoint, and it is read with ``weights_only=True``, which
refuses pickled code.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from ..runtime import atomic_write


def rng_state() -> dict:
    np_state = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {"key": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
        "python": {"version": py_version, "state": list(py_state), "gauss": py_gauss},
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))


def save_checkpoint(path: str | Path, state: dict) -> None:
    """Write ``state`` plus the random generators' state to ``path`` atomically."""
    state = {**state, "rng": rng_state()}
    atomic_write(path, lambda tmp: torch.save(state, tmp), mode=0o600)


def load_checkpoint(path: str | Path, map_location=None, restore_rng: bool = True) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    state = torch.load(path, map_location=map_location, weights_only=True)
    if restore_rng:
        set_rng_state(state["rng"])
    return state
