"""The architecture diagrams of notebooks 04-11, written as small hand-laid SVG files.

``python tools/diagrams.py`` writes ``notebooks/figures/*.svg``; the notebooks show those committed files
through markdown image links, so they render offline, in JupyterLab and on GitHub, with no code run. The colours are
the course's own: plotly's ``plotly_white`` colour sequence and text colour, which every plot in the course uses
(:data:`lmlib.course.viz.LAYOUT`). Symbols follow the papers and the docstrings of the modules drawn
(``lmlib.models.seq2seq``, ``transformer``, ``awd_lstm``/``dropouts``, ``ulmfit``, ``elmo``, ``gpt_finetune``,
``bert``, ``transformer_xl``). Text is real SVG text: ``_{...}`` in a label is a subscript, ``^{...}`` a
superscript.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from xml.sax.saxutils import escape

# plotly_white's colourway and font colour (plotly.io.templates["plotly_white"].layout): the course's palette.
# Written out so that drawing needs no plotly; tests/test_figures_svg.py checks them against plotly's template.
BLUE, RED, GREEN, PURPLE, ORANGE, CYAN = "#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3"
INK = "#2a3f5f"
GREY = "#808080"   # the course's reference lines (line_color="gray")
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
FIGURES = Path(__file__).resolve().parents[1] / "notebooks" / "figures"


def tint(colour: str, amount: float = 0.22) -> str:
    """``colour`` mixed with white: ``amount`` 1 is the colour, 0 white (box fills)."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(255 - (255 - c) * amount):02x}" for c in (r, g, b))


_MARKUP = re.compile(r"([_^])\{([^{}]*)\}")


def rich(label: str, size: float) -> str:
    """SVG text content for ``label``: ``_{j}`` a subscript, ``^{(l)}`` a superscript, everything else escaped."""
    out, shift, pos = [], 0.0, 0
    for m in _MARKUP.finditer(label):
        if m.start() > pos:
            out.append(_tspan(label[pos:m.start()], -shift, None))
            shift = 0.0
        target = 0.3 * size if m.group(1) == "_" else -0.38 * size
        out.append(_tspan(m.group(2), target - shift, "72%"))
        shift, pos = target, m.end()
    if pos < len(label):
        out.append(_tspan(label[pos:], -shift, None))
    return "".join(out)


def _tspan(text: str, dy: float, size: str | None) -> str:
    attrs = (f' dy="{dy:.1f}"' if abs(dy) > 1e-9 else "") + (f' font-size="{size}"' if size else "")
    return f"<tspan{attrs}>{escape(text)}</tspan>" if attrs else escape(text)


class Svg:
    """A figure of ``width`` x ``height`` user units, built from boxes, labels and arrows."""

    def __init__(self, width: int, height: int, title: str):
        self.width, self.height, self.title, self.parts = width, height, title, []
        self.shapes: dict[str, str] = {}

    def rect(self, x, y, w, h, fill="none", stroke=INK, rx=4, width=1.2, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="{rx:g}" fill="{fill}" '
                          f'stroke="{stroke}" stroke-width="{width:g}"{d}/>')

    def text(self, x, y, label, size=13, anchor="middle", colour=INK, bold=False, italic=False):
        style = (' font-weight="bold"' if bold else "") + (' font-style="italic"' if italic else "")
        anchor_attr = "" if anchor == "middle" else f' text-anchor="{anchor}"'
        size_attr = "" if size == 13 else f' font-size="{size:g}"'
        fill = "" if colour == INK else f' fill="{colour}"'
        self.parts.append(f'<text x="{x:g}" y="{y:g}"{anchor_attr}{size_attr}{fill}{style}>{rich(label, size)}</text>')

    def note(self, x, y, lines, step, size=13):
        """Left-aligned lines of text, the first at ``(x, y)``, each ``step`` below the one before."""
        for i, line in enumerate(lines):
            self.text(x, y + step * i, line, anchor="start", size=size)

    def box(self, x, y, w, h, label, colour=BLUE, size=13, lines=None, amount=0.22, dash=None, bold=False):
        """A tinted box with a centred label (``lines``: several labels, one per line)."""
        self.rect(x, y, w, h, fill=tint(colour, amount), stroke=colour, dash=dash)
        lines = lines or [label]
        step = size * 1.25
        top = y + h / 2 - step * (len(lines) - 1) / 2 + size * 0.36
        for i, line in enumerate(lines):
            self.text(x + w / 2, top + i * step, line, size=size, bold=bold and i == 0)

    def line(self, x1, y1, x2, y2, colour=INK, width=1.3, arrow=True, dash=None):
        self.path(f"M{x1:g},{y1:g} L{x2:g},{y2:g}", colour, width, arrow, dash)

    def path(self, d, colour=INK, width=1.3, arrow=True, dash=None):
        extra = (f' stroke-dasharray="{dash}"' if dash else "") + (f' marker-end="url(#{self._marker(colour)})"'
                                                                   if arrow else "")
        self.parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="{width:g}"{extra}/>')

    def circle(self, x, y, r, fill="white", stroke=INK, width=1.2, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<circle cx="{x:g}" cy="{y:g}" r="{r:g}" fill="{fill}" stroke="{stroke}" '
                          f'stroke-width="{width:g}"{d}/>')

    def cells(self, x, y, dropped, n=5, size=12, colour=RED):
        """A mask or vector of ``n`` cells: kept ones tinted, dropped ones white and crossed out (each cell one
        ``<use>`` of a shape defined once)."""
        for i in range(n):
            ref = "drop" if i in dropped else "keep-" + colour.lstrip("#")
            if ref not in self.shapes:
                self.shapes[ref] = (
                    f'<rect width="{size}" height="{size}" fill="white" stroke="{GREY}" stroke-width="0.8"/>'
                    f'<path d="M2,2 L{size - 2},{size - 2} M{size - 2},2 L2,{size - 2}" stroke="{GREY}" '
                    f'stroke-width="0.8"/>' if ref == "drop" else
                    f'<rect width="{size}" height="{size}" fill="{tint(colour, 0.45)}" stroke="{colour}" '
                    f'stroke-width="0.8"/>')
            self.parts.append(f'<use href="#{ref}" x="{x + i * size:g}" y="{y:g}"/>')

    def _marker(self, colour: str) -> str:
        return "arrow-" + colour.lstrip("#")

    def render(self) -> str:
        colours = sorted({m for p in self.parts for m in re.findall(r"url\(#arrow-([0-9a-fA-F]{6})\)", p)})
        markers = "".join(
            f'<marker id="arrow-{c}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#{c}"/></marker>' for c in colours)
        shapes = "".join(f'<g id="{ref}">{shape}</g>' for ref, shape in self.shapes.items())
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}" role="img" aria-label="{escape(self.title)}" '
                f'font-family="{FONT}" font-size="13" fill="{INK}" text-anchor="middle">\n'
                f"<title>{escape(self.title.split(': ', 1)[0])}</title>\n<desc>{escape(self.title)}</desc>\n"
                f"<defs>{markers}{shapes}</defs>\n"
                f'<rect width="{self.width}" height="{self.height}" fill="white"/>\n'
                + "\n".join(self.parts) + "\n</svg>\n")


