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


def _field(result: dict, dotted: str):
    """``result["a"]["b"]`` for ``"a.b"``; None where a level is missing."""
    value = result
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def refuse_another_checkpoint(name: str, recorded: str, loaded: str, rerun: str) -> None:
    """Raise unless the result ``name`` recorded the sha256 of the checkpoint loaded (``rerun``: how to rebuild it)."""
    if recorded != loaded:
        raise RuntimeError(f"{name}.json was measured with another checkpoint (sha256 {str(recorded)[:12]}…) than the "
                           f"one loaded ({loaded[:12]}…); rerun {rerun}")


def load_checked(name: str, sha256: str, *, sha_field: str = "checkpoint_sha256", recipe: dict | None = None,
                 recipe_field: str = "settings.recipe", rerun: str | None = None) -> dict:
    """:func:`load`, refusing a result that does not describe the checkpoint shipped today.

    A committed benchmark quotes the sha256 of the checkpoint it measured (at ``sha_field``, a dotted path such as
    ``"pretrained.sha256"``); a notebook passes the sha256 of the checkpoint it loaded, and a stale file raises
    instead of being shown beside a model it was never run on. With ``recipe``, the result's fine-tuning settings
    (at ``recipe_field``) must equal it as well. ``rerun`` names the script that rebuilds the file; by default the
    result's own ``command``.
    """
    result = load(name)
    how = rerun or _field(result, "command") or f"the script in tests/benchmarks/ that writes {name}.json"
    recorded = _field(result, sha_field)
    if recorded is None:
        raise KeyError(f"{name}.json has no checkpoint sha256 at {sha_field!r}; name the field that holds it")
    refuse_another_checkpoint(name, recorded, sha256, how)
    if recipe is not None and _field(result, recipe_field) != json.loads(json.dumps(recipe)):
        raise RuntimeError(f"{name}.json was run with other fine-tuning settings than the recipe's; rerun {how}")
    return result
