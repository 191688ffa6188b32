"""A notebook shown live as slides in the JupyterLab that requirements install (jupyterlab-slideshow), in headless
Chromium: its cells run, the slides follow the notebook's slide metadata, and a widget on a slide answers the keyboard.

The test opens a temporary copy of notebooks/00_start_here.ipynb in JupyterLab, runs it, starts the slideshow from
the first cell and steps forward through the slides: each step must show the next cell whose slide type is "slide"
(the metadata tools/slides.py writes). Then it goes down the subslides of the section that holds the temperature
widget until the widget is on screen, reaches its slider with the Tab key alone, moves it with the arrow key and
waits for the sample under it to change (the kernel runs behind the slide). No request may leave 127.0.0.1 and no
console error may appear (labdriver.TOLERATED_CONSOLE aside).

Why jupyterlab-slideshow and not jupyterlab-rise: RISE for JupyterLab (0.43.1, the newest) ships its own copy of
JupyterLab 4.3, in which the ipywidgets 8 manager fails to load ("Shared module @jupyterlab/console doesn't exist");
jupyterlab-slideshow presents the notebook inside the running JupyterLab, so widgets work as in the notebook.
Skipped without Chromium, playwright or the extension (requirements-course.txt).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from labdriver import REPO, TOLERATED_CONSOLE, LabServer, find_chromium, keep_local, prepare_root

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("browser tests skipped: no Chromium found (install the 'chromium' package)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="browser tests skipped: the playwright package is not installed")
pytest.importorskip("jupyterlab_slideshow", reason="live slides skipped: jupyterlab-slideshow is not installed "
                                                   "(pip install -r requirements.txt)")
from playwright.sync_api import sync_playwright  # noqa: E402
from test_notebooks_in_lab import CHROMIUM_ARGS  # noqa: E402

NOTEBOOK = "00_start_here.ipynb"
WIDGET = "widgets.interact("   # the code of the cell whose slider the test moves

JS_VISIBLE = """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map((c, i) => {
  const r = c.getBoundingClientRect(), s = getComputedStyle(c);
  return (r.width > 0 && r.height > 0 && s.display !== 'none' && s.visibility !== 'hidden'
          && r.bottom > 0 && r.top < window.innerHeight) ? i : -1; }).filter(i => i >= 0)"""
JS_IDLE = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle'; }"""
JS_RAN = """() => { const w = window.jupyterapp.shell.currentWidget, k = w.sessionContext.session.kernel;
  const prompts = Array.from(w.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')).map(p => p.textContent);
  return k.status === 'idle' && prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p)); }"""


def _types(nb: dict) -> list[str]:
    return [c.get("metadata", {}).get("slideshow", {}).get("slide_type", "-") for c in nb["cells"]]


@pytest.fixture(scope="module")
def lab():
    with tempfile.TemporaryDirectory(prefix="lmlib-slides-") as tmp:
        tmp = Path(tmp)
        root = prepare_root(tmp)
        env = {**os.environ, "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1", "LMLIB_RESULTS_DIR": str(tmp / "results"),
               "LMLIB_PRESET": os.environ.get("LMLIB_PRESET", "teach"), "PYTHONDONTWRITEBYTECODE": "1"}
        server = LabServer(root, tmp, env)
        try:
            yield server
        finally:
            server.stop()