# -- 04: Bahdanau attention -------------------------------------------------------------------------------------

def attention_encoder_decoder() -> Svg:
    s = Svg(780, 480, "Encoder-decoder with Bahdanau attention: a bidirectional GRU encoder's annotations h_j, "
                      "weights alpha_ij from the alignment model, context c_i, decoder state s_i, and the readout "
                      "t_i from s_i, y_(i-1) and c_i that gives p(y_i | y_<i, x)")
    top = 70  # room above the decoder for the readout
    cols, labels = [70, 170, 270, 430], ["1", "2", "3", "S"]
    weights = [1.2, 5.0, 2.5, 1.0]
    hub = (245, 150 + top)
    for cx, j, w in zip(cols, labels, weights):
        s.text(cx, 375 + top, f"x_{{{j}}}", size=15)
        s.line(cx, 360 + top, cx, 327 + top)
        s.box(cx - 36, 295 + top, 72, 30, f"←h_{{{j}}}", GREEN)
        s.box(cx - 36, 250 + top, 72, 30, f"→h_{{{j}}}", BLUE)
        s.line(cx, 250 + top, hub[0] + (cx - hub[0]) * 0.13, hub[1] + 14, RED, width=w, arrow=False)
        lx, ly = cx + (hub[0] - cx) * 0.3, 250 + top + (hub[1] - 250 - top) * 0.3
        s.text(lx + (-24 if cx < hub[0] else 26), ly + 4, f"α_{{i{j}}}" if j != "S" else "α_{iS}", size=13,
               colour=RED)
    s.text(350, 290 + top, "…", size=18)
    for a, b in zip(cols[:-1], cols[1:]):
        if b - a < 120:
            s.line(a + 36, 265 + top, b - 37, 265 + top, BLUE)
            s.line(b - 36, 310 + top, a + 37, 310 + top, GREEN)
    s.line(306, 265 + top, 330, 265 + top, BLUE, arrow=False)
    s.line(370, 265 + top, 393, 265 + top, BLUE)
    s.line(393, 310 + top, 370, 310 + top, GREEN, arrow=False)
    s.line(330, 310 + top, 307, 310 + top, GREEN)
    s.text(478, 262 + top, "annotations h_{j} = [→h_{j}; ←h_{j}]", anchor="start")
    s.text(478, 282 + top, "bidirectional GRU encoder", anchor="start", size=12, colour=GREY)
    s.circle(*hub, 14, fill=tint(RED, 0.25), stroke=RED)
    s.text(hub[0], hub[1] + 5, "Σ", size=15)
    s.text(hub[0] - 22, 128 + top, "c_{i} = Σ_{j} α_{ij} h_{j}", anchor="end")
    # decoder: s_i = f(s_{i-1}, y_{i-1}, c_i)
    s.box(320, 50 + top, 80, 36, "s_{i−1}", PURPLE, size=14)
    s.box(470, 50 + top, 80, 36, "s_{i}", PURPLE, size=14)
    s.line(400, 68 + top, 469, 68 + top, PURPLE)
    s.text(292, 72 + top, "…", size=16)
    s.line(hub[0] + 10, hub[1] - 10, 478, 87 + top, RED, width=1.6)
    s.text(664, 73 + top, "y_{i−1}", anchor="start", size=14)
    s.line(660, 68 + top, 551, 68 + top)
    s.text(560, 40 + top, "GRU decoder", anchor="start", size=12, colour=GREY)
    # readout: t_i from s_i, E y_{i-1} and c_i, as lmlib.models.seq2seq computes it
    s.box(400, 34, 250, 40, "", CYAN, size=12, lines=["readout t_{i} = tanh(W_{t} [s_{i}; E y_{i−1}; c_{i}])",
                                                        "p(y_{i} | y_{<i}, x) = softmax(W_{o} t_{i})"])
    s.line(510, 50 + top, 510, 75)
    s.path(f"M690,{55 + top} L690,54 L651,54", INK, 1.3)
    s.path(f"M{hub[0] - 10:g},{hub[1] - 10:g} L{hub[0] - 10:g},54 L399,54", RED, 1.6)
    s.text(hub[0] - 4, 48, "c_{i}", anchor="start", size=13, colour=RED)
    s.line(525, 34, 525, 14)
    s.text(532, 16, "y_{i}", anchor="start", size=14)
    # alignment model
    s.box(305, 160 + top, 190, 34, "α_{i} = softmax_{j} a(s_{i−1}, h_{j})", RED, size=12, amount=0.12)
    s.line(360, 87 + top, 360, 159 + top, PURPLE, dash="4 3")
    s.text(366, 128 + top, "query s_{i−1}", anchor="start", size=12, colour=PURPLE)
    s.line(304, 177 + top, 286, 177 + top, RED)
    for i, eq in enumerate(["e_{ij} = v_{a}^{⊤} tanh(W_{a} s_{i−1} + U_{a} h_{j})",
                            "α_{ij} = exp(e_{ij}) / Σ_{k} exp(e_{ik})",
                            "s_{i} = f(s_{i−1}, y_{i−1}, c_{i})"]):
        s.text(520, 150 + top + 22 * i, eq, anchor="start", size=13)
    s.text(390, 400 + top, "Without attention, every step reads the same C = [→h_{S}; ←h_{1}]: the bottleneck.",
           size=12, colour=GREY)
    return s


# -- 05: the Transformer's encoder and decoder layers -------------------------------------------------------------

def _sublayer(s, cx, y, label, colour, lines=None):
    s.box(cx - 90, y, 180, 34, label, colour, size=12, lines=lines)


def _add_norm(s, cx, y):
    s.box(cx - 90, y, 180, 24, "Add & Norm", ORANGE, size=12)


def _residual(s, x_side, cx, y_from, y_to):
    """The residual path: from the stream at y_from, around the sub-layer, into Add & Norm at y_to."""
    edge = cx - 90 if x_side < cx else cx + 90
    s.path(f"M{cx:g},{y_from:g} L{x_side:g},{y_from:g} L{x_side:g},{y_to:g} L{edge:g},{y_to:g}", INK, 1.1)


