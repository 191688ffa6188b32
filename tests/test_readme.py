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


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def test_binder_launch_link_is_one_badge_line_a_course_edits_once():
    lines = [line for line in README.splitlines() if "mybinder.org/v2/gh/" in line]
    assert len(lines) == 1, f"README.md gives the Binder address {len(lines)} times: a course should edit one line"
    assert lines[0].startswith("[![") and "/OWNER/REPO/" in lines[0], \
        "the Binder address is not a badge line with the OWNER/REPO placeholder"
    target = re.search(r"urlpath=lab/tree/(\S+?)\)", lines[0]).group(1)
    assert (REPO / target).is_file(), f"the Binder badge opens {target}, which does not exist"


def test_setup_counts_its_commands_and_launches_lab_from_the_repository_root():
    setup = _section("Set up and run")
    blocks = [b for b in re.findall(r"^```bash\n(.*?)^```", setup, flags=re.M | re.S) if "pip install" in b]
    prose = " ".join(setup.split())
    assert "two commands on every system" in prose, "README.md's set-up no longer says two commands on every system"
    assert len(blocks) == 1, f"README.md's set-up has {len(blocks)} install blocks, not one"
    commands = [line for line in blocks[0].splitlines() if line.strip()]
    assert len(commands) == 2 and "pip install -r requirements.txt" in commands[0] and "jupyter lab" in commands[1], \
        f"the set-up block is not the two commands (install, then JupyterLab): {commands}"
    assert "download.pytorch.org" not in blocks[0], "the CPU-wheel line is a download saving, not a set-up step"
    launches = re.findall(r"jupyter lab[^\n`]*", README)
    assert launches and all("--notebook-dir=." in line for line in launches), \
        f"a `jupyter lab` line does not serve the repository root (--notebook-dir=.): {launches}"
    run = subprocess.run([sys.executable, "-m", "jupyterlab", "--help-all"], capture_output=True, text=True, timeout=120)
    assert "--notebook-dir" in run.stdout, "this JupyterLab no longer knows --notebook-dir"
    assert "python -m ipykernel install --user --name lmlib" in setup, "the named-kernel line for global Jupyter is gone"


def test_readme_counts_the_shipped_checkpoints():
    shipped = len(list((REPO / "lmlib" / "pretrained").rglob("*.safetensors")))
    words = {4: "Four", 5: "Five", 6: "Six"}
    assert f"{words[shipped]} small checkpoints ship with the course" in README, \
        f"{shipped} checkpoints ship in lmlib/pretrained/, and README.md counts them otherwise"


def test_the_readme_test_commands_name_paths_that_exist():
    commands = re.findall(r"`(\.venv/bin/python -m pytest[^`]*)`", README)
    assert any("-m \"not notebook_runs\"" in c and ".ipynb" in c for c in commands), "the quick test command is gone"
    for command in commands:
        for path in re.findall(r"\s((?:tests|notebooks)/\S*)", command):
            assert (REPO / path).exists(), f"README.md's `{command}` names {path}, which does not exist"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"notebook_runs:' in pyproject, "the quick command deselects the marker notebook_runs, which is not registered"


def test_the_readme_pretrain_options_exist():
    """Every option written after `lmlib pretrain` in the README is one `python -m lmlib pretrain --help` lists."""
    options = {o for line in README.splitlines() if "lmlib pretrain" in line
               for o in re.findall(r"(--[a-z][a-z0-9-]*)", line.split("lmlib pretrain", 1)[1])}
    assert {"--device", "--bf16", "--out", "--preset"} <= options, f"the README's pretrain lines changed: {options}"
    run = subprocess.run([sys.executable, "-m", "lmlib", "pretrain", "--help"], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    unknown = sorted(o for o in options if not re.search(rf"{re.escape(o)}\b", run.stdout))
    assert not unknown, f"README.md uses pretrain options that `python -m lmlib pretrain --help` does not list: {unknown}"


def test_citation_file_matches_the_package():
    yaml = pytest.importorskip("yaml")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version = "([^"]+)"', pyproject, flags=re.M).group(1)
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert citation["version"] == version, f"CITATION.cff gives version {citation['version']}, pyproject {version}"
    assert citation["license"] == "MIT" and citation["authors"] and citation["title"].startswith("lmlib")
    assert "CITATION.cff" in _section("How to cite"), "README.md does not point at CITATION.cff"
