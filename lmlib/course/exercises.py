"""Self-checking exercises: the reader writes a function or a value, a check cell says pass or not yet.

A check never raises (a notebook with an unfinished exercise still runs top to bottom); it prints one
line that begins with ``PASS`` or ``NOT YET`` and returns whether it passed. The reference answers
come from the library, never from a number typed into the notebook. A ``hint`` is printed only after a
wrong attempt, never before the reader has tried: it points the way; the answer itself belongs in a
solution the reader opens on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch


class Outcome:
    """The result of a check: true when it passed. It prints nothing when it is a cell's last value,
    because the check has already said PASS or NOT YET."""

    def __init__(self, passed: bool):
        self.passed = passed

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return "PASS" if self.passed else "NOT YET"

    def _ipython_display_(self) -> None:
        pass


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
        return a.shape == b.shape and torch.allclose(a, b, rtol=rtol, atol=atol)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
    return a == b


def check_value(name: str, answer: Any, expected: Any, rtol: float = 1e-4, atol: float = 1e-6, hint: str = "") -> Outcome:
    """Compare a value the reader computed with the expected one."""
    if answer is None or answer is Ellipsis:
        print(f"NOT YET {name}: no answer yet.")
        return Outcome(False)
    if _close(answer, expected, rtol, atol):
        print(f"PASS {name}")
        return Outcome(True)
    print(f"NOT YET {name}: got {answer!r}. {hint}".rstrip())
    return Outcome(False)


def check_function(
    name: str,
    fn: Callable,
    reference: Callable,
    cases: Iterable[tuple],
    rtol: float = 1e-4,
    atol: float = 1e-6,
    hint: str = "",
) -> Outcome:
    """Run the reader's ``fn`` and the library's ``reference`` on each argument tuple in ``cases``."""
    for args in cases:
        try:
            got = fn(*args)
        except NotImplementedError:
            print(f"NOT YET {name}: the function is not written yet.")
            return Outcome(False)
        except Exception as err:  # the reader's code: report, do not crash the notebook
            print(f"NOT YET {name}: calling it with {args!r} raised {type(err).__name__}: {err}")
            return Outcome(False)
        want = reference(*args)
        if got is None or not _close(got, want, rtol, atol):
            shown = got if not isinstance(got, torch.Tensor) else f"tensor of shape {tuple(got.shape)}"
            print(f"NOT YET {name}: for input {args!r} expected {want!r}, got {shown!r}. {hint}".rstrip())
            return Outcome(False)
    print(f"PASS {name}")
    return Outcome(True)


def _shown(value: Any, fmt: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.format(value)
    return repr(value) if isinstance(value, str) else str(value)


def _same_answer(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return a == b


def check_prediction(name: str, predicted: Any, measured: Any, tolerance: float | None = None, *,
                     why: str = "", fmt: str = "{:.3g}") -> Outcome:
    """Compare what the reader predicted with what an experiment just measured, then say why.

    A number is right when ``|predicted - measured| <= tolerance`` (``tolerance`` is absolute, and required for
    numbers); anything else (a word, a bool) when it equals ``measured`` (words ignore case and surrounding
    spaces). The first printed line begins with ``RIGHT``, ``WRONG`` or ``NO PREDICTION``; the measured value
    is printed in every case, so a reader who left the prediction at ``None`` still sees the answer, and
    ``why`` follows. Like the other checks it never raises on the reader's value; it returns whether the
    prediction was right.
    """
    numeric = isinstance(measured, (int, float)) and not isinstance(measured, bool)
    if numeric and (tolerance is None or tolerance < 0):
        raise ValueError(f"{name}: a numeric prediction needs a tolerance >= 0, got {tolerance!r}")
    if numeric and tolerance >= abs(measured):
        raise ValueError(f"{name}: a tolerance of {tolerance!r} around {measured!r} lets a prediction of 0 pass; "
                         "ask for a quantity the reader can get wrong, or a tighter tolerance")
    if isinstance(measured, bool):
        raise ValueError(f"{name}: a yes/no prediction is right half the time by guessing; ask for a number or "
                         "for one of several choices")
    got = _shown(measured, fmt)
    if predicted is None or predicted is Ellipsis:
        print(f"NO PREDICTION {name}: the run measured {got}. Write a prediction first next time.")
        passed = False
    elif numeric:
        try:
            off = abs(float(predicted) - float(measured))
        except (TypeError, ValueError):
            print(f"WRONG {name}: the prediction {predicted!r} is not a number; the run measured {got}.")
            passed = False
        else:
            passed = off <= tolerance
            verdict = "RIGHT" if passed else "WRONG"
            print(f"{verdict} {name}: you predicted {_shown(predicted, fmt)}, the run measured {got} "
                  f"(off by {fmt.format(off)}; within {fmt.format(tolerance)} counts as right).")
    else:
        passed = _same_answer(predicted, measured)
        print(f"{'RIGHT' if passed else 'WRONG'} {name}: you predicted {_shown(predicted, fmt)}, the run measured {got}.")
    if why:
        print(f"Why: {why}")
    return Outcome(passed)