def transformer_layers() -> Svg:
    s = Svg(640, 610, "The Transformer (Vaswani et al. 2017): N encoder layers (self-attention, feed-forward) and "
                      "N decoder layers (masked self-attention, cross-attention, feed-forward), each sub-layer "
                      "followed by Add & Norm")
    ex, dx = 175, 455
    # inputs
    for cx, what in ((ex, "source tokens x"), (dx, "target tokens shifted right y_{<t}")):
        s.text(cx, 600, what, size=12)
        s.line(cx, 588, cx, 566)
        s.box(cx - 90, 532, 180, 32, "embedding · √d_{model}", GREY, size=12, amount=0.15)
        s.line(cx, 532, cx, 511)
        s.circle(cx, 498, 12)
        s.text(cx, 503, "+", size=15)
        s.text(cx + 18, 503, "PE(pos) sinusoids", anchor="start", size=11, colour=GREY)
        s.line(cx, 486, cx, 436)
    # encoder layer
    s.rect(ex - 122, 258, 244, 208, fill="none", stroke=GREY, dash="5 4", rx=8)
    s.text(ex - 135, 365, "N×", anchor="end", size=14, bold=True)
    _sublayer(s, ex, 402, "", RED, ["Multi-head attention", "self: Q = K = V = x"])
    _residual(s, ex - 108, ex, 452, 382)
    s.line(ex, 402, ex, 395)
    _add_norm(s, ex, 370)
    s.line(ex, 370, ex, 337)
    _sublayer(s, ex, 302, "", BLUE, ["Feed-forward, each position", "max(0, xW_{1} + b_{1})W_{2} + b_{2}"])
    _residual(s, ex - 108, ex, 350, 280)
    s.line(ex, 302, ex, 293)
    _add_norm(s, ex, 268)
    s.text((ex + dx) / 2 - 70, 231, "encoder output (memory)", size=11, colour=GREY)
    # decoder layer
    s.rect(dx - 122, 152, 244, 314, fill="none", stroke=GREY, dash="5 4", rx=8)
    s.text(dx + 135, 310, "N×", anchor="start", size=14, bold=True)
    _sublayer(s, dx, 402, "", RED, ["Masked multi-head attention", "causal: t sees positions ≤ t"])
    _residual(s, dx + 108, dx, 452, 382)
    s.line(dx, 402, dx, 395)
    _add_norm(s, dx, 370)
    s.line(dx, 370, dx, 337)
    _sublayer(s, dx, 302, "", RED, ["Multi-head attention (cross)", "Q: decoder; K, V: memory"])
    _residual(s, dx + 108, dx, 350, 280)
    s.line(dx, 302, dx, 293)
    _add_norm(s, dx, 268)
    s.line(dx, 268, dx, 237)
    _sublayer(s, dx, 202, "", BLUE, ["Feed-forward, each position", "max(0, xW_{1} + b_{1})W_{2} + b_{2}"])
    _residual(s, dx + 108, dx, 250, 180)
    s.line(dx, 202, dx, 193)
    _add_norm(s, dx, 168)
    # memory into cross-attention
    s.path(f"M{ex:g},268 L{ex:g},238 L{(ex + dx) / 2:g},238 L{(ex + dx) / 2:g},319 L{dx - 91:g},319", RED, 1.6)
    # output
    s.line(dx, 168, dx, 131)
    s.box(dx - 90, 98, 180, 32, "Linear (= target embedding)", CYAN, size=12)
    s.line(dx, 98, dx, 79)
    s.box(dx - 90, 50, 180, 28, "softmax", CYAN, size=12)
    s.line(dx, 50, dx, 34)
    s.text(dx, 24, "p(y_{t} | y_{<t}, x)", size=13)
    s.note(20, 40, ["Add & Norm: LayerNorm(x + Dropout(Sublayer(x))),",
                    "post-norm as in the paper and lmlib's",
                    "default (norm_first=False); pre-norm",
                    "computes x + Sublayer(LayerNorm(x))."], step=17, size=12)
    return s


# -- 05: multi-head attention, Q, K, V and the split into heads ----------------------------------------------------

def multihead_qkv() -> Svg:
    s = Svg(820, 560, "Multi-head self-attention (Vaswani et al. 2017, section 3.2.2): X is projected by W^Q_i, W^K_i, "
                      "W^V_i into h heads of d_k = d_model / h columns; each head attends on its own; Concat of the "
                      "heads times W^O gives MultiHead(X)")
    stripes = [("1", 0), ("2", 1), ("…", 2), ("h", 3)]  # 4 stripes drawn for h heads
    sw = 55  # stripe width: d_k columns
    projections = [("Q", 50, RED), ("K", 300, BLUE), ("V", 550, GREEN)]
    # the input
    s.box(300, 492, 220, 32, "X   (n × d_{model})", GREY, size=13, amount=0.15)
    s.text(410, 545, "self-attention: queries, keys and values are all projections of the same X", size=11.5,
           colour=GREY)
    for name, x0, colour in projections:
        s.path(f"M410,492 L410,482 L{x0 + 110:g},482 L{x0 + 110:g},447", colour, 1.3)
        s.text(x0 + 117, 468, f"× W^{{{name}}} = [W^{{{name}}}_{{1}} … W^{{{name}}}_{{h}}]", anchor="start", size=11.5,
               colour=colour)
        s.rect(x0, 405, 220, 40, fill=tint(colour, 0.15), stroke=colour)
        for label, k in stripes:
            x = x0 + k * sw
            if k:
                s.line(x, 405, x, 445, colour, width=0.8, arrow=False, dash="3 2")
            s.text(x + sw / 2, 430, f"XW^{{{name}}}_{{{label}}}" if label != "…" else "…", size=12)
        s.text(x0 + 110, 397, f"{name} = XW^{{{name}}}   (n × d_{{model}})", size=12, colour=colour, bold=True)
    # each head takes its own block of each projection
    for head, k, hx in (("1", 0, 40), ("2", 1, 300), ("h", 3, 560)):
        for name, x0, colour in projections:
            s.line(x0 + k * sw + sw / 2, 405, hx + 110 + {"Q": -60, "K": 0, "V": 60}[name], 331, colour, width=1.1)
        s.box(hx, 282, 220, 48, "", PURPLE, size=12, lines=[
            f"head_{{{head}}} = Attention(Q_{{{head}}}, K_{{{head}}}, V_{{{head}}})",
            f"softmax(Q_{{{head}}}K_{{{head}}}^{{⊤}} / √d_{{k}}) V_{{{head}}}:  n × d_{{k}}"])
        s.line(hx + 110, 282, 410 + (hx - 300) * 0.45, 231, PURPLE)
    s.text(540, 310, "…", size=18)
    # concat and the output projection
    s.box(210, 196, 400, 34, "Concat(head_{1}, …, head_{h})   n × h·d_{k} = n × d_{model}", ORANGE, size=12.5)
    s.line(410, 196, 410, 167)
    s.box(300, 132, 220, 34, "× W^{O}   (d_{model} × d_{model})", CYAN, size=12.5)
    s.line(410, 132, 410, 103)
    s.text(410, 90, "MultiHead(X) = Concat(head_{1}, …, head_{h}) W^{O}   (n × d_{model})", size=13, bold=True)
    s.note(18, 30, ["Q_{i} = XW^{Q}_{i}, K_{i} = XW^{K}_{i}, V_{i} = XW^{V}_{i}: each W_{i} is d_{model} × d_{k},",
                    "d_{k} = d_{v} = d_{model} / h: h heads cost about one head of full width."], step=18, size=12)
    s.note(500, 30, ["lmlib: the h projections sit side by side in one", "Linear; a reshape splits (batch, n, d_{model})",
                     "into (batch, h, n, d_{k})."], step=17, size=12)
    return s


# -- 06: the AWD-LSTM's dropouts ----------------------------------------------------------------------------------

