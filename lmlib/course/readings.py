"""Kept importable by the names notebooks 05 and 07 use: the readings live in
:mod:`lmlib.course.translation_readings` and :mod:`lmlib.course.ulmfit_results`."""

from .translation_readings import attention_reading, race_reading  # noqa: F401
from .ulmfit_results import ulmfit_ablation_imdb_reading  # noqa: F401
