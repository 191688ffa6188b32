"""The course's plotting style (lmlib.course.viz): curves told apart by more than colour, colours that stay apart
under the common colour-vision deficiencies, and slide metadata in every notebook (tools/slides.py)."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from lmlib.course import viz

REPO = Path(__file__).resolve().parents[1]

# Machado, Oliveira & Fernandes (2009), "A Physiologically-based Model for Simulation of Color Vision Deficiency",
# IEEE TVCG 15(6): the severity-1.0 matrices, applied to linear RGB.
CVD = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}
MIN_DELTA_E = 15.0   # CIE76 distance that stays clearly visible between two thin lines


def _linear(hex_colour: str) -> np.ndarray:
    c = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ np.clip(linear, 0, 1)
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def closest_pair(palette, vision=None) -> tuple[float, tuple[str, str]]:
    """The smallest CIE76 distance between two colours of the palette, as seen with the given deficiency."""
    seen = {c: _lab(np.array(CVD[vision]) @ _linear(c) if vision else _linear(c)) for c in palette}
    return min((float(np.linalg.norm(seen[a] - seen[b])), (a, b)) for a, b in itertools.combinations(palette, 2))


@pytest.mark.parametrize("vision", [None, *CVD])
def test_the_palette_stays_apart_with_each_common_colour_vision_deficiency(vision):
    distance, pair = closest_pair(viz.PALETTE, vision)
    assert distance >= MIN_DELTA_E, f"{pair} are only ΔE {distance:.1f} apart for {vision or 'normal vision'}"


def test_the_check_fails_for_plotlys_default_palette():
    plotly_io = pytest.importorskip("plotly.io")
    default = plotly_io.templates["plotly"].layout.colorway[:len(viz.PALETTE)]
    assert min(closest_pair(default, v)[0] for v in CVD) < MIN_DELTA_E


def test_each_curve_differs_in_dash_and_marker_as_well_as_colour():
    fig = viz.line_plot({f"curve {i}": [i, i + 1.0, i + 0.5] for i in range(len(viz.PALETTE))}, markers=True)
    full = fig.layout.template
    assert fig.layout.template.layout.colorway == viz.PALETTE
    styles = [(s.line.dash, s.marker.symbol) for s in full.data.scatter]
    assert len(set(d for d, _ in styles)) == len(styles) == len(set(m for _, m in styles)) >= len(viz.PALETTE)
    # a figure built anywhere after the import gets the same template (plotly's default)
    import plotly.graph_objects as go
    assert go.Figure().layout.template.layout.colorway == viz.PALETTE


def _slides():
    spec = importlib.util.spec_from_file_location("slides", REPO / "tools" / "slides.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("notebook", sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb")))
def test_every_notebook_has_slide_metadata(notebook):
    nb = json.loads((REPO / "notebooks" / notebook).read_text(encoding="utf-8"))
    problems = _slides().problems(nb)
    assert not problems, f"{notebook}: " + "; ".join(problems[:5]) + " (run: python tools/slides.py apply)"


def test_the_slide_check_finds_a_cell_without_metadata():
    slides = _slides()
    nb = {"cells": [{"cell_type": "markdown", "source": "# T", "metadata": {"slideshow": {"slide_type": "slide"}}},
                    {"cell_type": "markdown", "source": "## A", "metadata": {"slideshow": {"slide_type": "slide"}}},
                    {"cell_type": "code", "source": "x = 1", "metadata": {}}]}
    assert any("cell 2" in p for p in slides.problems(nb))
    planned = slides.plan_notebook(nb)
    assert [r["type"] for r in planned][:2] == ["slide", "slide"]


@pytest.mark.parametrize("svg", sorted(p.name for p in (REPO / "notebooks" / "figures").glob("*.svg")))
def test_every_diagram_says_what_it_shows(svg):
    import re

    text = (REPO / "notebooks" / "figures" / svg).read_text(encoding="utf-8")
    head = text[:text.find("<defs>")]
    assert 'role="img"' in head and re.search(r'aria-label="[^"]{20,}"', head), f"{svg}: no role=img with an aria-label"
    assert re.search(r"<title>[^<]{5,}</title>", head) and re.search(r"<desc>[^<]{20,}</desc>", head), \
        f"{svg}: no <title> and <desc> saying what it shows"


def test_every_picture_has_alt_text_where_it_is_shown():
    import re

    missing = []
    for path in [*sorted((REPO / "notebooks").glob("*.ipynb")), REPO / "README.md"]:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
        missing += [f"{path.name}: ![]({src})" for alt, src in re.findall(r"!\[([^\]]*)\]\(([^)\s]+)", text)
                    if len(alt.strip()) < 10]
        missing += [f"{path.name}: {tag[:80]}" for tag in re.findall(r"<img\s[^>]*>", text)
                    if not re.search(r'alt="[^"]{10,}"', tag)]
    assert not missing, "pictures without a text alternative that says what they show:\n" + "\n".join(missing)


def test_every_questionnaire_has_8_to_12_questions_whose_numbers_are_in_its_notebook():
    """tools/lecture/content.json: the answers are the notebook's own; a number an answer gives must appear in the
    notebook's prose, code or stored outputs (a typed-in or stale number fails)."""
    import re

    content = json.loads((REPO / "tools" / "lecture" / "content.json").read_text(encoding="utf-8"))
    numbered = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(content) == numbered, "a numbered notebook without a questionnaire, or one for no notebook"
    missing = []
    for name, entry in content.items():
        assert 8 <= len(entry["questions"]) <= 12, f"{name}: {len(entry['questions'])} questions, not 8-12"
        assert entry.get("predict"), f"{name}: no predict-then-run question"
        nb = json.loads((REPO / "notebooks" / name).read_text(encoding="utf-8"))
        text = json.dumps(nb, ensure_ascii=False).replace(",", "")
        for question, answer in entry["questions"]:
            for number in re.findall(r"\d+(?:[.,]\d+)?", answer):
                if len(number) > 1 and number.replace(",", "") not in text:
                    missing.append(f"{name}: {number} (answer to {question!r})")
    assert not missing, "numbers in the answers that their notebook does not give:\n" + "\n".join(missing)
