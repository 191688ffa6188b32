"""Self-checking exercises: the reader writes a function or a value, a check cell says pass or not yet.

A check never raises (a notebook with an unfinished exercise still runs top to bottom); it prints one
line that begins with ``PASS`` or ``NOT YET`` and returns whether it passed. A notebook's check cell names
its exercise, ``check("01 add-k bigram", answer, tiny)``: the reference it is checked against lives in
:mod:`lmlib.course.answers`, so the cell shows no expression the reader could run to print the answer. A
``hint`` is printed only after a wrong attempt, never before the reader has tried: it points the way; the
answer itself belongs in a solution the reader opens on purpose.

A predict-then-run cell (:func:`check_prediction`) with no prediction entered says only that: its stored
output, which the course website and GitHub show to anyone who scrolls, holds neither the measured value
nor why it comes out so. Both appear once a prediction is written and the cell is run again.
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


NO_PREDICTION = ("NO PREDICTION {name}: write your prediction in the cell above and run this cell again; the "
                 "measured value and why it comes out so are shown then.")
"""What :func:`check_prediction` prints when nothing was predicted: no measured value, no why."""

PREDICTION_METADATA = "lmlib_prediction"
"""The key of the stored output's metadata (not shown by any renderer) under which :func:`check_prediction`
keeps the measured value and tolerance of an unanswered prediction, so that the tests can check the exercise
can be failed without the output showing the answer."""


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


def _publish_unanswered(line: str, metadata: dict) -> None:
    """Show ``line`` as the cell's output, with ``metadata`` stored beside it but not displayed (in IPython);
    elsewhere just print it."""
    try:
        from IPython.core.interactiveshell import InteractiveShell
        from IPython.display import publish_display_data
    except ImportError:  # pragma: no cover - IPython ships with the course's requirements
        InteractiveShell = None
    if InteractiveShell is not None and InteractiveShell.initialized():
        publish_display_data({"text/plain": line}, metadata={PREDICTION_METADATA: metadata})
    else:
        print(line)


def check_prediction(name: str, predicted: Any, measured: Any, tolerance: float | None = None, *,
                     why: str = "", fmt: str = "{:.3g}", details: str = "") -> Outcome:
    """Compare what the reader predicted with what an experiment just measured, then say why.

    A number is right when ``|predicted - measured| <= tolerance`` (``tolerance`` is absolute, and required for
    numbers); anything else (a word) when it equals ``measured`` (words ignore case and surrounding spaces). The
    first printed line begins with ``RIGHT``, ``WRONG`` or ``NO PREDICTION``. With a prediction, the measured value,
    ``details`` (what the run measured besides, e.g. the other rows of its table) and ``why`` follow. Without one
    (``None`` or ``...``) only :data:`NO_PREDICTION` is shown, so a stored output gives nothing away; the measured
    value is kept in the output's metadata for the tests. Like the other checks it never raises on the reader's
    value; it returns whether the prediction was right.
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
    if predicted is None or predicted is Ellipsis:
        _publish_unanswered(NO_PREDICTION.format(name=name), {
            "name": name, "measured": float(measured) if numeric else str(measured),
            "tolerance": None if tolerance is None else float(tolerance), "fmt": fmt})
        return Outcome(False)
    got = _shown(measured, fmt)
    if numeric:
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
    if details:
        print(details)
    if why:
        print(f"Why: {why}")
    return Outcome(passed)


def check(exercise: str, answer: Any, *inputs: Any, hint: str = "") -> Outcome:
    """Check the reader's ``answer`` to the notebook exercise named ``exercise`` against its hidden reference in
    :mod:`lmlib.course.answers`.

    ``inputs`` are the notebook's own objects the exercise is about (a corpus, a model); the reference computes
    the expected value from them, or, for a function exercise (``answer`` is the reader's function), builds the
    cases to call it on. The check cell shows only the exercise's name, so there is nothing in it to run for the
    answer. An unknown name is refused with the known ones."""
    from . import answers

    spec = answers.exercise(exercise)
    if spec.kind == "value":
        if answer is None or answer is Ellipsis:
            print(f"NOT YET {exercise}: no answer yet.")
            return Outcome(False)
        return check_value(exercise, answer, spec.reference(*inputs), spec.rtol, spec.atol, hint)
    if not callable(answer):
        print(f"NOT YET {exercise}: the function is not written yet.")
        return Outcome(False)
    return check_function(exercise, answer, spec.reference, spec.cases(*inputs), spec.rtol, spec.atol, hint)
