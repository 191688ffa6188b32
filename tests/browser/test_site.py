"""The course website (tools/build_site.py), built as the README says and opened page by page in headless Chromium.

The module builds the site once into a temporary folder with the README's command, serves it on 127.0.0.1 with a
small static server and opens every page of it. A page fails if it logs a JavaScript or console error, a plotly
figure draws nothing (a ``.js-plotly-plot`` without ``.main-svg``, or a stored figure with no plot at all), a bertviz
view has no SVG drawing, an image is broken (naturalWidth 0) or missing (an SVG diagram the notebook shows), a math
element is left untypeset, a widget view is missing or shows its plain-text stand-in, or the launch link is not the
README's Binder address for that notebook; the test fails if any request leaves 127.0.0.1 (every other request is
recorded, and fails inside the browser, whose resolver knows no other host). One notebook page is also opened from
disk (file://), as a class without a server would. The site's navigation must follow the course order and its search must find a word.
``test_the_checks_catch_a_broken_page`` shows each check firing on a page broken on purpose.

Every page is also audited by axe-core (a11y.py: WCAG 2.1 A/AA, no serious or critical violation), and every slide
deck (slides/<notebook>.html, reveal.js) is opened, checked like a page, stepped through to its last slide and
fragment (its slide count must be the one its notebook's slide metadata gives), must carry speaker notes, and is
audited too. A page with an image without alt text and a low-contrast paragraph shows the audit firing.

Skipped, with the reason, without Chromium, playwright or the site's packages (requirements.txt).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest
from labdriver import REPO, find_chromium

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("browser tests skipped: no Chromium found (install the 'chromium' package)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="browser tests skipped: the playwright package is not installed")
for _module in ("sphinx", "myst_nb", "sphinx_book_theme", "mathjax"):
    pytest.importorskip(_module, reason=f"site test skipped: {_module} is not installed (pip install -r requirements.txt)")
pytest.importorskip("axe_playwright_python", reason="site test skipped: axe-playwright-python is not installed "
                                                    "(pip install -r requirements.txt)")
from a11y import audit  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from test_notebooks_in_lab import CHROMIUM_ARGS  # noqa: E402

# No host resolves but 127.0.0.1 (the site's server): a request to anywhere else fails inside the browser.
SITE_ARGS = [*CHROMIUM_ARGS, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]

_spec = importlib.util.spec_from_file_location("build_site", REPO / "tools" / "build_site.py")
build_site = importlib.util.module_from_spec(_spec)
sys.modules["build_site"] = build_site   # dataclasses look their module up there
_spec.loader.exec_module(build_site)

BUILD_TIMEOUT_S = 300
SETTLE_TIMEOUT_MS = 30_000   # figures, attention views and math have this long to draw on a busy machine
FROM_DISK = "06_awd_lstm"     # figures, a widget, math and a diagram: the page opened from disk as well

# Everything a page can show wrongly, read from the page once it has settled.
JS_INSPECT = r"""() => {
  const bertviz = Array.from(document.querySelectorAll('[id^="bertviz-"]')).filter(el => /^bertviz-[0-9a-f]+$/.test(el.id));
  return {
    storedFigures: document.querySelectorAll('script.lmlib-plotly-json').length,
    plotDivs: document.querySelectorAll('.lmlib-plotly').length,
    undrawnFigures: Array.from(document.querySelectorAll('.lmlib-plotly')).filter(
      el => !el.classList.contains('js-plotly-plot') || !el.querySelector('.main-svg')).map(el => el.id),
    emptyPlots: Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => !el.querySelector('.main-svg')).length,
    bertviz: bertviz.map(el => ({id: el.id, drawn: el.querySelector('svg') ?
      el.querySelector('svg').querySelectorAll('rect, path, line, text').length : 0})),
    images: Array.from(document.images).map(img => ({src: img.getAttribute('src'), complete: img.complete,
      width: img.naturalWidth})),
    math: document.querySelectorAll('.math').length,
    untypeset: Array.from(document.querySelectorAll('.math')).filter(el => !el.querySelector('mjx-container'))
      .map(el => el.textContent.slice(0, 80)),
    widgets: document.querySelectorAll('.lmlib-widget').length,
    widgetStandIns: Array.from(document.querySelectorAll('.cell_output')).filter(
      el => /\b[VH]Box\(children=|IntSlider\(value=|FloatSlider\(value=|Output\(\)/.test(el.innerText)).length,
    binder: Array.from(document.querySelectorAll('a[href*="mybinder.org"]')).map(a => a.href),
    nav: Array.from(document.querySelectorAll('.bd-sidebar-primary nav.bd-links a.reference')).map(a => a.getAttribute('href')),
  };
}"""

# Settled: every stored figure drawn, every attention view drawn, MathJax done (or given up: the checks then say so).
JS_SETTLED = r"""() => {
  const figures = document.querySelectorAll('script.lmlib-plotly-json').length;
  const drawn = document.querySelectorAll('.lmlib-plotly .main-svg').length;
  const views = Array.from(document.querySelectorAll('[id^="bertviz-"]')).filter(el => /^bertviz-[0-9a-f]+$/.test(el.id));
  const viewsDrawn = views.every(el => el.querySelector('svg rect, svg path, svg line, svg text'));
  const mathDone = !document.querySelector('.math') || (window.MathJax && window.MathJax.startup &&
    window.MathJax.startup.document && document.querySelectorAll('.math mjx-container').length ===
    document.querySelectorAll('.math').length);
  const images = Array.from(document.images).every(img => img.complete);
  return drawn >= figures && viewsDrawn && mathDone && images;
}"""


def _notebook_expectations(path: Path) -> dict:
    """What the page of one committed notebook must show: its widget views and the images its markdown shows."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    widgets = sum(1 for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
                  if build_site.WIDGET_VIEW_MIME in o.get("data", {}))
    images = [Path(m).name for c in nb["cells"] if c["cell_type"] == "markdown"
              for m in re.findall(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)", "".join(c["source"]))]
    return {"widgets": widgets, "images": images}


class Pages:
    """One Chromium context; every request not to the site's own server (or file://, data:, blob:) is recorded, and
    console errors and uncaught exceptions are recorded for the page being checked.

    The browser is launched with SITE_ARGS, whose resolver finds no host but 127.0.0.1, so a request elsewhere fails
    in the browser without reaching the network. Requests are watched, not intercepted: interception (playwright's
    route) turns Chromium's cache off, and every page would load and compile plotly.js and MathJax afresh."""

    def __init__(self, browser, base: str):
        self.base, self.blocked, self.errors = base, [], []
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.context.on("request", self._request)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text[:300]}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {str(e)[:300]}"))

    def _request(self, request):
        url = request.url
        parts = urllib.parse.urlsplit(url)
        if not (parts.scheme in ("data", "blob", "file") or (parts.hostname == "127.0.0.1" and url.startswith(self.base))):
            self.blocked.append(url)

    def open(self, url: str, settle_ms: int = SETTLE_TIMEOUT_MS) -> tuple[dict, list[str], list[str]]:
        """(what the page shows, its errors, the requests it made to anywhere but the site)."""
        self.errors, self.blocked = [], []
        self.page.goto(url, wait_until="load", timeout=60_000)
        try:
            self.page.wait_for_function(JS_SETTLED, timeout=settle_ms, polling=100)
        except Exception:   # not settled in time: the inspection below says what is missing
            pass
        return self.page.evaluate(JS_INSPECT), list(self.errors), list(self.blocked)


def page_problems(found: dict, errors: list[str], blocked: list[str]) -> list[str]:
    """Everything wrong on one page, whatever page it is."""
    problems = [f"JavaScript error: {e}" for e in errors]
    problems += [f"a request left 127.0.0.1 (stopped in the browser): {u[:200]}" for u in blocked]
    if found["undrawnFigures"] or found["plotDivs"] < found["storedFigures"]:
        problems.append(f"{len(found['undrawnFigures'])} of {found['storedFigures']} plotly figures drew nothing: "
                        f"{found['undrawnFigures'][:5]}")
    if found["emptyPlots"]:
        problems.append(f"{found['emptyPlots']} .js-plotly-plot elements have no .main-svg")
    problems += [f"bertviz view {v['id']} drew no SVG" for v in found["bertviz"] if not v["drawn"]]
    problems += [f"broken image {i['src']} (naturalWidth 0)" for i in found["images"] if i["width"] == 0]
    if found["untypeset"]:
        problems.append(f"{len(found['untypeset'])} of {found['math']} math elements not typeset, e.g. "
                        f"{found['untypeset'][0]!r}")
    if found["widgetStandIns"]:
        problems.append(f"{found['widgetStandIns']} outputs show a widget's plain-text stand-in instead of the widget")
    return problems


def notebook_problems(found: dict, notebook: Path, launch: str) -> list[str]:
    """What a notebook page must show beyond any page: its widget views, its diagrams, its launch link."""
    want = _notebook_expectations(notebook)
    problems = []
    if found["widgets"] != want["widgets"]:
        problems.append(f"{found['widgets']} widget views shown, the notebook stores {want['widgets']}")
    shown = {Path(urllib.parse.urlsplit(i["src"] or "").path).name for i in found["images"] if i["width"]}
    problems += [f"the image {name} of the notebook's markdown is not on the page" for name in want["images"]
                 if name not in shown]
    if launch not in found["binder"]:
        problems.append(f"no launch link to {launch} (Binder links: {found['binder'][:3]})")
    problems += [f"a Binder link that is not this notebook's: {u}" for u in found["binder"] if u != launch]
    return problems


@pytest.fixture(scope="module")
def site():
    """The site built by the README's command into a temporary folder: (folder, seconds the build took)."""
    with tempfile.TemporaryDirectory(prefix="lmlib-site-test-") as tmp:
        out = Path(tmp) / "_site"
        start = time.perf_counter()
        run = subprocess.run([sys.executable, str(REPO / "tools" / "build_site.py"), "--out", str(out), "--quiet"],
                             cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        assert run.returncode == 0, f"tools/build_site.py failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        yield out, time.perf_counter() - start, run.stdout


@pytest.fixture(scope="module")
def server(site):
    with build_site.serve(site[0]) as base:
        yield base


@pytest.fixture(scope="module")
def pages(server):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=SITE_ARGS)
        try:
            yield Pages(browser, server)
        finally:
            browser.close()


def _html_pages(out: Path) -> list[str]:
    """Every page but the slide decks (test_every_deck_... opens those)."""
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html")
                  if not p.relative_to(out).parts[0].startswith("_") and p.relative_to(out).parts[0] != "slides")


