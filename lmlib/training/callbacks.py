"""Callbacks for :class:`lmlib.training.trainer.Trainer`: schedules, clipping, regularizers, freezing, stopping, display.

Under data-parallel training (:mod:`lmlib.training.distributed`) every rank runs the callbacks that change training,
so the ranks stay in step; the ones that only print or draw (``PrintEvery``, ``ProgressBar``, ``StepProgress``,
``LivePlot``) say ``main_process_only = True`` and run on rank 0 alone.
"""

from __future__ import annotations

import copy
import math
import os
import sys
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from .distributed import world_size
from .trainer import Callback, Trainer


class LRSchedule(Callback):
    """Set each parameter group's learning rate to ``base_lr * factor(step)`` before every step.

    ``factor`` is a pure function of the global step (0-based), so schedules can be tested against their
    formula on their own. Multiplying each group's own base rate keeps discriminative rates intact.
    """

    def __init__(self, factor: Callable[[int], float]):
        self.factor = factor
        self.base_lrs: list[float] | None = None
        self.lrs: list[float] = []

    def on_fit_begin(self, trainer: Trainer) -> None:
        if self.base_lrs is None:
            self.base_lrs = [g.get("initial_lr", g["lr"]) for g in trainer.optimizer.param_groups]
            for g, lr in zip(trainer.optimizer.param_groups, self.base_lrs):
                g["initial_lr"] = lr

    def on_batch_begin(self, trainer: Trainer, batch) -> None:
        f = self.factor(trainer.step)
        for g, lr in zip(trainer.optimizer.param_groups, self.base_lrs):
            g["lr"] = lr * f
        self.lrs.append(trainer.optimizer.param_groups[-1]["lr"])

    def state_dict(self) -> dict:
        return {"base_lrs": self.base_lrs, "lrs": self.lrs}

    def load_state_dict(self, state: dict) -> None:
        self.base_lrs, self.lrs = state["base_lrs"], list(state["lrs"])


