"""Reading a comparison's numbers: a perplexity from a summed loss, a difference in units of its standard error,
and the best row of a table. The references notebook 12's exercises check the reader's answers against."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def perplexity(total_nll: float, n_tokens: int) -> float:
    """exp(total negative log-likelihood in nats / number of tokens): the per-token perplexity of a summed loss."""
    if n_tokens < 1:
        raise ValueError(f"n_tokens must be at least 1, got {n_tokens}")
    return math.exp(total_nll / n_tokens)


def z_of_difference(a: float, se_a: float, b: float, se_b: float) -> float:
    """(a − b) / sqrt(se_a² + se_b²): the difference of two independent means in units of its standard error."""
    se = math.hypot(se_a, se_b)
    if se == 0:
        raise ValueError("both standard errors are 0: the difference has no spread to measure it in")
    return (a - b) / se


def best_method(rows: Sequence[Mapping], dataset: str, n_labels: int) -> str:
    """The ``method`` of the row with the highest ``mean`` among ``rows`` of ``dataset`` at ``n_labels``."""
    at = [r for r in rows if r["dataset"] == dataset and r["n_labels"] == n_labels]
    if not at:
        raise ValueError(f"no {dataset} row at {n_labels:,} labels")
    return max(at, key=lambda r: r["mean"])["method"]