SEARCH = ("search.html", "perplexity")   # the search page is opened with this query


@pytest.fixture(scope="module")
def visits(site, pages):
    """Every page of the site opened once: {page: (what it shows, its errors, its requests elsewhere)}."""
    seen = {}
    for name in _html_pages(site[0]):
        url = pages.base + name + (f"?q={SEARCH[1]}" if name == SEARCH[0] else "")
        found, errors, blocked = pages.open(url)
        if name == SEARCH[0]:
            try:   # the results come once the search index has loaded
                pages.page.wait_for_selector("#search-results ul.search li", timeout=SETTLE_TIMEOUT_MS)
            except Exception:
                pass
            found["searchHits"] = pages.page.locator("#search-results ul.search li a").evaluate_all(
                "as => as.map(a => a.getAttribute('href'))")
            errors, blocked = errors + pages.errors[len(errors):], blocked + pages.blocked[len(blocked):]
        found["axe"] = audit(pages.page)
        seen[name] = (found, errors, blocked)
    return seen


def test_every_page_is_drawn_with_nothing_from_outside(site, visits):
    out, seconds, _ = site
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    base = build_site.binder_base(readme)[0]
    notebooks = {f"notebooks/{p.stem}.html": p for p in build_site.course_notebooks(REPO / "notebooks")}
    assert set(notebooks) <= set(visits), f"notebook pages missing: {sorted(set(notebooks) - set(visits))}"
    failures, totals = {}, {"figures": 0, "bertviz": 0, "math": 0, "widgets": 0, "images": 0}
    for name, (found, errors, blocked) in visits.items():
        problems = page_problems(found, errors, blocked)
        if name in notebooks:
            problems += notebook_problems(found, notebooks[name], build_site.launch_url(base, notebooks[name].name))
        if problems:
            failures[name] = problems
        totals["figures"] += found["storedFigures"]
        totals["bertviz"] += len(found["bertviz"])
        totals["math"] += found["math"]
        totals["widgets"] += found["widgets"]
        totals["images"] += len(found["images"])
    print(f"site built in {seconds:.1f} s; {len(visits)} pages: {totals}")
    assert not failures, "the course website:\n" + "\n".join(
        f"  {name}:\n" + "\n".join(f"    - {p}" for p in problems) for name, problems in failures.items())
    # the course really is there: figures, attention views, math and widgets, not empty pages that pass every check
    assert totals["figures"] >= 40 and totals["bertviz"] >= 4 and totals["math"] >= 200 and totals["widgets"] >= 20, totals


