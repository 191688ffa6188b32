"""One training loop for the whole course, extended by callbacks instead of copied per notebook.

A ``Trainer`` knows nothing about any model. It is given a ``loss_fn(model, batch)`` that returns the
mean loss of the batch (and, optionally, how many items it averaged over and how many it got right), and
it does the rest: the optimizer step, token-weighted averages, perplexity, evaluation, history, and
calling each callback at fixed points:

    on_fit_begin → (on_epoch_begin → (on_batch_begin → on_loss → after_backward → [on_log] → on_batch_end)* →
    on_epoch_end)* → on_fit_end

A callback may change the loss (regularizers), the gradients (clipping), the learning rates (schedules),
which parameters train (unfreezing), or stop training (early stopping, a time budget).

The loss stays on the device while training: reading a number back from a GPU makes the host wait until the GPU has
finished every queued step, so a loop that reads the loss each step runs at the speed of that round trip. The Trainer
reads the losses back once every ``log_every`` steps (and at the end of each epoch), all at once; only then is a
non-finite loss caught (a ``FloatingPointError`` naming its step) and ``on_log`` receives the losses read. With the
default ``log_every=1`` every step is read, as on a CPU, where reading costs nothing.

The same Trainer runs data-parallel under ``torchrun --nproc_per_node=N`` (:mod:`lmlib.training.distributed`):
after ``init_distributed()`` it wraps the model in DistributedDataParallel, so each rank trains on its share of the
global batch and the gradients are averaged. ``trainer.model`` stays the plain model, so checkpoints look the same
with one process or many.

A checkpoint may be taken in the middle of an epoch (:meth:`Trainer.save_checkpoint` from ``on_batch_end``): it
records how many batches of the epoch were taken and their running loss sums, and :meth:`Trainer.fit` after
:meth:`Trainer.load_checkpoint` draws and discards those batches (so a seeded batch stream reaches the same next
batch) and goes on from there, with a stateful loss's carried state (e.g. an RNN's hidden state) restored instead of
reset.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..runtime import eval_mode, map_tensors, pick_device
from .distributed import (
    all_gather,
    all_reduce_sum,
    any_rank,
    explain_lost_ranks,
    is_distributed,
    is_main_process,
    rank,
    split_random_streams,
    world_size,
    wrap_model,
)


@dataclass
class BatchResult:
    """What a loss function reports for one batch: the mean ``loss``, over ``n`` items, ``correct`` of them right."""

    loss: torch.Tensor
    n: int = 1
    correct: int | None = None


@dataclass
class EvalResult:
    loss: float
    n: int
    accuracy: float | None = None

    @property
    def perplexity(self) -> float:
        """exp of the mean per-token negative log-likelihood (meaningful when the loss is one); inf on overflow."""
        return math.exp(self.loss) if self.loss < 700.0 else math.inf


def _as_result(out: Any) -> BatchResult:
    if isinstance(out, BatchResult):
        return out
    if isinstance(out, torch.Tensor):
        return BatchResult(out)
    raise TypeError(f"loss_fn must return a scalar tensor or a BatchResult, got {type(out).__name__}")


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor in it (also inside tuples, named tuples, lists, dicts and dataclasses) moved to
    ``device``."""
    return map_tensors(batch, lambda t: t.to(device))


def _after(batches: Iterable[Any], taken: int) -> Iterable[Any]:
    """The batches after the first ``taken`` (those a resumed checkpoint had trained on), so that a seeded stream
    stays in step: passed over by the source's own ``skip(n)`` when it has one (it must leave the stream where
    drawing ``n`` batches would, e.g. without building them), else drawn and dropped."""
    if taken and hasattr(batches, "skip"):
        batches.skip(taken)
        return batches
    return itertools.islice(batches, taken, None)


def _reset_state(loss_fn: Callable) -> None:
    reset = getattr(loss_fn, "reset", None)
    if callable(reset):
        reset()


@torch.no_grad()
def evaluate(model: nn.Module, loss_fn: Callable[[nn.Module, Any], torch.Tensor | BatchResult],
             batches: Iterable[Any], device: torch.device | None = None) -> EvalResult:
    """Mean loss of ``model`` over ``batches`` (and accuracy when ``loss_fn`` reports ``correct``), in eval
    mode and without gradients: no optimizer is involved. Items are weighted by the ``n`` each batch
    reports, so the mean is per token for language models. A stateful ``loss_fn`` is reset before and after."""
    total, count, correct, has_correct = 0.0, 0, 0, False
    with eval_mode(model):
        _reset_state(loss_fn)
        for batch in batches:
            result = _as_result(loss_fn(model, batch if device is None else to_device(batch, device)))
            total += result.loss.item() * result.n
            count += result.n
            if result.correct is not None:
                has_correct, correct = True, correct + result.correct
        _reset_state(loss_fn)
    if count == 0:
        raise ValueError("the evaluation data yielded no batches")
    return EvalResult(total / count, count, correct / count if has_correct else None)


