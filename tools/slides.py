"""The lecture slide plan of every notebook, and the one command that writes it into the notebooks.

    .venv/bin/python tools/slides.py plan             # (re)compute tools/slides/plan.json from the notebooks
    .venv/bin/python tools/slides.py apply [NB ...]   # write the plan into the notebooks' cell metadata
    .venv/bin/python tools/slides.py check            # exit 1 if a notebook has a cell without slide metadata

A slide type is what Jupyter's slideshow tools read from ``cell.metadata.slideshow.slide_type`` (JupyterLab's
slideshow extension, nbconvert, the website's decks): ``slide`` starts a new slide, ``subslide`` a new slide below
it, ``fragment`` appears on the current slide at the next key press, ``-`` continues the current slide, ``skip``
is left out and ``notes`` goes to the speaker notes. The plan is chosen for a lecture: each ``#``/``##`` section a
slide and each ``###`` a subslide; a figure, a widget or a listing on a slide of its own when the slide is already
full; the short reading of a figure as a fragment after it, a long one as speaker notes; the plumbing (imports,
exercise stubs and their checks, folded solutions) skipped. ``plan`` writes the result, cell by cell with the
reason, to ``tools/slides/plan.json`` (keyed by cell id, with the cell's opening words to find it again should
the id change); hand-made choices go under ``"overrides"`` there and win over the rules. ``apply`` writes only
``metadata.slideshow`` (and removes nothing else), so it can run after anyone's re-execution of a notebook, as
often as wanted: a cell already as planned is not touched and an unchanged notebook is not rewritten.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
PLAN = REPO / "tools" / "slides" / "plan.json"
TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

SLIDE_CAPACITY = 24        # about what fits on one 16:9 slide, in lines of text (see weight())
LONG_READING_WORDS = 110   # a reading of a figure longer than this goes to the speaker notes
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PLOTLY = "application/vnd.plotly.v1+json"


def cell_source(cell: dict) -> str:
    """A cell's source as one string (nbformat allows a list of lines)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def key(cell: dict) -> str:
    """The cell's opening words: how the plan finds a cell again if its id changed."""
    return re.sub(r"\s+", " ", cell_source(cell)).strip()[:60]


def _visual(cell: dict) -> bool:
    """A figure, a widget or an attention view among the outputs."""
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if WIDGET_VIEW in data or PLOTLY in data or "image/png" in data or "image/svg+xml" in data:
            return True
        if "bertviz" in "".join(data.get("text/html", "")):
            return True
    return False


