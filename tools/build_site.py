"""Build the course website from the committed notebooks and their stored outputs: no notebook runs.

    .venv/bin/python tools/build_site.py            # writes _site/; open _site/index.html from disk or any static host

The engine is Jupyter Book 1's, without its command-line wrapper: Sphinx with myst-nb (notebooks and their stored
outputs) and sphinx-book-theme (the book's navigation in course order, search, a "launch on Binder" button and a
download button on each page). Settings: ``tools/site/conf.py``. This script

* stages the notebooks (00-12, then demos) and ``notebooks/figures/`` into a temporary source folder, with an index
  page made from the README's opening paragraph and its notebook table;
* turns the outputs no notebook builder renders by itself into HTML: each plotly figure (stored as
  ``application/vnd.plotly.v1+json``) becomes an empty ``<div>`` and its JSON, drawn on the page by the local
  plotly.js (``tools/site/static/lmlib-site.js``); each ipywidgets view becomes its stored state in HTML (the
  controls as they were after the run, disabled, and each Output widget's stored outputs, figures included), with a
  note that the controls run live in JupyterLab or on Binder. bertviz views are HTML with their own scripts
  (``lmlib.course.attention_views`` inlines d3 and jQuery) and pass through as stored;
* adds a "launch on Binder" link at the top of each notebook page, with the address of the README's badge line
  (the one place a course writes its ``OWNER/REPO``);
* copies plotly.js (from the plotly wheel) and MathJax 3 (from the django-static-mathjax wheel) into ``_static/``,
  so no page loads anything from another host;
* puts the original notebooks into ``_sources/`` for the theme's download button.

``tests/browser/test_site.py`` builds the site, opens every page in headless Chromium and fails on a JavaScript
error, a figure or attention view that draws nothing, a broken image, untypeset math or a request that leaves
127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import html
import http.server
import io
import json
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SITE_TOOLS = REPO / "tools" / "site"
DEFAULT_OUT = REPO / "_site"

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
LIVE = 'disabled title="runs live in JupyterLab or on Binder"'   # every control of a stored widget view
BADGE = re.compile(r"\((https://mybinder\.org/v2/gh/([^/\s]+)/([^/\s]+)/([^?\s]+))\?urlpath=lab/tree/[^)\s]+\)")


@dataclass
class Report:
    """What a build made: the pages, what it converted, Sphinx's warnings and the seconds it took."""

    out: Path
    pages: list[str] = field(default_factory=list)          # paths relative to out, index first, in course order
    figures: int = 0
    widgets: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    decks: list[str] = field(default_factory=list)           # slides/<notebook>.html, one reveal.js deck each
    lecture_pages: list[str] = field(default_factory=list)   # instructor notes, questionnaires and their answers


# -- the notebooks and the README ------------------------------------------------------------------------------

def course_notebooks(notebooks_dir: Path) -> list[Path]:
    """The course order: the numbered notebooks, then the demo page."""
    numbered = sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb"))
    demos = notebooks_dir / "demos.ipynb"
    return numbered + ([demos] if demos.is_file() else [])


def binder_base(readme: str) -> tuple[str, str, str, str]:
    """(launch address without urlpath, owner, repository, branch) from the README's Binder badge line."""
    match = BADGE.search(readme)
    if not match:
        raise SystemExit("README.md has no Binder badge line (https://mybinder.org/v2/gh/OWNER/REPO/BRANCH"
                         "?urlpath=lab/tree/...): the site takes its launch links from it")
    return match.group(1), match.group(2), match.group(3), match.group(4)


def launch_url(base: str, notebook: str) -> str:
    return f"{base}?urlpath=lab/tree/notebooks/{notebook}"


def readme_intro(readme: str) -> tuple[str, str]:
    """The README's title and the first prose paragraph after it (the three sentences that say what the course is)."""
    lines = readme.splitlines()
    title = next(line[2:].strip() for line in lines if line.startswith("# "))
    paragraphs = re.split(r"\n\s*\n", readme.split("\n", 1)[1])
    for paragraph in paragraphs:
        text = paragraph.strip()
        if text and not text.startswith(("[![", "![", "#", "<", "```", "|")):
            return title, text
    return title, ""


