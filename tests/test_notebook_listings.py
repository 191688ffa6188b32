"""Every `show_source(...)` call in the notebooks shows its listing to the student.

A helper that returns a display object shows nothing unless it is the last expression of its cell: notebook 09's
cell that promised GPT's `forward` ("exactly eq. 2") showed only `hidden_states`. nbval cannot see that (it
compares no outputs of these cells), so this test runs every call the way the notebook does, in a real kernel:
for each cell that calls `show_source`, a cell with the same statements where everything else is `pass`, after
the notebook's own imports. Each call must display exactly one listing (none is empty, none shows twice).
No notebook is run: only its imports and the listings, so all notebooks take a few seconds together.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest
from notebook_client import notebook_client  # nbclient, its waits in slices (see there why)

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _parse(source: str) -> tuple[str, ast.Module]:
    """A cell's code, its magics and shell lines made `pass` so that it parses as Python."""
    code = "\n".join("pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    return code, ast.parse(code)


def _is_show_source(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "show_source"


def listing_cells(notebook: Path) -> tuple[list[str], list[dict]]:
    """The notebook's import statements, and per cell that calls show_source: the reduced cell and its calls.

    A call must be a statement of its own at the top of its cell (not inside a loop, a function or an
    expression), so that what the reduced cell runs is what the notebook runs.
    """
    imports, cells = [], []
    for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        code, tree = _parse("".join(cell["source"]))
        imports += [ast.get_source_segment(code, s) for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        calls = [n for n in ast.walk(tree) if _is_show_source(n)]
        if not calls:
            continue
        top = [s.value for s in tree.body if isinstance(s, ast.Expr) and _is_show_source(s.value)]
        assert len(top) == len(calls), (
            f"{notebook.name} cell {index}: call show_source(...) as a statement of its own, at the top level of the "
            f"cell:\n{ast.unparse(tree)}")
        reduced = "\n".join(ast.get_source_segment(code, s) if isinstance(s, ast.Expr) and _is_show_source(s.value)
                            else "pass" for s in tree.body)
        cells.append({"index": index, "reduced": reduced, "calls": [ast.get_source_segment(code, c) for c in top],
                      "starts": [next((k.value.value for k in c.keywords if k.arg == "start"), None) for c in top]})
    return imports, cells


def _listing(output: dict) -> str | None:
    if output.get("output_type") not in ("display_data", "execute_result"):
        return None
    text = output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


@pytest.fixture(scope="module")
def executed():
    """One kernel runs, per notebook, its imports and then its reduced listing cells; outputs by notebook."""
    nb = nbformat.v4.new_notebook()
    where = []
    for notebook in NOTEBOOKS:
        imports, cells = listing_cells(notebook)
        if not cells:
            continue
        nb.cells.append(nbformat.v4.new_code_cell("\n".join(imports)))
        where.append((notebook.name, None))
        for cell in cells:
            nb.cells.append(nbformat.v4.new_code_cell(cell["reduced"]))
            where.append((notebook.name, cell))
    notebook_client(nb, timeout=240, kernel_name="python3", allow_errors=True,
                    resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    found: dict[str, list] = {}
    for (name, cell), run in zip(where, nb.cells):
        errors = [o for o in run.outputs if o.get("output_type") == "error"]
        assert not errors, f"{name}: {'its imports' if cell is None else 'cell ' + str(cell['index'])} failed: " \
                           f"{errors[0]['ename']}: {errors[0]['evalue']}\n{run.source}"
        if cell is not None:
            found.setdefault(name, []).append((cell, run.outputs))
    return found


def test_the_notebooks_call_show_source_often_enough_for_the_scan_to_mean_something():
    assert sum(len(listing_cells(nb)[1]) for nb in NOTEBOOKS) >= 50


@pytest.mark.parametrize("notebook", [nb.name for nb in NOTEBOOKS if listing_cells(nb)[1]])
def test_every_show_source_call_displays_its_listing(executed, notebook):
    problems = []
    for cell, outputs in executed[notebook]:
        listings = [t for t in map(_listing, outputs) if t is not None]
        label = f"cell {cell['index']} ({'; '.join(cell['calls'])})"
        if len(listings) != len(cell["calls"]):
            problems.append(f"{label}: {len(cell['calls'])} show_source call(s) displayed {len(listings)} listing(s); "
                            f"each call must show its code once, wherever it stands in the cell")
            continue
        for call, start, text in zip(cell["calls"], cell["starts"], listings):
            first = text.lstrip().splitlines()[0] if text.strip() else ""
            if start is not None and start not in first:
                problems.append(f"{label}: {call} should begin at {start!r}, shows {first!r}")
            if start is None and not first.startswith(("def ", "class ", "@", "async def ")):
                problems.append(f"{label}: {call} shows {first!r}, not a definition")
    assert not problems, f"{notebook}:\n" + "\n".join(problems)
