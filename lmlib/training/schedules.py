"""Learning-rate schedules and the learning-rate range test used by ULMFiT.

* Slanted triangular learning rates (STLR) and discriminative fine-tuning: Howard & Ruder (2018),
  "Universal Language Model Fine-tuning for Text Classification", section 3.2.
* The learning-rate range test ("LR finder"): Smith (2017), "Cyclical Learning Rates for Training
  Neural Networks", section 3.3, in the exponential form popularised by the fastai library.

The schedules are pure functions of the step so tests can check them against the paper's formula.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any

import torch

from .callbacks import LRSchedule


def _check_stlr_args(T: int, cut_frac: float, ratio: float, eta_max: float) -> None:
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"T (the number of training iterations) must be a positive integer, got {T!r}")
    if not 0 < cut_frac < 1:
        raise ValueError(f"cut_frac must lie strictly between 0 and 1 (the paper uses 0.1), got {cut_frac}")
    if ratio < 1:
        raise ValueError(f"ratio (how much smaller the lowest rate is than eta_max) must be >= 1, got {ratio}")
    if eta_max <= 0:
        raise ValueError(f"eta_max must be positive, got {eta_max}")


def stlr_cut(T: int, cut_frac: float) -> int:
    """cut = ⌊T · cut_frac⌋, the last warm-up iteration of STLR, computed exactly.

    In floating point the product can fall just below a whole number: 0.29 is stored as
    0.28999999999999998002..., so ``math.floor(100 * 0.29)`` gives 28, not 29 (178 such (T, cut_frac)
    pairs for T ≤ 3000 and two-decimal cut_frac). ``cut_frac`` is therefore read as the decimal a person
    typed: ``Fraction(str(cut_frac))`` turns the float into the shortest decimal that rounds to it
    (``str(0.29) == '0.29'``, so 29/100), and the floor is taken in exact arithmetic. A value that is not
    a short decimal keeps all its digits (``str(0.1 + 0.2) == '0.30000000000000004'``); ``Fraction`` and
    ``Decimal`` inputs are used as they are.
    """
    try:
        exact = Fraction(str(cut_frac))
    except ValueError:  # e.g. a 0-d tensor, whose str() is not a number
        exact = Fraction(float(cut_frac))
    return math.floor(T * exact)


def stlr(t: int, T: int, cut_frac: float = 0.1, ratio: float = 32.0, eta_max: float = 0.01) -> float:
    """Slanted triangular learning rate at iteration ``t`` of ``T`` (Howard & Ruder 2018, eq. 3):

        cut = ⌊T · cut_frac⌋
        p   = t / cut                                   if t < cut
              1 − (t − cut) / (cut · (1/cut_frac − 1))   otherwise
        η_t = η_max · (1 + p · (ratio − 1)) / ratio

    The rate rises linearly from η_max/ratio to η_max over the first ``cut`` iterations, then decays
    linearly back towards η_max/ratio. ``t`` counts from 0, so ``t`` must lie in [0, T).

    The decay's denominator cut · (1/cut_frac − 1) is the number of iterations left after the warm-up,
    T − cut, whenever T · cut_frac is a whole number (T = 1000, cut_frac = 0.1: 100 · 9 = 900). When it
    is not, the floor makes the paper's denominator shorter than T − cut, so the decay overshoots: for
    T = 15 it ends at p = −1/9 and η_14 < 0. We therefore decay over the T − cut iterations that are left,

        p = 1 − (t − cut) / (T − cut)                   for t ≥ cut,

    which is the paper's formula exactly whenever T · cut_frac is whole and keeps η_t ≥ η_max/ratio
    otherwise. The same line covers T · cut_frac < 1 (cut = 0: no warm-up, a pure decay p = 1 − t/T;
    with T = 1 the single step uses η_max). ``cut`` is the exact floor of :func:`stlr_cut` (T = 100,
    cut_frac = 0.29 gives 29, where the float product 28.999999999999996 would give 28).
    """
    _check_stlr_args(T, cut_frac, ratio, eta_max)
    if not isinstance(t, int) or not 0 <= t < T:
        raise ValueError(f"t must be an integer iteration in [0, T) = [0, {T}), got {t!r}")
    cut = stlr_cut(T, cut_frac)
    p = t / cut if t < cut else 1 - (t - cut) / (T - cut)  # T - cut = cut·(1/cut_frac − 1) when T·cut_frac is whole
    return eta_max * (1 + p * (ratio - 1)) / ratio


def stlr_schedule(T: int, cut_frac: float = 0.1, ratio: float = 32.0, eta_max: float = 0.01) -> list[float]:
    """[η_0, ..., η_{T-1}] of :func:`stlr`."""
    return [stlr(t, T, cut_frac, ratio, eta_max) for t in range(T)]


class STLR(LRSchedule):
    """Trainer callback: each parameter group's rate follows STLR scaled to its own base rate.

    A group created with rate η^l (discriminative fine-tuning) gets η^l · stlr(t)/η_max at step t, so the
    ratios between groups stay exactly 2.6 while all of them follow the slanted triangle. Steps past T
    (if training runs longer than planned) are an error rather than a silently clipped rate.
    """

    def __init__(self, T: int, cut_frac: float = 0.1, ratio: float = 32.0):
        _check_stlr_args(T, cut_frac, ratio, 1.0)
        self.T, self.cut_frac, self.ratio = T, cut_frac, ratio
        self.start_step: int | None = None
        super().__init__(self._factor)

    def _factor(self, step: int) -> float:
        return stlr(step - self.start_step, self.T, self.cut_frac, self.ratio, eta_max=1.0)

    def on_fit_begin(self, trainer) -> None:
        if self.start_step is None:
            self.start_step = trainer.step
        super().on_fit_begin(trainer)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "start_step": self.start_step}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.start_step = state["start_step"]


def discriminative_lrs(eta_top: float, n_groups: int, factor: float = 2.6) -> list[float]:
    """Per-group rates for discriminative fine-tuning, lowest layer first (Howard & Ruder 2018, eq. 2):

        θ_t^l = θ_{t−1}^l − η^l · ∇_{θ^l} J(θ),     η^{l−1} = η^l / 2.6

    so group l of L gets η^L / factor^(L−l); the last group (the top) gets ``eta_top``.
    """
    if eta_top <= 0:
        raise ValueError(f"eta_top must be positive, got {eta_top}")
    if n_groups < 1:
        raise ValueError(f"n_groups must be at least 1, got {n_groups}")
    if factor < 1:
        raise ValueError(f"factor must be >= 1 (lower layers learn more slowly), got {factor}")
    return [eta_top / factor ** (n_groups - 1 - l) for l in range(n_groups)]


def stlr_figure(T: int = 1000, cut_frac: float = 0.1, ratio: float = 32.0, eta_max: float = 0.01):
    """The STLR schedule with the cut (end of warm-up) and the peak η_max marked."""
    import plotly.graph_objects as go

    from ..course.viz import LAYOUT

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


# -- the learning-rate range test -------------------------------------------------------------------

@dataclass
class LRFinderResult:
    """The sweep: rates tried, raw and smoothed losses, and the suggested rate (see :func:`lr_find`)."""

    lrs: list[float]
    losses: list[float]
    smoothed: list[float]
    suggestion: float
    rule: str
    diverged: bool = False
    extra: dict = field(default_factory=dict)

    def figure(self):
        import plotly.graph_objects as go

        from ..course.viz import LAYOUT

        fig = go.Figure()
        fig.add_trace(go.Scatter(x=self.lrs, y=self.losses, name="loss", mode="lines", opacity=0.35))
        fig.add_trace(go.Scatter(x=self.lrs, y=self.smoothed, name="smoothed loss", mode="lines"))
        fig.add_vline(x=self.suggestion, line_dash="dash", line_color="crimson")
        fig.add_annotation(x=math.log10(self.suggestion), y=1, yref="paper", showarrow=False,
                           text=f"suggested {self.suggestion:.1e}", xanchor="left", yanchor="bottom")
        fig.update_layout(title=f"LR range test ({self.rule})", xaxis_title="learning rate",
                          yaxis_title="training loss", **LAYOUT)
        fig.update_xaxes(type="log")
        return fig


def suggest_lr(lrs: list[float], smoothed: list[float], skip_start: int = 2, skip_end: int = 1) -> float:
    """The rate where the smoothed loss falls fastest against log(lr): argmin of d loss / d log lr.

    The first ``skip_start`` points (EMA warm-up) and the last ``skip_end`` (divergence) are ignored.
    """
    n = len(lrs)
    if n < skip_start + skip_end + 2:
        raise ValueError(f"the sweep has {n} points, too few to find a slope; run more iterations")
    best, best_slope = None, math.inf
    for i in range(skip_start, n - skip_end - 1):
        slope = (smoothed[i + 1] - smoothed[i]) / (math.log(lrs[i + 1]) - math.log(lrs[i]))
        if slope < best_slope:
            best, best_slope = i, slope
    return lrs[best]


def lr_find(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.nn.Module, Any], Any],
    batches: Iterable[Any],
    start_lr: float = 1e-7,
    end_lr: float = 10.0,
    num_iter: int = 100,
    beta: float = 0.98,
    diverge_factor: float = 4.0,
) -> LRFinderResult:
    """Exponential LR sweep (Smith 2017): train ``num_iter`` steps with η_i = start·(end/start)^(i/(n−1)).

    The loss is smoothed with a bias-corrected exponential moving average,
        m_i = β m_{i−1} + (1 − β) ℓ_i,     ŝ_i = m_i / (1 − β^(i+1)),
    and the sweep stops once ŝ_i > ``diverge_factor`` × (best ŝ so far). Suggested rate: steepest
    descent of ŝ against log η (:func:`suggest_lr`). The model and optimizer are restored afterwards,
    so the test leaves no trace. ``batches`` is cycled if shorter than ``num_iter``.
    """
    if not 0 < start_lr < end_lr:
        raise ValueError(f"need 0 < start_lr < end_lr, got {start_lr} and {end_lr}")
    if num_iter < 5:
        raise ValueError(f"num_iter must be at least 5, got {num_iter}")
    if not 0 <= beta < 1:
        raise ValueError(f"beta must be in [0, 1), got {beta}")
    import copy

    from .trainer import _as_result

    saved_model, saved_opt = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    batches = list(batches)
    if not batches:
        raise ValueError("lr_find needs at least one batch")
    lrs, losses, smoothed = [], [], []
    avg, best, diverged = 0.0, math.inf, False
    model.train()
    for i in range(num_iter):
        lr = start_lr * (end_lr / start_lr) ** (i / (num_iter - 1))
        for g in optimizer.param_groups:
            g["lr"] = lr
        loss = _as_result(loss_fn(model, batches[i % len(batches)])).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        value = loss.item()
        avg = beta * avg + (1 - beta) * value
        smooth = avg / (1 - beta ** (i + 1))
        lrs.append(lr)
        losses.append(value)
        smoothed.append(smooth)
        best = min(best, smooth)
        if not math.isfinite(value) or smooth > diverge_factor * best:
            diverged = True
            break
    model.load_state_dict(saved_model)
    optimizer.load_state_dict(saved_opt)
    suggestion = suggest_lr(lrs, smoothed)
    return LRFinderResult(lrs, losses, smoothed, suggestion, "steepest descent of the smoothed loss", diverged)
