"""Offline attention views: the HTML fetches nothing, shapes are checked, and the views draw in a browser.

The browser tests load each view in headless Chromium with every network request aborted, and count
what d3 drew. They need the Python package ``playwright`` and a Chromium binary (``/usr/bin/chromium``,
or set ``LMLIB_CHROMIUM``); playwright's own browser download is never used.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from lmlib.course import attention_views as av
from lmlib.course import viz

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("LMLIB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def random_attention(layers, heads, queries, keys, seed=0, batch_axis=True):
    g = torch.Generator().manual_seed(seed)
    shape = (1, heads, queries, keys) if batch_axis else (heads, queries, keys)
    return [torch.randn(shape, generator=g).softmax(-1) for _ in range(layers)]


TOKENS = ["the", "cat", "sat", "on", "the", "mat", "<eos>"]
SRC = ["she", "is", "tall", ".", "<eos>"]
TGT = ["<bos>", "elle", "est", "grande", "."]


@pytest.fixture(scope="module")
def views():
    """One of each kind of view, built once."""
    torch.set_num_threads(1)
    enc, dec, cross = (random_attention(2, 4, 5, 5, 1), random_attention(2, 4, 5, 5, 2), random_attention(2, 4, 5, 5, 3))
    return {
        "head": av.head_view(random_attention(3, 4, 7, 7), TOKENS),
        "model": av.model_view(random_attention(3, 4, 7, 7, batch_axis=False), TOKENS),
        "encoder-decoder head": av.encoder_decoder_view(enc, dec, cross, encoder_tokens=SRC, decoder_tokens=TGT),
        "encoder-decoder model": av.encoder_decoder_view(enc, dec, cross, encoder_tokens=SRC, decoder_tokens=TGT,
                                                         view="model"),
    }


# --- the HTML itself -------------------------------------------------------------------------------

# Addresses that occur in the inlined code without being fetched: XML namespaces and comments.
NOT_FETCHED = {"http://www.w3.org/1999/xhtml", "http://www.w3.org/1999/xlink", "http://www.w3.org/2000/svg",
               "http://www.w3.org/2000/xmlns/", "http://www.w3.org/XML/1998/namespace", "https://d3js.org",
               "https://github.com/tensorflow/tensor2tensor/blob/master/tensor2tensor/visualization/attention.js"}


def split_markup(html):
    """(markup outside <script> elements, the scripts' text)."""
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S | re.I)
    return re.sub(r"(<script\b[^>]*>).*?</script>", r"\1</script>", html, flags=re.S | re.I), "\n".join(scripts)


def test_html_fetches_nothing(views):
    for name, view in views.items():
        html = view.data
        assert isinstance(html, str) and view._repr_html_() == html, name
        markup, scripts = split_markup(html)
        assert not re.search(r"<script[^>]*\bsrc\s*=", markup, re.I), f"{name}: a <script src=...> is left"
        assert not re.search(r"<link\b|<style\b|@import", markup, re.I), f"{name}: a stylesheet is left"
        # (d3 and jQuery still contain their own `define(...)` registration, which the wrapper disarms:
        # the browser test below gives the page a `define` that throws if called)
        assert not re.search(r"\brequire(js)?\s*[(.]", scripts), f"{name}: a require.js call is left"
        addresses = set(re.findall(r"https?://[^\s'\"\\)]*", html))
        assert addresses <= NOT_FETCHED, f"{name}: addresses in the HTML: {sorted(addresses - NOT_FETCHED)}"
        assert "d3js.org v5.16.0" in scripts and "jQuery v3.7.1" in scripts, f"{name}: the vendored libraries are not inlined"


def test_every_view_has_its_own_root_id(views):
    ids = [re.findall(r'<div id="(bertviz-[0-9a-f]+)"', v.data) for v in views.values()]
    assert all(len(i) == 1 for i in ids)
    assert len({i[0] for i in ids}) == len(ids)


def test_batch_axis_is_optional():
    with_batch = av.head_view(random_attention(2, 3, 4, 4, seed=5), TOKENS[:4]).data
    without = av.head_view(random_attention(2, 3, 4, 4, seed=5, batch_axis=False), TOKENS[:4]).data
    same_id = lambda html: re.sub(r"bertviz-[0-9a-f]+", "bertviz-ID", html)  # noqa: E731
    assert same_id(with_batch) == same_id(without)


