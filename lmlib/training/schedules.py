"""Learning-rate schedules and the learning-rate range test used by ULMFiT.

* Slanted triangular learning rates (STLR) and discriminative fine-tuning: Howard & Ruder (2018),
  "Universal Language Model Fine-tuning for Text Classification", section 3.2.
* The learning-rate range test ("LR finder"): Smith (2017), "Cyclical Learning Rates for Training
  Neural Networks", section 3.3, in the exponential form popularised by the fastai library, run as a
  callback (:class:`LRFinder`) on the one Trainer.

The schedules are pure functions of the step so tests can check them against the paper's formula.
Their figures are in :mod:`lmlib.course.figures`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch
from torch import nn

from .callbacks import LRSchedule
from .trainer import Callback, Trainer


def stlr_cut(T: int, cut_frac: float) -> int:
    """cut = ⌊T · cut_frac⌋, the last warm-up iteration of STLR, computed exactly.

    In floating point the product can fall just below a whole number: 0.29 is stored as
    0.28999999999999998002..., so ``math.floor(100 * 0.29)`` gives 28, not 29. ``cut_frac`` is therefore read
    as the decimal a person typed: ``Fraction(str(cut_frac))`` turns the float into the shortest decimal that rounds to it
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
    cut_frac = 0.29 gives 29, where the float product, a hair under 29, would floor to 28).
    """
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"T (the number of training iterations) must be a positive integer, got {T!r}")
    if not 0 < cut_frac < 1:
        raise ValueError(f"cut_frac must lie strictly between 0 and 1 (the paper uses 0.1), got {cut_frac}")
    if ratio < 1:
        raise ValueError(f"ratio (how much smaller the lowest rate is than eta_max) must be >= 1, got {ratio}")
    if eta_max <= 0:
        raise ValueError(f"eta_max must be positive, got {eta_max}")
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
        stlr(0, T, cut_frac, ratio, eta_max=1.0)  # validates the arguments now rather than at the first step
        self.T, self.cut_frac, self.ratio = T, cut_frac, ratio
        self.start_step: int | None = None
        super().__init__(self._factor)

    def _factor(self, step: int) -> float:
        return stlr(step - self.start_step, self.T, self.cut_frac, self.ratio, eta_max=1.0)

    def on_fit_begin(self, trainer) -> None:
        if self.start_step is None:
            self.start_step = trainer.step
        super().on_fit_begin(trainer)

    def on_continue(self, trainer) -> None:
        self.start_step = 0  # the triangle spans the whole run, from its first step

    def retarget(self, total: int) -> None:
        """Lay the triangle over a run cut to ``total`` steps in all (:class:`~lmlib.training.callbacks.TimeBudget`)."""
        self.T = max(1, total - (self.start_step or 0))

    def state_dict(self) -> dict:
        return {**super().state_dict(), "start_step": self.start_step, "T": self.T}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.start_step, self.T = state["start_step"], state.get("T", self.T)


def warmup_cosine(t: int, T: int, warmup: int, min_ratio: float = 0.1) -> float:
    """The rate factor of GPT-style pretraining at step t of T: a linear warm-up over ``warmup`` steps, then a
    cosine decay to ``min_ratio`` (Radford et al. 2018, §4.1: "increased linearly from zero over the first 2000
    updates and annealed to 0 using a cosine schedule"; here to min_ratio instead of 0).

        f(t) = (t + 1) / warmup                                           for t < warmup
        f(t) = r + (1 − r) · ½ · (1 + cos(π · (t − warmup) / (T − warmup − 1)))  otherwise, r = min_ratio

    so the first step after the warm-up runs at the full rate and the last step (t = T − 1) at exactly r.
    """
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"T (total steps) must be an int >= 1, got {T!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < T:
        raise ValueError(f"warmup must be an int in [0, T) = [0, {T}), got {warmup!r}")
    if not 0.0 <= min_ratio <= 1.0:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
    if not 0 <= t < T:
        raise ValueError(f"step t={t} is outside the schedule's {T} steps; plan T for the whole run")
    if t < warmup:
        return (t + 1) / warmup
    progress = (t - warmup) / max(1, T - warmup - 1)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


class WarmupCosine(LRSchedule):
    """Trainer callback: each parameter group's rate is its base rate times :func:`warmup_cosine` of the step."""

    def __init__(self, T: int, warmup: int, min_ratio: float = 0.1):
        warmup_cosine(0, T, warmup, min_ratio)  # validates the arguments now rather than at the first step
        self.T, self.warmup, self.min_ratio = T, warmup, min_ratio
        super().__init__(lambda step: warmup_cosine(step, self.T, self.warmup, self.min_ratio))

    def retarget(self, total: int) -> None:
        """Lay the schedule over a run cut to ``total`` steps (:class:`~lmlib.training.callbacks.TimeBudget`)."""
        self.T = max(total, self.warmup + 1)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "T": self.T}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.T = state.get("T", self.T)


def scaled_lr(lr: float, batch_size: int, new_batch_size: int) -> float:
    """The rate for ``new_batch_size`` when ``lr`` was right for ``batch_size``: lr · sqrt(B' / B), the square-root
    scaling rule for Adam (Malladi et al. 2022, "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms")."""
    if batch_size < 1 or new_batch_size < 1:
        raise ValueError(f"batch sizes must be positive, got {batch_size} and {new_batch_size}")
    return lr * math.sqrt(new_batch_size / batch_size)


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
    return [eta_top / factor ** (n_groups - 1 - g) for g in range(n_groups)]