def test_every_page_passes_the_accessibility_audit(visits):
    failures = {name: found["axe"] for name, (found, _, _) in visits.items() if found["axe"]}
    assert not failures, "axe-core (WCAG 2.1 A/AA, serious or critical):\n" + "\n".join(
        f"  {name}:\n" + "\n".join(f"    - {p}" for p in problems) for name, problems in failures.items())


def test_every_notebook_has_instructor_notes_and_a_questionnaire_with_answers_apart(site):
    """(Each of these pages is opened, checked and audited with every other page by the tests above.)"""
    lecture = build_site_lecture()
    content = lecture.load_content()
    for notebook in build_site.course_notebooks(REPO / "notebooks"):
        if notebook.stem == "demos":
            continue
        stem = notebook.stem
        assert notebook.name in content, f"tools/lecture/content.json has no questionnaire for {notebook.name}"
        assert 8 <= len(content[notebook.name]["questions"]) <= 12, f"{notebook.name}: not 8-12 questions"
        for kind in ("instructors", "questions", "answers"):
            assert (site[0] / kind / f"{stem}.html").is_file(), f"no {kind} page for {notebook.name}"
        answers = [a for _, a in content[notebook.name]["questions"]]
        questions_page = (site[0] / "questions" / f"{stem}.html").read_text(encoding="utf-8")
        answers_page = (site[0] / "answers" / f"{stem}.html").read_text(encoding="utf-8")
        assert f"../answers/{stem}.html" in questions_page, f"questions/{stem}.html does not link its answers"
        shown = [a for a in answers if html_text(a)[:40] in html_text(questions_page)]
        assert not shown, f"questions/{stem}.html shows answers: {shown[:2]}"
        assert all(html_text(a)[:40] in html_text(answers_page) for a in answers), f"answers/{stem}.html lacks answers"
        notes = (site[0] / "instructors" / f"{stem}.html").read_text(encoding="utf-8")
        for section in ("The hour", "Run these live", "Predict, then run", "The slips the exercises catch",
                        "With no internet in the room"):
            assert section in notes, f"instructors/{stem}.html has no section {section!r}"
    # the hour's minutes are the timings file's, computed from the notebooks' stored runs
    timings = lecture.load_timings()
    for name, timing in timings.items():
        assert sum(timing["minutes"]) == lecture.HOUR_MIN - lecture.QUESTIONS_MIN, name
        assert timing["minutes"] == lecture.hour_plan(timing), f"{name}: minutes not computed from its timings"


