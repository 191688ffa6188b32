"""ruff, configured in pyproject.toml, over the package, its tests and the notebooks' code cells: part of the test
run, not a separate step.

ruff reads .ipynb files itself (each code cell is linted; the cells of a notebook are one module, so an import in
the first cell used in the tenth is used). A finding that is a deliberate teaching pattern (an import or a variable
an exercise asks the student to use) carries a `# noqa: <code> (<reason>)` on its line.
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ["lmlib", "tests", "notebooks", "tools"]


def ruff(*args: str) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True)
    assert "No module named ruff" not in run.stderr, "ruff is missing: pip install -r requirements.txt"
    return run


def test_ruff_finds_nothing():
    run = ruff("check", "--no-cache", *CHECKED)
    assert run.returncode == 0, f"ruff check {' '.join(CHECKED)}:\n{run.stdout}{run.stderr}"


def test_ruff_reads_every_notebook():
    # A ruff before 0.6 (which read no .ipynb unless told), or an exclude with force-exclude in pyproject.toml,
    # would skip the notebooks and let the check above pass; seen failing with the latter.
    listed = {Path(line.strip()).resolve() for line in ruff("check", "--show-files", *CHECKED).stdout.splitlines()}
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert notebooks, "no notebooks found"
    missing = [nb.name for nb in notebooks if nb.resolve() not in listed]
    assert not missing, f"ruff does not check these notebooks: {missing}"