def test_a_token_cannot_close_the_script():
    view = av.head_view(random_attention(1, 2, 3, 3), ["</script>", "<!--", "x"])
    assert view.data.lower().count("</script") == 1  # only the element's own end tag
    assert "<!--" not in view.data


def test_viz_exposes_the_views():
    assert viz.head_view is av.head_view and viz.model_view is av.model_view
    assert viz.encoder_decoder_view is av.encoder_decoder_view and viz.transformer_view is av.transformer_view


def test_transformer_view_reads_attention_maps():
    from lmlib.models.transformer import AttentionMaps

    maps = AttentionMaps(random_attention(2, 4, 5, 5, 1), random_attention(2, 4, 6, 6, 2),
                         random_attention(2, 4, 6, 5, 3))
    view = av.transformer_view(maps, SRC, ["<bos>", "a", "b", "c", "d", "e"])
    names = re.findall(r'<option value="\d">(\w+)</option>', split_markup(view.data)[0])
    assert names == ["Encoder", "Decoder", "Cross"]
    only_cross = av.transformer_view(maps, SRC, ["<bos>", "a", "b", "c", "d", "e"], parts=["cross"], view="model")
    assert "<option" not in split_markup(only_cross.data)[0]
    with pytest.raises(ValueError, match="parts must be"):
        av.transformer_view(maps, SRC, TGT, parts=["encoder", "memory"])


def test_save_writes_a_standalone_page(tmp_path, views):
    path = views["head"].save(tmp_path / "head.html")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and views["head"].data in text


def test_vendored_files_match_their_hashes_and_ship_with_the_package():
    for name in av.VENDORED:
        assert av.vendored(name)  # raises if the sha256 differs
    readme = (av.VENDOR / "README.md").read_text()
    for name, digest in av.VENDORED.items():
        assert digest in readme, f"vendor/README.md does not list the sha256 of {name}"
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["lmlib"]
    shipped = {Path(p).resolve() for pattern in patterns for p in glob.glob(str(ROOT / "lmlib" / pattern))}
    for name in list(av.VENDORED) + ["d3.LICENSE", "jquery.LICENSE.txt", "README.md"]:
        assert (av.VENDOR / name).resolve() in shipped, f"{name} is not in [tool.setuptools.package-data]"


# --- shape errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("attention, message", [
    (random_attention(2, 4, 6, 6), r"attention\[0\] has shape \(1, 4, 6, 6\), expected \(1, heads, 7, 7\)"),
    ([torch.rand(2, 4, 7, 7)], r"attention\[0\] has shape \(2, 4, 7, 7\): a batch of 2 sentences"),
    ([torch.rand(7, 7)], r"attention\[0\] has shape \(7, 7\), expected \(1, heads, 7, 7\) or \(heads, 7, 7\)"),
    ([torch.rand(1, 4, 7, 7), torch.rand(1, 2, 7, 7)], r"attention\[1\] has 2 heads but attention\[0\] has 4"),
    ([], r"attention is empty"),
    ([torch.full((1, 2, 7, 7), float("nan"))], r"NaN"),
])
def test_shape_errors_name_expected_and_actual(attention, message):
    for view in (av.head_view, av.model_view):
        with pytest.raises(ValueError, match=message):
            view(attention, TOKENS)


def test_one_tensor_for_all_layers_is_refused():
    with pytest.raises(TypeError, match=r"one tensor per layer.*shape \(2, 1, 4, 7, 7\)"):
        av.head_view(torch.rand(2, 1, 4, 7, 7), TOKENS)
    with pytest.raises(TypeError, match="sequence of tokens"):
        av.head_view(random_attention(1, 2, 3, 3), "a b c")


def test_cross_attention_shape_is_decoder_by_encoder():
    swapped = random_attention(2, 4, 5, 4)  # (encoder, decoder) instead of (decoder, encoder)
    with pytest.raises(ValueError, match=r"cross_attention\[0\] has shape \(1, 4, 5, 4\), expected \(1, heads, 4, 5\)"):
        av.encoder_decoder_view(cross_attention=swapped, encoder_tokens=SRC, decoder_tokens=TGT[:4])


