"""Kept importable by the names notebooks 07-12 use: the rows are built in :mod:`lmlib.course.results`, the tables
rendered in :mod:`lmlib.course.tables`, and :func:`context_directions` lives in :mod:`lmlib.course.type_your_own`."""

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
from .type_your_own import context_directions  # noqa: F401