class Callback:
    """Base class: override the hooks you need. ``trainer`` is passed to each.

    Under DDP every rank runs every callback, so the ranks stay in step, except those that only print, draw or write
    files: they set ``main_process_only = True`` and run on rank 0 alone."""

    main_process_only = False

    def on_fit_begin(self, trainer: Trainer) -> None: ...
    def on_epoch_begin(self, trainer: Trainer) -> None: ...
    def on_batch_begin(self, trainer: Trainer, batch: Any) -> None: ...
    def on_loss(self, trainer: Trainer, loss: torch.Tensor) -> torch.Tensor:
        return loss
    def after_backward(self, trainer: Trainer) -> None: ...
    def on_batch_end(self, trainer: Trainer, loss: torch.Tensor) -> None:
        """After each step; ``loss`` is the batch's loss, a detached tensor still on the device (reading it waits for
        the device: a callback that shows the loss uses ``on_log``)."""
    def on_log(self, trainer: Trainer, losses: list[float]) -> None:
        """Every ``log_every`` steps and at the end of an epoch: the losses of the steps since the last call."""
    def on_epoch_end(self, trainer: Trainer, logs: dict[str, float]) -> None: ...
    def on_fit_end(self, trainer: Trainer) -> None: ...
    def on_continue(self, trainer: Trainer) -> None:
        """The run goes on from ``trainer.step`` without the state this callback had there
        (:meth:`Trainer.continue_at`): set yourself as you would stand at that step."""
    def state_dict(self) -> dict:
        return {}
    def load_state_dict(self, state: dict) -> None: ...


Batches = Iterable[Any] | Callable[[int], Iterable[Any]]


