"""What the website gives an instructor: a reveal.js deck per notebook, instructor notes, and questionnaires.

    .venv/bin/python tools/lecture.py timings     # recompute tools/lecture/timings.json from the notebooks' stored run

``tools/build_site.py`` calls :func:`write_pages` (Markdown pages for Sphinx: instructor notes, questions, answers)
and :func:`build_decks` (one self-contained reveal.js deck per notebook under ``slides/``); nothing here runs a
notebook or fetches anything.

* **Timings** (``tools/lecture/timings.json``, written by the ``timings`` command, committed): each code cell's run
  time in the notebook's last stored run (the teach-preset re-execution records ``metadata.execution``: execute_input
  to execute_reply), summed per section (``#``/``##`` heading) with the section's slide count, and the browser
  test's whole-notebook run time from ``tests/browser/artifacts/summary.json`` when a run left one. The hour's plan
  is computed from it: 50 minutes shared among the sections in proportion to ``TALK_MIN_PER_SLIDE`` per slide
  plus the section's run time, the last 10 for the questionnaire.
* **Instructor notes**: the plan for the hour; the cells to run live (every one that draws a figure or a widget,
  and every one slower than ``LIVE_S``) with their run time and what to say while they run (the opening of the
  prose above them); the predict-then-run questions (``tools/lecture/content.json``, and the notebook's own
  prediction exercises); the slips its exercise checks were written for (their hints); and a room without internet.
* **Questionnaire**: ``content.json``'s 8-12 questions per notebook on one page, the answers on another.
* **Decks**: the notebook's cells by their slide metadata (``tools/slides.py``), outputs as the website shows them
  (plotly figures drawn by the local plotly.js, widgets as their stored state), math by the local MathJax 3,
  reveal.js 5.2.1 from ``tools/site/vendor/reveal.js`` (npm package, MIT), and speaker notes: the cells marked
  ``notes`` plus each section's minutes and each live cell's run time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import re
import shutil
import sys
from pathlib import Path

from slides import PLOTLY, WIDGET_VIEW, cell_source  # tools/slides.py, beside this file

REPO = Path(__file__).resolve().parents[1]
LECTURE = REPO / "tools" / "lecture"
TIMINGS = LECTURE / "timings.json"
CONTENT = LECTURE / "content.json"
SUMMARY = REPO / "tests" / "browser" / "artifacts" / "summary.json"
VENDOR = REPO / "tools" / "site" / "vendor" / "reveal.js"

HOUR_MIN, QUESTIONS_MIN = 60, 10
TALK_MIN_PER_SLIDE = 1.5   # minutes an instructor spends on one slide or subslide, before any cell runs
LIVE_S = 2.0               # a cell slower than this is one to talk over while it runs


def _slide_type(cell: dict) -> str:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")


def _seconds(cell: dict) -> float | None:
    ex = cell.get("metadata", {}).get("execution", {})
    start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not start or not end:
        return None
    t0, t1 = (dt.datetime.fromisoformat(v.replace("Z", "+00:00")) for v in (start, end))
    return max(0.0, (t1 - t0).total_seconds())


def _visual(cell: dict) -> str | None:
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if WIDGET_VIEW in data:
            return "a widget"
        if PLOTLY in data:
            return "a figure"
        if "bertviz" in "".join(data.get("text/html", "")):
            return "an attention view"
    return None


def _heading(src: str) -> str:
    return re.sub(r"^#+\s*", "", src.strip().splitlines()[0]).strip()


# -- timings ---------------------------------------------------------------------------------------------------

def notebook_timings(nb: dict) -> dict:
    """Per-cell and per-section run times of one notebook's stored run, with each section's slide count."""
    sections, cells, first = [], [], None
    for i, cell in enumerate(nb["cells"]):
        src = cell_source(cell)
        if cell.get("cell_type") == "markdown" and re.match(r"#{1,2} ", src):
            sections.append({"title": _heading(src), "cell": i, "run_s": 0.0, "slides": 0, "live": []})
        if not sections:
            sections.append({"title": "(before the title)", "cell": i, "run_s": 0.0, "slides": 0, "live": []})
        section = sections[-1]
        if _slide_type(cell) in ("slide", "subslide"):
            section["slides"] += 1
        seconds = _seconds(cell)
        if cell.get("cell_type") == "code" and seconds is not None:
            start = cell["metadata"]["execution"]["iopub.execute_input"]
            first = min(first or start, start)
            section["run_s"] = round(section["run_s"] + seconds, 2)
            cells.append({"cell": i, "id": cell.get("id", ""), "run_s": round(seconds, 2),
                          "shows": _visual(cell), "skipped_in_slides": _slide_type(cell) == "skip"})
            if _slide_type(cell) != "skip" and (_visual(cell) or seconds >= LIVE_S):
                section["live"].append(i)
    return {"stored_run": first, "run_s": round(sum(c["run_s"] for c in cells), 1), "sections": sections,
            "cells": cells}


def hour_plan(timing: dict) -> list[int]:
    """Minutes per section: 50 shared by slides and run time (largest remainders, so they add up exactly)."""
    talk = HOUR_MIN - QUESTIONS_MIN
    weights = [s["slides"] * TALK_MIN_PER_SLIDE + s["run_s"] / 60 for s in timing["sections"]]
    total = sum(weights) or 1.0
    raw = [talk * w / total for w in weights]
    minutes = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - minutes[i], reverse=True)[:talk - sum(minutes)]:
        minutes[i] += 1
    return minutes


def make_timings(notebooks: list[Path]) -> dict:
    browser = {}
    if SUMMARY.is_file():
        summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
        browser = {name: {"run_s": e.get("run_s"), "passed": e.get("passed"), "recorded": summary.get("updated")}
                   for name, e in summary.get("notebooks", {}).items()}
    out = {"about": "Computed by `tools/lecture.py timings` from each notebook's stored run (cell metadata.execution)"
                    " and, where present, the browser test's summary.json. Do not edit by hand.",
           "notebooks": {}}
    for path in notebooks:
        timing = notebook_timings(json.loads(path.read_text(encoding="utf-8")))
        timing["minutes"] = hour_plan(timing)
        if path.name in browser:
            timing["browser_test"] = browser[path.name]
        out["notebooks"][path.name] = timing
    return out


def load_timings() -> dict:
    return json.loads(TIMINGS.read_text(encoding="utf-8")).get("notebooks", {}) if TIMINGS.is_file() else {}


def load_content() -> dict:
    return json.loads(CONTENT.read_text(encoding="utf-8"))


# -- pages -----------------------------------------------------------------------------------------------------

def _first_sentence(text: str, limit: int = 240) -> str:
    text = text.split("```")[0]
    text = re.sub(r"\*\*|__|<[^>]+>", "", text)
    text = re.sub(r"\s+", " ", re.sub(r"^#+ .*$", "", text, flags=re.M)).strip()
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text).strip()
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= limit else sentence[:limit].rsplit(" ", 1)[0] + " …"


def _prose_before(nb: dict, i: int) -> str:
    for j in range(i - 1, -1, -1):
        cell = nb["cells"][j]
        if cell.get("cell_type") == "markdown" and not cell_source(cell).lstrip().startswith("<details"):
            return _first_sentence(cell_source(cell))
    return ""


def exercise_hints(nb: dict) -> list[str]:
    """The hints of the notebook's exercise checks: each names the slip the check was written for."""
    hints = []
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            for m in re.finditer(r'hint\s*=\s*\(?\s*((?:f?"(?:[^"\\]|\\.)*"\s*)+)', cell_source(cell)):
                pieces = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))
                hints.append("".join(pieces).replace('\\"', '"'))
    return list(dict.fromkeys(hints))


