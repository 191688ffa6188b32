"""Figures of training ideas (ULMFiT's schedules, the LR range test, gradual unfreezing) for the notebooks.

They live in the course layer, above :mod:`lmlib.training`, because a figure is for the reader: the
schedules and callbacks they draw stay plain functions and numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from ..training.schedules import LRFinderResult, stlr_cut, stlr_schedule, unfreezing_timeline
from .viz import LAYOUT, heatmap


def stlr_figure(T: int = 1000, cut_frac: float = 0.1, ratio: float = 32.0, eta_max: float = 0.01) -> go.Figure:
    """The STLR schedule with the cut (end of warm-up) and the peak η_max marked."""
    etas = stlr_schedule(T, cut_frac, ratio, eta_max)
    cut = stlr_cut(T, cut_frac)
    fig = go.Figure(go.Scatter(x=list(range(T)), y=etas, mode="lines", name="η_t"))
    fig.add_vline(x=cut, line_dash="dash", line_color="gray")
    peak = max(range(T), key=etas.__getitem__)
    fig.add_trace(go.Scatter(x=[peak], y=[etas[peak]], mode="markers+text", name="peak",
                             text=[f"peak η={etas[peak]:.2e} at t={peak}"], textposition="top right"))
    fig.update_layout(title=f"STLR: T={T}, cut_frac={cut_frac:g}, ratio={ratio:g}, η_max={eta_max:.3g} → cut={cut}",
                      xaxis_title="iteration t", yaxis_title="learning rate η_t", showlegend=False, **LAYOUT)
    return fig


def lr_find_figure(result: LRFinderResult) -> go.Figure:
    """The range test's raw and smoothed loss against the learning rate (log axis), the suggestion marked."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=result.lrs, y=result.losses, name="loss", mode="lines", opacity=0.35))
    fig.add_trace(go.Scatter(x=result.lrs, y=result.smoothed, name="smoothed loss", mode="lines"))
    fig.add_vline(x=result.suggestion, line_dash="dash", line_color="crimson")
    fig.add_annotation(x=math.log10(result.suggestion), y=1, yref="paper", showarrow=False,
                       text=f"suggested {result.suggestion:.1e}", xanchor="left", yanchor="bottom")
    fig.update_layout(title=f"LR range test ({result.rule})", xaxis_title="learning rate",
                      yaxis_title="training loss", **LAYOUT)
    fig.update_xaxes(type="log")
    return fig


def timeline_figure(n_groups: int = 5, epochs: int = 6, eta_top: float = 0.01, factor: float = 2.6,
                    gradual: bool = True, names: Sequence[str] | None = None) -> go.Figure:
    """Heatmap of :func:`~lmlib.training.schedules.unfreezing_timeline`: which group trains at which peak
    rate in each epoch."""
    names = list(names) if names is not None else ["embedding", *[f"LSTM {i + 1}" for i in range(n_groups - 2)], "head"][:n_groups]
    table = unfreezing_timeline(n_groups, epochs, eta_top, factor, gradual)
    return heatmap(table.flip(0), x=[f"epoch {e + 1}" for e in range(epochs)], y=names[::-1],
                   title=f"peak learning rate per layer group (0 = frozen); η^(l-1) = η^l / {factor:g}",
                   colorscale="Blues", text_format=".1e")


def label_curve_figure(curves: dict[str, tuple[Sequence[int], Sequence[float], Sequence[float | None]]],
                       title: str, y_title: str) -> go.Figure:
    """Accuracy against the number of labelled examples (log x axis), one line per method, each point its mean
    with ± one standard error as an error bar (``None``: no bar, e.g. a single seed).
    ``curves``: name -> (label counts, means, standard errors)."""
    fig = go.Figure()
    for name, (xs, means, ses) in curves.items():
        if not len(xs) == len(means) == len(ses):
            raise ValueError(f"curve {name!r} has {len(xs)} label counts, {len(means)} means and {len(ses)} errors")
        fig.add_trace(go.Scatter(x=list(xs), y=list(means), name=name, mode="lines+markers",
                                 error_y=dict(type="data", array=[s or 0.0 for s in ses], visible=True)))
    fig.update_layout(title=title, xaxis_title="labelled training examples (log scale)", yaxis_title=y_title, **LAYOUT)
    fig.update_xaxes(type="log")
    return fig