def build_site_lecture():
    sys.path.insert(0, str(REPO / "tools"))
    import lecture
    return lecture


def html_text(text: str) -> str:
    """Text without tags and escapes, quotes made straight (Sphinx curls them): page text and content.json compare."""
    import html as _html
    text = _html.unescape(re.sub(r"<[^>]+>", " ", text)).replace("\\", "")
    return re.sub(r"\s+", " ", text.translate(str.maketrans("‘’“”", "''\"\""))).strip()


def expected_slides(notebook: Path) -> int:
    """How many slides (reveal.js counts each subslide) the notebook's slide metadata asks for."""
    types = [c.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
             for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]]
    shown = [t for t in types if t != "skip"]
    return sum(t in ("slide", "subslide") for t in shown) + (1 if shown and shown[0] not in ("slide", "subslide") else 0)


JS_DECK_READY = r"""() => window.Reveal && window.Reveal.isReady() &&
  (!document.querySelector('.math') || (window.MathJax && window.MathJax.startup && window.MathJax.startup.document &&
   document.querySelectorAll('.math mjx-container').length === document.querySelectorAll('.math').length)) &&
  document.querySelectorAll('.lmlib-plotly .main-svg').length >= document.querySelectorAll('script.lmlib-plotly-json').length"""

# Step through the whole deck with reveal.js's own navigation (next: the next fragment, else the next slide),
# letting the page run between steps; record each slide shown and any slide that shows nothing.
JS_DECK_WALK = r"""async () => {
  const R = window.Reveal, seen = new Set(), empty = [];
  R.slide(0, 0, -1);
  for (let step = 0; step < 5000; step++) {
    const i = R.getIndices(), slide = R.getCurrentSlide();
    seen.add(i.h + '.' + (i.v || 0));
    if (!slide.innerText.trim() && !slide.querySelector('img, svg, .lmlib-plotly')) empty.push(i.h + '.' + (i.v || 0));
    if (R.isLastSlide() && !R.availableFragments().next) break;
    R.next();
    await new Promise(r => setTimeout(r, 0));
  }
  return {total: R.getTotalSlides(), seen: seen.size, empty: empty, last: R.isLastSlide(),
          notes: document.querySelectorAll('aside.notes').length, notesPlugin: R.hasPlugin('notes'),
          fragments: document.querySelectorAll('.reveal .fragment').length};
}"""


