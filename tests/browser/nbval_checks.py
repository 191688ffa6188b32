"""nbval's checks, applied to the run the browser test makes, so that each notebook is executed once per test run.

The suite runs nbval in lax mode (pyproject.toml: ``--nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg``).
For a notebook that means: every code cell runs without raising, a reference cell that was never run holds no
outputs, and each cell tagged ``nbval-check-output`` (or marked ``# NBVAL_CHECK_OUTPUT``) produces the outputs
stored in the file, compared by nbval's own ``compare_outputs`` after the same sanitizing regexes, with the same
keys skipped. :func:`nbval_problems` makes exactly those checks on the notebook JupyterLab holds after Run All
(``labdriver.JS_MODEL``), and the root ``conftest.py`` then leaves nbval's own run of that notebook out.

A notebook that uses any other nbval marker (skip, raises-exception, ...) is not covered here: :func:`covered`
says so, and nbval runs it as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace

import nbformat
from nbval.plugin import (
    IPyNbCell,
    coalesce_streams,
    find_comment_markers,
    find_metadata_tags,
    get_sanitize_patterns,
    nocolors,
)

SANITIZE_FILE = Path(__file__).resolve().parents[1] / "nbval_sanitize.cfg"
# nbval's skipped keys (IPyNbFile.__init__, without --nbdime: images are not compared either)
SKIP_COMPARE = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")


def _options(cell: dict) -> dict:
    """nbval's options of a code cell, read as nbval reads them: metadata tags, then comment markers over them."""
    options = dict(find_metadata_tags(cell.get("metadata", {})))
    options.update(dict(find_comment_markers("".join(cell.get("source", "")))))
    return options


def _checked(cell: dict) -> bool:
    return bool(_options(cell).get("check", False))  # lax mode: only cells marked for it are compared


def covered(notebook: dict) -> bool:
    """Whether every nbval option the notebook's cells set is one :func:`nbval_problems` applies (check-output
    and ignore-output; not skip or raises-exception)."""
    return all(set(_options(c)) <= {"check"} for c in notebook.get("cells", []) if c.get("cell_type") == "code")


def _outputs(outputs: Iterable[dict]) -> list:
    """Outputs as nbformat nodes with multi-line strings joined, as nbformat reads them from a file."""
    def join(value):
        if isinstance(value, dict):
            return {k: join(v) for k, v in value.items()}
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return "".join(value)
        return value

    return [nbformat.from_dict(join(dict(o))) for o in outputs or []]


def _comparer(patterns: list[tuple[str, str]]):
    """An object IPyNbCell.compare_outputs runs on: nbval's comparison itself, with its sanitizing and skips."""
    fake = SimpleNamespace(parent=SimpleNamespace(skip_compare=SKIP_COMPARE, sanitize_patterns=dict(patterns)),
                           colors=nocolors, comparison_traceback=[])
    fake.sanitize = lambda s: IPyNbCell.sanitize(fake, s)

    def mismatch(key, left, right):  # nbval's report of a differing value, without pytest's assertion repr
        fake.comparison_traceback.append(f"mismatch {key!r}: stored {str(left)[:300]!r}, this run {str(right)[:300]!r}")

    fake.format_output_compare = mismatch
    return fake


def nbval_problems(reference: dict, executed: dict, sanitize_file: Path = SANITIZE_FILE) -> list[tuple[int, str]]:
    """``(cell index, problem)`` for every nbval-lax failure of ``executed`` (the notebook after a run) against
    ``reference`` (the notebook as stored): a cell that raised or did not run, a never-run reference cell with
    outputs, and a checked cell whose outputs differ from the stored ones (nbval's message, without colours)."""
    patterns = get_sanitize_patterns(sanitize_file.read_text()) if sanitize_file else []
    ref_cells, run_cells = reference.get("cells", []), executed.get("cells", [])
    if len(ref_cells) != len(run_cells):
        return [(0, f"{len(ref_cells)} cells in the file, {len(run_cells)} after the run")]
    problems = []
    for index, (ref, run) in enumerate(zip(ref_cells, run_cells)):
        if ref.get("cell_type") != "code":
            continue
        outputs = _outputs(run.get("outputs"))
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if errors:
            problems.append((index, f"nbval: cell execution caused an exception: {errors[0].get('ename')}: "
                                    f"{str(errors[0].get('evalue'))[:200]}"))
            continue
        if run.get("execution_count") is None:
            problems.append((index, "nbval: the cell did not run"))
            continue
        stored = _outputs(ref.get("outputs"))
        if ref.get("execution_count") is None:
            if stored:
                problems.append((index, "nbval: unrun reference cell has outputs"))
            continue
        if _checked(ref):
            comparer = _comparer(patterns)
            if not IPyNbCell.compare_outputs(comparer, coalesce_streams(outputs), coalesce_streams(stored)):
                detail = re.sub(r"\s+", " ", " ".join(map(str, comparer.comparison_traceback)))[:600]
                problems.append((index, f"nbval: cell outputs differ from the stored ones: {detail}"))
    return problems