def awd_lstm_dropouts() -> Svg:
    s = Svg(890, 560, "AWD-LSTM: embedding dropout, locked (variational) dropout masks m_in, m_1, m_2, m_out shared "
                      "by every time step, and DropConnect on the hidden-to-hidden weights")
    cols, words, targets = [300, 440, 580], ["I", "love", "cats"], ["love", "cats", "<eos>"]
    rows = {  # y of each row; masks: the dropped cells (the same at every step)
        "words": 535, "emb": 482, "m_in": 437, "lstm1": 385, "m_1": 337, "lstm2": 285, "m_2": 237,
        "lstm3": 185, "m_out": 137, "soft": 85, "targets": 40}
    masks = {"m_in": {1, 3}, "m_1": {0, 4}, "m_2": {2}, "m_out": {1, 4}}
    labels = {
        "emb": ("embedding dropout Ẽ[x_{t}]", "mask (|V|, 1): one per word type"),
        "m_in": ("input dropout m_{in}", "mask (B, 1, d_{e})"),
        "lstm1": ("LSTM layer 1", "recurrence on W̃_{hh}^{(1)}"),
        "m_1": ("hidden dropout m_{1}", "mask (B, 1, d_{h})"),
        "lstm2": ("LSTM layer 2", "recurrence on W̃_{hh}^{(2)}"),
        "m_2": ("hidden dropout m_{2}", "mask (B, 1, d_{h})"),
        "lstm3": ("LSTM layer 3", "d_{e} outputs, for the tied E"),
        "m_out": ("output dropout m_{out}", "mask (B, 1, d_{e})"),
        "soft": ("decoder, tied to E", "softmax(E (m_{out} ⊙ h^{(3)}_{t}) + b)"),
    }
    for key, (name, detail) in labels.items():
        y = rows[key]
        s.text(12, y - 2, name, anchor="start", size=13, bold=True)
        s.text(12, y + 14, detail, anchor="start", size=11.5, colour=GREY)
    s.text(12, rows["words"] + 4, "input x_{t}", anchor="start", size=13, bold=True)
    s.text(12, rows["targets"] + 4, "predicts x_{t+1}", anchor="start", size=13, bold=True)
    for t, (cx, word, target) in enumerate(zip(cols, words, targets)):
        s.text(cx, rows["words"] + 5, word, size=14)
        s.text(cx, 555, f"t = {t + 1}", size=11, colour=GREY)
        s.line(cx, rows["words"] - 12, cx, rows["emb"] + 9)
        s.cells(cx - 30, rows["emb"] - 6, set(range(5)) if word == "love" else set(), colour=BLUE)
        for key in ("m_in", "m_1", "m_2", "m_out"):
            s.cells(cx - 30, rows[key] - 6, masks[key])
        for a, b in (("emb", "m_in"), ("m_in", "lstm1"), ("lstm1", "m_1"), ("m_1", "lstm2"), ("lstm2", "m_2"),
                     ("m_2", "lstm3"), ("lstm3", "m_out"), ("m_out", "soft")):
            top = rows[b] + (17 if b.startswith(("lstm", "soft")) else 8)
            s.line(cx, rows[a] - 8, cx, top)
        for layer in (1, 2, 3):
            s.box(cx - 45, rows[f"lstm{layer}"] - 15, 90, 30, f"LSTM_{{{layer}}}", BLUE, size=12)
        s.box(cx - 45, rows["soft"] - 15, 90, 30, "softmax", ORANGE, size=12)
        s.line(cx, rows["soft"] - 16, cx, rows["targets"] + 9)
        s.text(cx, rows["targets"] + 4, target, size=13)
    for layer in (1, 2, 3):
        y = rows[f"lstm{layer}"]
        for a, b in zip(cols[:-1], cols[1:]):
            s.line(a + 46, y, b - 47, y, RED, width=1.6)
        s.text((cols[0] + cols[1]) / 2, y - 6, f"W̃_{{hh}}^{{({layer})}}", size=11, colour=RED)
    s.text(440, 16, "each red mask is drawn once per sequence and reused at every step t (locked);"
                    " a crossed cell is a dropped unit", size=11.5, colour=GREY)
    # DropConnect panel
    x0, y0 = 680, 205
    s.text(x0 - 8, y0 - 28, "weight dropout (DropConnect)", anchor="start", size=12.5, bold=True)
    for i, row in enumerate([{1}, {0, 3}, {0, 4}, {2}, {1, 3}]):
        s.cells(x0, y0 - 16 + 12 * i, row)
    s.text(x0 + 68, y0 + 12, "W̃_{hh}", anchor="start", size=13, colour=RED)
    s.note(x0 - 8, y0 + 72, ["W̃_{hh} = M ⊙ W_{hh} / (1 − p_{w})", "M_{ij} ~ Bernoulli(1 − p_{w}),",
                             "one M per layer and forward pass,", "shared by every step t and",
                             "every sequence of the batch"], step=16, size=11.5)
    # embedding dropout panel
    x0, y0 = 715, 420
    s.text(x0 - 43, y0 - 20, "embedding dropout", anchor="start", size=12.5, bold=True)
    for i, word in enumerate(["I", "love", "cats", "dogs"]):
        s.text(x0 - 6, y0 + 10 + 14 * i, word, anchor="end", size=11)
        s.cells(x0, y0 + i * 14, set(range(5)) if word == "love" else set(), colour=BLUE)
    s.text(x0 + 66, y0 + 10, "E", anchor="start", size=13)
    s.note(x0 - 43, y0 + 75, ["z_{w} ~ Bernoulli(1 − p_{e}) per word", "type: a dropped word is 0",
                              "wherever it occurs in the batch"], step=16, size=11.5)
    return s


# -- 07: ULMFiT's three stages ------------------------------------------------------------------------------------