def prediction_exercises(nb: dict) -> list[str]:
    return [m.group(1).strip() for cell in nb["cells"] if cell.get("cell_type") == "code"
            for m in re.finditer(r"#\s*your prediction:\s*(.+)", cell_source(cell))]


def _md(text: str) -> str:
    """Text from content.json or a notebook, safe inside a Markdown list item (no stray $ math, no HTML)."""
    return html.escape(text, quote=False).replace("$", "\\$").replace("*", "\\*").replace("_", "\\_")


def instructor_page(name: str, nb: dict, timing: dict, content: dict) -> str:
    title = _heading(cell_source(nb["cells"][0]))
    stem = Path(name).stem
    lines = [f"# Instructor notes: {_md(title)}", "",
             f'For a one-hour session on `notebooks/{name}`. <a href="../notebooks/{stem}.html">The notebook\'s page</a> · '
             f'<a href="../slides/{stem}.html">its slides</a> (press <kbd>s</kbd> in them for the speaker view, with '
             f'the notes) · <a href="../questions/{stem}.html">the questionnaire</a>.', ""]
    run = timing.get("run_s", 0.0)
    when = (timing.get("stored_run") or "")[:10]
    browser = timing.get("browser_test", {})
    lines += ["## The hour", "",
              f"Computed from the notebook's last stored teach-preset run ({when}): its cells took {run:.0f} s in all"
              + (f"; the browser test's last run took {browser['run_s']:.0f} s end to end" if browser.get("run_s") else "")
              + f". Each section's share of {HOUR_MIN - QUESTIONS_MIN} minutes follows its slides "
              f"({TALK_MIN_PER_SLIDE:g} min each) and the time its cells run; the last {QUESTIONS_MIN} minutes are for "
              "the questionnaire.", "",
              "| section | minutes | slides | its cells run |", "|---|---:|---:|---:|"]
    for section, minutes in zip(timing["sections"], timing["minutes"]):
        lines.append(f"| {_md(section['title'])} | {minutes} | {section['slides']} | {section['run_s']:.1f} s |")
    lines.append(f"| questionnaire | {QUESTIONS_MIN} | | |")
    lines += ["", "## Run these live", "",
              "The cells on the slides that draw a figure, a widget or an attention view, or take longer than "
              f"{LIVE_S:g} s (run the notebook top to bottom first: Run All before the class, then re-run these). While "
              "a slow one runs, say what it computes: the line given is the opening of the prose above it.", ""]
    seconds = {c["cell"]: c for c in timing["cells"]}
    live = [i for s in timing["sections"] for i in s["live"]]
    groups: list[tuple[list[int], str]] = []   # cells under the same prose are one item
    for i in live:
        say = _prose_before(nb, i)
        if groups and groups[-1][1] == say:
            groups[-1][0].append(i)
        else:
            groups.append(([i], say))
    for cells, say in groups:
        what = ", ".join(f"{i} ({seconds.get(i, {}).get('shows') or 'output'}, {seconds.get(i, {}).get('run_s', 0):.1f} s)"
                         for i in cells)
        lines.append(f"- cell{'s' if len(cells) > 1 else ''} {what}: say: “{_md(say)}”")
    if not live:
        lines.append("- (no cell here draws a view or runs long: step through the slides)")
    predict = content.get("predict", []) + [f"(exercise) {p}" for p in prediction_exercises(nb)]
    lines += ["", "## Predict, then run", "",
              "Put the question to the room, take a show of hands or a number from each table, then run the cell.", ""]
    lines += [f"1. {_md(q)}" for q in predict]
    hints = exercise_hints(nb)
    lines += ["", "## The slips the exercises catch", "",
              "Each exercise's check cell prints a hint when the answer is wrong; these are the mistakes they were "
              "written for, the ones to watch for while students work:", ""]
    lines += [f"- {_md(h)}" for h in hints] or ["- (no exercise checks in this notebook)"]
    lines += ["", "## With no internet in the room", "",
              "- Before the class, on a machine with internet: `pip install -r requirements.txt` and run the notebook "
              "once (`lmlib.data` fetches and checks its datasets into `data/`; or set `LMLIB_DATA_DIR` to a copy). "
              "After that nothing it runs needs the network: set `LMLIB_OFFLINE=1 HF_HUB_OFFLINE=1` to be sure.",
              "- The website and these slides are plain files: copy the built `_site/` folder to a USB stick and open "
              "`index.html` (or this deck) from disk; every script, figure and font is in the folder.",
              "- The notebook's page shows the outputs of its last run, so a room without a working kernel can still "
              "follow the figures; the deck's figures stay interactive (hover, zoom).", ""]
    return "\n".join(lines)


