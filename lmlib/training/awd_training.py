"""How the AWD-LSTM is trained: variable-length BPTT and non-monotonically triggered averaged SGD.

Merity, Keskar & Socher (2018), "Regularizing and optimizing LSTM language models" (ICLR):

* **Variable-length BPTT** (section 4.1). Fixed windows always cut the text at the same places, so a
  word at a window start never gets gradient from its left context. Each window length is drawn as
      base = bptt with probability p, bptt / 2 otherwise;   seq_len ~ N(base, σ²),
  floored at a minimum, and the learning rate of that batch is scaled by seq_len / bptt, since the
  loss is a mean over tokens and short windows would otherwise weigh as much as long ones.
* **NT-ASGD** (section 3, Algorithm 1). Plain SGD until the validation metric has not improved on
  the best value seen more than n checks ago ("non-monotone" trigger); from that step T on, keep the
  running average of the iterates and return  w̄ = 1 / (k - T + 1) · Σ_{i=T}^{k} w_i.
* **AR and TAR** (section 4.6; Merity, McCann & Socher 2017, "Revisiting activation regularization for
  language RNNs"): penalties on the last layer's outputs, which the model keeps after each forward
  pass as ``last_outputs`` (after dropout) and ``last_raw_outputs`` (before it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch

from ..text.batching import LMBatch, bptt_batches
from .callbacks import Regularizer
from .trainer import Callback, Trainer


# -- variable-length BPTT -----------------------------------------------------------------------------
def bptt_length_sampler(bptt: int, p: float = 0.95, sigma: float = 5.0, min_len: int = 5,
                        generator: torch.Generator | None = None) -> Callable[[], int]:
    """A function drawing one window length per call:

        base = bptt w.p. p, else bptt / 2;   seq_len = max(min_len, ⌊x⌋),  x ~ N(base, σ²).

    The floor ``min_len`` keeps a tail draw from producing an empty or negative window (the paper's
    code uses 5). The draws come from ``generator``, so a seeded generator repeats the same lengths.
    """
    if bptt < 2:
        raise ValueError(f"bptt must be at least 2, got {bptt}")
    if not 0 < p <= 1:
        raise ValueError(f"p (the probability of the full length) must be in (0, 1], got {p}")
    if sigma < 0:
        raise ValueError(f"sigma must be non-negative, got {sigma}")
    if min_len < 1:
        raise ValueError(f"min_len must be at least 1, got {min_len}")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)

    def sample() -> int:
        full = torch.rand((), generator=gen).item() < p
        base = bptt if full else bptt / 2
        x = base + sigma * torch.randn((), generator=gen).item()
        return max(min_len, int(math.floor(x)))

    return sample


def length_distribution(bptt: int, p: float = 0.95, sigma: float = 5.0, min_len: int = 5,
                        max_len: int | None = None) -> dict[int, float]:
    """The exact probabilities P(seq_len = k) of :func:`bptt_length_sampler`, for checking it.

    P(k) = Σ_base w_base · [Φ((k + 1 - base)/σ) - Φ((k - base)/σ)] for k > min_len, and the whole
    lower tail P(⌊x⌋ ≤ min_len) is piled on k = min_len.
    """
    if sigma <= 0:
        raise ValueError("the distribution is only defined here for sigma > 0")
    max_len = max_len if max_len is not None else int(bptt + 10 * sigma)

    def cdf(x: float) -> float:
        return sum(w * 0.5 * (1 + math.erf((x - b) / (sigma * math.sqrt(2)))) for w, b in ((p, bptt), (1 - p, bptt / 2)))

    return {min_len: cdf(min_len + 1), **{k: cdf(k + 1) - cdf(k) for k in range(min_len + 1, max_len + 1)}}


def variable_bptt_batches(streams: torch.Tensor, bptt: int, seed: int = 0, p: float = 0.95,
                          sigma: float = 5.0, min_len: int = 5) -> Callable[[int], list[LMBatch]]:
    """A Trainer data function ``epoch -> batches`` of variable-length windows over ``streams`` ``(batch, n)``.

    Epoch e draws its lengths from a generator seeded with ``seed + e``: a new cut per epoch, yet the
    same cuts after a resume. Pair it with :class:`SeqLenLRScale` to rescale the learning rate.
    """
    def batches(epoch: int) -> list[LMBatch]:
        gen = torch.Generator().manual_seed(seed + epoch)
        return list(bptt_batches(streams, bptt_length_sampler(bptt, p, sigma, min_len, gen)))

    return batches


class SeqLenLRScale(Callback):
    """Scale every group's learning rate by seq_len / bptt for one batch, then restore it.

    seq_len is read from the batch (``batch.x.size(1)`` or ``batch[0].size(1)``). Place it after any
    :class:`~lmlib.training.callbacks.LRSchedule` in the callback list so it scales the scheduled rate.
    """

    def __init__(self, bptt: int):
        if bptt < 1:
            raise ValueError(f"bptt must be positive, got {bptt}")
        self.bptt = bptt
        self.saved: list[float] = []
        self.scales: list[float] = []

    def on_batch_begin(self, trainer: Trainer, batch) -> None:
        x = batch.x if hasattr(batch, "x") else batch[0]
        scale = x.size(1) / self.bptt
        self.saved = [g["lr"] for g in trainer.optimizer.param_groups]
        for g in trainer.optimizer.param_groups:
            g["lr"] = g["lr"] * scale
        self.scales.append(scale)

    def on_batch_end(self, trainer: Trainer, loss) -> None:
        for g, lr in zip(trainer.optimizer.param_groups, self.saved):
            g["lr"] = lr


# -- NT-ASGD ------------------------------------------------------------------------------------------
def nt_asgd_should_switch(logs: Sequence[float], v: float, n: int) -> bool:
    """Algorithm 1's trigger: switch when t > n and v > min_{l ∈ {0, ..., t-n-1}} logs[l].

    ``logs`` are the validation metrics of the earlier checks (t = len(logs)), ``v`` the new one (lower
    is better). Only values *more than n checks old* count as the best to beat, so the last n checks
    may wander without triggering: the non-monotone interval.
    """
    if n < 1:
        raise ValueError(f"the non-monotone interval n must be at least 1, got {n}")
    t = len(logs)
    return t > n and v > min(logs[: t - n])


def nt_asgd_trigger_check(valid_metrics: Sequence[float], n: int) -> int | None:
    """The index of the check at which NT-ASGD switches to averaging, or None if it never does."""
    logs: list[float] = []
    for check, v in enumerate(valid_metrics):
        if nt_asgd_should_switch(logs, v, n):
            return check
        logs.append(v)
    return None


class NTASGD(Callback):
    """Non-monotonically triggered ASGD around any optimizer (SGD in the paper), as a Trainer callback.

    At each epoch end (the logging interval L is one epoch of the data function) the validation loss
    in ``logs["valid_loss"]`` is checked with :func:`nt_asgd_should_switch`. From the switch on, after
    every optimizer step the running mean w̄ ← w̄ + (w_k - w̄) / (k - T + 1) of the parameters is
    updated, so w̄ is the mean of the iterates w_T..w_k (including the iterate at the switch). With
    ``valid`` data, each later epoch also evaluates w̄ and logs it as ``avg_valid_loss`` /
    ``avg_valid_ppl``. At the end of fit the model holds w̄ (the algorithm's return value).
    ``switch_step`` (T) and ``switch_epoch`` (the 1-based epoch whose check triggered) record the switch.
    """

    def __init__(self, n: int = 5, valid=None, load_average_at_end: bool = True):
        nt_asgd_should_switch([], 0.0, n)  # validates n now rather than at the first check
        self.n, self.valid, self.load_average_at_end = n, valid, load_average_at_end
        self.logs: list[float] = []
        self.switch_step: int | None = None
        self.switch_epoch: int | None = None
        self.average: list[torch.Tensor] | None = None
        self.count = 0

    @property
    def averaging(self) -> bool:
        return self.average is not None

    @staticmethod
    def _params(model: torch.nn.Module) -> list[torch.Tensor]:
        return [p for p in model.parameters() if p.requires_grad]

    @staticmethod
    @torch.no_grad()
    def _load(params: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        for p, v in zip(params, values):
            p.copy_(v)

    def start_averaging(self, trainer: Trainer) -> None:
        """Begin averaging at the current iterate (T ← k)."""
        self.average = [p.detach().clone() for p in self._params(trainer.model)]
        self.count = 1
        self.switch_step, self.switch_epoch = trainer.step, trainer.epoch

    def on_batch_end(self, trainer: Trainer, loss) -> None:
        if self.average is None:
            return
        self.count += 1
        with torch.no_grad():
            for avg, p in zip(self.average, self._params(trainer.model)):
                avg.add_(p.detach() - avg, alpha=1.0 / self.count)

    def on_epoch_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        if self.average is None:
            if "valid_loss" not in logs:
                raise KeyError("NTASGD checks the validation loss each epoch: pass valid data to fit()")
            v = logs["valid_loss"]
            if nt_asgd_should_switch(self.logs, v, self.n):
                self.start_averaging(trainer)
            self.logs.append(v)
        elif self.valid is not None:
            with self.averaged_weights(trainer.model):
                res = trainer.evaluate(self.valid)
            logs.update(avg_valid_loss=res.loss, avg_valid_ppl=res.perplexity)

    @contextmanager
    def averaged_weights(self, model: torch.nn.Module):
        """Temporarily load w̄ into ``model`` (e.g. to evaluate it), then restore the current iterate."""
        if self.average is None:
            yield model
            return
        params = self._params(model)
        saved = [p.detach().clone() for p in params]
        self._load(params, self.average)
        try:
            yield model
        finally:
            self._load(params, saved)

    def on_fit_end(self, trainer: Trainer) -> None:
        if self.load_average_at_end and self.average is not None:
            self._load(self._params(trainer.model), self.average)

    def state_dict(self) -> dict:
        return {"logs": self.logs, "switch_step": self.switch_step, "switch_epoch": self.switch_epoch,
                "average": self.average, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.logs, self.count = list(state["logs"]), int(state["count"])
        self.switch_step, self.switch_epoch = state["switch_step"], state["switch_epoch"]
        self.average = state["average"]


# -- AR and TAR ----------------------------------------------------------------------------------------
def activation_penalty(dropped_last: torch.Tensor) -> torch.Tensor:
    """AR: L2(m ⊙ h_t), the mean square of the last layer's *dropped* outputs ``(batch, time, units)``.

    The paper writes α L2(m ⊙ h_t); its code (and ours) uses the mean of squares over batch, time and
    units, so α does not depend on the sizes. Multiply by α (2 on PTB) via :func:`ar_regularizer`.
    """
    if dropped_last.dim() != 3:
        raise ValueError(f"AR expects (batch, time, units), got shape {tuple(dropped_last.shape)}")
    return dropped_last.pow(2).mean()


def temporal_activation_penalty(raw_last: torch.Tensor) -> torch.Tensor:
    """TAR: L2(h_t - h_{t+1}), the mean square of consecutive differences of the *raw* last-layer outputs.

    ``raw_last`` is ``(batch, time, units)``; differences are taken along time. Slowly changing hidden
    states are encouraged; multiply by β (1 on PTB) via :func:`tar_regularizer`.
    """
    if raw_last.dim() != 3:
        raise ValueError(f"TAR expects (batch, time, units), got shape {tuple(raw_last.shape)}")
    if raw_last.size(1) < 2:
        return raw_last.new_zeros(())
    return (raw_last[:, 1:] - raw_last[:, :-1]).pow(2).mean()


def ar_regularizer(alpha: float = 2.0) -> Regularizer:
    """A Trainer callback adding α · AR of ``trainer.model.last_outputs[-1]`` to each training loss."""
    return Regularizer(lambda trainer: activation_penalty(trainer.model.last_outputs[-1]), alpha, "AR")


def tar_regularizer(beta: float = 1.0) -> Regularizer:
    """A Trainer callback adding β · TAR of ``trainer.model.last_raw_outputs[-1]`` to each training loss."""
    return Regularizer(lambda trainer: temporal_activation_penalty(trainer.model.last_raw_outputs[-1]), beta, "TAR")