def test_every_deck_advances_to_its_end_offline_with_notes_and_passes_the_audit(site, pages):
    failures, totals = {}, {"decks": 0, "slides": 0, "notes": 0, "fragments": 0}
    for notebook in build_site.course_notebooks(REPO / "notebooks"):
        name = f"slides/{notebook.stem}.html"
        assert (site[0] / name).is_file(), f"the site has no deck {name}"
        pages.errors, pages.blocked = [], []
        pages.page.goto(pages.base + name, wait_until="load", timeout=60_000)
        try:
            pages.page.wait_for_function(JS_DECK_READY, timeout=SETTLE_TIMEOUT_MS, polling=100)
        except Exception:   # the checks below say what is missing
            pass
        found = pages.page.evaluate(JS_INSPECT)
        walk = pages.page.evaluate(JS_DECK_WALK) if pages.page.evaluate("() => !!window.Reveal") else None
        problems = page_problems(found, list(pages.errors), list(pages.blocked))
        if walk is None:
            problems.append("reveal.js did not load")
        else:
            want = expected_slides(notebook)
            if walk["total"] != want:
                problems.append(f"{walk['total']} slides, the notebook's slide metadata gives {want}")
            if walk["seen"] != walk["total"] or not walk["last"]:
                problems.append(f"stepping through reached {walk['seen']} of {walk['total']} slides")
            if walk["empty"]:
                problems.append(f"slides showing nothing: {walk['empty'][:5]}")
            if not walk["notesPlugin"] or not walk["notes"]:
                problems.append(f"no speaker notes (plugin loaded: {walk['notesPlugin']}, notes: {walk['notes']})")
            totals["slides"] += walk["total"]
            totals["notes"] += walk["notes"]
            totals["fragments"] += walk["fragments"]
        problems += audit(pages.page)
        totals["decks"] += 1
        if problems:
            failures[name] = problems
    print(f"decks: {totals}")
    assert not failures, "the slide decks:\n" + "\n".join(
        f"  {name}:\n" + "\n".join(f"    - {p}" for p in problems) for name, problems in failures.items())
    assert totals["slides"] >= 300 and totals["notes"] >= 14 and totals["fragments"] >= 1, totals


def test_navigation_follows_the_course_order_and_search_finds_a_word(visits):
    expected = [f"notebooks/{p.stem}.html" for p in build_site.course_notebooks(REPO / "notebooks")]
    shown = [href.split("#")[0] for href in visits["index.html"][0]["nav"] if href.startswith("notebooks/")]
    assert shown == expected, f"the sidebar lists the notebooks as {shown}, not in the course order {expected}"
    hits = visits[SEARCH[0]][0]["searchHits"]
    assert any("01_ngrams" in h for h in hits), f"searching {SEARCH[1]!r} did not find notebook 01: {hits}"


