"""The instructor's demo page, as the README serves it: `voila notebooks/demos.ipynb`, opened in headless Chromium.

Voilà runs the notebook in a kernel and shows only the outputs. The test asserts that the page finishes rendering
with no code and no error on it, that every view of notebooks/demos.ipynb is there (a rendered widget per code
cell that makes one, the plotly figures drawn, the bertviz views' SVG drawn, the type-your-own boxes present), that
typing the example in a type-your-own box changes its output, that a slider reached with the Tab key alone and
moved with the arrow keys changes the figure it drives, that axe-core finds no serious or critical WCAG 2.1 A/AA
violation on the page (a11y.py) once every figure is drawn, and that no request leaves 127.0.0.1.
(JupyterLab's plotly renderer shows an <img> without alt text while plotly.js draws a figure, and when it renders a
figure again it shows the PNG it cached from the first drawing, drawing the graph only when the pointer enters it.
On a busy machine (the whole suite, two workers) the STLR figure came back that way; the test waits for every figure,
passes the pointer over one still shown as its image, as a student's would, and says so in a warning. A figure that
draws neither way fails the test.)
(test_notebooks_in_lab.py runs the same notebook in JupyterLab and moves every control.)
Skipped when voila (requirements.txt), Chromium or playwright is missing.

Voilà once stalled here at "Executing N of 18" in 4 runs of 5: the views redrew with ``with output:
clear_output(wait=True); display(...)``, which nbclient (Voilà's executor) mirrors with a server-side Output widget
that sends on the kernel's shell socket without awaiting the send; the cell's execute_reply then went unseen and
Voilà, which sets no cell timeout, waited for it forever (the kernel idle, the reply read only when a timeout woke
the poll). The views now set their outputs with :func:`lmlib.course.type_your_own.show`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from pathlib import Path

import pytest
from a11y import audit
from labdriver import REPO, TYPED_BOXES, find_chromium, free_port, keep_local, prepare_root

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("browser tests skipped: no Chromium found (install the 'chromium' package)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="browser tests skipped: the playwright package is not installed")
pytest.importorskip("voila", reason="demo-mode test skipped: voila is not installed (pip install -r requirements.txt)")
from playwright.sync_api import sync_playwright  # noqa: E402
from test_notebooks_in_lab import CHROMIUM_ARGS  # noqa: E402

DEMOS = REPO / "notebooks" / "demos.ipynb"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
RENDER_TIMEOUT_S = 120
# Voilà's own page template (0.5.13) links Font Awesome's CSS from a CDN: offline only its icons are missing, and the
# demo views use none. Anything else leaving 127.0.0.1 fails the test.
KNOWN_OUTSIDE = ("cdn.jsdelivr.net/npm/@fortawesome/fontawesome-free",)
# Voilà 0.5.13 bundles JupyterLab 4.2 and loads the lab extensions installed beside it; jupytext's, built for Lab
# 4.6, fails to load there (it only adds file formats to Lab's file browser, which Voilà does not show).
KNOWN_CONSOLE = ("The getter for the shared module is not a function",)

# ipywidgets 8.1's slider handle (noUiSlider, role="slider") has no accessible name: the slider's description is a
# <label> the handle is not tied to. The widget is ipywidgets' own markup, so axe's rule is let through for it only.
IPYWIDGETS_A11Y = {"aria-input-field-name": "el.classList.contains('noUi-handle')"}

JS_PAGE = r"""() => {
  const drawn = el => { const r = el.getBoundingClientRect(); return r.width > 10 && r.height > 10; };
  return {
    loading: !!document.querySelector('#loading, .voila-spinner') && getComputedStyle(
      document.querySelector('#loading, .voila-spinner')).display !== 'none',
    code: Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputArea, .jp-InputArea-editor, .CodeMirror, .cm-editor')).filter(drawn).length,
    errors: Array.from(document.querySelectorAll(
      '[data-mime-type="application/vnd.jupyter.error"], [data-mime-type="application/vnd.jupyter.stderr"], .jp-RenderedText[data-mime-type*="stderr"]'))
      .map(e => e.innerText.slice(0, 500)),
    widgetErrors: Array.from(document.querySelectorAll('.jp-OutputArea-output'))
      .filter(o => /Error displaying widget|Error rendering|Javascript Error/.test(o.innerText)).length,
    widgets: Array.from(document.querySelectorAll('.jp-OutputArea-output > .jupyter-widgets, .jp-OutputArea-output > .widget-container, .jp-OutputArea-output > .lm-Widget.jupyter-widgets')).filter(drawn).length,
    plots: Array.from(document.querySelectorAll('.js-plotly-plot')).filter(drawn).length,
    // Lab's plotly renderer shows an <img> (no alt text) until plotly.js has drawn the figure, then hides it
    drawing: Array.from(document.querySelectorAll('.jp-RenderedPlotly')).filter(el => {
      const img = el.querySelector('img.plot-img');
      return !el.querySelector('.plot-container') || (img && getComputedStyle(img).display !== 'none'); }).length,
    // each plotly output: [drawn as a graph, its placeholder image shown, length of that image's data URL]
    plotlyState: Array.from(document.querySelectorAll('.jp-RenderedPlotly')).map(el => {
      const img = el.querySelector('img.plot-img');
      return [!!el.querySelector('.plot-container'), !!img && getComputedStyle(img).display !== 'none',
              img ? (img.getAttribute('src') || '').length : -1]; }),
    bertviz: Array.from(document.querySelectorAll('[id^="bertviz-"]')).filter(el => /^bertviz-[0-9a-f]+$/.test(el.id))
      .map(el => { const svg = el.querySelector('svg'); return svg ? svg.querySelectorAll('rect, path, line, text').length : 0; }),
    typed: Array.from(document.querySelectorAll('TYPED')).map(el => el.getAttribute('placeholder') || ''),
    headings: Array.from(document.querySelectorAll('h2')).map(h => h.innerText.replace(/¶/g, '').trim()),
    // the Output of each view (the redrawn part under its controls or typed box): one that draws nothing is empty
    emptyViews: Array.from(document.querySelectorAll('.jp-OutputArea-output .widget-vbox > .widget-output'))
      .filter(el => el.getBoundingClientRect().height < 5).length,
  };
}""".replace("TYPED", TYPED_BOXES)

JS_OUTPUT_OF_BOX = r"""(i) => {
  const box = document.querySelectorAll('TYPED')[i];
  const view = box.closest('.widget-vbox');
  const out = view && view.querySelector('.widget-output');
  return out ? out.innerText : null;
}""".replace("TYPED", TYPED_BOXES)


# The figure a slider drives: how many figures its view holds, and the first one's traces' data.
JS_FOCUSED_FIGURE = r"""() => {
  const handle = document.activeElement;
  if (!handle || !handle.classList.contains('noUi-handle')) return null;
  let view = handle.parentElement, plot = null;
  while (view && !plot) {   // the nearest box around the slider that holds a figure, within its cell's output
    plot = view.querySelector('.js-plotly-plot');
    if (view.classList.contains('jp-OutputArea-output')) break;
    view = view.parentElement;
  }
  return plot ? JSON.stringify({figures: view.querySelectorAll('.js-plotly-plot').length,
                                 data: (plot.data || []).map(t => [t.x, t.y])}) : null;
}"""


def _still_drawing(page, timeout_s: float) -> int:
    """How many plotly figures are not drawn yet, after waiting up to ``timeout_s`` for none."""
    deadline = time.time() + timeout_s
    while (drawing := page.evaluate(JS_PAGE)["drawing"]) and time.time() < deadline:
        page.wait_for_timeout(200)
    return drawing


def figures_drawn(page, timeout_s: float = 30, pointer_timeout_s: float = 15) -> list[str]:
    """Wait until every plotly figure on the page is drawn (a view redrawn by a control draws its figure anew); one
    still shown as plotly's cached image gets the pointer passed over it, which makes the renderer draw it (given
    ``pointer_timeout_s`` more)."""
    drawing = _still_drawing(page, timeout_s)
    cached = [i for i, (graph, shown, src) in enumerate(page.evaluate(JS_PAGE)["plotlyState"]) if shown and src > 0]
    for i in cached:  # the pointer onto the image (its mouseenter draws the graph, which then covers it)
        image = page.locator(".jp-RenderedPlotly").nth(i).locator("img.plot-img")
        image.scroll_into_view_if_needed()
        box = image.bounding_box()
        page.mouse.move(0, 0)
        if box:
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    if cached:
        drawing = _still_drawing(page, pointer_timeout_s)
        warnings.warn(f"{len(cached)} plotly figures were shown as the image plotly cached (no alt text) until the "
                      f"pointer passed over them; {'all' if not drawing else 'not all'} were then drawn", stacklevel=2)
    if not drawing:
        return []
    return [f"{drawing} plotly figures still not drawn after {timeout_s:g} s (each figure: [graph drawn, placeholder "
            f"image shown, its data URL's length]: {page.evaluate(JS_PAGE)['plotlyState']})"]


def keyboard_problems(page, max_tabs: int = 200) -> list[str]:
    """Tab from the top of the page to the first slider that drives a figure, press ArrowRight, see the figure change
    (redrawn in place: the view holds as many figures as before)."""
    page.locator("body").click(position={"x": 5, "y": 5})
    figure = None
    for _ in range(max_tabs):
        page.keyboard.press("Tab")
        figure = page.evaluate(JS_FOCUSED_FIGURE)
        if figure:
            break
    if not figure:
        return [f"{max_tabs} presses of Tab never reached a slider that drives a figure"]
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    after, deadline = figure, time.time() + 15
    while after == figure and time.time() < deadline:
        page.wait_for_timeout(200)
        after = page.evaluate(JS_FOCUSED_FIGURE)
    if not after or after == figure:
        return ["moving the focused slider with ArrowRight did not change its figure"]
    before, now = json.loads(figure)["figures"], json.loads(after)["figures"]
    return [] if now == before else [f"the slider's view holds {now} figures after a redraw, {before} before"]


def expected_views(notebook: dict) -> dict[str, int]:
    """What the demo page must show, counted from its code cells: widgets (one per call of a *_widget or *_box
    helper), bertviz views (gpt_attention_view, attention_pair_box's two) and type-your-own boxes."""
    code = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    boxes = sum(src.count("_box(") for src in code)
    return {"widgets": sum(src.count("_widget(") for src in code) + boxes,
            "bertviz": sum(src.count("attention_view(") for src in code) + 2 * sum(src.count("attention_pair_box(") for src in code),
            "typed": boxes,
            "headings": sum(1 for c in notebook["cells"] if c["cell_type"] == "markdown" and "\n## " in "\n" + "".join(c["source"]))}


def test_expected_views_counts_the_demo_cells():
    nb = {"cells": [{"cell_type": "code", "source": ["demos.stlr_widget()"]},
                    {"cell_type": "code", "source": ["demos.gpt_attention_view()"]},
                    {"cell_type": "code", "source": ["type_your_own.attention_pair_box()"]},
                    {"cell_type": "markdown", "source": ["## A title\n", "text"]}]}
    assert expected_views(nb) == {"widgets": 2, "bertviz": 3, "typed": 1, "headings": 1}


def test_a_plotly_figure_counts_as_drawing_until_its_placeholder_image_is_hidden():
    """The page check's ``drawing``: Lab's plotly renderer holds an <img> without alt text until plotly.js draws."""
    views = {"<div class='jp-RenderedPlotly'><img class='plot-img'></div>": 1,  # plotly.js still loading
             "<div class='jp-RenderedPlotly'><img class='plot-img'><div class='plot-container'></div></div>": 1,
             "<div class='jp-RenderedPlotly'><img class='plot-img' style='display:none'>"
             "<div class='plot-container'></div></div>": 0}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            for html, drawing in views.items():
                page.set_content(f"<html><body>{html}{html}</body></html>")
                assert page.evaluate(JS_PAGE)["drawing"] == 2 * drawing, html
        finally:
            browser.close()


PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
# plotly's renderer for a model that holds its cached PNG: the image, and the graph drawn when the pointer enters it
CACHED = (f"<div class='jp-RenderedPlotly' style='width:200px;height:100px'><img class='plot-img' src='{PNG}' "
          "style='width:200px;height:100px' onmouseenter=\"DRAW\"></div>")
DRAWS = ("const el = this.parentElement; this.style.display = 'none'; "
         "el.appendChild(Object.assign(document.createElement('div'), {className: 'plot-container'}));")


def test_a_figure_shown_as_its_cached_image_is_drawn_by_the_pointer_or_reported():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_content(f"<html><body>{CACHED.replace('DRAW', DRAWS)}</body></html>")
            with pytest.warns(UserWarning, match="1 plotly figures were shown as the image plotly cached"):
                assert figures_drawn(page, timeout_s=0.5) == []
            assert page.evaluate(JS_PAGE)["plotlyState"] == [[True, False, len(PNG)]]
            page.set_content(f"<html><body>{CACHED.replace('DRAW', '')}</body></html>")  # the pointer draws nothing
            with pytest.warns(UserWarning, match="not all were then drawn"):
                problems = figures_drawn(page, timeout_s=0.5, pointer_timeout_s=0.5)
            assert len(problems) == 1 and "1 plotly figures still not drawn" in problems[0]
        finally:
            browser.close()


@pytest.fixture(scope="module")
def voila_url():
    with tempfile.TemporaryDirectory(prefix="lmlib-voila-") as tmp:
        tmp = Path(tmp)
        root = prepare_root(tmp)
        # voila.json (read from the folder voila starts in, the repository root in the README) keeps JupyterLab-only
        # extensions out of the page: jupyterlab-slideshow and its fonts need Lab's main menu and document manager
        shutil.copy2(REPO / "voila.json", root / "voila.json")
        port = free_port()
        env = {**os.environ, "LMLIB_PRESET": os.environ.get("LMLIB_PRESET", "teach"), "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1", "LMLIB_RESULTS_DIR": str(tmp / "results"),
               "PYTHONDONTWRITEBYTECODE": "1"}
        log = open(tmp / "voila.log", "wb")
        # The README's command, with a fixed port and no browser.
        proc = subprocess.Popen([sys.executable, "-m", "voila", "notebooks/demos.ipynb", "--no-browser",
                                 f"--port={port}", "--Voila.ip=127.0.0.1"],
                                cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.time() + 60
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"voila exited with {proc.returncode}: {(tmp / 'voila.log').read_text()[-2000:]}")
                try:
                    urllib.request.urlopen(url + "voila/static/", timeout=2)
                except urllib.error.HTTPError:
                    break            # the server answers (a 403/404 for a folder is an answer)
                except OSError:
                    if time.time() > deadline:
                        pytest.fail("voila did not answer within 60 s")
                    time.sleep(0.5)
                else:
                    break
            yield url, tmp / "voila.log"
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
            (ARTIFACTS / "voila.log").write_bytes((tmp / "voila.log").read_bytes())


def test_voila_serves_the_demo_page_with_every_view(voila_url):
    url, log = voila_url
    want = expected_views(json.loads(DEMOS.read_text(encoding="utf-8")))
    blocked, console = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            keep_local(page, blocked)
            page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
            # Not "load": Voilà streams the page while the kernel runs it, and the load event came late or never
            # under a busy machine; the widgets on the page are what the test waits for.
            page.goto(url, wait_until="commit", timeout=60_000)
            deadline, state = time.time() + RENDER_TIMEOUT_S, None
            while time.time() < deadline:
                state = page.evaluate(JS_PAGE)
                if not state["loading"] and state["widgets"] >= want["widgets"] and not state["drawing"] and \
                        len([d for d in state["bertviz"] if d]) >= want["bertviz"]:
                    break
                page.wait_for_timeout(500)
            page.wait_for_timeout(1000)
            problems = figures_drawn(page)  # a figure shown as plotly's cached image is drawn before it is counted
            state = page.evaluate(JS_PAGE)
            if state["code"]:
                problems.append(f"{state['code']} code areas are visible (demo mode shows no code)")
            problems += [f"error output on the page: {e}" for e in state["errors"]]
            if state["widgetErrors"]:
                problems.append(f"{state['widgetErrors']} widgets failed to render")
            if state["widgets"] < want["widgets"]:
                problems.append(f"{state['widgets']} widgets drawn, {want['widgets']} expected")
            if len([d for d in state["bertviz"] if d]) < want["bertviz"]:
                problems.append(f"bertviz views drawn: {state['bertviz']}, {want['bertviz']} expected")
            if state["plots"] < 2:
                problems.append(f"{state['plots']} plotly figures drawn (STLR and sampling make one each)")
            if len(state["typed"]) != want["typed"]:
                problems.append(f"{len(state['typed'])} type-your-own boxes, {want['typed']} expected")
            if state["emptyViews"]:
                problems.append(f"{state['emptyViews']} views draw nothing under their controls")
            if len(state["headings"]) != want["headings"]:
                problems.append(f"{len(state['headings'])} section titles shown, {want['headings']} expected")
            # Typing reaches the kernel and back: the first box (the tokenizers) with its example.
            if state["typed"]:
                before = page.evaluate(JS_OUTPUT_OF_BOX, 0)
                box = page.locator(TYPED_BOXES).nth(0)
                box.fill(state["typed"][0])
                box.press("Enter")
                after, wait_until = before, time.time() + 15
                while after == before and time.time() < wait_until:
                    page.wait_for_timeout(200)
                    after = page.evaluate(JS_OUTPUT_OF_BOX, 0)
                if not after or after == before:
                    problems.append("typing the example into the first type-your-own box did not change its output")
                elif "⚠" in after:
                    problems.append(f"the first box shows a message instead of a result: {after[:300]}")
            problems += keyboard_problems(page)
            problems += figures_drawn(page)  # the audit reads the page as a student sees it once it has drawn
            problems += audit(page, known=IPYWIDGETS_A11Y)
            page.screenshot(path=str(ARTIFACTS / "voila_demos.png"), full_page=True)
        finally:
            browser.close()
    problems += [f"a request left 127.0.0.1 and was aborted: {u[:200]}" for u in blocked
                 if not any(known in u for known in KNOWN_OUTSIDE)]
    problems += [f"javascript console error: {m[:300]}" for m in console
                 if "net::ERR_FAILED" not in m and "status of 404" not in m and not any(k in m for k in KNOWN_CONSOLE)]
    assert not problems, "the Voilà demo page:\n  - " + "\n  - ".join(problems) + f"\n(voila's log: {ARTIFACTS / 'voila.log'})"
