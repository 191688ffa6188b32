"""ruff, configured in pyproject.toml, over the package and its tests: part of the test run, not a separate step."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "lmlib", "tests"], cwd=REPO,
                         capture_output=True, text=True)
    assert "No module named ruff" not in run.stderr, "ruff is missing: pip install -r requirements.txt"
    assert run.returncode == 0, f"ruff check lmlib tests:\n{run.stdout}{run.stderr}"
