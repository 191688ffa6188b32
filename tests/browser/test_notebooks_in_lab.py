"""Every notebook, opened in JupyterLab in headless Chromium and run top to bottom, looks right to a student.

For each notebooks/*.ipynb (new notebooks are picked up automatically) the test opens a temporary copy in
JupyterLab, presses Run All, waits until the kernel is idle and every prompt is numbered, and asserts:

- the notebook has a kernelspec and opens without unsaved changes;
- no cell shows an error or stderr output;
- every plotly figure is drawn with a non-zero size, and each axis range contains its data without exceeding it
  by orders of magnitude (a log axis at most 2 decades beyond its data);
- every widget renders; every interactive view (interact, interactive_output, an Output beside controls) shows
  output, and moving each slider (ArrowRight on its handle) or pressing each button changes that output within
  a few seconds, with no error;
- every bertviz view draws its SVG;
- every image a markdown cell refers to (the diagrams in notebooks/figures/) is drawn: loaded (naturalWidth > 0)
  and visible;
- every show_source(...) call shows one syntax-highlighted source listing, wherever it stands in its cell;
- no request leaves 127.0.0.1 (all are routed; others are aborted and listed);
- the kernel asks the network for nothing: Lab runs in a Binder session's environment (binder/start, with the Hub
  variables taken out again so that a default download would be tried) and a watch in every kernel records and
  refuses any lookup or connection to another host (binder_session.py); tests/test_binder.py's own runs of
  notebooks 09-11 are then left out by the root conftest.py;
- no JavaScript error in the page, except the console messages listed in labdriver.TOLERATED_CONSOLE;
- no float artefacts (0.09999999999999999, 5.000000000000001) in output text or figure titles, also after the
  controls moved;
- widget labels are not cut off and text inputs show their whole default value;
- the kernel's peak memory (with its child processes, polled, or its own high-water mark recorded as it exits,
  whichever is larger) stays within 1.5 GB, as Binder's 2 GB needs;
- nbval's checks (lax mode) hold for this run (nbval_checks.py): no cell raised, and every cell tagged
  nbval-check-output shows its stored outputs after sanitizing. The root conftest.py then leaves out nbval's own
  run of the notebook, so each notebook is executed once.

Run time and peak memory per notebook go to tests/browser/artifacts/summary.json, a screenshot of every widget to
tests/browser/artifacts/<notebook>/.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from binder_session import LOG_VARIABLE, read_log, session_environment
from labdriver import REPO, LabPage, LabServer, MemoryMonitor, find_chromium, open_and_run, prepare_root
from nbval_checks import covered, nbval_problems

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("browser tests skipped: no Chromium found (install the 'chromium' package)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="browser tests skipped: the playwright package is not installed")
pytest.importorskip("psutil", reason="browser tests skipped: the psutil package is not installed")

from playwright.sync_api import sync_playwright  # noqa: E402

NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
PEAK_MEMORY_LIMIT_MB = 1536   # the teach preset promises each notebook under 1.5 GB

# Playwright must never fetch a browser of its own: it drives the system Chromium given by executable_path.
os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def lab():
    """One JupyterLab for the module, over a temporary copy of the notebooks; kernels in the teach preset."""
    with tempfile.TemporaryDirectory(prefix="lmlib-lab-") as tmp:
        tmp = Path(tmp)
        root = prepare_root(tmp)
        # Lab starts as Binder starts it, through binder/start, with the Hub variables taken out again and every
        # kernel watched (binder_session.py): a notebook that reaches for the network, or would download real
        # weights by default, is seen. The root conftest.py has set the data mirror and the teach preset in
        # os.environ; kernels inherit the server's environment. Results the notebooks record go to a scratch folder.
        env = {**session_environment(tmp), "TQDM_DISABLE": "1", "LMLIB_RESULTS_DIR": str(tmp / "results"),
               "PYTHONDONTWRITEBYTECODE": "1"}
        server = LabServer(root, tmp, env)
        server.network_log = Path(env[LOG_VARIABLE])
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    """JupyterLab loaded once in one page; each test opens its notebook there, as from the file browser."""
    page = LabPage(browser, lab)
    try:
        yield page
    finally:
        page.close()


def _record(name: str, entry: dict) -> None:
    """Add one notebook's numbers to artifacts/summary.json (rewritten atomically after every notebook)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / "summary.json"
    # Under pytest-xdist two workers record notebooks at once: the lock keeps one's entry from erasing the other's.
    with open(ARTIFACTS / "summary.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            summary = {}
        summary.setdefault("notebooks", {})[name] = entry
        summary["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        os.replace(tmp, path)


def _startup_problems(lab_page) -> list[str]:
    """Requests and console errors while JupyterLab itself loaded (reported once, with the first notebook)."""
    startup, lab_page.startup = lab_page.startup, None
    if startup is None:
        return []
    return ([f"a request left 127.0.0.1 while JupyterLab loaded: {u[:200]}" for u in startup.blocked_requests]
            + [f"console error while JupyterLab loaded: {m}" for m in startup.console_errors])


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_in_jupyterlab(notebook, lab, lab_page):
    problems = [f"before this notebook: {p}" for p in _startup_problems(lab_page)]
    metadata = json.loads((REPO / "notebooks" / notebook).read_text(encoding="utf-8")).get("metadata", {})
    if not metadata.get("kernelspec", {}).get("name"):
        problems.append("metadata: no kernelspec (JupyterLab asks the student to pick a kernel)")

    lab.shutdown_kernels()
    lab.network_log.unlink(missing_ok=True)
    started = time.perf_counter()
    with MemoryMonitor(lab.proc.pid) as memory:
        report = open_and_run(lab_page, notebook, ARTIFACTS / Path(notebook).stem, memory)
    lab.shutdown_kernels()   # the kernel records its own peak memory as it exits
    session = read_log(lab.network_log)
    report.peak_rss_mb = round(max(memory.peak, session.kernel_peak_bytes) / 2**20)
    problems += report.problems + session.problems()
    reference = json.loads((REPO / "notebooks" / notebook).read_text(encoding="utf-8"))
    if report.executed is not None and covered(reference):   # nbval's checks on this run (conftest.py skips its own)
        problems += [f"cell {cell}: {problem}" for cell, problem in nbval_problems(reference, report.executed)]
    for url in report.blocked_requests:
        problems.append(f"network: a request left 127.0.0.1 and was aborted: {url[:200]}")
    for message, count in Counter(report.console_errors).items():
        problems.append(f"javascript: console error{f' (x{count})' if count > 1 else ''}: {message}")
    if report.peak_rss_mb > PEAK_MEMORY_LIMIT_MB:
        problems.append(f"memory: the kernel peaked at {report.peak_rss_mb} MB, over {PEAK_MEMORY_LIMIT_MB} MB")

    _record(notebook, {
        "passed": not problems, "run_s": report.run_s, "open_s": report.open_s, "widgets_s": report.widgets_s,
        "total_s": round(time.perf_counter() - started, 1), "kernel_peak_rss_mb": report.peak_rss_mb,
        "polled_peak_rss_mb": round(memory.peak / 2**20),
        "kernel_high_water_mark_mb": round(session.kernel_peak_bytes / 2**20),
        "processes_at_peak": memory.at_peak,
        "figures": report.figures, "widget_views": report.widget_views, "interactions": report.interactions,
        "slowest_widget_response_s": report.slowest_response_s, "dirty_flag_on_open": report.dirty_on_open,
        "bertviz_views": report.bertviz_views, "images": report.images,
        "tolerated_console": dict(Counter(report.tolerated_console)),
        "problems": problems, "screenshots": report.screenshots,
    })
    assert not problems, f"{notebook}: {len(problems)} problem(s) a student would see:\n  - " + "\n  - ".join(problems)
