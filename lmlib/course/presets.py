"""Presets: one switch for how much compute a notebook spends.

* ``teach`` (default): every notebook runs top to bottom in at most 90 s on 2 CPU cores, under 1.5 GB.
* ``full``: the settings that give the best results; may take much longer or want a GPU.

Choose with the environment variable ``LMLIB_PRESET`` before starting Jupyter (or the tests). Every
experiment states both settings side by side with :func:`choose`, so a reader sees what ``full`` would do.
"""

from __future__ import annotations

import os
from typing import TypeVar

PRESETS = ("teach", "full")
T = TypeVar("T")


def current() -> str:
    """The active preset, read from ``LMLIB_PRESET`` each time (default ``teach``)."""
    name = os.environ.get("LMLIB_PRESET", "teach").strip().lower()
    if name not in PRESETS:
        raise ValueError(f"LMLIB_PRESET={name!r} is not a preset; use one of {', '.join(PRESETS)}")
    return name


def choose(teach: T, full: T) -> T:
    """The value for the active preset: ``choose(teach=1, full=13)`` epochs."""
    return teach if current() == "teach" else full
