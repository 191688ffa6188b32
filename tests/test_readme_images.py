"""The README's pictures and links: each picture exists, is at most 300 KB, is one that tools/readme_images.py makes
and is shown; every relative link of the README and of docs/*.md reaches a file, and every #anchor a heading."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
LIMIT_BYTES = 300_000
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# ![alt](path) and <img src="path">, outside code
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)|<img\s[^>]*?src=\"([^\"]+)\"")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")


def _prose(text: str) -> str:
    """The Markdown without its fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _images(text: str) -> list[str]:
    """The pictures a page shows from the repository (not badges served by other sites)."""
    return [a or b for a, b in _IMAGE.findall(_prose(text)) if not re.match(r"[a-z]+:", a or b)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", _prose(path.read_text(encoding="utf-8")), flags=re.M)
    return {_slug(h) for h in headings}


def test_readme_shows_pictures_that_exist_are_small_and_are_made_by_the_script():
    images = _images(README)
    assert 2 <= len(images) <= 3, f"README.md shows {len(images)} pictures: {images} (two or three, from the course)"
    script = (REPO / "tools" / "readme_images.py").read_text(encoding="utf-8")
    for image in images:
        path = REPO / image
        assert image.startswith("docs/images/") and path.is_file(), f"README.md shows {image}, not a file in docs/images/"
        size = path.stat().st_size
        assert size <= LIMIT_BYTES, f"{image} is {size:,} bytes, over {LIMIT_BYTES:,}"
        assert f'"{path.name}"' in script, f"{image} is not one of the pictures tools/readme_images.py makes"
    made = set(re.findall(r'\("(\w+\.png)", "notebooks/', script))
    assert made == {Path(i).name for i in images}, f"tools/readme_images.py makes {made}, the README shows {images}"


def test_the_first_screen_holds_the_sentences_a_picture_and_the_set_up_commands():
    """Before the second heading: the three sentences, the first picture and the Linux and JupyterLab commands."""
    second = [m.start() for m in re.finditer(r"^## ", README, flags=re.M)][1]
    first_screen = README[:second]
    assert _images(first_screen), "no picture before the notebook table"
    intro = re.split(r"\n\s*\n", README.split("\n", 3)[3])[0]
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", " ".join(intro.split())) if s]
    assert len(sentences) == 3, f"the README opens with {len(sentences)} sentences, not three: {sentences}"
    assert "--index-url https://download.pytorch.org/whl/cpu" in first_screen
    assert "jupyter lab --notebook-dir=. notebooks/00_start_here.ipynb" in first_screen
    assert first_screen.count("\n") < 60, "the README's first screen grew past 60 lines"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_reaches_a_file_and_a_heading(page):
    broken = []
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))) + _images(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue   # http(s), mailto: not checked here (no network)
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)} has broken links:\n  " + "\n  ".join(broken)