def test_encoder_decoder_argument_errors():
    enc = random_attention(2, 4, 5, 5)
    with pytest.raises(ValueError, match="at least one"):
        av.encoder_decoder_view(encoder_tokens=SRC)
    with pytest.raises(ValueError, match="encoder_tokens are needed"):
        av.encoder_decoder_view(enc)
    with pytest.raises(ValueError, match="different numbers of layers"):
        av.encoder_decoder_view(enc, random_attention(3, 4, 5, 5), encoder_tokens=SRC, decoder_tokens=TGT)
    # with include_layers naming layers both have, different depths are fine
    av.encoder_decoder_view(enc, random_attention(3, 4, 5, 5), encoder_tokens=SRC, decoder_tokens=TGT,
                            include_layers=[0, 1])
    with pytest.raises(TypeError, match="model view does not take heads"):
        av.encoder_decoder_view(enc, encoder_tokens=SRC, view="model", heads=[0])
    with pytest.raises(ValueError, match=r"layer 5 is not among the layers shown \[0, 1\]"):
        av.head_view(enc, SRC, layer=5)
    with pytest.raises(ValueError, match=r"heads must be a non-empty list of head indices 0..3"):
        av.head_view(enc, SRC, heads=[4])


# --- in a browser, with the network blocked ----------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (set LMLIB_CHROMIUM to its path)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


# A page that already has what a notebook page may have: an AMD loader and its own $.
PAGE_GLOBALS = """<script>
window.$ = "the page's own $";
window.define = function () { throw new Error("a library registered with the page's AMD loader"); };
window.define.amd = {};
</script>"""


def render(browser, body: str) -> dict:
    """Load ``body`` as a page with every request aborted; what was drawn, requested and thrown."""
    context = browser.new_context(offline=True)
    page = context.new_page()
    requests, errors = [], []

    def block(route):
        url = route.request.url
        if url.startswith(("about:blank", "data:")):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", block)
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_content(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{PAGE_GLOBALS}{body}</body></html>",
                     wait_until="load")
    counts = page.evaluate("""() => [...document.querySelectorAll('div[id^="bertviz-"]')].map(root => ({
        id: root.id,
        svgs: root.querySelectorAll('svg').length,
        rects: root.querySelectorAll('svg rect').length,
        lines: root.querySelectorAll('svg line').length,
        texts: [...root.querySelectorAll('svg text')].map(t => t.textContent),
    }))""")
    page_dollar = page.evaluate("() => window.$")
    result = dict(page=page, context=context, views=counts, page_dollar=page_dollar,
                  external=[u for u in requests if not u.startswith(("about:blank", "data:"))], errors=errors)
    return result


def test_views_draw_offline_side_by_side(browser, views):
    result = render(browser, "\n".join(v.data for v in views.values()))
    try:
        assert result["external"] == [], f"requests to other hosts: {result['external']}"
        assert result["errors"] == [], f"page errors: {result['errors']}"
        assert result["page_dollar"] == "the page's own $"
        assert len(result["views"]) == len(views)
        drawn = dict(zip(views, result["views"], strict=True))
        for name, d in drawn.items():
            assert d["svgs"] >= 1 and d["rects"] > 0 and d["lines"] > 0, f"{name} drew nothing: {d}"
        # head view: one line per (query, key) pair for each of the 4 heads, a box per token on each side
        assert drawn["head"]["lines"] >= 4 * len(TOKENS) ** 2
        assert drawn["head"]["texts"].count("cat") == 2
        # model view: a thumbnail per layer and head, each with a line per (query, key) pair
        assert drawn["model"]["lines"] >= 3 * 4 * len(TOKENS) ** 2
        assert drawn["encoder-decoder head"]["texts"][:len(SRC)] == SRC  # the encoder is shown first

        page = result["page"]
        # interaction uses d3 5's (d, i) handlers: hover a token, switch to cross-attention, open a thumbnail
        head = drawn["encoder-decoder head"]["id"]
        page.hover(f"#{head} svg text >> nth=1")
        page.select_option(f"#{head} #filter", "2")
        texts = page.evaluate(f"() => [...document.querySelectorAll('#{head} svg text')].map(t => t.textContent)")
        assert texts[:len(TGT)] == TGT and SRC[0] in texts, texts
        model = drawn["model"]["id"]
        page.click(f"#{model} svg g rect >> nth=-1", force=True)
        assert result["errors"] == [], f"page errors after interacting: {result['errors']}"
        assert result["external"] == []
    finally:
        result["context"].close()