def ulmfit_stages() -> Svg:
    s = Svg(880, 466, "ULMFiT's three stages: (a) general-domain LM pretraining, (b) target-task LM fine-tuning "
                      "with discriminative rates and STLR, (c) classifier fine-tuning with gradual unfreezing")
    panels = [
        ("(a) General-domain LM", "text: PTB here (paper: Wikitext-103)", "a"),
        ("(b) Target-task LM fine-tuning", "text: IMDb reviews, no labels", "b"),
        ("(c) Classifier fine-tuning", "labelled IMDb reviews", "c"),
    ]
    ys = {"emb": 300, "lstm1": 250, "lstm2": 200, "lstm3": 150}
    for p, (title, data, kind) in enumerate(panels):
        x0 = 10 + p * 295
        cx = x0 + 132
        s.rect(x0, 10, 265, 446, fill="none", stroke=GREY, rx=8, dash="5 4")
        s.text(cx, 34, title, size=13.5, bold=True)
        s.text(cx, 54, data, size=11.5, colour=GREY)
        s.box(cx - 65, ys["emb"], 130, 32, "embedding E", GREY, size=12, amount=0.18)
        for layer in (1, 2, 3):
            s.box(cx - 65, ys[f"lstm{layer}"], 130, 32, f"AWD-LSTM layer {layer}", BLUE, size=12)
        for a, b in (("emb", "lstm1"), ("lstm1", "lstm2"), ("lstm2", "lstm3")):
            s.line(cx, ys[a], cx, ys[b] + 33)
        s.text(cx, 360, "w_{1} … w_{T}", size=12)
        s.line(cx, 348, cx, 333)
        if kind == "c":
            s.box(cx - 65, 72, 130, 50, "", GREEN, size=11,
                  lines=["classifier head", "h_{c} = [h_{T}, max, mean]", "BN, dropout, linear ×2"])
            s.line(cx, 150, cx, 123)
            s.text(cx, 138, "", size=10)
            groups = ["emb", "lstm1", "lstm2", "lstm3"]
            for g, key in enumerate(groups):
                s.text(cx + 72, ys[key] + 21, f"η^{{{g + 1}}}", anchor="start", size=13, colour=RED)
                s.text(cx - 72, ys[key] + 21, f"epoch {5 - g}", anchor="end", size=11, colour=GREY)
            s.text(cx + 72, 102, "η^{5}", anchor="start", size=13, colour=RED)
            s.text(cx - 72, 102, "epoch 1", anchor="end", size=11, colour=GREY)
            notes = ["gradual unfreezing: each group trains", "from the epoch shown, the top first;",
                     "rates η^{l−1} = η^{l} / 2.6, STLR over all steps"]
        else:
            s.box(cx - 65, 88, 130, 34, "softmax (tied to E)", ORANGE, size=12)
            s.line(cx, 150, cx, 123)
            s.text(cx, 76, "p(w_{t+1} | w_{≤t})", size=12)
            if kind == "b":
                for g, key in enumerate(["emb", "lstm1", "lstm2", "lstm3"]):
                    s.text(cx + 72, ys[key] + 21, f"η^{{{g + 1}}}", anchor="start", size=13, colour=RED)
                notes = ["all layers train from the start;", "discriminative rates η^{l−1} = η^{l} / 2.6",
                         "under slanted triangular rates (STLR)"]
            else:
                notes = ["learns p(w_{t+1} | w_{≤t}) on a large", "general corpus; trained once,",
                         "shipped as a checkpoint"]
        for i, note in enumerate(notes):
            s.text(cx, 382 + 14 * i, note, size=11)
        if kind in "bc":   # STLR: a short climb to η_max at the cut, then a long decay
            sx, sy = x0 + 82, 426
            s.path(f"M{sx:g},{sy + 20:g} L{sx + 10:g},{sy:g} L{sx + 44:g},{sy + 18:g}", RED, 1.6, arrow=False)
            s.path(f"M{sx - 2:g},{sy + 22:g} L{sx + 46:g},{sy + 22:g}", GREY, 0.8, arrow=False)
            s.text(sx + 52, sy + 18, "STLR: η_{t} against step t", anchor="start", size=10.5, colour=RED)
        if p < 2:
            s.line(x0 + 268, 215, x0 + 292, 215, INK, width=2.2)
    return s


# -- 08: ELMo's biLM and the scalar mix ---------------------------------------------------------------------------

def elmo_bilm() -> Svg:
    s = Svg(820, 340, "ELMo's biLM over three tokens: a character CNN gives x_k; forward LSTM layers read left to "
                      "right, backward ones right to left; the task mixes every layer's concatenated state, "
                      "ELMo_k = gamma sum_j s_j h_k,j (Peters et al. 2018, Equation 1)")
    cols = {"k−2": 150, "k−1": 300, "k": 450}   # column centres; the mixed token k is the last shown
    words = {"k−2": "“a”", "k−1": "“bright”", "k": "“star”"}
    w, fwd, bwd = 120, BLUE, GREEN
    rows = {2: 118, 1: 196}                       # top of each LSTM layer's forward row; its backward row is 28 below
    y_tok, y_soft = 274, 62
    s.text(16, 24, "biLM (Peters et al. 2018, §3.1): a forward and a backward LSTM LM share the token layer Θ_{x} "
                   "and the softmax Θ_{s}", anchor="start", size=12.5)
    s.text(16, rows[2] + 30, "LSTM 2", anchor="start", size=12, bold=True)
    s.text(16, rows[1] + 30, "LSTM 1", anchor="start", size=12, bold=True)
    s.text(16, y_tok + 20, "tokens", anchor="start", size=12, bold=True)
    s.box(cols["k−2"] - w / 2, y_soft, cols["k"] - cols["k−2"] + w, 26,
          "softmax Θ_{s}, shared: → predicts t_{k+1}, ← predicts t_{k−1}", ORANGE, size=12)
    for name, cx in cols.items():
        x0 = cx - w / 2
        s.box(x0, y_tok, w, 30, f"char CNN → x_{{{name}}}", PURPLE, size=11.5, amount=0.16)
        s.text(cx, y_tok + 50, f"t_{{{name}}} = {words[name]}", size=11.5, colour=GREY)
        for j, y in rows.items():
            s.box(x0, y, w, 24, f"→h_{{{name},{j}}}", fwd, size=11.5)
            s.box(x0, y + 28, w, 24, f"←h_{{{name},{j}}}", bwd, size=11.5)
        s.line(cx, y_tok, cx, rows[1] + 53)
        s.line(cx, rows[1], cx, rows[2] + 53)
        s.line(cx, rows[2], cx, y_soft + 27)
    names = list(cols)
    for a, b in zip(names, names[1:]):     # forward: left to right; backward: right to left
        for y in rows.values():
            s.line(cols[a] + w / 2, y + 12, cols[b] - w / 2 - 1, y + 12, fwd)
            s.line(cols[b] - w / 2, y + 40, cols[a] + w / 2 + 1, y + 40, bwd)
    for y in rows.values():              # the backward LSTM at k has read t_N … t_(k+1)
        s.line(cols["k"] + w / 2 + 34, y + 40, cols["k"] + w / 2 + 1, y + 40, bwd, dash="3 2")
    s.text(cols["k"] + w / 2 + 36, rows[1] + 68, "← from t_{N} … t_{k+1}", anchor="start", size=10.5, colour=GREEN)
    s.text(cols["k−2"] - w / 2, rows[1] + 68, "t_{1} … →", anchor="start", size=10.5, colour=BLUE)
    # h_{k,j}: the concatenated state of each layer at token k, and the token layer [x_k; x_k]
    xk = cols["k"] - w / 2 - 5
    taps = {2: (rows[2] - 4, 60), 1: (rows[1] - 4, 60), 0: (y_tok - 4, 38)}
    for y, h in taps.values():
        s.rect(xk, y, w + 10, h, stroke=RED, rx=6, width=1.6, dash="5 3")
    mx, sx, sy = 640, 782, 214
    for j, (y, h) in taps.items():
        label = "h_{k,0} = [x_{k}; x_{k}]" if j == 0 else f"h_{{k,{j}}} = [→h; ←h]"
        s.line(xk + w + 10, y + h / 2, mx + 34, y + h / 2, RED, width=1.2, arrow=False)
        s.text(mx, y + h / 2 + 14, label, anchor="start", size=10.5, colour=RED)
        s.text(mx, y + h / 2 - 5, f"× s_{{{j}}}", anchor="start", size=12, colour=RED)
        s.line(mx + 34, y + h / 2, sx - 14, sy + (j - 1) * 8, RED, width=1.2)
    s.circle(sx, sy, 14, fill=tint(RED, 0.25), stroke=RED)
    s.text(sx, sy + 5, "Σ", size=14)
    s.line(sx, sy - 15, sx, 146)
    s.text(sx + 6, 176, "× γ", anchor="start", size=12, colour=RED)
    s.text(sx, 136, "ELMo_{k}", size=13, bold=True, colour=RED)
    s.text(810, 58, "ELMo_{k} = γ Σ_{j} s_{j} h_{k,j}", anchor="end", size=13, bold=True, colour=RED)
    s.text(810, 76, "Peters et al. 2018, Equation 1", anchor="end", size=11.5)
    s.text(810, 94, "s = softmax(w); w, γ learned by the task", anchor="end", size=11.5)
    return s


