"""Plots used across the course, and a way to show library code inside a notebook.

Figures are plain plotly ``go.Figure`` objects on plotly's default renderer, which in JupyterLab is a
~7 KB JSON bundle drawn by the bundled extension: no CDN, so they render offline.

Importing this module makes the course's template ``"lmlib"`` plotly's default: ``plotly_white`` with the
Okabe-Ito colours (Okabe & Ito 2008, *Color Universal Design*; told apart under the common colour-vision
deficiencies) and, trace by trace, a different line dash and marker symbol, so curves differ by more than
colour (WCAG 2.1, success criterion 1.4.1 "Use of Color").
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal

import plotly.graph_objects as go
import plotly.io as pio

# Okabe-Ito, most distinct first; their yellow (#F0E442) is left out: 1.2:1 against the white background
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "5px,2px,1px,2px")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "triangle-down")


def course_template() -> go.layout.Template:
    """plotly_white with the course's colours; the n-th scatter trace gets the n-th colour, dash and symbol."""
    template = go.layout.Template(pio.templates["plotly_white"])
    template.layout.colorway = PALETTE
    template.data.scatter = [go.Scatter(line=dict(dash=dash), marker=dict(symbol=symbol))
                             for dash, symbol in zip(DASHES, SYMBOLS)]
    return template


pio.templates["lmlib"] = course_template()
pio.templates.default = "lmlib"

LAYOUT = dict(template="lmlib", margin=dict(l=60, r=20, t=50, b=50), height=380)


def heatmap(
    z,
    x: Sequence[str] | None = None,
    y: Sequence[str] | None = None,
    title: str = "",
    colorscale: str = "Blues",
    zmin: float | None = None,
    zmax: float | None = None,
    text_format: str | None = ".2f",
) -> go.Figure:
    """A labelled heatmap of a 2-D array (attention weights, embeddings, gate values...).

    Rows are ``y`` from top to bottom, as a matrix is read; cells are annotated when the matrix is small.
    """
    import numpy as np

    z = np.asarray(z.detach().cpu() if hasattr(z, "detach") else z, dtype=float)
    if z.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D array, got shape {z.shape}")
    if x is not None and len(x) != z.shape[1]:
        raise ValueError(f"{len(x)} column labels for {z.shape[1]} columns")
    if y is not None and len(y) != z.shape[0]:
        raise ValueError(f"{len(y)} row labels for {z.shape[0]} rows")
    annotate = text_format is not None and z.size <= 400
    # Cells sit at integer positions and labels are tick texts: a token that occurs twice in a sentence
    # keeps two rows, where category axes would merge them into one.
    rows, cols = list(range(z.shape[0])), list(range(z.shape[1]))
    x_text = [str(v) for v in x] if x is not None else [str(c) for c in cols]
    y_text = [str(v) for v in y] if y is not None else [str(r) for r in rows]
    fig = go.Figure(go.Heatmap(
        z=z, x=cols, y=rows, colorscale=colorscale, zmin=zmin, zmax=zmax,
        text=np.vectorize(lambda v: format(v, text_format))(z) if annotate else None,
        texttemplate="%{text}" if annotate else None,
        customdata=[[(y_text[r], x_text[c]) for c in cols] for r in rows],
        hovertemplate="%{customdata[0]} → %{customdata[1]}<br>%{z:.3f}<extra></extra>",
    ))
    fig.update_layout(title=title, **LAYOUT)
    fig.update_xaxes(tickmode="array", tickvals=cols, ticktext=x_text)
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=y_text, autorange="reversed")
    return fig