def test_a_notebook_runs_as_live_slides_and_its_widget_answers_the_keyboard(lab):
    nb = json.loads((REPO / "notebooks" / NOTEBOOK).read_text(encoding="utf-8"))
    types = _types(nb)
    slides = [i for i, t in enumerate(types) if t == "slide"]
    widget = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and WIDGET in "".join(c["source"]))
    section = max(i for i in slides if i < widget)
    problems, blocked, console = [], [], []
    started = time.perf_counter()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            keep_local(page, blocked)
            page.on("console", lambda m: console.append(m.text[:300]) if m.type == "error" and not any(
                pattern.search(m.text) for pattern, _ in TOLERATED_CONSOLE) else None)
            page.on("pageerror", lambda e: console.append(f"uncaught: {str(e)[:300]}"))
            page.goto(f"{lab.url}/lab/tree/notebooks/{NOTEBOOK}?reset", timeout=90_000)
            page.wait_for_function(JS_IDLE, timeout=90_000, polling=250)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_timeout(1000)
            page.wait_for_function(JS_RAN, timeout=120_000, polling=250)
            page.evaluate("() => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = 0;"
                          " return window.jupyterapp.commands.execute('deck:start'); }")
            page.wait_for_timeout(1000)

            # forward: one slide (a "slide" cell and what continues it) per step, in the notebook's order
            shown = [page.evaluate(JS_VISIBLE)]
            for _ in slides[1:]:
                page.evaluate("() => window.jupyterapp.commands.execute('deck:forward')")
                page.wait_for_timeout(300)
                shown.append(page.evaluate(JS_VISIBLE))
            firsts = [s[0] if s else None for s in shown]
            if firsts != slides:
                problems.append(f"stepping forward showed the cells {firsts}, the slide metadata starts slides at {slides}")
            if any(i in s for s in shown for i, t in enumerate(types) if t == "skip"):
                problems.append("a cell marked skip is on a slide")

            # back to the widget's section, then down its subslides until the widget is on screen
            for _ in range(len(slides)):
                if page.evaluate(JS_VISIBLE)[:1] == [section]:
                    break
                page.evaluate("() => window.jupyterapp.commands.execute('deck:back')")
                page.wait_for_timeout(200)
            for _ in range(widget - section + 1):
                if widget in page.evaluate(JS_VISIBLE):
                    break
                page.evaluate("() => window.jupyterapp.commands.execute('deck:down')")
                page.wait_for_timeout(300)
            if widget not in page.evaluate(JS_VISIBLE):
                problems.append(f"going down from slide {section} never showed the widget's cell {widget}")
            else:
                cell = page.locator(".jp-Notebook .jp-Cell").nth(widget)
                output = cell.locator(".widget-output, .jp-OutputArea-child").last
                before = output.inner_text()
                # reach the slider with Tab alone, as a keyboard user would
                page.locator(".jp-Notebook").first.focus()
                for _ in range(40):
                    page.keyboard.press("Tab")
                    if page.evaluate("() => !!document.activeElement && document.activeElement.classList.contains"
                                     "('noUi-handle')"):
                        break
                focused = page.evaluate("() => document.activeElement.closest('.jp-Cell') === "
                                        f"document.querySelectorAll('.jp-Notebook .jp-Cell')[{widget}] && "
                                        "document.activeElement.classList.contains('noUi-handle')")
                if not focused:
                    problems.append("Tab never reached the slider on the widget's slide")
                else:
                    value = page.evaluate("() => document.activeElement.getAttribute('aria-valuenow')")
                    page.keyboard.press("ArrowRight")
                    after, deadline = before, time.time() + 15
                    while after == before and time.time() < deadline:
                        page.wait_for_timeout(200)
                        after = output.inner_text()
                    moved = page.evaluate("() => document.activeElement.getAttribute('aria-valuenow')")
                    if moved == value:
                        problems.append(f"ArrowRight left the slider at {value}")
                    if after == before:
                        problems.append("moving the slider on the slide did not change the sample under it in 15 s")
                shots = Path(__file__).parent / "artifacts"
                shots.mkdir(exist_ok=True)
                page.screenshot(path=str(shots / "live_slide_widget.png"))
        finally:
            browser.close()
    problems += [f"a request left 127.0.0.1 (aborted): {u[:200]}" for u in blocked]
    problems += [f"console error: {m}" for m in console]
    print(f"live slides: {len(slides)} slides stepped through, widget moved, {time.perf_counter() - started:.0f} s")
    assert not problems, f"{NOTEBOOK} as live slides:\n  - " + "\n  - ".join(problems)