# -- 09: GPT's input transformations ------------------------------------------------------------------------------

def _sequence(s, y, parts, x0=132, width=430):
    """Token boxes along one row; fixed widths for the special tokens, the rest shared by the texts."""
    special = {"[start]": (56, GREEN), "[delim]": (56, ORANGE), "[extract]": (66, RED)}
    fixed = sum(special[p][0] for p in parts if p in special)
    texts = [p for p in parts if p not in special]
    gap = 4
    free = width - fixed - gap * (len(parts) - 1)
    x = x0
    for part in parts:
        w, colour = special.get(part, (free / len(texts), BLUE))
        s.box(x, y, w, 26, part, colour, size=11.5 if part in special else 12,
              amount=0.3 if part in special else 0.1)
        x += w + gap
    return x0 + width


def gpt_input_transformations() -> Svg:
    s = Svg(880, 440, "GPT-1's input transformations (Radford et al. 2018, Figure 1): classification, entailment, "
                      "similarity and multiple choice as token sequences with start, delimiter and extract tokens")
    s.text(347, 20, "one token sequence", size=12, colour=GREY)
    s.text(630, 20, "pretrained GPT", size=12, colour=GREY)
    s.text(752, 20, "new: W_{y}", size=12, colour=GREY)

    def transformer(y, linear=True):
        s.line(563, y + 13, 587, y + 13)
        s.box(588, y, 84, 26, "Transformer", PURPLE, size=12)
        if linear:
            s.line(672, y + 13, 717, y + 13)
            s.box(718, y, 68, 26, "Linear", CYAN, size=12)

    rows = [("Classification", 40, [["[start]", "text", "[extract]"]]),
            ("Entailment", 92, [["[start]", "premise", "[delim]", "hypothesis", "[extract]"]]),
            ("Similarity", 146, [["[start]", "text 1", "[delim]", "text 2", "[extract]"],
                                 ["[start]", "text 2", "[delim]", "text 1", "[extract]"]]),
            ("Multiple choice", 246, [["[start]", "context", "[delim]", "answer 1", "[extract]"],
                                      ["[start]", "context", "[delim]", "answer 2", "[extract]"],
                                      ["[start]", "context", "[delim]", "answer N", "[extract]"]])]
    for name, y, seqs in rows:
        s.text(10, y + 18, name, anchor="start", size=13, bold=True)
        for i, parts in enumerate(seqs):
            yy = y + 36 * i
            _sequence(s, yy, parts)
            if name == "Similarity":
                transformer(yy, linear=False)
                s.line(672, yy + 13, 692, 165, INK)
            elif name == "Multiple choice":
                transformer(yy)
                s.line(786, yy + 13, 808, 294)
            else:
                transformer(yy)
        if name == "Similarity":
            s.circle(700, 172, 9)
            s.text(700, 177, "+", size=13)
            s.line(709, 172, 717, 172)
            s.box(718, 159, 68, 26, "Linear", CYAN, size=12)
        if name == "Multiple choice":
            s.box(810, 282, 62, 26, "softmax", CYAN, size=11.5)
            s.text(841, 325, "over the", size=10.5, colour=GREY)
            s.text(841, 338, "N answers", size=10.5, colour=GREY)
    s.note(10, 388, [
        "[start], [delim], [extract]: three new tokens, never seen in pretraining. The last block's state at "
        "[extract], h_{l}^{m}, feeds",
        "a linear layer: P(y | x^{1}, …, x^{m}) = softmax(h_{l}^{m} W_{y}). Similarity adds the states of both "
        "orders; multiple choice",
        "scores each answer's sequence and normalises the N scores with a softmax."], step=17, size=12)
    return s


# -- 10: BERT's input and its two heads ---------------------------------------------------------------------------

PAIR = ["[CLS]", "the", "plot", "was", "thin", ".", "[SEP]", "the", "actors", "saved", "it", ".", "[SEP]"]
SEGMENT = [0] * 7 + [1] * 6


def _col(t: int) -> float:
    return 186 + 52 * t


def bert_input() -> Svg:
    s = Svg(850, 302, "BERT's input representation (Devlin et al. 2019, Figure 2): the sum of token, segment and "
                      "position embeddings for [CLS] A [SEP] B [SEP]")
    rows = [("Input", "", 32), ("Token", "E_{tok}[x_{t}]", 90), ("Segment", "E_{seg}[s_{t}]", 150),
            ("Position", "E_{pos}[t]", 210)]
    for name, symbol, y in rows:
        s.text(10, y + 12 if not symbol else y + 8, name, anchor="start", size=13, bold=True)
        if symbol:
            s.text(10, y + 25, symbol, anchor="start", size=12)
    for t, (token, seg) in enumerate(zip(PAIR, SEGMENT)):
        x = _col(t)
        s.box(x - 24, 32, 48, 26, token, GREY, size=11, amount=0.06)
        s.box(x - 24, 90, 48, 32, f"E_{{{token}}}", ORANGE, size=11 if len(token) < 6 else 10)
        s.box(x - 24, 150, 48, 32, "E_{A}" if seg == 0 else "E_{B}", GREEN if seg == 0 else CYAN, size=12)
        s.box(x - 24, 210, 48, 32, f"E_{{{t}}}", PURPLE, size=12)
        s.text(x, 141, "+", size=14)
        s.text(x, 201, "+", size=14)
        s.line(x, 58, x, 89, GREY, width=1)
    s.text(10, 270, "h_{0} = LayerNorm(E_{tok}[x_{t}] + E_{seg}[s_{t}] + E_{pos}[t]), then dropout.",
           anchor="start", size=12.5)
    s.text(10, 290, "Segment A (s_{t} = 0): [CLS], sentence A and the first [SEP]; segment B (s_{t} = 1): "
                    "sentence B and the last [SEP].", anchor="start", size=12)
    return s


