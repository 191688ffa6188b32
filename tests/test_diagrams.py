"""The diagrams the notebooks show: every image a notebook's markdown refers to exists, is a well-formed SVG with a
size and real text; the committed SVGs are what tools/diagrams.py draws, in the course's colours; every
notebook 04-11 shows at least one."""

import importlib.util
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("diagrams", REPO / "tools" / "diagrams.py")
diagrams = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(diagrams)
NOTEBOOKS = REPO / "notebooks"
SVG = "{http://www.w3.org/2000/svg}"
# The same pattern as the browser test's (tests/browser/labdriver.py): ![alt](path "title") or <img src="path">.
IMAGE_REF = re.compile(r"""!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+["'][^"']*["'])?\s*\)|<img\s[^>]*?src=["']([^"']+)["']""")


def image_refs(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [a or b for cell in cells if cell["cell_type"] == "markdown"
            for a, b in IMAGE_REF.findall("".join(cell["source"]))]


REFS = [(nb.name, ref) for nb in sorted(NOTEBOOKS.glob("*.ipynb")) for ref in image_refs(nb)]


def check_svg(path: Path) -> list[str]:
    """What is wrong with the SVG at ``path`` (empty when nothing is)."""
    if not path.is_file():
        return [f"{path} does not exist"]
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return [f"{path} is not well-formed XML: {e}"]
    problems = []
    if root.tag != SVG + "svg":
        problems.append(f"{path}: the root element is {root.tag}, not an SVG <svg>")
    box = root.get("viewBox", "").replace(",", " ").split()
    if not (len(box) == 4 and float(box[2]) > 0 and float(box[3]) > 0) and not (root.get("width") and root.get("height")):
        problems.append(f"{path}: no viewBox and no width/height, so it has no size of its own")
    texts = ["".join(t.itertext()).strip() for t in root.iter(SVG + "text")]
    if not any(texts):
        problems.append(f"{path}: no <text> with any text in it (labels must be real SVG text)")
    if re.search(r"""(?:href|src)=["'](?:https?:)?//""", path.read_text(encoding="utf-8")):
        problems.append(f"{path}: refers to a remote resource; the figure must work offline")
    return problems


def test_notebooks_refer_to_images():
    assert REFS, "no notebook's markdown refers to an image; the diagrams are missing"


@pytest.mark.parametrize("notebook,ref", REFS, ids=[f"{n}:{r}" for n, r in REFS])
def test_referenced_image_exists_and_is_an_svg_with_text(notebook, ref):
    assert not re.match(r"^(?:[a-z]+:)?//", ref), f"{notebook} refers to a remote image {ref}; it must work offline"
    path = NOTEBOOKS / ref.split("?")[0]
    if path.suffix == ".svg":
        assert not check_svg(path), f"{notebook}: " + "; ".join(check_svg(path))
    else:
        assert path.is_file() and path.stat().st_size > 0, f"{notebook} refers to {ref}, which does not exist"


@pytest.mark.parametrize("number", [f"{n:02d}" for n in range(4, 12)])
def test_each_notebook_04_to_11_shows_a_diagram(number):
    [notebook] = NOTEBOOKS.glob(f"{number}_*.ipynb")
    assert any(ref.startswith("figures/") and ref.endswith(".svg") for ref in image_refs(notebook)), \
        f"{notebook.name} shows no diagram from notebooks/figures/"


def test_committed_svgs_are_what_the_generator_draws():
    drawn = diagrams.render_all()
    for name, text in drawn.items():
        path = diagrams.FIGURES / name
        assert path.is_file(), f"{path} is missing: run python tools/diagrams.py"
        assert path.read_text(encoding="utf-8") == text, f"{path} differs from what tools/diagrams.py draws: run " \
                                                         "python tools/diagrams.py and commit the result"
    shown = {ref.rsplit("/", 1)[-1] for _, ref in REFS}
    assert set(drawn) <= shown, f"drawn but shown by no notebook: {sorted(set(drawn) - shown)}"


def test_svgs_are_small():
    for name, text in diagrams.render_all().items():
        assert len(text.encode()) < 20_000, f"{name} is {len(text.encode()):,} bytes; keep a diagram small"


def test_palette_is_the_courses():
    plotly_io = pytest.importorskip("plotly.io")
    template = plotly_io.templates["plotly_white"].layout
    assert [c.lower() for c in template.colorway[:6]] == [c.lower() for c in (
        diagrams.BLUE, diagrams.RED, diagrams.GREEN, diagrams.PURPLE, diagrams.ORANGE, diagrams.CYAN)]
    assert template.font.color.lower() == diagrams.INK.lower()


def test_check_svg_finds_a_broken_file(tmp_path):
    assert check_svg(tmp_path / "missing.svg")
    (tmp_path / "bad.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'><text>a</svg>")
    assert "not well-formed" in check_svg(tmp_path / "bad.svg")[0]
    (tmp_path / "empty.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 10 10'><rect/></svg>")
    assert "no <text>" in check_svg(tmp_path / "empty.svg")[0]
    (tmp_path / "nosize.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'><text>a</text></svg>")
    assert "no viewBox" in check_svg(tmp_path / "nosize.svg")[0]


def test_markup_gives_subscripts_and_escapes():
    assert diagrams.rich("h_{k,j} < 1 & x", 10) == 'h<tspan dy="3.0" font-size="72%">k,j</tspan><tspan dy="-3.0"> &lt; 1 &amp; x</tspan>'
    assert diagrams.rich("mem_len", 10) == "mem_len"
