"""The README's Python examples run as printed, and its install instructions never name the unrelated PyPI `lmlib`."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.M | re.S)


def test_readme_has_python_examples():
    assert PYTHON_BLOCKS, "README.md has no ```python block: the library example is gone or its fence changed"


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_readme_python_block_runs(index, tmp_path):
    """Each block runs on its own in a fresh interpreter (as a reader would paste it), from an empty folder."""
    script = tmp_path / f"readme_block_{index}.py"
    script.write_text(PYTHON_BLOCKS[index], encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, (
        f"README.md python block {index + 1} failed (exit {result.returncode}):\n{PYTHON_BLOCKS[index]}\n"
        f"--- stderr (end) ---\n{result.stderr[-3000:]}")


def test_distribution_is_not_the_pypi_lmlib():
    """`lmlib` on PyPI is another project: the distribution has its own name and the README never installs it."""
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    name = re.search(r'^\[project\]\n(?:[^\[].*\n)*?name\s*=\s*"([^"]+)"', pyproject, flags=re.M).group(1)
    assert name != "lmlib", "pyproject.toml's [project] name is 'lmlib', which on PyPI is an unrelated project"
    assert not re.search(r"pip install\s+(-U\s+)?lmlib(\s|$|[=<>\[])", README), \
        "README.md tells readers to `pip install lmlib`, which installs an unrelated PyPI project"


def test_binder_link_is_not_the_unrelated_repository():
    assert "mybinder.org/v2/gh/lmlib/lmlib" not in README, \
        "README.md's Binder link points at github.com/lmlib/lmlib, an unrelated project"


@pytest.mark.parametrize("doc", ["README.md", "data/README.md"])
def test_every_dataset_is_listed_with_its_licence_and_citation(doc):
    """Both tables name each dataset lmlib can fetch, with the licence and citation its registry entry records."""
    from lmlib.data import DATASETS

    lines = (REPO / doc).read_text(encoding="utf-8").splitlines()
    for ds in DATASETS.values():
        rows = [line for line in lines if line.startswith(f"| **{ds.name}**")]
        assert len(rows) == 1, f"{doc} has {len(rows)} table rows for the dataset {ds.name!r}, not 1"
        assert ds.licence in rows[0], f"{doc}: the row for {ds.name!r} does not give its licence {ds.licence!r}"
        assert ds.citation in rows[0], f"{doc}: the row for {ds.name!r} does not give its citation {ds.citation!r}"


def test_licence_file_is_the_mit_licence_the_readme_names():
    licence = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n") and "Permission is hereby granted, free of charge" in licence, \
        "LICENSE is not the MIT licence, which README.md and pyproject.toml name"
    assert "Code: MIT" in README, "README.md no longer says the code is MIT-licensed"
    assert 'license = { text = "MIT" }' in (REPO / "pyproject.toml").read_text(encoding="utf-8")
