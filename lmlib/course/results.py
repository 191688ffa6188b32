"""The benchmark results committed with the course, read by name.

Long runs (a full-preset training, a comparison with a peer library) are scripts in
``tests/benchmarks/``; each writes ``tests/benchmarks/results/NAME.json``, and notebooks quote them
through :func:`load` instead of spelling out a path. The folder belongs to the repository, not to the
installed package: lmlib installed from the repository in editable mode (as ``requirements.txt`` does)
finds it; a copy installed without the repository has no results to read, and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[2] / "tests" / "benchmarks" / "results"


def results_dir() -> Path:
    """``tests/benchmarks/results`` of the repository lmlib was installed from."""
    if not RESULTS_DIR.is_dir():
        raise FileNotFoundError(
            f"no benchmark results at {RESULTS_DIR}: this lmlib is installed without its repository. Clone the "
            "repository and install it with `pip install -e .` (requirements.txt does) to read the committed results")
    return RESULTS_DIR


def available() -> list[str]:
    """The names :func:`load` accepts, sorted."""
    return sorted(path.stem for path in results_dir().glob("*.json"))


def load(name: str) -> dict:
    """The committed result ``tests/benchmarks/results/<name>.json``, e.g. ``load("translation_budget")``."""
    if not name or Path(name).name != name or name.endswith(".json"):
        raise ValueError(f"give a result's bare name, as in load('attention'), not a path or file name; got {name!r}")
    path = results_dir() / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark result named {name!r} in {results_dir()}; the results there are: "
                                f"{', '.join(available())}. Each is written by a script in tests/benchmarks/")
    return json.loads(path.read_text())