def line_plot(
    series: Mapping[str, Sequence[float] | tuple[Sequence[float], Sequence[float]]],
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    log_y: bool = False,
    markers: bool = False,
) -> go.Figure:
    """Several named curves on one plot. Each value is ``ys`` or an ``(xs, ys)`` pair."""
    fig = go.Figure()
    for name, values in series.items():
        if isinstance(values, tuple) and len(values) == 2:
            xs, ys = values
        else:
            xs, ys = list(range(len(values))), values
        if len(xs) != len(ys):
            raise ValueError(f"series {name!r} has {len(xs)} x values but {len(ys)} y values")
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), name=name, mode="lines+markers" if markers else "lines"))
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, **LAYOUT)
    if log_y:
        fig.update_yaxes(type="log")
    return fig


def bar_plot(values: Mapping[str, float], title: str = "", y_title: str = "", text_format: str = ".1f") -> go.Figure:
    """One bar per named value, labelled with the value."""
    names, ys = list(values), list(values.values())
    fig = go.Figure(go.Bar(x=names, y=ys, text=[format(v, text_format) for v in ys], textposition="outside"))
    fig.update_layout(title=title, yaxis_title=y_title, **LAYOUT)
    return fig


def reference_line(fig: go.Figure, value: float, text: str, axis: str = "y", **line) -> go.Figure:
    """A labelled dotted line across the plot at ``value``: horizontal for ``axis="y"``, vertical for "x".

    On a log axis plotly places shapes in data units but annotations in log10 units (``add_hline``'s own
    ``annotation_text`` gets this wrong), so the label sits at log10(value). Set the axis type first.
    """
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    is_log = fig.layout[f"{axis}axis"].type == "log"
    if is_log and value <= 0:
        raise ValueError(f"a line at {value} cannot be drawn on a log axis")
    where = math.log10(value) if is_log else value
    style = {"line_dash": "dot", "line_color": "gray", **line}
    if axis == "y":
        fig.add_hline(y=value, **style)
        fig.add_annotation(x=1, xref="paper", y=where, yref="y", text=text, showarrow=False,
                           xanchor="right", yanchor="bottom")
    else:
        fig.add_vline(x=value, **style)
        fig.add_annotation(x=where, xref="x", y=1, yref="paper", text=text, showarrow=False,
                           xanchor="left", yanchor="top")
    return fig


def on_step(value: float, step: float) -> float:
    """A slider's value rounded to as many decimals as its ``step``: 0.09999999999999999 (step 0.01) → 0.1.

    A FloatSlider's value is computed in the browser as min + k·step in binary floating point, so it
    arrives as 2.0000000000000004 or 0.35000000000000003; round it before computing with it or showing it.
    """
    decimals = max(0, -Decimal(str(step)).normalize().as_tuple().exponent)
    return round(value, decimals)


def source(obj, start: str | None = None, lines: int | None = None) -> str:
    """The source code of a library function, class or module.

    ``start`` begins the listing at the first line containing that text; ``lines`` limits its length.
    """
    try:
        text = inspect.getsource(obj).splitlines()
    except (TypeError, OSError) as err:
        raise TypeError(f"cannot show the source of {obj!r}: {err}") from None
    if start is not None:
        hits = [i for i, line in enumerate(text) if start in line]
        if not hits:
            raise ValueError(f"{start!r} does not occur in the source of {getattr(obj, '__qualname__', obj)}")
        text = text[hits[0]:]
    if lines is not None:
        text = text[:lines]
    return "\n".join(text)


def show_source(obj, start: str | None = None, lines: int | None = None) -> None:
    """Display the real source of ``obj`` in the notebook, syntax-highlighted, wherever the call stands.

    ``start`` and ``lines`` select part of it, as in :func:`source`. The listing is displayed, not returned, so
    that several calls in one cell all show (a returned object shows only as the cell's last expression).
    """
    from IPython.display import Code, display

    display(Code(source(obj, start=start, lines=lines), language="python"))


# Attention views that draw offline (bertviz with its JavaScript inlined); see attention_views.py.
from lmlib.course.attention_views import (  # noqa: E402, F401
    encoder_decoder_view,
    head_view,
    model_view,
    transformer_view,
)