def _read_all(values: list) -> list[float]:
    """Device scalars as floats, in one transfer (floats pass through)."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    read = iter(torch.stack([t.double() for t in tensors]).tolist() if tensors else [])
    return [next(read) if isinstance(v, torch.Tensor) else v for v in values]


class GradientClipping(Callback):
    """Rescale gradients so their global L2 norm is at most ``max_norm``. The norm before clipping is kept on the
    device at each step and read back only when ``norms`` is asked for, so clipping never waits for a GPU."""

    def __init__(self, max_norm: float):
        if max_norm <= 0:
            raise ValueError(f"max_norm must be positive, got {max_norm}")
        self.max_norm = max_norm
        self._norms: list = []

    @property
    def norms(self) -> list[float]:
        """The global gradient norm before clipping at each step."""
        self._norms = _read_all(self._norms)
        return list(self._norms)

    def after_backward(self, trainer: Trainer) -> None:
        self._norms.append(torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), self.max_norm).detach())


class Regularizer(Callback):
    """Add ``weight * penalty(trainer)`` to the loss (e.g. AR/TAR on stored activations, L2)."""

    def __init__(self, penalty: Callable[[Trainer], torch.Tensor], weight: float = 1.0, name: str = "penalty"):
        if weight < 0:
            raise ValueError(f"a regularizer's weight must be non-negative, got {weight}")
        self.penalty, self.weight, self.name = penalty, weight, name
        self._values: list = []

    @property
    def values(self) -> list[float]:
        """The weighted penalty added at each step (kept on the device, read back when asked for)."""
        self._values = _read_all(self._values)
        return list(self._values)

    def on_loss(self, trainer: Trainer, loss: torch.Tensor) -> torch.Tensor:
        if self.weight == 0:
            return loss
        extra = self.weight * self.penalty(trainer)
        self._values.append(extra.detach())
        return loss + extra


def freeze(module: nn.Module) -> nn.Module:
    """Stop gradients for every parameter of ``module``."""
    return module.requires_grad_(False)


def unfreeze(module: nn.Module) -> nn.Module:
    """Let gradients reach every parameter of ``module`` again."""
    return module.requires_grad_(True)


class GradualUnfreezing(Callback):
    """Gradual unfreezing (Howard & Ruder 2018, sec. 3.3) as a Trainer callback.

    ``groups`` lowest first (a model's ``layer_groups()``). In the first epoch of ``fit`` only the last
    group trains; each later epoch unfreezes the next lower group, until all train. Frozen parameters
    get ``requires_grad=False``, so they get no gradient and the optimizer leaves them untouched.
    ``schedule`` records, per epoch, the indices of the groups that trained.
    """

    def __init__(self, groups: Sequence[nn.Module]):
        if len(groups) < 1:
            raise ValueError("GradualUnfreezing needs at least one layer group")
        self.groups = list(groups)
        self.start_epoch: int | None = None
        self.schedule: list[list[int]] = []

    def n_trainable(self, epoch_in_fit: int) -> int:
        return min(epoch_in_fit + 1, len(self.groups))

    def on_fit_begin(self, trainer: Trainer) -> None:
        if self.start_epoch is None:
            self.start_epoch = trainer.epoch

    def on_epoch_begin(self, trainer: Trainer) -> None:
        k = self.n_trainable(trainer.epoch - self.start_epoch)
        for i, group in enumerate(self.groups):
            (unfreeze if i >= len(self.groups) - k else freeze)(group)
        self.schedule.append(list(range(len(self.groups) - k, len(self.groups))))

    def state_dict(self) -> dict:
        return {"start_epoch": self.start_epoch, "schedule": self.schedule}

    def load_state_dict(self, state: dict) -> None:
        self.start_epoch, self.schedule = state["start_epoch"], [list(s) for s in state["schedule"]]


class EarlyStopping(Callback):
    """Stop when the validation loss has not improved for ``patience`` epochs, then restore the best weights.

    ``score`` (optional, a function of the trainer, higher is better, e.g. the accuracy on a dev split) is watched
    instead of the epoch logs' ``valid_loss``; epochs of the fit before ``from_epoch`` (0-based, e.g. the partial
    stages of gradual unfreezing) are not watched. ``scores`` holds the watched scores, ``best_epoch`` the epoch (the
    trainer's 1-based count) whose weights are restored."""

    def __init__(self, patience: int = 2, score: Callable[[Trainer], float] | None = None, from_epoch: int = 0):
        if patience < 1:
            raise ValueError(f"patience must be at least 1, got {patience}")
        if from_epoch < 0:
            raise ValueError(f"from_epoch must be at least 0, got {from_epoch}")
        self.patience, self.best, self.bad_epochs = patience, math.inf, 0
        self.score, self.from_epoch = score, from_epoch
        self.best_state: dict | None = None
        self.start_epoch: int | None = None
        self.best_epoch: int | None = None
        self.scores: list[float] = []

    def on_fit_begin(self, trainer: Trainer) -> None:
        if self.start_epoch is None:
            self.start_epoch = trainer.epoch

    def on_epoch_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        if trainer.epoch - 1 - (self.start_epoch or 0) < self.from_epoch:  # the trainer has counted this epoch
            return
        if self.score is not None:
            self.scores.append(float(self.score(trainer)))
            value = -self.scores[-1]  # lower is better, as for a loss
        elif "valid_loss" not in logs:
            raise KeyError(f"EarlyStopping monitors 'valid_loss' but the epoch logs have {sorted(logs)}; "
                           f"pass validation data to fit()")
        else:
            value = logs["valid_loss"]
        if value < self.best:
            self.best, self.bad_epochs, self.best_epoch = value, 0, trainer.epoch
            self.best_state = copy.deepcopy(trainer.model.state_dict())
        else:
            self.bad_epochs += 1
            if self.bad_epochs >= self.patience:
                trainer.stop_training = True

    def on_fit_end(self, trainer: Trainer) -> None:
        if self.best_state is not None:
            trainer.model.load_state_dict(self.best_state)

    def state_dict(self) -> dict:
        return {"best": self.best, "bad_epochs": self.bad_epochs, "best_state": self.best_state,
                "start_epoch": self.start_epoch, "best_epoch": self.best_epoch, "scores": self.scores}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad_epochs, self.best_state = float(state["best"]), int(state["bad_epochs"]), state["best_state"]
        self.start_epoch, self.best_epoch = state.get("start_epoch"), state.get("best_epoch")
        self.scores = list(state.get("scores", []))


class TimeBudget(Callback):
    """Stop training after ``seconds`` of wall time, to compare models at the same budget.

    Given the run's planned ``steps``, it fits the run to the budget instead of cutting it short: at each ``on_log``
    after the first (the start-up is slower), if the steps left would not finish in time at the pace of the last
    logging interval, the planned total is cut to what will, and every callback with a ``retarget(total)`` method
    (the schedules, the progress display) lays itself over the new total, so the learning rate still anneals to its
    end. The total only ever shrinks; ``steps`` holds it, and training stops when the trainer reaches it."""

    def __init__(self, seconds: float, steps: int | None = None):
        if seconds <= 0:
            raise ValueError(f"seconds must be positive, got {seconds}")
        if steps is not None and steps < 1:
            raise ValueError(f"steps must be at least 1, got {steps}")
        self.seconds, self.steps = seconds, steps
        self.start = self.last_time = 0.0
        self.last_step: int | None = None

    def on_fit_begin(self, trainer: Trainer) -> None:
        self.start = self.last_time = time.perf_counter()
        self.last_step = None

    def on_log(self, trainer: Trainer, losses: list[float]) -> None:
        now = time.perf_counter()
        first, per_step = self.last_step is None, 0.0
        if not first and trainer.step > self.last_step:
            per_step = (now - self.last_time) / (trainer.step - self.last_step)
        self.last_time, self.last_step = now, trainer.step
        if first or self.steps is None or per_step == 0.0 or trainer.step >= self.steps:
            return
        left = self.seconds - (now - self.start)
        fits = trainer.step + max(1, int(left / per_step))
        if fits < self.steps:
            self.steps = fits
            for cb in trainer.callbacks:
                if callable(getattr(cb, "retarget", None)):
                    cb.retarget(fits)

    def on_batch_end(self, trainer: Trainer, loss) -> None:
        over_time = time.perf_counter() - self.start >= self.seconds
        if over_time or (self.steps is not None and trainer.step >= self.steps):
            trainer.stop_training = True

    def state_dict(self) -> dict:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.steps = state["steps"]


class MaxSteps(Callback):
    """Stop once the trainer has taken ``steps`` optimizer steps in total."""

    def __init__(self, steps: int):
        if steps < 1:
            raise ValueError(f"steps must be at least 1, got {steps}")
        self.steps = steps

    def on_batch_end(self, trainer: Trainer, loss) -> None:
        if trainer.step >= self.steps:
            trainer.stop_training = True


class PrintEvery(Callback):
    """Progress for long command-line runs: step, loss and learning rate every ``n`` steps (at the logging steps
    that fall on them), flushed."""

    main_process_only = True

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n = n

    def on_log(self, trainer: Trainer, losses: list[float]) -> None:
        if trainer.step % self.n == 0:
            print(f"step {trainer.step}  loss {losses[-1]:.3f}  lr {trainer.lr:.2e}", flush=True)


class ProgressBar(Callback):
    """A tqdm bar per epoch showing the running loss (a widget in Jupyter, text elsewhere)."""

    main_process_only = True

    def __init__(self, total: int | None = None, leave: bool = False):
        self.total, self.leave, self.bar = total, leave, None

    def on_epoch_begin(self, trainer: Trainer) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=self.total, desc=f"epoch {trainer.epoch + 1}", leave=self.leave, unit="batch")

    def on_log(self, trainer: Trainer, losses: list[float]) -> None:
        self.bar.update(len(losses))
        if trainer.step % 10 < len(losses):  # a step that is a multiple of 10 among these
            self.bar.set_postfix(loss=f"{losses[-1]:.3f}")

    def on_epoch_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.bar.close()


