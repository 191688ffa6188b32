"""The root conftest.py's schedule for `pytest -n 2 --dist loadgroup`: every test file is one xdist group except the
independent notebook runs, and among those one-test groups the longest come first (tested on stand-in items)."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest_under_test", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Item:
    def __init__(self, nodeid):
        self.nodeid, self.groups = nodeid, []

    def get_closest_marker(self, name):
        return self.groups[0] if name == "xdist_group" and self.groups else None

    def add_marker(self, marker):
        self.groups.append(marker)


def test_the_longest_groups_come_first_and_each_file_stays_together_in_order():
    conftest = _root_conftest()
    lab, binder = conftest.LAB, conftest.BINDER
    ids = ["notebooks/01_ngrams.ipynb::Cell 0", "notebooks/01_ngrams.ipynb::Cell 1", "tests/test_bert.py::test_a",
           f"{lab}00_start_here.ipynb]", f"{lab}03_rnn_lstm.ipynb]", "tests/test_binder.py::test_license",
           f"{binder}10_bert]", "tests/test_pretrain_cli.py::test_one", f"{lab}04_attention.ipynb]",
           "tests/test_pretrain_cli.py::test_two[gpt]", "tests/test_bert.py::test_b"]
    items = [Item(i) for i in ids]
    conftest.pytest_collection_modifyitems(SimpleNamespace(option=SimpleNamespace(dist="loadgroup")), items)
    assert [i.nodeid for i in items] == [  # the Lab notebooks together, longest first, then the Binder sessions
        f"{lab}04_attention.ipynb]", f"{lab}03_rnn_lstm.ipynb]", f"{lab}00_start_here.ipynb]", f"{binder}10_bert]",
        "notebooks/01_ngrams.ipynb::Cell 0", "notebooks/01_ngrams.ipynb::Cell 1", "tests/test_bert.py::test_a",
        "tests/test_binder.py::test_license", "tests/test_pretrain_cli.py::test_one",
        "tests/test_pretrain_cli.py::test_two[gpt]",
        "tests/test_bert.py::test_b"]
    groups = {i.nodeid: [m.args[0] for m in i.groups] for i in items}
    assert groups["notebooks/01_ngrams.ipynb::Cell 1"] == ["notebooks/01_ngrams.ipynb"]  # one kernel, in order
    assert groups["tests/test_pretrain_cli.py::test_two[gpt]"] == ["tests/test_pretrain_cli.py"]
    assert groups[f"{lab}04_attention.ipynb]"] == groups[f"{binder}10_bert]"] == []  # spread over the workers


@pytest.mark.parametrize("name", ["LAB", "BINDER"])
def test_every_named_long_test_exists(name):
    # A renamed test would silently lose its place at the front of the queue.
    conftest = _root_conftest()
    start = getattr(conftest, name)
    path, function = start.split("::")
    assert f"def {function.removesuffix('[')}(" in (ROOT / path).read_text()
    for entry in conftest.LONGEST_FIRST:
        if entry.startswith(start):
            param = entry[len(start):-1]
            assert (ROOT / "notebooks" / param).is_file() or (ROOT / "notebooks" / f"{param}.ipynb").is_file(), entry
    lab = [entry for entry in conftest.LONGEST_FIRST if entry.startswith(conftest.LAB)]
    assert conftest.LONGEST_FIRST[:len(lab)] == tuple(lab)  # every Lab notebook before any other group
    in_lab = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert {entry[len(conftest.LAB):-1] for entry in lab} == in_lab  # each named once, none missing


def test_without_loadgroup_nothing_is_grouped_or_moved():
    conftest = _root_conftest()
    items = [Item("tests/test_bert.py::test_a"), Item(f"{conftest.LAB}04_attention.ipynb]")]
    conftest.pytest_collection_modifyitems(SimpleNamespace(option=SimpleNamespace(dist="no")), items)
    assert [i.nodeid for i in items] == ["tests/test_bert.py::test_a", f"{conftest.LAB}04_attention.ipynb]"]
    assert not items[0].groups


def test_a_notebook_run_in_lab_is_not_run_again_by_nbval_or_in_a_plain_binder_kernel():
    """The JupyterLab test checks nbval's outputs and the Binder session's network and memory on its own run, so
    conftest.py leaves out nbval's run and tests/test_binder.py's run of the same notebook (and only those)."""
    import subprocess
    import sys

    from labdriver import find_chromium  # where the browser test looks for one

    if find_chromium() is None:
        pytest.skip("no Chromium: the browser test is skipped, and nbval and test_binder.py run the notebooks")
    pytest.importorskip("playwright.sync_api", reason="no playwright: the browser test is skipped")
    pytest.importorskip("psutil", reason="no psutil: the browser test is skipped")
    binder = "tests/test_binder.py::test_notebook_in_a_binder_session_asks_the_hub_nothing_and_stays_within_memory"
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                          "-k", "09_gpt or 10_bert or watch", "tests/browser/test_notebooks_in_lab.py",
                          "tests/test_binder.py", "notebooks/09_gpt.ipynb", "notebooks/10_bert.ipynb"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    collected = [line for line in run.stdout.splitlines() if "::" in line]
    assert sorted(collected) == [
        "tests/browser/test_notebooks_in_lab.py::test_notebook_in_jupyterlab[09_gpt.ipynb]",
        "tests/browser/test_notebooks_in_lab.py::test_notebook_in_jupyterlab[10_bert.ipynb]",
        "tests/test_binder.py::test_the_session_watch_refuses_and_records_a_lookup_and_leaves_the_jupyter_server_alone",
    ], run.stdout[-3000:] + run.stderr[-2000:]
    alone = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                            "-k", "09_gpt", "tests/test_binder.py"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert f"{binder}[09_gpt]" in alone.stdout, "without the Lab test, test_binder.py no longer runs notebook 09"