def question_pages(name: str, nb: dict, content: dict) -> tuple[str, str]:
    title = _heading(cell_source(nb["cells"][0]))
    stem = Path(name).stem
    questions = content.get("questions", [])
    ask = [f"# Questionnaire: {_md(title)}", "",
           f'{len(questions)} short questions on <a href="../notebooks/{stem}.html">the notebook</a>; every answer is in '
           f'its text. Write your answers down first, then <a href="../answers/{stem}.html">open the answers</a>.', ""]
    ask += [f"{i}. {_md(q)}" for i, (q, _) in enumerate(questions, 1)]
    answers = ["---", "orphan: true", "---", "", f"# Answers: {_md(title)}", "",
               f'The answers to <a href="../questions/{stem}.html">the questionnaire</a> on '
               f'<a href="../notebooks/{stem}.html">the notebook</a>.', ""]
    answers += [f"{i}. **{_md(q)}**  \n   {_md(a)}" for i, (q, a) in enumerate(questions, 1)]
    return "\n".join(ask) + "\n", "\n".join(answers) + "\n"


def write_pages(src: Path, notebooks: list[Path]) -> dict[str, list[str]]:
    """Write the instructor, question and answer pages into the Sphinx source; returns their docnames by kind."""
    content, timings = load_content(), load_timings()
    made = {"instructors": [], "questions": [], "answers": []}
    for path in notebooks:
        if path.name not in content:
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        timing = timings.get(path.name) or {**notebook_timings(nb)}
        timing.setdefault("minutes", hour_plan(timing))
        for kind in made:
            (src / kind).mkdir(exist_ok=True)
        (src / "instructors" / f"{path.stem}.md").write_text(instructor_page(path.name, nb, timing, content[path.name]),
                                                            encoding="utf-8")
        ask, answers = question_pages(path.name, nb, content[path.name])
        (src / "questions" / f"{path.stem}.md").write_text(ask, encoding="utf-8")
        (src / "answers" / f"{path.stem}.md").write_text(answers, encoding="utf-8")
        for kind in made:
            made[kind].append(f"{kind}/{path.stem}")
    return made