def weight(cell: dict) -> float:
    """Roughly how many lines of a slide the cell takes: its text wrapped at 90 characters, and its outputs."""
    src = cell_source(cell)
    lines = sum(max(1, math.ceil(len(line) / 90)) for line in src.splitlines()) if src.strip() else 0
    if cell.get("cell_type") == "markdown":
        lines += 2 * src.count("$$") // 2 + (8 if "figures/" in src else 0)
        return lines
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if out.get("output_type") == "stream":
            lines += min(12, "".join(out.get("text", "")).count("\n") + 1)
        elif WIDGET_VIEW in data:
            lines += 16
        elif PLOTLY in data or "image/png" in data or "image/svg+xml" in data:
            lines += 14
        elif "text/html" in data:
            html = "".join(data["text/html"])
            lines += 18 if "bertviz" in html else min(14, html.count("<tr") + html.count("\n") // 4 + 1)
        elif "text/markdown" in data:
            lines += min(12, "".join(data["text/markdown"]).count("\n") + 1)
        elif "text/plain" in data:
            lines += min(8, "".join(data["text/plain"]).count("\n") + 1)
    return lines


IMPORT_LINE = re.compile(r"\s*(import |from \S+ import |%|\)|[A-Za-z_][\w.]*\s*,?$)")


def plumbing(cell: dict, first_code: bool = False) -> str | None:
    """Why a cell is left out of the lecture (None: it is not). The first code cell, mostly imports, is the set-up."""
    src = cell_source(cell).strip()
    if cell.get("cell_type") == "markdown":
        return "a folded solution" if src.startswith("<details") else None
    if not src:
        return "an empty cell"
    code = [line for line in src.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    imports = sum(bool(IMPORT_LINE.match(line)) for line in code)
    if code and (imports == len(code) or (first_code and imports >= 0.6 * len(code))):
        return "imports and set-up"
    if re.search(r"=\s*None\s*#\s*your", src):
        return "an exercise stub"
    if re.search(r"\bcheck_(value|prediction|function|close|true|answer)\w*\(", src) and not _visual(cell):
        return "an exercise check"
    return None


def plan_notebook(nb: dict, overrides: dict[str, str] | None = None) -> list[dict]:
    """[{id, key, type, why}] for each cell of one notebook, in order."""
    overrides = overrides or {}
    rows, filled, after_visual, seen_code = [], 0.0, False, False
    for i, cell in enumerate(nb["cells"]):
        src, kind, w = cell_source(cell), cell.get("cell_type"), weight(cell)
        skip = plumbing(cell, first_code=kind == "code" and not seen_code)
        seen_code = seen_code or kind == "code"
        if i == 0:
            typ, why = "slide", "the title"
        elif kind == "markdown" and re.match(r"#{1,2} ", src):
            typ, why = "slide", "a section"
        elif kind == "markdown" and src.startswith("### "):
            typ, why = "subslide", "a subsection"
        elif skip:
            typ, why = "skip", skip
        elif kind == "markdown" and after_visual and len(src.split()) > LONG_READING_WORDS:
            typ, why = "notes", "the reading of the figure above, said rather than shown"
        elif kind == "markdown" and after_visual and len(src.split()) <= 60:
            typ, why = "fragment", "the reading of the figure above, after it"
        elif filled + w > SLIDE_CAPACITY and filled > 0:
            typ, why = "subslide", "the slide above is full" + (": the view gets its own" if _visual(cell) else "")
        elif kind == "markdown" and after_visual:
            typ, why = "fragment", "the reading of the figure above, after it"
        else:
            typ, why = "-", "continues the slide"
        cid = cell.get("id", "")
        if cid in overrides:
            typ, why = overrides[cid], "chosen by hand (plan.json overrides)"
        if typ in ("slide", "subslide"):
            filled = w
        elif typ in ("-", "fragment"):
            filled += w
        if typ not in ("skip", "notes"):
            after_visual = kind == "code" and _visual(cell)
        rows.append({"id": cid, "key": key(cell), "type": typ, "why": why})
    return rows


def _notebooks(names: list[str] | None) -> list[Path]:
    if names:
        return [NOTEBOOKS / Path(n).name for n in names]
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def _load_plan() -> dict:
    return json.loads(PLAN.read_text(encoding="utf-8")) if PLAN.is_file() else {"overrides": {}, "notebooks": {}}


def make_plan(names: list[str] | None = None) -> dict:
    plan = _load_plan()
    plan.setdefault("overrides", {})
    for path in _notebooks(names):
        nb = json.loads(path.read_text(encoding="utf-8"))
        plan.setdefault("notebooks", {})[path.name] = plan_notebook(nb, plan["overrides"].get(path.name))
    plan["notebooks"] = dict(sorted(plan["notebooks"].items()))
    PLAN.parent.mkdir(parents=True, exist_ok=True)
    PLAN.write_text(json.dumps(plan, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return plan


def planned_types(nb: dict, rows: list[dict], overrides: dict[str, str] | None = None) -> list[str]:
    """The slide type of each cell: by id from the plan, else by the cell's opening words, else by the rules."""
    by_id = {r["id"]: r["type"] for r in rows if r["id"]}
    by_key = {r["key"]: r["type"] for r in rows}
    ruled = plan_notebook(nb, overrides)
    return [by_id.get(c.get("id"), by_key.get(key(c), ruled[i]["type"])) for i, c in enumerate(nb["cells"])]


def apply(names: list[str] | None = None) -> list[str]:
    """Write the plan into the notebooks; returns the names of those that changed."""
    plan, changed = _load_plan(), []
    for path in _notebooks(names):
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        # nbformat's own layout (indent 1, non-ASCII kept, keys sorted), so a diff shows only the metadata lines;
        # a notebook written with its keys in another order keeps that order
        sort = json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n" == text
        rows = plan.get("notebooks", {}).get(path.name, [])
        types = planned_types(nb, rows, plan.get("overrides", {}).get(path.name))
        touched = False
        for cell, typ in zip(nb["cells"], types):
            if cell.setdefault("metadata", {}).get("slideshow", {}).get("slide_type") != typ:
                cell["metadata"].setdefault("slideshow", {})["slide_type"] = typ
                touched = True
        if touched:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=sort) + "\n", encoding="utf-8")
            changed.append(path.name)
    return changed


def problems(nb: dict) -> list[str]:
    """What keeps a notebook from being shown as slides: cells without a valid type, no title slide, no sections."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        typ = cell.get("metadata", {}).get("slideshow", {}).get("slide_type")
        if typ not in TYPES:
            out.append(f"cell {i} ({key(cell)[:40]!r}) has slide type {typ!r}")
    types = [c.get("metadata", {}).get("slideshow", {}).get("slide_type") for c in nb["cells"]]
    if types and types[0] != "slide":
        out.append("the first cell does not start a slide")
    if types.count("slide") < 2:
        out.append(f"{types.count('slide')} slides: a lecture needs its sections as slides")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("plan", "apply", "check"))
    parser.add_argument("notebooks", nargs="*", help="notebook file names (default: every notebook)")
    args = parser.parse_args(argv)
    if args.command == "plan":
        plan = make_plan(args.notebooks)
        for name, rows in plan["notebooks"].items():
            counts = {t: sum(r["type"] == t for r in rows) for t in TYPES}
            print(f"{name}: " + ", ".join(f"{n} {t}" for t, n in counts.items() if n))
        return 0
    if args.command == "apply":
        changed = apply(args.notebooks)
        print("slide metadata written into: " + (", ".join(changed) if changed else "nothing (already as planned)"))
        return 0
    bad = {p.name: problems(json.loads(p.read_text(encoding="utf-8"))) for p in _notebooks(args.notebooks)}
    bad = {k: v for k, v in bad.items() if v}
    for name, found in bad.items():
        print(f"{name}: " + "; ".join(found[:5]), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