def weight_decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two optimizer parameter groups, the GPT-2/BERT convention for AdamW: ``weight_decay`` on the weight matrices
    (and embeddings), none on the vectors (biases, LayerNorm gains and shifts), in the model's parameter order."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def discriminative_param_groups(groups: Sequence[nn.Module], eta_top: float, factor: float = 2.6) -> list[dict]:
    """Optimizer parameter groups with η^l = η^L / factor^(L−l) (:func:`discriminative_lrs`), one per module
    of ``groups`` (lowest first, e.g. a model's ``layer_groups()``). A parameter shared by two groups (a
    tied embedding and decoder) belongs to the first one it appears in, so each is optimized once."""
    lrs = discriminative_lrs(eta_top, len(groups), factor)
    seen: set[int] = set()
    out = []
    for module, lr in zip(groups, lrs):
        params = [p for p in module.parameters() if id(p) not in seen]
        seen.update(id(p) for p in params)
        out.append({"params": params, "lr": lr})
    return out


def unfreezing_timeline(n_groups: int, epochs: int, eta_top: float, factor: float = 2.6,
                        gradual: bool = True) -> torch.Tensor:
    """``(n_groups, epochs)`` peak learning rate of each group in each epoch (0 where it is frozen) under
    discriminative rates and, with ``gradual``, :class:`~lmlib.training.callbacks.GradualUnfreezing`."""
    lrs = discriminative_lrs(eta_top, n_groups, factor)
    table = torch.zeros(n_groups, epochs)
    for e in range(epochs):
        k = min(e + 1, n_groups) if gradual else n_groups
        for g in range(n_groups - k, n_groups):
            table[g, e] = lrs[g]
    return table


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


class LRFinder(Callback):
    """The learning-rate range test (Smith 2017) as a Trainer callback: step i of ``num_iter`` trains at

        η_i = start_lr · (end_lr / start_lr)^(i / (num_iter − 1))

    (every parameter group alike). The loss is smoothed with a bias-corrected exponential moving average,
        m_i = β m_{i−1} + (1 − β) ℓ_i,     ŝ_i = m_i / (1 − β^(i+1)),
    and training stops after ``num_iter`` steps, or once ŝ_i > ``diverge_factor`` × (best ŝ so far) or the
    loss is not finite. At the end of fit the model and optimizer are restored as they were, so the test
    leaves no trace; :meth:`result` holds the sweep and the suggested rate.
    """

    def __init__(self, start_lr: float = 1e-7, end_lr: float = 10.0, num_iter: int = 100, beta: float = 0.98,
                 diverge_factor: float = 4.0):
        if not 0 < start_lr < end_lr:
            raise ValueError(f"need 0 < start_lr < end_lr, got {start_lr} and {end_lr}")
        if num_iter < 5:
            raise ValueError(f"num_iter must be at least 5, got {num_iter}")
        if not 0 <= beta < 1:
            raise ValueError(f"beta must be in [0, 1), got {beta}")
        self.start_lr, self.end_lr, self.num_iter, self.beta = start_lr, end_lr, num_iter, beta
        self.diverge_factor = diverge_factor
        self.lrs: list[float] = []
        self.losses: list[float] = []
        self.smoothed: list[float] = []
        self.average, self.best, self.diverged = 0.0, math.inf, False
        self.saved: tuple[dict, dict] | None = None

    def on_fit_begin(self, trainer: Trainer) -> None:
        self.saved = copy.deepcopy(trainer.model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())

    def on_batch_begin(self, trainer: Trainer, batch) -> None:
        i = len(self.lrs)
        lr = self.start_lr * (self.end_lr / self.start_lr) ** (i / (self.num_iter - 1))
        for g in trainer.optimizer.param_groups:
            g["lr"] = lr
        self.lrs.append(lr)

    def on_loss(self, trainer: Trainer, loss: torch.Tensor) -> torch.Tensor:
        value, i = loss.item(), len(self.losses)
        self.average = self.beta * self.average + (1 - self.beta) * value
        smooth = self.average / (1 - self.beta ** (i + 1))
        self.losses.append(value)
        self.smoothed.append(smooth)
        self.best = min(self.best, smooth)
        if not math.isfinite(value) or smooth > self.diverge_factor * self.best:
            self.diverged = trainer.stop_training = True
        elif len(self.losses) == self.num_iter:
            trainer.stop_training = True
        return loss

    def on_fit_end(self, trainer: Trainer) -> None:
        self.restore(trainer)

    def restore(self, trainer: Trainer) -> None:
        """Put back the weights and optimizer state saved when the sweep began."""
        model_state, optimizer_state = self.saved
        trainer.model.load_state_dict(model_state)
        trainer.optimizer.load_state_dict(optimizer_state)

    def result(self) -> LRFinderResult:
        return LRFinderResult(self.lrs, self.losses, self.smoothed, suggest_lr(self.lrs, self.smoothed),
                              "steepest descent of the smoothed loss", self.diverged)


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
    """Run the range test of :class:`LRFinder` on the one Trainer: ``num_iter`` steps over ``batches``
    (cycled if shorter), then the model and optimizer are restored. Suggested rate: steepest descent of
    the smoothed loss against log η (:func:`suggest_lr`)."""
    finder = LRFinder(start_lr, end_lr, num_iter, beta, diverge_factor)
    batches = list(batches)
    if not batches:
        raise ValueError("lr_find needs at least one batch")
    trainer = Trainer(model, optimizer, loss_fn, [finder], device=next(model.parameters()).device)
    try:
        trainer.fit([batches[i % len(batches)] for i in range(num_iter)], epochs=1)
    except FloatingPointError:  # the loss stopped being finite: the sweep diverged, and the Trainer refuses the step
        finder.restore(trainer)
    return finder.result()