# -- decks -----------------------------------------------------------------------------------------------------

def _markdown():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.use(dollarmath_plugin, double_inline=True).use(amsmath_plugin)
    esc = html.escape
    md.add_render_rule("math_inline", lambda self, t, i, o, e: f'<span class="math">\\({esc(t[i].content)}\\)</span>')
    md.add_render_rule("math_inline_double", lambda self, t, i, o, e: f'<span class="math">\\[{esc(t[i].content)}\\]</span>')
    md.add_render_rule("math_block", lambda self, t, i, o, e: f'<div class="math">\\[{esc(t[i].content)}\\]</div>\n')
    md.add_render_rule("math_block_label", lambda self, t, i, o, e: f'<div class="math">\\[{esc(t[i].content)}\\]</div>\n')
    md.add_render_rule("amsmath", lambda self, t, i, o, e: f'<div class="math">\\[{esc(t[i].content)}\\]</div>\n')
    return md


def _code(source: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(source, PythonLexer(), HtmlFormatter(cssclass="lmlib-deck-code highlight"))


def deck_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="a11y-high-contrast-light").get_style_defs(".lmlib-deck-code")


def deck_html(nb: dict, name: str, converter, timing: dict | None, static: str = "../_static/") -> str:
    """One notebook (its outputs already turned into HTML by the site's converter) as a reveal.js deck."""
    md = _markdown()
    title = _heading(cell_source(nb["cells"][0]))
    minutes = {s["cell"]: m for s, m in zip(timing["sections"], timing["minutes"])} if timing else {}
    seconds = {c["cell"]: c["run_s"] for c in timing["cells"]} if timing else {}
    stacks: list[list[dict]] = []
    total = sum(_slide_type(c) in ("slide", "subslide") for c in nb["cells"])
    opening = (f"About {total} slides. Run the notebook before the class (JupyterLab: Run All), then step through it "
               "live with the slideshow button, or show this deck; the instructor notes give the minutes."
               if timing else "This notebook stores no outputs: present it live (JupyterLab's slideshow button, or "
               "Voilà: .venv/bin/voila notebooks/demos.ipynb), using this deck for the order.")
    for i, cell in enumerate(nb["cells"]):
        typ = _slide_type(cell)
        if typ == "skip":
            continue
        if typ == "slide" or not stacks:
            stacks.append([{"parts": [], "notes": [] if stacks else [opening]}])
        elif typ == "subslide":
            stacks[-1].append({"parts": [], "notes": []})
        slide = stacks[-1][-1]
        if i in minutes:
            slide["notes"].append(f"About {minutes[i]} minutes for this section.")
        src = cell_source(cell)
        if cell.get("cell_type") == "markdown":
            body = md.render(src)
        else:
            outs = "".join(f'<div class="lmlib-deck-output">{converter.output_html(o)}</div>'
                           for o in cell.get("outputs", []))
            body = _code(src) + outs
            if seconds.get(i, 0) >= LIVE_S or _visual(cell):
                slide["notes"].append(f"Run this cell live (it took {seconds.get(i, 0):.1f} s in the last run).")
        if typ == "notes":
            slide["notes"].append(body)
        elif typ == "fragment":
            slide["parts"].append(f'<div class="fragment">{body}</div>')
        else:
            slide["parts"].append(body)
    sections = []
    for stack in stacks:
        subs = []
        for slide in stack:
            notes = "".join(n if n.lstrip().startswith("<") else f"<p>{html.escape(n)}</p>" for n in slide["notes"])
            subs.append("<section>\n" + "\n".join(slide["parts"]) +
                        (f'\n<aside class="notes">{notes}</aside>' if notes else "") + "\n</section>")
        sections.append("<section>\n" + "\n".join(subs) + "\n</section>")
    figures = converter.figures > 0
    stem = Path(name).stem
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}: slides</title>
<link rel="icon" href="{static}lmlib-favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="{static}reveal.js/reveal.css">
<link rel="stylesheet" href="{static}reveal.js/theme/white.css">
<link rel="stylesheet" href="{static}lmlib-site.css">
<link rel="stylesheet" href="{static}lmlib-deck.css">
<style>{deck_css()}</style>
<script>window.MathJax = {{tex: {{inlineMath: [["\\\\(", "\\\\)"]], displayMath: [["\\\\[", "\\\\]"]]}},
  svg: {{fontCache: "global"}}}};</script>
