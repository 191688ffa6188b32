"""The tables of notebooks 11 and 12, kept importable by the names those notebooks use; they live in
:mod:`lmlib.course.tables` (rendering) and :mod:`lmlib.course.results` (loading)."""

from .results import transformer_xl_result  # noqa: F401
from .tables import (  # noqa: F401
    XL_NAMES,
    compute_matched_table,
    ladder_table,
    loss_by_memory_table,
    memory_table,
    pretraining_gains_table,
    scaling_table,
    speed_table,
    transfer_table,
)
