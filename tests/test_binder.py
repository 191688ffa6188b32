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

import pytest

REPO = Path(__file__).resolve().parents[1]
BINDER = REPO / "binder"
PEAK_MEMORY_LIMIT_MB = 1536  # the teach preset's promise, as in tests/browser: Binder gives 2 GB
HUB_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
SET_BY_START = (*HUB_VARIABLES, "LMLIB_PRESET", "LMLIB_REAL_WEIGHTS")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
TEST_ONLY = ("pytest", "nbval", "ruff", "playwright", "jupytext", "nltk", "gensim", "scikit-learn")


def start_environment(base: dict[str, str]) -> dict[str, str]:
    """The environment binder/start hands to the process it starts (it ends with `exec "$@"`)."""
    run = subprocess.run(["bash", str(BINDER / "start"), "env", "-0"], env=base, capture_output=True, timeout=30)
    assert run.returncode == 0, f"binder/start failed: {run.stderr.decode()[-500:]}"
    return dict(entry.split("=", 1) for entry in run.stdout.decode().split("\0") if "=" in entry)


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
# Notebooks 09-11 in a Binder session: no request to the Hub, peak memory within 1.5 GB.

# Put first on the kernel's PYTHONPATH: an audit hook that records and refuses every network lookup or connection
# that is not to this machine (the kernel's own channels are ZeroMQ sockets on 127.0.0.1, outside Python's socket
# module). A download needs a name lookup first, so even a machine without internet sees the attempt.
SITECUSTOMIZE = '''
import os
import sys

_LOG = os.environ["LMLIB_TEST_NETWORK_LOG"]
_LOCAL = {None, "", "localhost", "127.0.0.1", "::1", "0.0.0.0", b"localhost", b"127.0.0.1", b"::1"}


def _refuse(what):
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(what + "\\n")
    raise OSError(f"network access refused by tests/test_binder.py: {what}")


def _hook(event, args):
    if event in ("socket.getaddrinfo", "socket.gethostbyname") and args[0] not in _LOCAL:
        _refuse(f"{event} {args[0]!r}")
    elif event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in _LOCAL:
        _refuse(f"{event} {args[1]!r}")


sys.addaudithook(_hook)
'''

# Run after the notebook's own cells: one lookup of the Hub, which the hook must record (else the hook never ran and
# the check above proves nothing), then the kernel's own peak resident memory, which polling could miss.
LAST_CELL = """import resource as _resource, socket as _socket, sys as _sys
try:
    _socket.getaddrinfo("huggingface.co", 443)
except OSError:
    pass
print("LMLIB_PEAK_RSS_BYTES", _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss * (1 if _sys.platform == "darwin" else 1024))
"""
PROBE = "socket.getaddrinfo 'huggingface.co'"


@pytest.fixture(scope="module")
def session_environment(tmp_path_factory):
    """binder/start's environment, as Binder starts Lab with it, plus the recording hook. The Hub variables it
    sets are then taken out again, so that a notebook that would download by default is seen trying (binder/start
    setting them is the first test's business); proxies are dropped so any request resolves its own host."""
    tmp = tmp_path_factory.mktemp("binder")
    (tmp / "hook").mkdir()
    (tmp / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if k not in SET_BY_START + PROXY_VARIABLES}
    env = start_environment(base)
    for variable in HUB_VARIABLES:
        env.pop(variable, None)
    env.update(PYTHONPATH=os.pathsep.join([str(tmp / "hook"), *filter(None, [env.get("PYTHONPATH")])]),
               LMLIB_RESULTS_DIR=str(tmp / "results"), PYTHONDONTWRITEBYTECODE="1")
    return tmp, env


@pytest.mark.notebook_runs
@pytest.mark.parametrize("notebook", ["09_gpt", "10_bert", "11_transformer_xl_gpt2_gpt3"])
def test_notebook_in_a_binder_session_asks_the_hub_nothing_and_stays_within_memory(notebook, session_environment):
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(REPO / "tests" / "browser"))
    try:
        from labdriver import MemoryMonitor  # the browser test's measure: the kernel and its children, polled
    finally:
        sys.path.remove(str(REPO / "tests" / "browser"))
    tmp, env = session_environment
    log = tmp / f"{notebook}.network.log"
    env = {**env, "LMLIB_TEST_NETWORK_LOG": str(log)}
    nb = nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(LAST_CELL))
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(REPO / "notebooks")}})
    with MemoryMonitor(os.getpid()) as memory:
        client.execute(env=env)
    requests = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    assert requests[-1:] == [PROBE], f"the network hook did not run in {notebook}'s kernel (log: {requests})"
    assert not requests[:-1], f"{notebook} reached for the network in a Binder session: {requests[:-1]}"
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    kernel_peak = int(re.search(r"LMLIB_PEAK_RSS_BYTES (\d+)", printed).group(1))
    peak_mb = round(max(kernel_peak, memory.peak) / 2**20)
    print(f"{notebook}: peak {peak_mb} MB (kernel high-water mark {kernel_peak / 2**20:.0f} MB, polled {memory.peak / 2**20:.0f} MB)")
    assert peak_mb <= PEAK_MEMORY_LIMIT_MB, f"{notebook} peaked at {peak_mb} MB in a Binder session, over " \
                                            f"{PEAK_MEMORY_LIMIT_MB} MB (Binder gives 2 GB)"