def readme_table(readme: str) -> str:
    """The README's notebook table (the first table under "## The notebooks")."""
    start = readme.find("\n## The notebooks\n")
    if start == -1:
        return ""
    rows = []
    for line in readme[start:].splitlines()[2:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return "\n".join(rows)


# -- outputs into HTML -------------------------------------------------------------------------------------------

def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _script_json(obj) -> str:
    """JSON that can sit inside a <script> element."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")


class Converter:
    """Turns one notebook's plotly and widget outputs into HTML outputs; counts what it turned."""

    def __init__(self, stem: str, state: dict, launch: str):
        self.stem = re.sub(r"\W", "-", stem)
        self.state = state
        self.launch = launch
        self.figures = 0
        self.widgets = 0

    # plotly
    def plotly(self, figure: dict) -> str:
        self.figures += 1
        target = f"lmlib-plotly-{self.stem}-{self.figures}"
        return (f'<div class="lmlib-plotly" id="{target}"></div>\n'
                f'<script type="application/json" class="lmlib-plotly-json" data-target="{target}">'
                f"{_script_json(figure)}</script>")

    # one output (of a cell, or stored in an Output widget)
    def output_html(self, output: dict) -> str:
        kind = output.get("output_type")
        if kind == "stream":
            return f'<pre class="lmlib-stream lmlib-{output.get("name", "stdout")}">{html.escape(_text(output.get("text", "")))}</pre>'
        if kind == "error":
            trace = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(output.get("traceback", [])))
            return f'<pre class="lmlib-error">{html.escape(trace)}</pre>'
        data = output.get("data", {})
        if WIDGET_VIEW_MIME in data:
            return self.widget(data[WIDGET_VIEW_MIME]["model_id"], top=False)
        if PLOTLY_MIME in data:
            return self.plotly(data[PLOTLY_MIME])
        if "text/html" in data:
            return _accessible(_text(data["text/html"]))
        if "image/svg+xml" in data:
            return _text(data["image/svg+xml"])
        for image in ("image/png", "image/jpeg"):
            if image in data:
                return f'<img src="data:{image};base64,{_text(data[image]).strip()}" alt="output">'
        if "text/markdown" in data:
            from markdown_it import MarkdownIt
            return MarkdownIt("commonmark").enable("table").render(_text(data["text/markdown"]))
        if "text/plain" in data:
            return f'<pre class="lmlib-text">{html.escape(_text(data["text/plain"]))}</pre>'
        return ""

    # ipywidgets, from the notebook's stored widget state
    def _model(self, ref) -> dict | None:
        if not isinstance(ref, str):
            return None
        return self.state.get(ref.removeprefix("IPY_MODEL_"))

    def widget(self, model_id: str, top: bool = True) -> str:
        inner = self._widget(model_id, depth=0)
        if not top:
            return inner
        self.widgets += 1
        if LIVE not in inner:   # no control, e.g. a progress bar: shown as it ended, without a note
            return f'<div class="lmlib-widget lmlib-widget-static" data-model-id="{html.escape(model_id)}">{inner}</div>'
        note = ('<p class="lmlib-widget-note">An interactive view, shown as the run left it: its controls work when '
                f'the notebook runs, in JupyterLab or on <a href="{html.escape(self.launch)}">Binder</a>.</p>')
        return f'<div class="lmlib-widget" data-model-id="{html.escape(model_id)}">\n{note}\n{inner}\n</div>'

    def _widget(self, model_id: str, depth: int) -> str:
        model = self.state.get(model_id)
        if model is None or depth > 20:
            return ('<p class="lmlib-widget-missing">(this view\'s stored state is not in the notebook: it shows '
                    'when the notebook runs)</p>')
        name, s = model.get("model_name", ""), model.get("state", {})
        layout = (self._model(s.get("layout")) or {}).get("state", {})
        hidden = layout.get("display") == "none" or layout.get("visibility") == "hidden"
        style = ' style="display:none"' if hidden else ""
        desc = s.get("description") or ""
        label = f'<label class="lmlib-w-label">{html.escape(desc)}</label>' if desc else ""
        disabled = LIVE

        def children() -> str:
            return "\n".join(self._widget(ref.removeprefix("IPY_MODEL_"), depth + 1)
                             for ref in s.get("children", []) if isinstance(ref, str))

        if name in ("VBoxModel", "BoxModel", "GridBoxModel", "AccordionModel", "StackModel"):
            return f'<div class="lmlib-w-vbox"{style}>{children()}</div>'
        if name == "HBoxModel":
            return f'<div class="lmlib-w-hbox"{style}>{children()}</div>'
        if name == "TabModel":
            titles = s.get("titles") or []
            parts = []
            for i, ref in enumerate(s.get("children", [])):
                title = titles[i] if i < len(titles) and titles[i] else f"tab {i + 1}"
                parts.append(f'<div class="lmlib-w-tab"><p class="lmlib-w-tab-title">{html.escape(title)}</p>'
                             f'{self._widget(ref.removeprefix("IPY_MODEL_"), depth + 1)}</div>')
            return f'<div class="lmlib-w-vbox"{style}>{"".join(parts)}</div>'
        if name == "OutputModel":
            body = "\n".join(self.output_html(o) for o in s.get("outputs", []))
            return f'<div class="lmlib-w-output"{style}>{body}</div>'
        if name in ("IntSliderModel", "FloatSliderModel", "FloatLogSliderModel"):
            value, low, high = s.get("value", 0), s.get("min", 0), s.get("max", 100)
            position, step = value, s.get("step", 1)
            if name == "FloatLogSliderModel":
                import math
                base = s.get("base", 10)
                position = math.log(value, base) if value and value > 0 else low
            readout = _format(value, s.get("readout_format") or ("d" if name.startswith("Int") else ".2f"))
            return (f'<div class="lmlib-w-control lmlib-w-slider"{style}>{label}'
                    f'<input type="range" min="{low}" max="{high}" step="{step}" value="{position}" {disabled}>'
                    f'<output>{html.escape(readout)}</output></div>')
        if name in ("IntRangeSliderModel", "FloatRangeSliderModel"):
            value = s.get("value") or [0, 0]
            return (f'<div class="lmlib-w-control"{style}>{label}<output {disabled}>{html.escape(str(value[0]))} – '
                    f'{html.escape(str(value[-1]))}</output></div>')
        if name in ("DropdownModel", "SelectModel", "RadioButtonsModel", "ToggleButtonsModel"):
            index = s.get("index")
            options = "".join(f'<option{" selected" if i == index else ""}>{html.escape(str(o))}</option>'
                              for i, o in enumerate(s.get("_options_labels", [])))
            return f'<div class="lmlib-w-control"{style}>{label}<select {disabled}>{options}</select></div>'
        if name in ("TextModel", "TextareaModel", "PasswordModel", "ComboboxModel", "IntTextModel",
                    "FloatTextModel", "BoundedIntTextModel", "BoundedFloatTextModel"):
            value = "" if s.get("value") is None else str(s.get("value"))
            placeholder = html.escape(str(s.get("placeholder") or ""), quote=True)
            if name == "TextareaModel":
                field_html = f'<textarea placeholder="{placeholder}" {disabled}>{html.escape(value)}</textarea>'
            else:
                width = max(len(value), len(str(s.get("placeholder") or "")), 12) + 2   # the whole value shows
                field_html = (f'<input type="text" value="{html.escape(value, quote=True)}" '
                              f'placeholder="{placeholder}" style="width: min(100%, {width}ch)" {disabled}>')
            return f'<div class="lmlib-w-control"{style}>{label}{field_html}</div>'
        if name in ("CheckboxModel", "ToggleButtonModel"):
            checked = " checked" if s.get("value") else ""
            return (f'<div class="lmlib-w-control"{style}><label class="lmlib-w-label">'
                    f'<input type="checkbox"{checked} {disabled}> {html.escape(desc)}</label></div>')
        if name == "ButtonModel":
            return f'<div class="lmlib-w-control"{style}><button type="button" {disabled}>{html.escape(desc)}</button></div>'
        if name in ("HTMLModel", "HTMLMathModel"):
            return f'<div class="lmlib-w-control lmlib-w-html"{style}>{label}<div>{s.get("value") or ""}</div></div>'
        if name == "LabelModel":
            return f'<div class="lmlib-w-control"{style}><span>{html.escape(str(s.get("value") or ""))}</span></div>'
        if name in ("FloatProgressModel", "IntProgressModel"):
            return (f'<div class="lmlib-w-control"{style}>{label}<progress value="{s.get("value", 0)}" '
                    f'max="{s.get("max", 100)}"></progress></div>')
        if name == "ImageModel":
            return f'<div class="lmlib-w-control"{style}>{label}(an image, shown when the notebook runs)</div>'
        return (f'<div class="lmlib-w-control"{style}>{label}<span class="lmlib-w-unknown">'
                f'({html.escape(name.removesuffix("Model"))}: shown when the notebook runs)</span></div>')

    # a whole notebook
    def convert(self, nb: dict) -> dict:
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            for output in cell.get("outputs", []):
                data = output.get("data")
                if not data:
                    continue
                if WIDGET_VIEW_MIME in data:
                    output["data"] = {"text/html": self.widget(data[WIDGET_VIEW_MIME]["model_id"])}
                elif PLOTLY_MIME in data:
                    output["data"] = {"text/html": self.plotly(data[PLOTLY_MIME])}
                elif "text/html" in data and "bertviz-" in _text(data["text/html"]):
                    data["text/html"] = _accessible(_text(data["text/html"]))
        nb.get("metadata", {}).pop("widgets", None)
        return nb