def bert_heads() -> Svg:
    s = Svg(850, 380, "BERT's two pre-training heads: the masked LM on the final vector of each masked position, "
                      "next sentence prediction on the pooled [CLS] vector C")
    masked = 4
    tokens = [("[MASK]" if t == masked else tok) for t, tok in enumerate(PAIR)]
    for t, token in enumerate(tokens):
        x = _col(t)
        s.box(x - 24, 338, 48, 26, token, RED if t == masked else GREY, size=11, amount=0.25 if t == masked else 0.06)
        s.line(x, 338, x, 297, GREY, width=1)
        s.line(x, 256, x, 229, GREY, width=1)
        s.box(x - 18, 208, 36, 20, "C" if t == 0 else ("h_{t}" if t == masked else ""), BLUE, size=11,
              amount=0.35 if t in (0, masked) else 0.12)
    s.box(_col(0) - 24, 257, _col(12) - _col(0) + 48, 38, "", BLUE, size=12, amount=0.15,
          lines=["BERT encoder: L post-norm Transformer layers; every position attends to both sides",
                 "input h_{0} = token + segment + position embeddings"])
    # NSP on [CLS]
    x = _col(0)
    s.line(x, 207, x, 181)
    s.box(20, 148, 226, 32, "C = tanh(h_{L}[CLS] W_{p} + b_{p})", GREEN, size=11.5)
    s.line(x, 148, x, 125)
    s.box(20, 92, 226, 32, "NSP: 2-way linear + softmax", GREEN, size=12)
    s.line(x, 92, x, 70)
    s.text(x, 60, "IsNext / NotNext", size=13, bold=True)
    s.text(x, 40, "does B follow A in the text?", size=11, colour=GREY)
    # MLM at the masked position
    x = _col(masked)
    s.line(x, 207, x, 181)
    s.box(x - 112, 148, 224, 32, "dense → GELU → LayerNorm", ORANGE, size=12)
    s.line(x, 148, x, 125)
    s.box(x - 112, 92, 224, 32, "· E_{tok}^{⊤} + b (tied), softmax", ORANGE, size=12)
    s.line(x, 92, x, 70)
    s.text(x, 60, "MLM: p(x_{t} = “thin”)", size=13, bold=True)
    s.text(x, 40, "over the whole vocabulary", size=11, colour=GREY)
    s.note(560, 92, ["MLM: 15% of the tokens are chosen; a chosen",
                     "token becomes [MASK] 80%, a random token",
                     "10%, stays 10%; the loss is at chosen ones.",
                     "NSP: B is the next sentence half the time.",
                     "Pre-training loss: L_{MLM} + L_{NSP}."], step=18, size=12)
    return s


# -- 11: Transformer-XL's segments and memory --------------------------------------------------------------------

def transformer_xl_memory() -> Svg:
    s = Svg(820, 400, "Transformer-XL (Dai et al. 2019): segment tau+1 attends to the cached states of segment tau, "
                      "a memory with stop-gradient")
    pitch, x0 = 66, 150
    xs = [x0 + pitch * i for i in range(8)]
    ys = {2: 110, 1: 195, 0: 280}
    names = {2: "layer n: h^{n}", 1: "layer n−1: h^{n−1}", 0: "layer n−2: h^{n−2}"}
    for layer, y in ys.items():
        s.text(12, y + 5, names[layer], anchor="start", size=12.5)
    # attention of the first and the last query of the segment, in two layers
    for layer in (2, 1):
        y_q, y_k = ys[layer], ys[layer - 1]
        for q, colour, width in ((4, RED, 1.3), (7, tint(RED, 0.45), 1.0)):
            for k in range(0, q + 1):
                s.line(xs[q], y_q + 13, xs[k], y_k - 13, colour, width=width, arrow=False)
    for layer in (2, 1):   # memory states were computed from segment tau-1, which is gone
        for k in (0, 1):
            s.line(xs[k], ys[layer] + 13, xs[k] - 60 + 20 * k, ys[layer - 1] - 8, GREY, width=0.9, arrow=False,
                   dash="3 3")
    for y in ys.values():
        for i, x in enumerate(xs):
            if i < 4:
                s.circle(x, y, 13, fill=tint(GREY, 0.2), stroke=GREY, dash="3 2")
            else:
                s.circle(x, y, 13, fill=tint(BLUE, 0.35), stroke=BLUE)
    # brackets
    for lo, hi, label, sub, colour in ((0, 3, "segment τ: the memory", "M = mem_len positions, SG: no gradient",
                                        GREY),
                                       (4, 7, "segment τ+1: the current one", "L = segment_len positions, trained",
                                        BLUE)):
        a, b = xs[lo] - 16, xs[hi] + 16
        s.path(f"M{a:g},62 L{a:g},56 L{b:g},56 L{b:g},62", colour, 1.3, arrow=False)
        s.text((a + b) / 2, 30, label, size=12, colour=colour if colour != GREY else INK, bold=True)
        s.text((a + b) / 2, 47, sub, size=11.5, colour=GREY if colour == GREY else BLUE)
    s.text(xs[0] - 56, ys[1] + 30, "from τ−1", size=10.5, colour=GREY)
    # next memory
    s.line(xs[7] + 20, ys[1], xs[7] + 60, ys[1], BLUE, width=1.6)
    s.note(xs[7] + 66, ys[1] - 12, ["each layer's last M", "inputs, detached:", "the memory of τ+2"], step=16, size=11.5)
    s.text(xs[4] + 4, ys[2] - 22, "query i = 0", size=11, colour=RED)
    s.note(12, 338, [
        "h̃_{τ+1}^{n−1} = [SG(h_{τ}^{n−1}) ∘ h_{τ+1}^{n−1}]: queries from the segment h_{τ+1}^{n−1}, keys and "
        "values from h̃_{τ+1}^{n−1}.",
        "Query i reads the M memory positions and segment positions ≤ i, scored by relative distance; "
        "the gradient stops at the memory."], step=20, size=12)
    return s


# -- 09: GPT's Transformer stack and its two heads ----------------------------------------------------------------

def _shipped_config(name: str) -> dict:
    """The model config recorded in a shipped checkpoint's ``lmlib/pretrained/<name>/pretrain.json``."""
    import json
    path = Path(__file__).resolve().parents[1] / "lmlib" / "pretrained" / name / "pretrain.json"
    return json.loads(path.read_text(encoding="utf-8"))["config"]


