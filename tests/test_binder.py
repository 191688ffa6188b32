"""Binder: the image installs what the notebooks need and no test tools, its data fetch survives a dropped request,
and a session started by binder/start asks the Hugging Face Hub for nothing and keeps notebooks 09-11 within 1.5 GB.

Binder reaches the internet and gives a session 2 GB. Real GPT-2 or BERT-base weights alone take a kernel to about
1.5 GB, so two things keep them out: the notebooks download them only when the student asks, and binder/start sets
the Hub offline. Each has its own check here, so that either one failing is seen even while the other still holds.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import binder_session  # tests/browser: shared with the JupyterLab test, which runs in this session
import pytest
from binder_session import HUB_VARIABLES, start_environment
from labdriver import MemoryMonitor  # the browser test's measure: the kernel and its children, polled
from notebook_client import notebook_client

REPO = Path(__file__).resolve().parents[1]
BINDER = REPO / "binder"
PEAK_MEMORY_LIMIT_MB = 1536  # the teach preset's promise, as in tests/browser: Binder gives 2 GB
SET_BY_START = (*HUB_VARIABLES, "LMLIB_PRESET", "LMLIB_REAL_WEIGHTS")
TEST_ONLY = ("pytest", "nbval", "ruff", "playwright", "jupytext", "nltk", "gensim", "scikit-learn")


def test_binder_start_sets_the_teach_preset_and_the_hub_offline():
    base = {k: v for k, v in os.environ.items() if k not in SET_BY_START}
    env = start_environment(base)
    for variable in HUB_VARIABLES:
        assert env.get(variable) == "1", f"binder/start does not set {variable}=1: a Binder session could download " \
                                         f"real GPT-2/BERT weights (about 1.5 GB of memory on their own)"
    assert env.get("LMLIB_PRESET") == "teach", "binder/start does not choose the teach preset"
    assert "LMLIB_REAL_WEIGHTS" not in env, "binder/start asks for real weights"
    assert start_environment({**base, "LMLIB_PRESET": "full"})["LMLIB_PRESET"] == "full", \
        "binder/start overrides a preset the user chose"


# ---------------------------------------------------------------------------------------------------------------
# The image: requirements-course.txt for Binder, requirements.txt for everything.

def _requirement_names(path: Path) -> list[str]:
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.append(re.match(r"[A-Za-z0-9_.\-]+", line).group(0).lower())
    return names


def test_binder_installs_the_course_requirements_without_test_tools():
    post_build = (BINDER / "postBuild").read_text(encoding="utf-8")
    assert "-r requirements-course.txt" in post_build, "binder/postBuild does not install requirements-course.txt"
    assert "-r requirements.txt" not in post_build, "binder/postBuild installs requirements.txt, test tools and all"
    course = _requirement_names(REPO / "requirements-course.txt")
    assert not set(course) & set(TEST_ONLY), f"requirements-course.txt names test-only packages: " \
                                             f"{sorted(set(course) & set(TEST_ONLY))}"
    assert "-e ." in (REPO / "requirements-course.txt").read_text(encoding="utf-8"), "the course file lost `-e .`"
    full = (REPO / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^-r requirements-course\.txt$", full, flags=re.M), \
        "requirements.txt no longer includes requirements-course.txt: `pip install -r requirements.txt` would " \
        "not install the notebooks' own packages"
    missing = [name for name in TEST_ONLY if name not in _requirement_names(REPO / "requirements.txt")]
    assert not missing, f"requirements.txt no longer installs {missing}, which the tests use"


def _installed_closure(names: list[str]) -> set[str]:
    """The distributions `names` pull in, read from this environment's installed metadata."""
    seen, todo = set(), list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0))
    return seen


def test_the_course_requirements_cover_every_module_the_notebooks_load():
    """Every third-party module loaded by the notebooks' imports (and what those import in turn) comes from
    requirements-course.txt or what it pulls in. Peer libraries that only the tests import may stay out."""
    import ast
    import json

    imports = set()
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                code = "\n".join(line for line in "".join(cell["source"]).splitlines()
                                 if not line.lstrip().startswith(("%", "!")))
                imports |= {ast.unparse(node) for node in ast.walk(ast.parse(code))
                            if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "level", 0) == 0}
    script = "\n".join(sorted(imports)) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, f"the notebooks' imports fail: {run.stderr[-1000:]}"
    loaded = {name.split(".")[0] for name in json.loads(run.stdout.strip().splitlines()[-1])}
    closure = _installed_closure(_requirement_names(REPO / "requirements-course.txt"))
    providers = metadata.packages_distributions()
    missing = sorted(f"{module} ({', '.join(providers[module])})" for module in loaded
                     if module in providers and module not in sys.stdlib_module_names and module != "lmlib"
                     and not any(re.sub(r"[-_.]+", "-", d).lower() in closure for d in providers[module]))
    assert not missing, f"the notebooks load modules that Binder does not install (requirements-course.txt): {missing}"


# ---------------------------------------------------------------------------------------------------------------
# The data fetch: retried with growing waits; a source that keeps failing is named.