def _accessible(output_html: str) -> str:
    """A stored bertviz view with its menus named by their visible labels (as the views made now already are)."""
    if "bertviz-" not in output_html:
        return output_html
    from lmlib.course.attention_views import label_selects
    return label_selects(output_html)


def _format(value, spec: str) -> str:
    """A slider's readout, with the d3-format spec ipywidgets uses (Python's format mini-language for the usual ones)."""
    try:
        return format(value, spec.replace("~", ""))
    except (ValueError, TypeError):
        return str(value)


# -- staging and building ----------------------------------------------------------------------------------------

def launch_cell(launch: str, notebook: str, demos: bool, lecture: bool = False) -> dict:
    extra = (" Its views have no stored output: they appear when it runs, in JupyterLab, on Binder or served by "
             "Voilà (<code>.venv/bin/voila notebooks/demos.ipynb</code>)." if demos else "")
    stem = html.escape(Path(notebook).stem)
    links = (f' For a class: <a href="../slides/{stem}.html">its slides</a>, <a href="../instructors/{stem}.html">'
             f'instructor notes</a> and <a href="../questions/{stem}.html">a questionnaire</a>.' if lecture else "")
    text = (f'<p class="lmlib-launch">This page is the notebook <code>notebooks/{html.escape(notebook)}</code> with '
            f'the outputs of its last run. <a class="lmlib-binder" href="{html.escape(launch)}">Launch it on '
            f'Binder</a> to run it and move its controls, or run it in JupyterLab (see the README).{extra}{links}</p>')
    return {"cell_type": "markdown", "id": "lmlib-site-launch", "metadata": {}, "source": text}