def gpt_block() -> Svg:
    c = _shipped_config("gpt_imdb")
    s = Svg(820, 566, "GPT-1 (Radford et al. 2018, Figure 1, left): text and position embedding, 12 Transformer "
                      "blocks of masked multi-head self-attention and feed-forward, each followed by add and layer "
                      "norm; a text-prediction head and a task-classifier head, L3 = L2 + lambda L1")
    cx = 250
    s.text(cx, 554, "tokens U = (u_{i−k}, …, u_{i−1}), or a task's sequence x^{1}, …, x^{m}", size=12)
    s.line(cx, 541, cx, 515)
    s.box(cx - 110, 480, 220, 34, "", GREY, size=12, amount=0.15,
          lines=["Text & Position Embed", "h_{0} = U W_{e} + W_{p}"])
    s.line(cx, 480, cx, 447)
    # one block, repeated n times
    s.rect(cx - 130, 206, 260, 232, fill="none", stroke=GREY, dash="5 4", rx=8)
    s.text(cx - 142, 324, "12×", anchor="end", size=16, bold=True)
    s.text(cx - 142, 342, "(n blocks)", anchor="end", size=11, colour=GREY)
    _sublayer(s, cx, 392, "", RED, ["Masked Multi Self Attention", "position t sees positions ≤ t"])
    _residual(s, cx + 108, cx, 432, 362)
    s.line(cx, 392, cx, 375)
    s.box(cx - 90, 350, 180, 24, "Add & Layer Norm", ORANGE, size=12)
    s.line(cx, 350, cx, 317)
    _sublayer(s, cx, 282, "", BLUE, ["Feed Forward, each position", "GELU(x W_{1} + b_{1}) W_{2} + b_{2}"])
    _residual(s, cx + 108, cx, 330, 252)
    s.line(cx, 282, cx, 265)
    s.box(cx - 90, 240, 180, 24, "Add & Layer Norm", ORANGE, size=12)
    s.text(cx + 142, 322, "h_{l} = transformer_block(h_{l−1})", anchor="start", size=12.5)
    s.text(cx + 142, 340, "l = 1, …, n", anchor="start", size=12, colour=GREY)
    # the two heads on the last block's states
    s.line(cx, 240, cx, 196, arrow=False)
    s.path(f"M{cx:g},196 L{cx - 110:g},196 L{cx - 110:g},167", INK, 1.3)
    s.path(f"M{cx:g},196 L{cx + 110:g},196 L{cx + 110:g},167", INK, 1.3)
    s.text(cx + 8, 218, "h_{n}", anchor="start", size=12)
    s.box(cx - 200, 130, 180, 36, "", CYAN, size=12, lines=["Text Prediction", "P(u) = softmax(h_{n} W_{e}^{⊤})"])
    s.box(cx + 20, 130, 180, 36, "", GREEN, size=12,
          lines=["Task Classifier", "P(y | x^{1..m}) = softmax(h_{l}^{m} W_{y})"])
    s.line(cx - 110, 130, cx - 110, 104)
    s.line(cx + 110, 130, cx + 110, 104)
    s.text(cx - 110, 92, "L_{1} = Σ_{i} log P(u_{i} | u_{i−k..i−1})", size=12)
    s.text(cx - 110, 76, "pretraining; auxiliary in fine-tuning", size=11, colour=GREY)
    s.text(cx + 110, 92, "L_{2} = Σ_{(x, y)} log P(y | x^{1..m})", size=12)
    s.text(cx + 110, 76, "the task's labels, read at [extract]", size=11, colour=GREY)
    s.text(cx, 44, "fine-tuning maximises L_{3}(C) = L_{2}(C) + λ · L_{1}(C)", size=14, bold=True)
    s.text(cx, 22, "the text-prediction head reuses W_{e} (tied); the task adds only W_{y} and λ", size=11.5,
           colour=GREY)
    # the paper's size and this course's
    order = ("pre-norm, GPT-2's order: LayerNorm before each", "sub-layer and one after the last block.") \
        if c["norm"] == "pre" else ("post-norm, as drawn.", "")
    s.note(470, 420, ["Radford et al. 2018: n = 12 blocks, 768",
                      "dimensions, 12 heads; post-norm (Add &",
                      "Layer Norm after each sub-layer), as drawn.",
                      "",
                      f"The course's IMDb GPT (section 5): n = {c['num_layers']},",
                      f"d_model {c['d_model']}, {c['num_heads']} heads, {c['block_size']} positions,",
                      *[line for line in order if line]], step=17, size=12)
    return s


# -- 10: fine-tuning BERT ----------------------------------------------------------------------------------------

def bert_finetuning() -> Svg:
    s = Svg(880, 402, "Fine-tuning BERT (after Devlin et al. 2019, Figure 4): the same pretrained encoder for every "
                      "task; a sentence or sentence pair in, a classifier on C for a label, or on each T_i for a tag")
    panels = [
        (20, "(a) one sentence or a pair → one label", "e.g. sentiment (SST-2, IMDb), entailment (MNLI)",
         ["[CLS]", "Tok 1", "…", "Tok N", "[SEP]", "Tok′ 1", "…", "[SEP]"],
         ["C", "T_{1}", "…", "T_{N}", "T_{[SEP]}", "T′_{1}", "…", "T′_{[SEP]}"]),
        (460, "(b) one sentence → a tag per token", "e.g. named entities (CoNLL-2003), part of speech",
         ["[CLS]", "Tok 1", "Tok 2", "…", "Tok N", "[SEP]"],
         ["C", "T_{1}", "T_{2}", "…", "T_{N}", "T_{[SEP]}"]),
    ]
    for x0, title, example, tokens, outs in panels:
        width = 400
        pitch = width / len(tokens)
        xs = [x0 + pitch * (i + 0.5) for i in range(len(tokens))]
        s.text(x0, 24, title, anchor="start", size=13.5, bold=True)
        s.text(x0, 42, example, anchor="start", size=11.5, colour=GREY)
        for x, token, out in zip(xs, tokens, outs):
            special = token.startswith("[")
            if token != "…":
                s.box(x - pitch / 2 + 3, 330, pitch - 6, 26, token, GREEN if special else GREY, size=11,
                      amount=0.3 if special else 0.08)
                s.line(x, 330, x, 297, GREY, width=1)
                s.line(x, 246, x, 220, GREY, width=1)
                s.box(x - pitch / 2 + 5, 194, pitch - 10, 24, out, BLUE, size=10.5 if len(out) > 8 else 11.5,
                      amount=0.35 if out == "C" or (x0 > 400 and out.startswith("T_{")) else 0.12)
            else:
                s.text(x, 348, "…", size=14)
                s.text(x, 211, "…", size=14)
        s.box(x0, 250, width, 44, "", PURPLE, size=12, amount=0.16,
              lines=["the same pretrained BERT, every weight fine-tuned",
                     "input: token + segment + position embeddings"])
        if x0 < 400:   # classification on C
            x = xs[0]
            s.line(x, 194, x, 162)
            s.box(x - 20, 124, 250, 36, "", RED, size=12,
                  lines=["new layer W ∈ R^{K×H}", "P(label) = softmax(C W^{⊤})"])
            s.line(x, 124, x, 98)
            s.text(x - 20, 88, "class label", anchor="start", size=13, bold=True)
        else:          # tagging on every T_i
            tagged = [i for i, out in enumerate(outs) if out.startswith("T_{") and out != "T_{[SEP]}"]
            for i in tagged:
                s.line(xs[i], 194, xs[i], 162)
            s.box(xs[tagged[0]] - 30, 124, xs[tagged[-1]] - xs[tagged[0]] + 60, 36, "", RED, size=12,
                  lines=["one new layer W, shared by positions", "P(tag_{i}) = softmax(T_{i} W^{⊤})"])
            for i, tag in zip(tagged, ["B-PER", "I-PER", "O"]):
                s.line(xs[i], 124, xs[i], 98)
                s.text(xs[i], 88, tag, size=12.5, bold=True)
    s.note(20, 376, ["A pair fills segment A ([CLS], sentence A, the first [SEP]) and segment B (sentence B, the "
                     "last [SEP]);", "one sentence is segment A alone. Only W is new; every other weight starts "
                     "from pretraining."], step=16, size=12)
    return s


DIAGRAMS = {
    "attention_encoder_decoder.svg": attention_encoder_decoder,
    "transformer_layers.svg": transformer_layers,
    "multihead_qkv.svg": multihead_qkv,
    "awd_lstm_dropouts.svg": awd_lstm_dropouts,
    "ulmfit_stages.svg": ulmfit_stages,
    "elmo_bilm.svg": elmo_bilm,
    "gpt_input_transformations.svg": gpt_input_transformations,
    "bert_input.svg": bert_input,
    "bert_heads.svg": bert_heads,
    "transformer_xl_memory.svg": transformer_xl_memory,
    "gpt_block.svg": gpt_block,
    "bert_finetuning.svg": bert_finetuning,
}


def render_all() -> dict[str, str]:
    """Every diagram's SVG text, by file name."""
    return {name: draw().render() for name, draw in DIAGRAMS.items()}


def main(argv: list[str] | None = None) -> int:
    out = Path(argv[0]) if argv else FIGURES
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (out / name).write_text(text, encoding="utf-8")
        print(f"{out / name}: {len(text.encode()):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
