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