def readme_picture(readme: str) -> tuple[str, str] | None:
    """(path, alt text) of the README's first picture from docs/images/, as ![alt](path) or <img src=... alt=...>."""
    for tag in re.finditer(r"!\[(?P<alt>[^\]]*)\]\((?P<src>docs/images/[^)\s]+)\)|<img\s[^>]*>", readme):
        if tag.group("src"):
            return tag.group("src"), tag.group("alt")
        src, alt = re.search(r'src="(docs/images/[^"]+)"', tag.group(0)), re.search(r'alt="([^"]*)"', tag.group(0))
        if src:
            return src.group(1), alt.group(1) if alt else ""
    return None


def index_page(readme: str, base: str, notebooks: list[Path], lecture: dict[str, list[str]] | None = None,
               extra_docs: list[str] = ()) -> str:
    title, intro = readme_intro(readme)
    table = readme_table(readme)
    found = readme_picture(readme)
    picture = f"\n```{{image}} {found[0]}\n:alt: {found[1]}\n:width: 300px\n```\n" if found else ""
    toctree = "\n".join([f"notebooks/{nb.stem}" for nb in notebooks] + list(extra_docs))
    lecture = lecture or {}
    more = ""
    if lecture.get("instructors"):
        more += ("\n## For the lecture hall\n\nEvery notebook has a slide deck (reveal.js, with speaker notes: press "
                 "<kbd>s</kbd>), instructor notes with a plan for the hour computed from its last run, and a "
                 "questionnaire whose answers are on a page of their own; the links are at the top of each notebook's "
                 "page and in the sidebar.\n")
        for kind, caption in (("instructors", "For instructors"), ("questions", "Questionnaires")):
            more += (f"\n```{{toctree}}\n:hidden:\n:maxdepth: 1\n:caption: {caption}\n\n"
                     + "\n".join(lecture[kind]) + "\n```\n")
    return (f"# {title}\n\n{intro}\n{picture}\n"
            f'<p class="lmlib-launch"><a class="lmlib-binder" href="{html.escape(launch_url(base, "00_start_here.ipynb"))}">'
            f"Launch the course on Binder</a>: nothing to install. Each page is a notebook with the outputs of its "
            f"last run; the launch link at its top opens it on Binder, where it runs.</p>\n\n"
            f"## The notebooks\n\n{table}\n\n"
            f"```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{toctree}\n```\n{more}")