def test_a_notebook_page_opened_from_disk_draws_everything(site, pages):
    """A classroom without a server opens _site/ from disk: scripts, figures, math and images work over file://."""
    out = site[0]
    found, errors, blocked = pages.open((out / "notebooks" / f"{FROM_DISK}.html").as_uri())
    problems = page_problems(found, errors, blocked)
    assert found["storedFigures"] and found["math"] and found["images"] and found["widgets"], found
    assert not problems, f"notebooks/{FROM_DISK}.html opened from disk:\n  - " + "\n  - ".join(problems)


BROKEN_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="_static/lmlib-site.js" defer></script>
<script src="https://cdn.example.org/lib.js"></script></head><body>
<div class="lmlib-plotly" id="lmlib-plotly-broken-1"></div>
<script type="application/json" class="lmlib-plotly-json" data-target="lmlib-plotly-broken-1">{"data": [], "layout": {}}</script>
<div id="bertviz-0123abcd"><svg></svg></div>
<img src="_images/no_such_figure.svg" alt="missing">
<span class="math notranslate nohighlight">\\(x^2\\)</span>
<div class="cell_output"><pre>VBox(children=(IntSlider(value=3),))</pre></div>
</body></html>"""


INACCESSIBLE_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>inaccessible</title></head>
<body><main><h1>A page that fails the audit</h1><img src="_static/lmlib-none.svg" width="10" height="10">
<p style="color: #bbbbbb; background: #ffffff">light grey text on white, 1.9:1</p></main></body></html>"""


def test_the_checks_catch_a_broken_page(site, pages):
    """Each check fires: plotly.js missing (the figure stays undrawn and the site script throws), an empty bertviz
    view, a broken image, math with no MathJax, a widget's plain-text stand-in, a request to another host, and a
    notebook page without its widget, diagram and launch link."""
    out = site[0]
    (out / "broken_on_purpose.html").write_text(BROKEN_PAGE, encoding="utf-8")
    try:
        found, errors, blocked = pages.open(pages.base + "broken_on_purpose.html", settle_ms=3000)
    finally:
        (out / "broken_on_purpose.html").unlink()
    problems = "\n".join(page_problems(found, errors, blocked))
    for expected in ("JavaScript error", "plotly.min.js did not load", "left 127.0.0.1", "plotly figures drew nothing",
                     "bertviz view bertviz-0123abcd drew no SVG", "broken image _images/no_such_figure.svg",
                     "math elements not typeset", "plain-text stand-in"):
        assert expected in problems, f"the check for {expected!r} did not fire:\n{problems}"
    notebook = REPO / "notebooks" / "06_awd_lstm.ipynb"
    missing = "\n".join(notebook_problems(found, notebook, "https://mybinder.org/v2/gh/O/R/HEAD?urlpath=x"))
    # the accessibility audit: an image without a text alternative, a paragraph in light grey on white
    (out / "inaccessible_on_purpose.html").write_text(INACCESSIBLE_PAGE, encoding="utf-8")
    try:
        pages.open(pages.base + "inaccessible_on_purpose.html", settle_ms=1000)
        found_axe = "\n".join(audit(pages.page))
    finally:
        (out / "inaccessible_on_purpose.html").unlink()
    for expected in ("image-alt", "color-contrast"):
        assert expected in found_axe, f"the audit did not report {expected}:\n{found_axe}"
    # on a real notebook page, where the colour rules run on a sample, a low-contrast line inside a listing is found
    pages.open(pages.base + "notebooks/03_rnn_lstm.html")
    pages.page.evaluate("""() => document.querySelector('.cell_output pre, div.highlight pre').insertAdjacentHTML(
        'beforeend', '<span style="color: #d0d0d0; font-size: 9px">faint</span>')""")
    found_axe = "\n".join(audit(pages.page))
    assert "color-contrast" in found_axe, f"the sampled audit missed a faint line on a notebook page:\n{found_axe}"
    for expected in ("widget views shown", "awd_lstm_dropouts.svg", "no launch link"):
        assert expected in missing, f"the check for {expected!r} did not fire:\n{missing}"
