"""bertviz's attention views, made to draw with no internet access.

bertviz (J. Vig, 2019, *A Multiscale Visualization of Attention in the Transformer Model*, ACL demo)
draws attention with d3 in the browser. Its HTML loads require.js, d3 and jQuery from a CDN at the
moment it is displayed, so offline, or behind a firewall, the output is an empty box. The views here
ask bertviz for the same HTML (``html_action="return"``) and make it self-contained:

* d3 5.16.0 and jQuery 3.7.1 are inlined from ``lmlib/course/vendor/`` (licences and hashes there);
* the require.js tag and ``require.config`` are dropped, and bertviz's drawing function is called
  directly with the two libraries instead of through ``requirejs([...])``;
* the libraries run inside a function whose ``define``, ``module`` and ``exports`` are undefined, so an
  AMD loader on the page (the classic Notebook has one) cannot capture d3 as an anonymous module, and
  jQuery hands the page's own ``$`` back (``noConflict``). Each view keeps its libraries to itself and
  has bertviz's unique ``bertviz-<hex>`` root id, so several views in one notebook do not interfere.

Attention format, as lmlib's models and ``transformers``' ``output_attentions`` give it: a sequence with
one tensor per layer, each ``(1, heads, query, key)``; ``(heads, query, key)`` is accepted too.

Every view is an ``IPython.display.HTML``: ``.data`` is the HTML string, ``.save(path)`` writes a standalone page.

The two libraries are about 335 KB, stored again with every view. A page of many views (a type-your-own box,
whose every drawing is stored in the widget state) can hold them once: ``libraries="shared"`` gives a light view
that draws with the copy :func:`library_script` puts on the page (display that once, before the views).
JupyterLab runs an HTML output's scripts only when it is trusted: views stored in a notebook opened from disk
appear after rerunning the cell (or ``jupyter trust NOTEBOOK``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import torch

try:
    from IPython.display import HTML
except ImportError:  # IPython comes with Jupyter, not with lmlib; without it a view is still its HTML

    class HTML:  # type: ignore[no-redef]
        def __init__(self, data: str):
            self.data = data

        def _repr_html_(self) -> str:
            return self.data

VENDOR = Path(__file__).resolve().parent / "vendor"
# sha256 of the vendored files, as listed in vendor/README.md
VENDORED = {
    "d3.min.js": "5dbe924b3847df010f0b8572dd6ef42ea87d6370eeff72b13ea236247412a53c",
    "jquery.min.js": "fc9a93dd241f6b045cbff0481cf4e1901becd0e12fb45166a8f17f95823f0b1a",
}

LIBRARIES = ("inline", "shared")
SHARED = "lmlibBertvizLibraries"   # the page's one copy of d3 and jQuery for shared views: window[SHARED] = {$, d3}
HEAD_OPTIONS = {"layer", "heads", "include_layers", "prettify_tokens"}
MODEL_OPTIONS = {"include_layers", "include_heads", "display_mode", "prettify_tokens"}


class AttentionView(HTML):
    """An HTML output holding one self-contained bertviz view; ``.data`` is its HTML."""

    def save(self, path: str | Path, title: str = "attention") -> Path:
        """Write the view as a standalone page that any browser opens offline; returns the path."""
        path = Path(path)
        path.write_text(f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
                        f"<body>\n{self.data}\n</body></html>\n", encoding="utf-8")
        return path


def head_view(
    attention: Sequence[torch.Tensor],
    tokens: Sequence[str],
    *,
    sentence_b_start: int | None = None,
    layer: int | None = None,
    heads: Sequence[int] | None = None,
    include_layers: Sequence[int] | None = None,
    prettify_tokens: bool = True,
    libraries: str = "inline",
) -> AttentionView:
    """bertviz's head view of a self-attention model: one layer at a time, one colour per head.

    ``attention``: one tensor per layer, ``(1, heads, T, T)`` or ``(heads, T, T)``; ``tokens``: the T
    tokens. ``layer`` is the layer shown first and ``heads`` the heads switched on (zero-based).
    ``libraries``: "inline" (the view carries d3 and jQuery) or "shared" (it draws with :func:`library_script`'s).
    """
    return _self_view("head", attention, tokens, libraries, sentence_b_start=sentence_b_start, layer=layer,
                      heads=heads, include_layers=include_layers, prettify_tokens=prettify_tokens)


def model_view(
    attention: Sequence[torch.Tensor],
    tokens: Sequence[str],
    *,
    sentence_b_start: int | None = None,
    include_layers: Sequence[int] | None = None,
    include_heads: Sequence[int] | None = None,
    display_mode: str = "light",
    prettify_tokens: bool = True,
    libraries: str = "inline",
) -> AttentionView:
    """bertviz's model view: a thumbnail per layer (rows) and head (columns); click one to enlarge it.

    Same ``attention``, ``tokens`` and ``libraries`` as :func:`head_view`; ``display_mode`` is "light" or "dark".
    """
    return _self_view("model", attention, tokens, libraries, sentence_b_start=sentence_b_start,
                      display_mode=display_mode, include_layers=include_layers, include_heads=include_heads,
                      prettify_tokens=prettify_tokens)


def _self_view(view: str, attention, tokens, libraries: str, **options) -> AttentionView:
    tokens = _tokens(tokens, "tokens")
    attention = _layers(attention, "attention", len(tokens), len(tokens))
    options = _checked(options, view, len(attention), attention[0].size(1))
    raw = getattr(_bertviz(), f"{view}_view")(attention, tokens, html_action="return", **options)
    return AttentionView(self_contained(raw.data, libraries))


def encoder_decoder_view(
    encoder_attention: Sequence[torch.Tensor] | None = None,
    decoder_attention: Sequence[torch.Tensor] | None = None,
    cross_attention: Sequence[torch.Tensor] | None = None,
    *,
    encoder_tokens: Sequence[str] | None = None,
    decoder_tokens: Sequence[str] | None = None,
    view: str = "head",
    **options,
) -> AttentionView:
    """Encoder self-, decoder self- and cross-attention of an encoder-decoder model in one view.

    Shapes per layer: encoder ``(1, heads, S, S)``, decoder ``(1, heads, T, T)``, cross
    ``(1, heads, T, S)`` (decoder positions ask, encoder positions answer), for S ``encoder_tokens``
    and T ``decoder_tokens``; the batch axis may be left out. Give any of the three; with more than one,
    a menu above the view switches between them. ``view`` is "head" or "model"; ``options`` are those
    of :func:`head_view` (``layer``, ``heads``, ``include_layers``, ``prettify_tokens``) or of
    :func:`model_view` (``include_layers``, ``include_heads``, ``display_mode``, ``prettify_tokens``).
    """
    if view not in ("head", "model"):
        raise ValueError(f"view must be 'head' or 'model', got {view!r}")
    allowed = HEAD_OPTIONS if view == "head" else MODEL_OPTIONS
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(f"{view} view does not take {', '.join(unknown)}; it takes {', '.join(sorted(allowed))}")
    if encoder_attention is None and decoder_attention is None and cross_attention is None:
        raise ValueError("give at least one of encoder_attention, decoder_attention, cross_attention")
    if (encoder_attention is not None or cross_attention is not None) and encoder_tokens is None:
        raise ValueError("encoder_tokens are needed to label encoder or cross-attention")
    if (decoder_attention is not None or cross_attention is not None) and decoder_tokens is None:
        raise ValueError("decoder_tokens are needed to label decoder or cross-attention")
    enc = _tokens(encoder_tokens, "encoder_tokens") if encoder_tokens is not None else None
    dec = _tokens(decoder_tokens, "decoder_tokens") if decoder_tokens is not None else None
    given = {"encoder_attention": (encoder_attention, enc, enc), "decoder_attention": (decoder_attention, dec, dec),
             "cross_attention": (cross_attention, dec, enc)}  # (layers, query tokens, key tokens)
    parts = {name: _layers(layers, name, len(queries), len(keys))
             for name, (layers, queries, keys) in given.items() if layers is not None}
    depths = {name: len(layers) for name, layers in parts.items()}
    widths = {name: layers[0].size(1) for name, layers in parts.items()}
    if len(set(depths.values())) > 1 and options.get("include_layers") is None:
        # one layer menu serves the whole view, so every part needs the layers it offers
        raise ValueError(f"the attentions have different numbers of layers {depths}; pass "
                         "include_layers with layers that all of them have")
    if len(set(widths.values())) > 1:
        raise ValueError(f"the attentions have different numbers of heads {widths}; one view needs the same count")
    if view == "model":
        options.setdefault("display_mode", "light")
    options = _checked(options, view, min(depths.values()), next(iter(widths.values())))
    draw = getattr(_bertviz(), f"{view}_view")
    raw = draw(**parts, encoder_tokens=enc, decoder_tokens=dec, html_action="return", **options)
    return AttentionView(self_contained(raw.data))


def transformer_view(maps, source_tokens: Sequence[str], target_tokens: Sequence[str], *, view: str = "head",
                     parts: Sequence[str] = ("encoder", "decoder", "cross"), **options) -> AttentionView:
    """The attention of lmlib's :class:`~lmlib.models.transformer.Transformer` from its ``attention_maps``.

    ``maps`` is the :class:`~lmlib.models.transformer.AttentionMaps` of one sentence pair;
    ``source_tokens`` label the encoder positions (ending in ``<eos>``), ``target_tokens`` the decoder
    inputs (``<bos> y_1 .. y_{T-1}``). ``parts`` picks among "encoder", "decoder" and "cross"; the
    rest is as in :func:`encoder_decoder_view`.
    """
    fields = {"encoder": "encoder_self", "decoder": "decoder_self", "cross": "cross"}
    unknown = [p for p in parts if p not in fields]
    if unknown or not parts:
        raise ValueError(f"parts must be a non-empty selection of {list(fields)}, got {list(parts)}")
    missing = [fields[p] for p in parts if not hasattr(maps, fields[p])]
    if missing:
        raise TypeError(f"maps needs the attributes {missing} (Transformer.attention_maps gives them), "
                        f"got {type(maps).__name__}")
    given = {f"{p}_attention": getattr(maps, fields[p]) for p in parts}
    return encoder_decoder_view(**given, encoder_tokens=source_tokens if {"encoder", "cross"} & set(parts) else None,
                                decoder_tokens=target_tokens if {"decoder", "cross"} & set(parts) else None,
                                view=view, **options)


# ---------------------------------------------------------------------------------------------------
# Making bertviz's HTML self-contained

# bertviz 1.4 returns: <script src=".../require.min.js"></script> + the view's <div> + <script>JS</script>
_BERTVIZ_HTML = re.compile(
    r'^\s*<script src="[^"]*require[^"]*"></script>(?P<div>.*?)<script type="text/javascript">(?P<js>.*)</script>\s*$',
    re.S)
_REQUIRE_CONFIG = re.compile(r"require\.config\(\s*\{.*?\n\}\);[ \t]*\n?", re.S)
_REQUIRE_CALL = re.compile(r"requirejs\(\s*\[\s*'jquery'\s*,\s*'d3'\s*\]\s*,\s*function\s*\(\s*\$\s*,\s*d3\s*\)\s*\{")
_LOADER_CALL = re.compile(r"\b(require|requirejs|define)\s*(\(|\.config)")


@lru_cache(maxsize=None)
def vendored(name: str) -> str:
    """The text of a vendored library, after checking its sha256 against :data:`VENDORED`."""
    data = (VENDOR / name).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != VENDORED[name]:
        raise RuntimeError(f"{VENDOR / name} has sha256 {digest}, expected {VENDORED[name]}: the vendored copy "
                           "was changed; restore it (see vendor/README.md)")
    text = data.decode("utf-8")
    if re.search(r"</script|<!--", text, re.I):
        raise RuntimeError(f"{name} contains '</script' or '<!--' and cannot be inlined in a <script> element")
    return text


def _script_safe(js: str) -> str:
    """Keep text such as a token '</script>' from ending the <script> element early.

    Inside the JS these sequences only occur in strings (the JSON of tokens and weights), where
    ``<\\/`` and ``\\x3C!--`` read back as the same characters.
    """
    js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.I)
    return js.replace("<!--", "\\x3C!--")


def _libraries_js() -> str:
    """JavaScript that defines d3 and jQuery as local variables ``d3`` and ``$``, touching no global of the page."""
    return "\n".join([
        "  var libraries = {};",
        "  // define/module/exports are undefined here, so neither library registers with a module loader",
        "  (function (define, module, exports) {",
        vendored("d3.min.js"),
        "  }).call(libraries);  // d3 5 attaches itself to `this`",
        "  (function (define, module, exports) {",
        vendored("jquery.min.js"),
        "  }).call(libraries);",
        "  var $ = window.jQuery.noConflict(true);  // give the page back its own $ and jQuery, if any",
        "  var d3 = libraries.d3;",
    ])


def library_script() -> HTML:
    """One ``<script>`` that puts d3 and jQuery on the page once, as ``window.lmlibBertvizLibraries``, for the
    views made with ``libraries="shared"`` (it does nothing where a copy is already there)."""
    return HTML("\n".join([
        '<script type="text/javascript">',
        "(function () {",
        f"  if (window.{SHARED}) return;",
        _libraries_js(),
        f"  window.{SHARED} = {{$: $, d3: d3}};",
        "})();",
        "</script>",
    ]))


_UNLABELLED_SELECT = re.compile(r"(\w[\w ]*?):\s*<select(?![^>]*aria-label)")


def label_selects(view_html: str) -> str:
    """Give each of bertviz's menus ("Layer: <select>") its visible label as its accessible name (WCAG 4.1.2)."""
    return _UNLABELLED_SELECT.sub(lambda m: f'{m[1]}: <select aria-label="{m[1].strip()}"', view_html)


def self_contained(bertviz_html: str, libraries: str = "inline") -> str:
    """Rewrite the HTML of a bertviz 1.4 view (``html_action="return"``) so it fetches nothing.

    The returned HTML is the view's ``<div>`` and one ``<script>`` that defines d3 and jQuery
    privately (``libraries="inline"``), or takes the page's copy put there by :func:`library_script`
    (``"shared"``), then runs bertviz's drawing function with them.
    """
    if libraries not in LIBRARIES:
        raise ValueError(f"libraries must be one of {LIBRARIES}, got {libraries!r}")
    layout = ("bertviz's output does not have the layout of bertviz 1.4 (a require.js tag, a <div id='bertviz-...'>, "
              "a script of require.config and one requirejs([...]) call); lmlib's offline views need bertviz 1.4.x")
    match = _BERTVIZ_HTML.match(bertviz_html)
    if match is None:
        raise RuntimeError(layout)
    js, configs = _REQUIRE_CONFIG.subn("", match["js"], count=1)
    js, calls = _REQUIRE_CALL.subn("var draw = function ($, d3) {", js, count=1)
    js = js.rstrip()
    root = re.search(r'<div id="(bertviz-[0-9a-f]+)"', match["div"])
    if configs != 1 or calls != 1 or not js.endswith("});") or root is None:
        raise RuntimeError(layout)
    js = js[: -len("});")] + "};"
    if _LOADER_CALL.search(js):  # a module loader left after the rewriting would capture d3
        raise RuntimeError(layout)
    run = [
        "  try {",
        "    draw($, d3);",
        "  } catch (err) {",
        f"    var root = document.getElementById({root[1]!r});",
        "    if (root) root.insertAdjacentText('beforeend', 'The attention view failed to draw: ' + err);",
        "    throw err;",
        "  }",
    ]
    if libraries == "inline":
        script = "\n".join(["(function () {", _libraries_js(), _script_safe(js), *run, "})();"])
    else:  # wait (up to 10 s) for library_script's copy: a restored page may draw this output before that one
        script = "\n".join([
            "(function () {",
            _script_safe(js),
            "  var tries = 0;",
            "  (function wait() {",
            f"    var shared = window.{SHARED};",
            "    if (!shared) {",
            "      if (tries++ < 200) return setTimeout(wait, 50);",
            f"      var root = document.getElementById({root[1]!r});",
            "      if (root) root.insertAdjacentText('beforeend', 'The attention view has no d3 on this page: run "
            "its cell again (lmlib.course.attention_views.library_script() was not shown).');",
            "      return;",
            "    }",
            "    var $ = shared.$, d3 = shared.d3;",
            *("  " + line for line in run),
            "  })();",
            "})();",
        ])
    return f'{label_selects(match["div"].strip())}\n<script type="text/javascript">\n{script}\n</script>\n'


# ---------------------------------------------------------------------------------------------------
# Checks

def _tokens(tokens, name: str) -> list[str]:
    if isinstance(tokens, str):
        raise TypeError(f"{name} must be a sequence of tokens, got one string {tokens[:40]!r}; split it first")
    tokens = [str(t) for t in tokens]
    if not tokens:
        raise ValueError(f"{name} is empty")
    return tokens


def _layers(attention, name: str, queries: int, keys: int) -> list[torch.Tensor]:
    """One float tensor ``(1, heads, queries, keys)`` per layer, or an error naming the shapes."""
    expected = f"(1, heads, {queries}, {keys}) or (heads, {queries}, {keys})"
    if isinstance(attention, torch.Tensor):
        raise TypeError(f"{name} must be a list with one tensor per layer, each {expected}; got one tensor of "
                        f"shape {tuple(attention.shape)} (for a single layer pass [tensor])")
    layers = list(attention)
    if not layers:
        raise ValueError(f"{name} is empty: expected one tensor per layer, each {expected}")
    out = []
    for i, a in enumerate(layers):
        a = torch.as_tensor(a.detach() if isinstance(a, torch.Tensor) else a).cpu().float()
        if a.dim() == 3:
            a = a.unsqueeze(0)
        if a.dim() != 4:
            raise ValueError(f"{name}[{i}] has shape {tuple(a.shape)}, expected {expected}")
        if a.size(0) != 1:
            raise ValueError(f"{name}[{i}] has shape {tuple(a.shape)}: a batch of {a.size(0)} sentences, but a view "
                             f"draws one, expected {expected}; pick sentence b with [a[b:b + 1] for a in {name}]")
        if a.shape[2:] != (queries, keys):
            raise ValueError(f"{name}[{i}] has shape {tuple(a.shape)}, expected {expected} to match the tokens "
                             f"({queries} query and {keys} key positions)")
        if out and a.size(1) != out[0].size(1):
            raise ValueError(f"{name}[{i}] has {a.size(1)} heads but {name}[0] has {out[0].size(1)}: "
                             f"shape {tuple(a.shape)}, expected (1, {out[0].size(1)}, {queries}, {keys})")
        if not torch.isfinite(a).all():
            raise ValueError(f"{name}[{i}] contains NaN or infinite weights")
        out.append(a)
    # bertviz writes every weight into the page as JSON text. A float32 weight printed as a Python float has 17
    # digits, 10 of them conversion noise, and that made each stored view ~250 KB; four decimals (0.0001) are far
    # finer than the line opacities and colours a view draws from them.
    return [a.double().round(decimals=4) for a in out]


def _checked(options: dict, view: str, num_layers: int, num_heads: int) -> dict:
    """A view's ``options``, refused when they name a layer, head or display mode the attention does not have;
    their index sequences as lists, as bertviz needs them."""
    include_layers, layer = options.get("include_layers"), options.get("layer")
    if include_layers is not None:
        bad = [i for i in include_layers if not 0 <= i < num_layers]
        if bad or not list(include_layers):
            raise ValueError(f"include_layers must be a non-empty list of layer indices 0..{num_layers - 1}, "
                             f"got {list(include_layers)}")
    shown = list(range(num_layers)) if include_layers is None else list(include_layers)
    if layer is not None and layer not in shown:
        raise ValueError(f"layer {layer} is not among the layers shown {shown}")
    name = "heads" if view == "head" else "include_heads"
    heads = options.get(name)
    if heads is not None and (not list(heads) or any(not 0 <= h < num_heads for h in heads)):
        raise ValueError(f"{name} must be a non-empty list of head indices 0..{num_heads - 1}, got {list(heads)}")
    if options.get("display_mode", "light") not in ("light", "dark"):
        raise ValueError(f"display_mode must be 'light' or 'dark', got {options['display_mode']!r}")
    return {key: list(value) if key in ("include_layers", "include_heads", "heads") and value is not None else value
            for key, value in options.items()}


def _bertviz():
    try:
        import bertviz
    except ImportError:
        raise ImportError("the attention views draw with bertviz: pip install 'bertviz>=1.4,<1.5'") from None
    return bertviz


__all__ = ["AttentionView", "head_view", "model_view", "encoder_decoder_view", "transformer_view",
           "self_contained", "library_script", "vendored", "VENDORED", "LIBRARIES"]