def _fetch_data_module():
    spec = importlib.util.spec_from_file_location("binder_fetch_data", BINDER / "fetch_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_data_fetch_tries_again_after_a_dropped_request(monkeypatch, tmp_path, capsys):
    from lmlib import data

    fetch_data, tries, waits = _fetch_data_module(), [], []
    monkeypatch.setenv("LMLIB_DATA_DIR", str(tmp_path))

    def flaky(files, root):
        tries.append([f.path for f in files])
        if len(tries) < 3:
            raise data.DataError(f"could not download {files[0].url}: timed out")
        for f in files:
            (root / f.path).parent.mkdir(parents=True, exist_ok=True)
            (root / f.path).write_bytes(b"")

    monkeypatch.setattr(data, "fetch", flaky)
    monkeypatch.setattr(data, "verify", lambda file, root: root / file.path)
    assert fetch_data.fetch_all(["tinyshakespeare"], sleep=waits.append) == 0
    assert tries == [["tinyshakespeare/input.txt"]] * 3 and waits == [10, 30]
    out = capsys.readouterr().out
    assert "try 1 of 4 failed" in out and "tinyshakespeare: every file in place and verified" in out


def test_data_fetch_that_keeps_failing_names_the_dataset_and_its_source(monkeypatch, tmp_path, capsys):
    from lmlib import data

    fetch_data, waits = _fetch_data_module(), []
    monkeypatch.setenv("LMLIB_DATA_DIR", str(tmp_path))

    def down(files, root):
        raise data.DataError(f"could not download {files[0].url}: HTTP Error 503")

    monkeypatch.setattr(data, "fetch", down)
    assert fetch_data.fetch_all(["tinyshakespeare", "ptb"], sleep=waits.append) == 1
    assert waits == [10, 30, 90], "the waits between tries do not grow as documented (10, 30, 90 s)"
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1, errors
    assert errors[0].startswith("error: dataset 'tinyshakespeare' could not be fetched from karpathy/char-rnn "
                                "after 4 tries: could not download https://raw.githubusercontent.com/karpathy/"), errors[0]


# ---------------------------------------------------------------------------------------------------------------
# Notebooks 09-11 in a Binder session: no request to the Hub, peak memory within 1.5 GB. Where the JupyterLab browser
# test runs (Chromium found), it starts its Lab server with this same session environment and checks every notebook
# so, and the root conftest.py leaves these plain-kernel runs out: each notebook is executed once.

def test_the_session_watch_refuses_and_records_a_lookup_and_leaves_the_jupyter_server_alone(tmp_path):
    env = binder_session.session_environment(tmp_path)
    assert env["LMLIB_PRESET"] == os.environ.get("LMLIB_PRESET", "teach")
    assert not set(binder_session.HUB_VARIABLES) & set(env), "the session keeps the Hub offline: a download by " \
                                                             "default would not be seen"
    probe = "import socket\ntry:\n    socket.getaddrinfo('huggingface.co', 443)\nexcept OSError as e:\n    print(e)"
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert "network access refused by the tests' Binder session" in run.stdout, run.stdout + run.stderr
    lines = (tmp_path / "network.log").read_text(encoding="utf-8").splitlines()
    assert [line.split(" ", 2)[1] for line in lines] == ["watching", "refused", "peak_rss_bytes"], lines
    assert lines[1].endswith("refused socket.getaddrinfo 'huggingface.co'") and int(lines[2].split()[2]) > 2**20
    (tmp_path / "network.log").unlink()
    server = subprocess.run([sys.executable, "-m", "jupyter", "--version"], env=env, capture_output=True, timeout=60)
    assert server.returncode == 0 and not (tmp_path / "network.log").exists(), "the Jupyter server was watched"
    log = binder_session.read_log(tmp_path / "network.log")
    assert log.problems() == ["network: no kernel was watched (the session's sitecustomize did not run in the "
                              "kernel), so the network and memory checks prove nothing"]


def test_a_session_log_names_every_problem(tmp_path):
    (tmp_path / "network.log").write_text("7 watching -m ipykernel_launcher -f\n8 watching -c import\n"
                                          "7 refused socket.getaddrinfo 'huggingface.co'\n8 peak_rss_bytes 99\n"
                                          "9 watching -m ipykernel_launcher -f\n9 peak_rss_bytes 5000\n",
                                          encoding="utf-8")
    log = binder_session.read_log(tmp_path / "network.log")
    assert (log.kernels, log.kernel_peak_bytes, log.kernels_without_peak) == ([7, 9], 5000, [7])
    assert log.problems() == ["network: the kernel reached for the network in a Binder session: "
                              "socket.getaddrinfo 'huggingface.co'",
                              "memory: kernel 7 exited without recording its peak memory (killed rather than shut "
                              "down?)"]


@pytest.mark.notebook_runs
@pytest.mark.parametrize("notebook", ["09_gpt", "10_bert", "11_transformer_xl_gpt2_gpt3"])
def test_notebook_in_a_binder_session_asks_the_hub_nothing_and_stays_within_memory(notebook, tmp_path):
    import nbformat

    env = {**binder_session.session_environment(tmp_path), "LMLIB_RESULTS_DIR": str(tmp_path / "results"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    nb = nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", as_version=4)
    client = notebook_client(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(REPO / "notebooks")}})
    with MemoryMonitor(os.getpid()) as memory:
        client.execute(env=env)
    log = binder_session.read_log(tmp_path / "network.log")
    assert not log.problems(), f"{notebook} in a Binder session: {log.problems()}"
    peak_mb = round(max(log.kernel_peak_bytes, memory.peak) / 2**20)
    print(f"{notebook}: peak {peak_mb} MB (kernel high-water mark {log.kernel_peak_bytes / 2**20:.0f} MB, "
          f"polled {memory.peak / 2**20:.0f} MB)")
    assert peak_mb <= PEAK_MEMORY_LIMIT_MB, f"{notebook} peaked at {peak_mb} MB in a Binder session, over " \
                                            f"{PEAK_MEMORY_LIMIT_MB} MB (Binder gives 2 GB)"
