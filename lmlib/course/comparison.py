"""The whole course side by side (notebook 12): which positions a model's representation of a word depends on.

The rows and tables notebooks 07-12 import from here are built in :mod:`lmlib.course.results` (from the committed
results and the checkpoints' ``pretrain.json``) and rendered in :mod:`lmlib.course.tables`; their names stay
importable from this module.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .results import (  # noqa: F401
    BOW_METHODS,
    bow_baseline_rows,
    difference,
    gpu_transfer_rows,
    lesson_checks,
    load_for_shipped,
    longer_pretraining_rows,
    pretraining_loss_curves,
    ptb_ladder,
    shipped_report,
    short_pretraining_report,
    staged_pretraining_rows,
    transfer_rows,
)
from .tables import dev_sweep_table, lesson_checks_table, staged_pretraining_table  # noqa: F401


def context_directions(states: Callable[[object], torch.Tensor], original, changed, position: int) -> dict[str, bool]:
    """Which positions' representations move when the token at ``position`` is replaced: ``{"earlier": ...,
    "later": ...}``. ``states(x)`` maps an input to ``(1, T, d)`` representations; ``changed`` is ``original`` with
    the token at ``position`` replaced. A left-to-right model moves only later positions, a bidirectional one both."""
    with torch.no_grad():
        delta = (states(changed) - states(original)).abs().amax(dim=-1)[0]  # (T,)
    if delta.numel() <= position:
        raise ValueError(f"position {position} is outside the {delta.numel()} positions of the input")
    return {"earlier": bool((delta[:position] > 1e-5).any()), "later": bool((delta[position + 1:] > 1e-5).any())}