<script src="{static}mathjax/tex-svg.js" defer></script>
{f'<script src="{static}plotly.min.js"></script>' if figures else ""}
<script src="{static}lmlib-site.js" defer></script>
</head>
<body>
<nav class="lmlib-deck-home" aria-label="course"><a href="../notebooks/{stem}.html">the notebook's page</a> ·
<a href="../instructors/{stem}.html">instructor notes</a></nav>
<main class="reveal"><div class="slides">
{chr(10).join(sections)}
</div></main>
<script src="{static}reveal.js/reveal.js"></script>
<script src="{static}reveal.js/plugin/notes/notes.js"></script>
<script src="{static}lmlib-deck.js"></script>
</body>
</html>
"""


def copy_reveal(dest: Path) -> None:
    """reveal.js (vendored from its npm package, with its licence) into the site's _static/ folder."""
    shutil.copytree(VENDOR, dest / "reveal.js")


def build_decks(out: Path, notebooks: list[tuple[Path, dict, object]], figures_dir: Path | None) -> list[str]:
    """Write slides/<notebook>.html for each (path, converted notebook, converter); returns the decks' paths."""
    timings = load_timings()
    (out / "slides").mkdir(parents=True, exist_ok=True)
    if figures_dir and figures_dir.is_dir():
        shutil.copytree(figures_dir, out / "slides" / "figures", dirs_exist_ok=True)
    made = []
    for path, nb, converter in notebooks:
        deck = deck_html(nb, path.name, converter, timings.get(path.name))
        (out / "slides" / f"{path.stem}.html").write_text(deck, encoding="utf-8")
        made.append(f"slides/{path.stem}.html")
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("timings",))
    parser.parse_args(argv)
    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    timings = make_timings(notebooks)
    TIMINGS.write_text(json.dumps(timings, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, t in timings["notebooks"].items():
        print(f"{name}: {t['run_s']:.0f} s of cells, minutes per section {t['minutes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