def test_stock_bertviz_draws_nothing_offline(browser):
    """The reason for this module: bertviz's own output, with the network blocked, draws nothing."""
    from bertviz import head_view

    stock = head_view(random_attention(2, 2, 3, 3), ["a", "b", "c"], html_action="return").data
    result = render(browser, stock)
    try:
        assert result["external"], "stock bertviz made no request; the test page would not show a blocked CDN"
        assert all(v["svgs"] == 0 for v in result["views"])
    finally:
        result["context"].close()


def test_views_are_json_data_not_python_reprs(views):
    """The weights reach the page as JSON numbers (bertviz json.dumps the tensors' lists)."""
    match = re.search(r"const params = (\{.*?\}); // HACK", views["head"].data, re.S)
    params = json.loads(match[1])
    assert len(params["attention"][0]["attn"]) == 3 and params["attention"][0]["left_text"] == TOKENS


def test_the_page_carries_each_weight_to_four_decimals():
    attention = random_attention(3, 4, 7, 7)
    view = av.head_view(attention, TOKENS)
    params = json.loads(re.search(r"const params = (\{.*?\}); // HACK", view.data, re.S)[1])
    shown = torch.tensor(params["attention"][0]["attn"], dtype=torch.float64)  # (layers, heads, T, T)
    exact = torch.cat([a.reshape(1, 4, 7, 7).double() for a in attention])
    assert (shown - exact).abs().max() <= 5e-5 + 1e-12  # within half of the last kept decimal
    assert torch.equal(shown, shown.mul(1e4).round().div(1e4))  # and no digits beyond the fourth


# --- shared libraries: one copy of d3 and jQuery per page -----------------------------------------------------

def test_a_shared_view_carries_no_library_and_the_library_script_carries_both():
    attention = random_attention(3, 4, 7, 7)
    inline, shared = av.head_view(attention, TOKENS), av.head_view(attention, TOKENS, libraries="shared")
    markup, scripts = split_markup(shared.data)
    assert "d3js.org v5.16.0" not in scripts and "jQuery v3.7.1" not in scripts
    assert "window.lmlibBertvizLibraries" in scripts and "const params" in scripts
    assert len(shared.data) < len(inline.data) - 300_000  # the libraries are ~335 KB
    light = av.model_view(attention, TOKENS, libraries="shared")  # the model view too
    assert "d3js.org v5.16.0" not in split_markup(light.data)[1] and "d3js.org v5.16.0" in av.model_view(attention, TOKENS).data
    library = av.library_script().data
    assert "d3js.org v5.16.0" in library and "jQuery v3.7.1" in library and "window.lmlibBertvizLibraries" in library
    with pytest.raises(ValueError, match="libraries must be one of"):
        av.head_view(attention, TOKENS, libraries="cdn")


def test_shared_views_draw_offline_with_one_copy_of_the_libraries(browser):
    first = av.head_view(random_attention(3, 4, 7, 7, 1), TOKENS, libraries="shared")
    second = av.head_view(random_attention(2, 2, 5, 5, 2), SRC, libraries="shared")
    third = av.model_view(random_attention(2, 2, 5, 5, 3), SRC, libraries="shared")
    # the views come first on the page, as a restored notebook may draw them before the library's output
    result = render(browser, first.data + second.data + third.data + av.library_script().data)
    try:
        assert result["external"] == [] and result["errors"] == [], result
        page = result["page"]
        page.wait_for_function("() => document.querySelectorAll('div[id^=\"bertviz-\"] svg line').length > 0",
                               timeout=10_000)
        for root in (r["id"] for r in result["views"]):
            lines = page.evaluate(f"() => document.querySelectorAll('#{root} svg line').length")
            assert lines > 0, f"{root} drew nothing"
        assert page.evaluate("() => window.$") == "the page's own $"
    finally:
        result["context"].close()


def test_a_shared_view_without_the_library_says_so(browser):
    view = av.head_view(random_attention(1, 1, 3, 3), ["a", "b", "c"], libraries="shared")
    result = render(browser, view.data)
    try:
        page = result["page"]
        page.wait_for_function("() => document.body.innerText.includes('has no d3 on this page')", timeout=15_000)
        assert result["external"] == []
    finally:
        result["context"].close()