def copy_assets(dest: Path) -> None:
    """plotly.js and MathJax 3 from their Python wheels, into the folder Sphinx copies to _static/."""
    import mathjax
    import plotly

    dest.mkdir(parents=True, exist_ok=True)
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    shutil.copy2(plotly_js, dest / "plotly.min.js")
    import lecture  # tools/lecture.py: reveal.js for the slide decks
    lecture.copy_reveal(dest)
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = dest / "mathjax"
    target.mkdir()
    shutil.copy2(es5 / "tex-svg.js", target / "tex-svg.js")
    shutil.copy2(es5.parent / "LICENSE", target / "LICENSE")
    # what tex-svg.js may load later: TeX extensions (\require, autoload) and the menu's accessibility parts
    for sub in ("input/tex/extensions", "a11y", "ui", "adaptors"):
        if (es5 / sub).is_dir():
            shutil.copytree(es5 / sub, target / sub)


def build(out: Path = DEFAULT_OUT, notebooks_dir: Path = REPO / "notebooks", quiet: bool = False) -> Report:
    """Build the website into ``out`` (replaced); returns what was built."""
    # nbformat's validator imports jsonschema, whose optional checker of the "iri" format (rfc3987_syntax) compiles
    # 38 grammars at import, a second or more of the build, for a format the notebook schema never uses.
    sys.modules.setdefault("rfc3987_syntax", None)
    from sphinx.application import Sphinx

    sys.path.insert(0, str(REPO / "tools"))
    import lecture  # tools/lecture.py: slide decks, instructor notes, questionnaires

    start = time.perf_counter()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    base, owner, repo, branch = binder_base(readme)
    notebooks = course_notebooks(notebooks_dir)
    report = Report(out=Path(out))
    with tempfile.TemporaryDirectory(prefix="lmlib-site-") as tmp:
        src, assets, doctrees = Path(tmp) / "src", Path(tmp) / "assets", Path(tmp) / "doctrees"
        (src / "notebooks").mkdir(parents=True)
        if (notebooks_dir / "figures").is_dir():
            shutil.copytree(notebooks_dir / "figures", src / "notebooks" / "figures")
        if (REPO / "docs" / "images").is_dir():
            shutil.copytree(REPO / "docs" / "images", src / "docs" / "images")
        content, decks = lecture.load_content(), []
        for path in notebooks:
            nb = json.loads(path.read_text(encoding="utf-8"))
            state = (nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {}))
            converter = Converter(path.stem, state, launch_url(base, path.name))
            converter.convert(nb)
            decks.append((path, json.loads(json.dumps(nb)), converter))
            nb["cells"].insert(0, launch_cell(launch_url(base, path.name), path.name, path.stem == "demos",
                                              lecture=path.name in content))
            if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) < (4, 5):
                nb["cells"][0].pop("id")   # cell ids came with nbformat 4.5
            (src / "notebooks" / path.name).write_text(json.dumps(nb), encoding="utf-8")
            report.figures += converter.figures
            report.widgets += converter.widgets
        made = lecture.write_pages(src, notebooks)
        extra = []
        glossary = REPO / "docs" / "glossary.md"
        if glossary.is_file():   # where the notebooks' links (../docs/glossary.md) find it
            (src / "docs").mkdir(exist_ok=True)
            shutil.copy2(glossary, src / "docs" / "glossary.md")
            extra.append("docs/glossary")
        (src / "index.md").write_text(index_page(readme, base, notebooks, made, extra), encoding="utf-8")
        copy_assets(assets)

        # Sphinx writes into the temporary folder (myst-nb puts a jupyter_execute/ folder beside its output), and
        # the finished site replaces `out` only once the build has succeeded.
        html_dir = Path(tmp) / "html"
        warnings = io.StringIO()
        overrides = {
            "html_static_path": [str(SITE_TOOLS / "static"), str(assets)],
            "html_theme_options": {
                "repository_url": f"https://github.com/{owner}/{repo}",
                "repository_branch": branch,
                "path_to_docs": "",
                "launch_buttons": {"binderhub_url": "https://mybinder.org", "notebook_interface": "jupyterlab"},
                "use_download_button": True,
                "use_fullscreen_button": True,
                "use_repository_button": False,
                "use_source_button": False,
                "home_page_in_toc": True,
                "show_navbar_depth": 1,
                "show_toc_level": 2,
            },
        }
        app = Sphinx(str(src), str(SITE_TOOLS), str(html_dir), str(doctrees), "html", confoverrides=overrides,
                     status=None if quiet else sys.stdout, warning=warnings, freshenv=True)
        app.build(force_all=True)
        if app.statuscode:
            raise SystemExit(f"the site build failed (Sphinx status {app.statuscode}):\n{warnings.getvalue()}")
        report.warnings = [w for w in warnings.getvalue().splitlines() if w.strip()]
        # the download button offers the notebook as committed, not the staged copy
        for path in notebooks:
            shutil.copy2(path, html_dir / "_sources" / "notebooks" / path.name)
        report.decks = lecture.build_decks(html_dir, decks, notebooks_dir / "figures")
        report.lecture_pages = [f"{doc}.html" for docs in made.values() for doc in docs]
        if Path(out).exists():
            shutil.rmtree(out)
        shutil.move(str(html_dir), str(out))
    report.pages = ["index.html"] + [f"notebooks/{path.stem}.html" for path in notebooks]
    report.seconds = time.perf_counter() - start
    return report


@contextlib.contextmanager
def serve(folder: Path):
    """Serve ``folder`` on 127.0.0.1 (a free port) from a thread; yields the base address, ending in "/"."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (replaced; default: _site/)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary and Sphinx's warnings")
    args = parser.parse_args(argv)
    report = build(args.out, quiet=args.quiet)
    for warning in report.warnings:
        print(warning, file=sys.stderr)
    print(f"built {len(report.pages)} notebook pages, {len(report.lecture_pages)} lecture pages and "
          f"{len(report.decks)} slide decks ({report.figures} plotly figures, {report.widgets} widget views) "
          f"in {report.seconds:.1f} s, {len(report.warnings)} warnings: open {report.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
