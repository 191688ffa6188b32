"""Settings for every pytest run, unit tests and notebooks alike (nbval starts each kernel with this environment).

It sits at the repository root so that `pytest notebooks/03_rnn_lstm.ipynb` gets the same settings as the full run.
"""

import json
import os

import pytest

# A from_pretrained call would otherwise wait ~30 s on the network before failing.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Notebooks are tested in the preset a class would run live.
os.environ.setdefault("LMLIB_PRESET", "teach")
# Progress bars are noise in stored outputs.
os.environ.setdefault("TQDM_DISABLE", "1")

# Beside a checkout laid out as in CI (../shared/data next to the repository), use that mirror by default.
_MIRROR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shared", "data")
if "LMLIB_DATA_DIR" not in os.environ and os.path.isfile(os.path.join(_MIRROR, "manifest.json")):
    os.environ["LMLIB_DATA_DIR"] = os.path.abspath(_MIRROR)


# With pytest-xdist (`-n 2 --dist loadgroup`, as pyproject.toml asks) each test file runs whole on one worker: a
# notebook's nbval cells share one kernel and must run in order, and a module's fixtures are built once. The
# exceptions are the JupyterLab browser test and the Binder sessions, whose notebooks are independent and long:
# they spread over the workers.
SPREAD_OVER_WORKERS = ("tests/browser/test_notebooks_in_lab.py", "tests/test_binder.py")

# pytest-xdist hands out the groups with the most tests first and the one-test groups last, those in collection
# order: the JupyterLab notebooks and the Binder sessions, the longest tests of the suite, end the run. Among them
# longest first (longest-processing-time-first, in the order of a fresh clone's `--durations`) keeps the two workers
# busy to the end instead of leaving one alone with a long notebook; the Lab notebooks stay together, so each worker
# runs its share back to back on one Lab server (a module fixture, about 12 s to start). Asking xdist to keep the
# collection order instead (--no-loadscope-reorder, Lab first) left a run hanging at its last two tests.
LAB = "tests/browser/test_notebooks_in_lab.py::test_notebook_in_jupyterlab["
BINDER = "tests/test_binder.py::test_notebook_in_a_binder_session_asks_the_hub_nothing_and_stays_within_memory["
LONGEST_FIRST = (*(f"{LAB}{name}.ipynb]" for name in (
                     "04_attention", "03_rnn_lstm", "07_ulmfit", "09_gpt", "10_bert", "05_transformer",
                     "11_transformer_xl_gpt2_gpt3", "08_elmo", "02_neural_lms_and_word2vec", "06_awd_lstm", "demos",
                     "01_ngrams", "12_comparison", "00_start_here")),
                 f"{BINDER}09_gpt]", f"{BINDER}11_transformer_xl_gpt2_gpt3]", f"{BINDER}10_bert]")


def _rank(nodeid: str) -> int:
    for rank, start in enumerate(LONGEST_FIRST):
        if nodeid == start or nodeid.startswith(start + "::"):
            return rank
    return len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    # On the workers xdist passes the mode as option.loadgroup (their own --dist is "no").
    if not getattr(config.option, "loadgroup", False) and getattr(config.option, "dist", "no") != "loadgroup":
        return
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path not in SPREAD_OVER_WORKERS and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(path))
    items.sort(key=lambda item: _rank(item.nodeid))  # stable: a group's items keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """On the controller, before anything runs: refuse when xdist could not group (nbval cells would be split)."""
    if node.config.getoption("dist", default="no") != "loadgroup":
        return
    ungrouped = [i for i in ids if "@" not in i and i.split("::", 1)[0] not in SPREAD_OVER_WORKERS]
    if ungrouped:
        pytest.exit(f"pytest-xdist's --dist loadgroup did not group {ungrouped[0]} (pytest {pytest.__version__}); "
                    "install the versions requirements.txt pins (pytest<9.2), or run with -p no:xdist", returncode=4)


# Each notebook is executed once: where the JupyterLab browser test runs a notebook (Chromium found, the test not
# deselected), it applies nbval's checks to that run (tests/browser/nbval_checks.py) and the Binder session's checks
# (no network, peak memory: its Lab server runs in that session's environment), and nbval's own run of the notebook
# and tests/test_binder.py's run of it are left out here. Without Chromium the browser module is skipped at
# collection, collects no test, and nbval and test_binder.py run their notebooks as before; `pytest
# notebooks/06_awd_lstm.ipynb` alone runs nbval too.
BROWSER_TEST = "tests/browser/test_notebooks_in_lab.py::test_notebook_in_jupyterlab["


class _OnceInLab:
    """A plugin of its own: its hook must run last (after -k and -m), the grouping hook above first."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        in_lab = {item.nodeid[len(BROWSER_TEST):-1] for item in items if item.nodeid.startswith(BROWSER_TEST)}
        if not in_lab:
            return
        root = os.path.dirname(os.path.abspath(__file__))
        from nbval_checks import covered  # tests/browser, on the path by pyproject.toml's pythonpath

        once = set()
        for name in in_lab:
            with open(os.path.join(root, "notebooks", name), encoding="utf-8") as fh:
                if covered(json.load(fh)):
                    once.add(f"notebooks/{name}")
        left_out = [item for item in items if item.nodeid.split("::", 1)[0] in once]
        # The Lab server runs in a Binder session's environment with every kernel watched (tests/browser/
        # binder_session.py): test_binder.py's plain-kernel sessions of the same notebooks are left out too.
        left_out += [item for item in items
                     if item.nodeid.startswith(BINDER) and f"{item.nodeid[len(BINDER):-1]}.ipynb" in in_lab]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            dropped = {id(item) for item in left_out}
            items[:] = [item for item in items if id(item) not in dropped]
            config.lmlib_checked_in_lab = sorted(once)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """Under xdist the workers collect: the controller reads which notebooks they left to the browser test."""
        in_lab = sorted(i[len(BROWSER_TEST):-1] for i in ids if i.startswith(BROWSER_TEST))
        by_nbval = {i.split("::", 1)[0] for i in ids if i.startswith("notebooks/")}
        node.config.lmlib_checked_in_lab = [f"notebooks/{n}" for n in in_lab if f"notebooks/{n}" not in by_nbval]

    def pytest_terminal_summary(self, terminalreporter, config):
        once = getattr(config, "lmlib_checked_in_lab", None)
        if once:
            terminalreporter.write_line(f"nbval's checks and the Binder session's (no network, peak memory) ran "
                                        f"inside the JupyterLab test's run of {len(once)} notebooks (each notebook "
                                        "executed once; see conftest.py)")


def pytest_configure(config):
    config.pluginmanager.register(_OnceInLab(), "lmlib-once-in-lab")