def _clock(seconds: float) -> str:
    """``seconds`` as ``m:ss``, or ``h:mm:ss`` from an hour on."""
    minutes, s = divmod(int(round(seconds)), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}:{m:02d}:{s:02d}" if hours else f"{m}:{s:02d}"


def _terminal_columns(stream) -> int:
    """The width of the terminal ``stream`` writes to; 0 when it is not a terminal (a file, a pipe, a notebook)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (AttributeError, OSError, ValueError):
        return 0


class StepProgress(Callback):
    """Progress of a run of ``total`` optimizer steps: the step, the loss, tokens per second and the time left.

    On a terminal (40 columns or more) it is a tqdm bar redrawn in place. Anywhere else (a CI log, a notebook, a
    file) it writes plain lines instead, one every tenth of the run and at least every ``every_s`` seconds, so a log
    holds readable lines rather than carriage returns. ``tokens(batch)`` counts one batch's tokens; under DDP the
    callback runs on rank 0 and counts rank 0's share times the number of ranks (exact when the shares are equal, an
    estimate otherwise). A resumed run counts from the step it resumed at: the rate and the time left are this
    stretch's. :meth:`summary` is the one line to print at the end; :meth:`close` ends the bar (also after an error).
    ``file`` is where the progress goes (default: ``sys.stderr`` at the start of ``fit``)."""

    main_process_only = True

    def __init__(self, total: int, tokens: Callable[[object], int] | None = None, desc: str = "training",
                 file=None, every_s: float = 60.0):
        if total < 1:
            raise ValueError(f"total must be at least 1 step, got {total}")
        if every_s <= 0:
            raise ValueError(f"every_s must be positive, got {every_s}")
        self.total, self.tokens, self.desc, self.file, self.every_s = total, tokens, desc, file, every_s
        self.bar = self.stream = None
        self.first_step = self.step = 0
        self.n_tokens = 0
        self.loss: float | None = None
        self.start = self.last_step_at = self.last_line_at = 0.0

    @property
    def seconds(self) -> float:
        """Seconds from the start of this ``fit`` to the end of its last step so far."""
        return self.last_step_at - self.start

    def rate(self) -> float:
        """Tokens per second in this ``fit`` so far."""
        return self.n_tokens / self.seconds if self.seconds > 0 else 0.0

    def on_fit_begin(self, trainer: Trainer) -> None:
        from tqdm import tqdm

        self.stream = self.file if self.file is not None else sys.stderr
        self.first_step = self.step = trainer.step
        self.n_tokens, self.loss = 0, None
        self.start = self.last_step_at = self.last_line_at = time.perf_counter()
        self.bar = (tqdm(total=self.total, initial=trainer.step, desc=self.desc, unit="step", file=self.stream,
                         dynamic_ncols=True) if _terminal_columns(self.stream) >= 40 else None)

    def on_batch_begin(self, trainer: Trainer, batch) -> None:
        if self.tokens is not None:
            self.n_tokens = self.n_tokens + self.tokens(batch) * world_size()  # a device count is read at on_log

    def retarget(self, total: int) -> None:
        """A time budget cut the run to ``total`` steps (:class:`TimeBudget`)."""
        self.total = total

    def on_log(self, trainer: Trainer, losses: list[float]) -> None:
        loss, self.n_tokens = losses[-1], int(self.n_tokens)
        self.step, self.loss, self.last_step_at = trainer.step, loss, time.perf_counter()
        rate = f"{self.rate():,.0f} tokens/s" if self.tokens is not None else f"{self.step - self.first_step} steps"
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss {loss:.3f}, {rate}", refresh=False)
            self.bar.update(trainer.step - self.bar.n)
            return
        tenth = max(1, self.total // 10)
        if trainer.step % tenth < len(losses) or trainer.step >= self.total or self.last_step_at - self.last_line_at >= self.every_s:
            self.last_line_at, done = self.last_step_at, self.step - self.first_step
            eta = _clock(self.seconds / done * (self.total - self.step)) if done > 0 else "?"
            print(f"{self.desc}: step {trainer.step}/{self.total} ({trainer.step / self.total:.0%})  loss {loss:.3f}  "
                  f"{rate}  {_clock(self.seconds)} elapsed, ETA {eta}",
                  file=self.stream, flush=True)

    def on_fit_end(self, trainer: Trainer) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def summary(self) -> str:
        """``gpt_imdb: 40 steps (1-40 of 40), 10,240 tokens in 2.1 s, 4,876 tokens/s; loss at the last step 5.511``"""
        done, seconds = self.step - self.first_step, self.seconds
        if done == 0:
            return f"{self.desc}: no step taken (at step {self.step} of {self.total})"
        tokens = (f"{self.n_tokens:,} tokens in {seconds:.1f} s, {self.rate():,.0f} tokens/s"
                  if self.tokens is not None else f"{seconds:.1f} s")
        return (f"{self.desc}: {done} steps ({self.first_step + 1}-{self.step} of {self.total}), {tokens}; "
                f"loss at the last step {self.loss:.3f}")


class LivePlot(Callback):
    """A plotly figure of the training loss (smoothed) and validation loss, redrawn in place as training runs.

    It updates one display slot through IPython's display handles, so it needs no widget machinery and
    works offline; outside IPython it records but draws nothing. Redraws at most every ``every_s`` seconds.
    """

    main_process_only = True

    def __init__(self, title: str = "loss", every_s: float = 1.0, smoothing: float = 0.9):
        if not 0 <= smoothing < 1:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.title, self.every_s, self.smoothing = title, every_s, smoothing
        self.steps: list[int] = []
        self.smoothed: list[float] = []
        self.valid: list[tuple[int, float]] = []
        self.handle = None
        self.last_draw = 0.0

    def figure(self):
        import plotly.graph_objects as go

        fig = go.Figure(go.Scatter(x=self.steps, y=self.smoothed, name="train (smoothed)", mode="lines"))
        if self.valid:
            fig.add_trace(go.Scatter(x=[s for s, _ in self.valid], y=[v for _, v in self.valid], name="validation",
                                     mode="lines"))
        fig.update_layout(title=self.title, xaxis_title="step", yaxis_title="loss", template="plotly_white",
                          margin=dict(l=60, r=20, t=50, b=50), height=380)
        return fig

    def _bundle(self) -> dict:
        # A plotly figure displays itself through _ipython_display_, which ignores display ids: every
        # "update" would append a new output. Publishing the plotly mimebundle directly updates in place.
        import json

        return {"application/vnd.plotly.v1+json": {**json.loads(self.figure().to_json()), "config": {}},
                "text/plain": f"<live loss plot: {len(self.steps)} steps>"}

    def on_fit_begin(self, trainer: Trainer) -> None:
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            return
        if get_ipython() is not None and self.handle is None:
            self.handle = display(self._bundle(), raw=True, display_id=True)

    def on_log(self, trainer: Trainer, losses: list[float]) -> None:
        for k, loss in enumerate(losses):
            prev = self.smoothed[-1] if self.smoothed else loss
            self.steps.append(trainer.step - len(losses) + 1 + k)
            self.smoothed.append(self.smoothing * prev + (1 - self.smoothing) * loss)
        if self.handle is not None and time.perf_counter() - self.last_draw > self.every_s:
            self.handle.update(self._bundle(), raw=True)
            self.last_draw = time.perf_counter()

    def on_epoch_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        if "valid_loss" in logs:
            self.valid.append((trainer.step, logs["valid_loss"]))

    def on_fit_end(self, trainer: Trainer) -> None:
        if self.handle is not None:
            self.handle.update(self._bundle(), raw=True)


class Checkpoint(Callback):
    """Save a resumable checkpoint to ``path`` (atomically) at the end of every epoch. Under DDP it runs on every
    rank, since each rank hands over its random generators, and rank 0 alone writes."""

    def __init__(self, path):
        self.path = path

    def on_epoch_end(self, trainer: Trainer, logs: dict[str, float]) -> None:
        trainer.save_checkpoint(self.path)