class Trainer:
    """Train ``model`` with ``optimizer`` on the mean loss computed by ``loss_fn(model, batch)``.

    Data is given to :meth:`fit` either as a re-iterable (a list of batches) or as a function
    ``epoch -> batches``, which is how a new shuffle per epoch stays reproducible after a resume.
    A ``loss_fn`` with a ``reset()`` method (a stateful RNN loss) is reset before each pass over the data.

    After each epoch ``history`` gains a dict with ``epoch``, ``step``, ``train_loss``, ``lr``,
    ``seconds`` and, with validation data, ``valid_loss``, ``valid_ppl`` and ``valid_acc`` (when reported).

    ``distributed="auto"`` trains data-parallel when a process group of several ranks exists (call
    ``init_distributed()`` before building the Trainer) and in one process otherwise; ``True`` insists on the group,
    ``False`` ignores it. ``autocast=torch.bfloat16`` runs ``loss_fn`` (the forward pass and the loss) under
    ``torch.autocast`` on the trainer's device; the backward pass and the optimizer step stay in float32.
    ``log_every`` is how many steps pass between reads of the losses from the device (see the module docstring).
    Under DDP each rank must get its own share of every batch (:func:`~lmlib.training.distributed.shard_batches`)
    and as many batches as the others; ``batch_losses``, ``history`` and :meth:`evaluate` then report the
    token-weighted mean over all ranks, the numbers one process with the global batch would report.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: Callable[[nn.Module, Any], torch.Tensor | BatchResult],
        callbacks: Iterable[Callback] = (),
        device: str | torch.device = "auto",
        distributed: bool | str = "auto",
        autocast: torch.dtype | None = None,
        log_every: int = 1,
    ):
        if log_every < 1:
            raise ValueError(f"log_every must be at least 1, got {log_every}")
        if distributed not in ("auto", True, False):
            raise ValueError(f"distributed must be 'auto', True or False, got {distributed!r}")
        if distributed is True and not is_distributed():
            raise ValueError("distributed=True needs a process group of several ranks, and there is none: launch the "
                             "script with `torchrun --nproc_per_node=N script.py` and call "
                             "lmlib.training.distributed.init_distributed() before building the Trainer, or leave "
                             "distributed='auto' to train in one process when there is no group")
        self.distributed = is_distributed() if distributed == "auto" else distributed
        if self.distributed:
            split_random_streams()  # each rank its own dropout masks (the model above is already built)
        self.device = pick_device(device) if isinstance(device, str) else device
        self.model = model.to(self.device)
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.callbacks = list(callbacks)
        self.epoch = 0
        self.step = 0
        self.history: list[dict[str, float]] = []
        self.batch_losses: list[float] = []
        self.stop_training = False
        self._ddp: nn.Module | None = None  # the DistributedDataParallel wrapper, built at the first step
        self._ddp_trainable: list[bool] = []
        self.autocast = autocast
        self.log_every = log_every
        self._pending: list[tuple] = []  # (reported loss, n, optimized loss, in fit) of the steps not yet read back
        self._unlogged: list[float] = []  # losses read back but not yet given to on_log
        self._in_fit = False
        self._epoch_step = 0  # batches taken in the unfinished epoch: a mid-epoch checkpoint resumes after them
        self._epoch_sums = (0.0, 0)  # their n-weighted loss sum and n, for the epoch's train_loss

    # -- helpers -------------------------------------------------------------------------------------
    def _active_callbacks(self) -> list[Callback]:
        if not self.distributed or is_main_process():
            return self.callbacks
        return [cb for cb in self.callbacks if not cb.main_process_only]

    def _emit(self, hook: str, *args: Any) -> None:
        for cb in self._active_callbacks():
            getattr(cb, hook)(self, *args)

    @staticmethod
    def _batches(data: Batches, epoch: int) -> Iterable[Any]:
        if callable(data):
            return data(epoch)
        if iter(data) is data:
            raise TypeError("a one-shot iterator cannot be replayed each epoch: pass a list of batches "
                            "or a function epoch -> batches")
        return data

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[-1]["lr"]

    # -- several processes -----------------------------------------------------------------------------
    def _training_model(self) -> nn.Module:
        """What ``loss_fn`` is given: ``model`` itself, or under DDP the wrapper that averages the gradients over the
        ranks in ``backward()``. DDP fixes the parameters it syncs when it is built, so it is rebuilt when a callback
        freezes or unfreezes some (all ranks run those callbacks, so they rebuild together)."""
        if not self.distributed:
            return self.model
        trainable = [p.requires_grad for p in self.model.parameters()]
        if self._ddp is None or trainable != self._ddp_trainable:
            self._ddp = None  # drop the old wrapper (and its gradient hooks) before the new one registers its own
            self._ddp, self._ddp_trainable = wrap_model(self.model), trainable
        return self._ddp

    @staticmethod
    def _global_result(result: BatchResult) -> BatchResult:
        """One batch's result over all ranks: the n-weighted mean loss, total n and correct."""
        total, n, correct, has_correct = all_reduce_sum(
            [result.loss.item() * result.n, result.n, result.correct or 0, result.correct is not None])
        return BatchResult(torch.tensor(total / n, dtype=torch.float64), int(n), int(correct) if has_correct else None)

    @staticmethod
    def _check_same_length(batches: Iterable[Any]) -> None:
        """Ranks that take different numbers of steps wait for each other forever: refuse sized data that differs."""
        if not hasattr(batches, "__len__"):
            return
        lengths = all_gather(len(batches))
        if len(set(lengths)) > 1:
            raise ValueError(f"the ranks have {lengths} batches this epoch (rank 0 first), but every rank must take the "
                             f"same number of steps: split each global batch between the ranks with "
                             f"lmlib.training.distributed.shard_batches")

    def _where(self) -> str:
        return f"training at step {self.step + 1} (epoch {self.epoch + 1})"

    # -- the loop ------------------------------------------------------------------------------------
    def train_step(self, batch: Any) -> BatchResult:
        """One optimizer step on ``batch``. Under DDP ``batch`` is this rank's share, and the result is the global
        one (:meth:`_global_result`)."""
        self.model.train()
        batch = to_device(batch, self.device)
        self._emit("on_batch_begin", batch)
        model = self._training_model()
        forward_calls = model.forward_calls if self.distributed else 0
        precision = torch.autocast(self.device.type, dtype=self.autocast) if self.autocast else nullcontext()
        with precision:
            result = _as_result(self.loss_fn(model, batch))
        if self.distributed and model.forward_calls == forward_calls:
            raise RuntimeError("under DDP the loss function must call model(...): only that call goes through "
                               "DistributedDataParallel, without it the gradients would not be averaged over the ranks")
        loss = result.loss
        for cb in self._active_callbacks():
            loss = cb.on_loss(self, loss)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # under DDP this also averages the gradients over the ranks
        self._emit("after_backward")
        self.optimizer.step()
        self.step += 1
        if self.distributed:
            result = self._global_result(result)
        self._pending.append((result.loss.detach(), result.n, loss.detach(), self._in_fit))
        if self._in_fit:
            self._epoch_step += 1
        if self.step % self.log_every == 0:
            self._log()
        self._emit("on_batch_end", result.loss.detach())
        return result

    def _read_back(self) -> None:
        """Read the losses of the steps not yet read from the device, in one transfer: ``batch_losses`` and the
        epoch's loss sums gain them, and a non-finite loss stops training with the step it appeared at."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        rows = torch.stack([torch.stack((reported.to(optimized.device, torch.float64), optimized.to(torch.float64)))
                            for reported, _, optimized, _ in pending]).tolist()  # the one wait for the device
        first = self.step - len(pending) + 1
        for k, ((_, n, _, in_fit), (value, optimized)) in enumerate(zip(pending, rows)):
            if not math.isfinite(optimized):
                raise FloatingPointError(f"loss became {optimized} at step {first + k}; lower the learning rate or "
                                         f"clip gradients")
            self.batch_losses.append(value)
            self._unlogged.append(value)
            if in_fit:
                total, count = self._epoch_sums
                self._epoch_sums = (total + value * n, count + n)

    def _log(self) -> None:
        """Read the pending losses back and give them to the callbacks' ``on_log``."""
        self._read_back()
        if self._unlogged:
            losses, self._unlogged = self._unlogged, []
            self._emit("on_log", losses)

    def fit(self, train: Batches, epochs: int = 1, valid: Batches | None = None) -> list[dict[str, float]]:
        """Train for ``epochs`` more epochs (continuing the epoch count after a resume) and return ``history``."""
        if epochs < 1:
            raise ValueError(f"epochs must be at least 1, got {epochs}")
        self.stop_training = False
        self._in_fit = True
        try:
            return self._fit(train, epochs, valid)
        finally:
            self._in_fit = False

    def _fit(self, train: Batches, epochs: int, valid: Batches | None) -> list[dict[str, float]]:
        with explain_lost_ranks(self._where) if self.distributed else nullcontext():
            self._emit("on_fit_begin")
            for _ in range(epochs):
                start = time.perf_counter()
                taken = self._epoch_step  # 0, or the batches a mid-epoch checkpoint had taken
                self._emit("on_epoch_begin")
                if not taken:  # resumed mid-epoch, a stateful loss keeps the state the checkpoint restored
                    _reset_state(self.loss_fn)
                batches = self._batches(train, self.epoch)
                if self.distributed:
                    self._check_same_length(batches)
                for batch in _after(batches, taken):
                    self.train_step(batch)  # adds the batch to self._epoch_sums
                    if self.distributed:  # a time budget or a diverging loss may stop one rank first
                        self.stop_training = any_rank(self.stop_training)
                    if self.stop_training:
                        break
                self._log()
                total, count = self._epoch_sums
                self._epoch_step, self._epoch_sums = 0, (0.0, 0)
                if count == 0:
                    raise ValueError("the training data yielded no batches")
                logs = {"epoch": self.epoch + 1, "step": self.step, "train_loss": total / count, "lr": self.lr}
                if valid is not None:
                    res = self.evaluate(valid)
                    logs.update(valid_loss=res.loss, valid_ppl=res.perplexity)
                    if res.accuracy is not None:
                        logs["valid_acc"] = res.accuracy
                logs["seconds"] = time.perf_counter() - start
                self.epoch += 1
                self.history.append(logs)
                self._emit("on_epoch_end", logs)
                if self.distributed:
                    self.stop_training = any_rank(self.stop_training)
                if self.stop_training:
                    break
            self._emit("on_fit_end")
        return self.history

    def evaluate(self, data: Batches) -> EvalResult:
        """:func:`evaluate` of the trainer's model and loss on ``data``. Under DDP each rank evaluates the data it is
        given and the result is the token-weighted mean over all of it, so every rank must call it (one that waits for
        the others' numbers alone waits until the timeout)."""
        result = evaluate(self.model, self.loss_fn, self._batches(data, self.epoch), self.device)
        if self.distributed:
            accuracy = 0.0 if result.accuracy is None else result.accuracy
            total, n, correct = all_reduce_sum([result.loss * result.n, result.n, accuracy * result.n])
            result = EvalResult(total / n, int(n), None if result.accuracy is None else correct / n)
        return result

    # -- checkpoints ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        self._read_back()  # the losses of every step taken belong to the state
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "step": self.step,
            "history": self.history,
            "batch_losses": self.batch_losses,
            "callbacks": [cb.state_dict() for cb in self.callbacks],
            "epoch_step": self._epoch_step,
            "epoch_sums": list(self._epoch_sums),
            "loss_fn": self._loss_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch, self.step = int(state["epoch"]), int(state["step"])
        self.history = [dict(h) for h in state["history"]]
        self.batch_losses = list(state["batch_losses"])
        if len(state["callbacks"]) != len(self.callbacks):
            raise ValueError(f"checkpoint has {len(state['callbacks'])} callback states, trainer has "
                             f"{len(self.callbacks)} callbacks; build the trainer with the same callbacks")
        for cb, cb_state in zip(self.callbacks, state["callbacks"]):
            cb.load_state_dict(cb_state)
        self._epoch_step = int(state.get("epoch_step", 0))
        total, count = state.get("epoch_sums", (0.0, 0))
        self._epoch_sums = (float(total), int(count))
        if state.get("loss_fn") and callable(getattr(self.loss_fn, "load_state_dict", None)):
            self.loss_fn.load_state_dict(state["loss_fn"])

    def save_checkpoint(self, path, extra: dict | None = None) -> None:
        """Write a resumable checkpoint to ``path`` (``extra``: more entries to store beside the state, e.g. what run
        it belongs to). Under DDP every rank must call it and only rank 0 writes: the ranks hold the same model and
        optimizer state, and ``model`` is the plain model, so the file loads in one process as well as in several.
        What differs between ranks goes in ``by_rank``: each one's random generators and its loss's carried state
        (a stateful RNN loss carries the rows of its own streams)."""
        from .checkpoint import rng_state, save_checkpoint

        if self.distributed:
            by_rank = all_gather({"rng": rng_state(), "loss_fn": self._loss_state()})
            if not is_main_process():
                return
            extra = {**(extra or {}), "by_rank": by_rank}
        save_checkpoint(path, {**(extra or {}), **self.state_dict()})

    def continue_at(self, step: int) -> None:
        """Go on with a run of one epoch from step ``step``, its weights at that step already in the model but neither
        its optimizer's state nor its callbacks' (a run whose resume.pt is lost, continued from a checkpoint it wrote
        on the way): the next :meth:`fit` skips the ``step`` batches already taken, each callback's ``on_continue``
        sets it to that step, and the optimizer's moments start again from zero. Unlike :meth:`load_checkpoint` the
        run does not go on exactly as if never stopped."""
        if self.step or self.epoch:
            raise ValueError(f"continue_at is for a fresh trainer; this one is at step {self.step}")
        if step < 1:
            raise ValueError(f"step must be at least 1, got {step}")
        self.step = self._epoch_step = step
        self._emit("on_continue")

    def load_checkpoint(self, path) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint`, random generators included.

        Written by as many ranks as there are now, each rank takes up its own generators and carried loss state,
        so the run goes on exactly as if never stopped. Written by another number of processes, the ranks' carried
        states are stacked and cut again for the ranks there are now (the loss's ``regroup_state``), and every rank
        starts from rank 0's generators, from which the ranks split their streams as at the start."""
        from .checkpoint import load_checkpoint, set_rng_state

        state = load_checkpoint(path, map_location=self.device, restore_rng=False)  # one set of generators, below
        by_rank = state.get("by_rank") or [{"rng": state["rng"], "loss_fn": state.get("loss_fn", {})}]
        here = world_size() if self.distributed else 1
        me = rank() if self.distributed else 0
        same_count = len(by_rank) == here
        if same_count:
            state = {**state, "loss_fn": by_rank[me]["loss_fn"]}
        elif any(s["loss_fn"] for s in by_rank):
            regroup = getattr(self.loss_fn, "regroup_state", None)
            if regroup is None:
                raise ValueError(f"{path} was written by {len(by_rank)} process(es) with a loss that carries state "
                                 f"from batch to batch, which this loss cannot share out again: resume it with "
                                 f"{len(by_rank)} process(es)")
            state = {**state, "loss_fn": regroup([s["loss_fn"] for s in by_rank], me, here)}
        self.load_state_dict(state)
        set_rng_state(by_rank[me]["rng"] if same_count else state["rng"])
        if self.distributed and not same_count:
            split_random_streams()

    def _loss_state(self) -> dict:
        return self.loss_fn.state_dict() if callable(getattr(self.loss_fn, "state_dict", None)) else {}
