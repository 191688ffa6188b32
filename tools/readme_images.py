"""The README's pictures, made from the course itself: screenshots of the course website in headless Chromium.

    .venv/bin/python tools/readme_images.py              # builds the site into a temporary folder first
    .venv/bin/python tools/readme_images.py --site _site # or takes one already built by tools/build_site.py

Writes into docs/images/ (each PNG at most 300 KB; tests/test_readme_images.py checks it):

* ``attention_view.png``: bertviz's head view of the shipped BERT on a sentence pair (notebook 10);
* ``stlr_widget.png``: the slanted-triangular-learning-rate widget, as its run left it (notebook 07);
* ``transfer_plot.png``: the IMDb transfer comparison, accuracy against labelled reviews (notebook 12).

Each picture is found by what it shows (the first head view, the widget whose figure is titled "STLR", the figure
whose title starts "IMDb" and names labelled reviews), so a re-run notebook gives the same pictures of its new
outputs. The system's Chromium is used, found as the browser tests find it (``tests/browser/labdriver.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "docs" / "images"
LIMIT_BYTES = 300_000
SCALE = 1.5   # pixels per CSS pixel: sharp on high-density screens; the README sizes each picture in CSS pixels

sys.path.insert(0, str(REPO / "tests" / "browser"))
from labdriver import find_chromium  # noqa: E402

_spec = importlib.util.spec_from_file_location("build_site", REPO / "tools" / "build_site.py")
build_site = importlib.util.module_from_spec(_spec)
sys.modules["build_site"] = build_site
_spec.loader.exec_module(build_site)

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-dev-shm-usage"]

# The region to capture, found in the page: (x, y, width, height) in CSS pixels, or a string saying what is missing.
JS_ATTENTION = r"""() => {
  const view = Array.from(document.querySelectorAll('[id^="bertviz-"]')).find(el =>
    /^bertviz-[0-9a-f]+$/.test(el.id) && /Layer/.test(el.innerText));
  if (!view) return 'no bertviz head view (one with a Layer menu) on the page';
  view.scrollIntoView();
  const boxes = [view.querySelector('select, span, div'), ...view.querySelectorAll('svg text, svg rect')]
    .filter(Boolean).map(el => el.getBoundingClientRect()).filter(r => r.width > 0);
  const left = Math.min(...boxes.map(r => r.left)), top = Math.min(...boxes.map(r => r.top));
  const right = Math.max(...boxes.map(r => r.right)), bottom = Math.max(...boxes.map(r => r.bottom));
  return [left - 8, top - 8, right - left + 24, bottom - top + 16];
}"""

JS_STLR = r"""() => {
  const widget = Array.from(document.querySelectorAll('.lmlib-widget')).find(el =>
    Array.from(el.querySelectorAll('.gtitle')).some(t => /^STLR/.test(t.textContent)));
  if (!widget) return 'no widget with a figure titled "STLR..." on the page';
  const body = widget.querySelector('.lmlib-w-vbox') || widget;
  body.scrollIntoView();
  const r = body.getBoundingClientRect();
  return [r.left - 8, r.top - 8, r.width + 16, r.height + 16];
}"""

JS_TRANSFER = r"""() => {
  const plot = Array.from(document.querySelectorAll('.lmlib-plotly')).find(el =>
    Array.from(el.querySelectorAll('.gtitle')).some(t => /^IMDb/.test(t.textContent) && /labelled/.test(t.textContent)));
  if (!plot) return 'no figure titled "IMDb ... labelled ..." on the page';
  plot.scrollIntoView();
  const r = plot.getBoundingClientRect();
  return [r.left, r.top, r.width, r.height];
}"""

PICTURES = [  # (file, page, how to find the region)
    ("attention_view.png", "notebooks/10_bert.html", JS_ATTENTION),
    ("stlr_widget.png", "notebooks/07_ulmfit.html", JS_STLR),
    ("transfer_plot.png", "notebooks/12_comparison.html", JS_TRANSFER),
]


def shoot(site: Path, out: Path = IMAGES) -> list[Path]:
    """Screenshot each picture from the built site into ``out``; returns the files written."""
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no Chromium found (install the 'chromium' package, or set CHROMIUM=/path/to/chrome)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with build_site.serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1200}, device_scale_factor=SCALE)
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith((base, "data:", "blob:"))
                       else r.abort())
            for name, path, js in PICTURES:
                page.goto(base + path, wait_until="load")
                page.wait_for_function("() => !document.querySelector('.lmlib-plotly:not(.js-plotly-plot)')",
                                       timeout=60_000)
                page.wait_for_timeout(500)
                region = page.evaluate(js)
                if isinstance(region, str):
                    raise SystemExit(f"{path}: {region}")
                page.wait_for_timeout(200)
                region = page.evaluate(js)   # again, after scrolling it into view
                x, y, width, height = (max(0, v) for v in region)
                target = out / name
                page.screenshot(path=str(target), clip={"x": x, "y": y, "width": width, "height": height})
                size = target.stat().st_size
                if size > LIMIT_BYTES:
                    raise SystemExit(f"{target} is {size:,} bytes, over the README's limit of {LIMIT_BYTES:,}")
                written.append(target)
                print(f"{target.relative_to(REPO) if target.is_relative_to(REPO) else target}: "
                      f"{int(width)}x{int(height)} px, {size / 1000:.0f} KB")
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a site built by tools/build_site.py (default: build one now)")
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder for the pictures (default: docs/images/)")
    args = parser.parse_args(argv)
    if args.site:
        shoot(args.site, args.out)
        return 0
    with tempfile.TemporaryDirectory(prefix="lmlib-readme-images-") as tmp:
        build_site.build(Path(tmp) / "_site", quiet=True)
        shoot(Path(tmp) / "_site", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
