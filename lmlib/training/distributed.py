"""Data-parallel training on several processes with PyTorch's own engine, ``torchrun``.

    torchrun --nproc_per_node=N train.py

starts N copies of ``train.py`` and tells each one who it is through the environment: ``RANK`` (0 … N−1),
``WORLD_SIZE`` (N), ``LOCAL_RANK`` (its index on this machine) and ``MASTER_ADDR``/``MASTER_PORT`` (where rank 0
waits for the others). :func:`init_distributed` reads them and joins the process group; a
:class:`~lmlib.training.trainer.Trainer` built afterwards wraps its model in ``DistributedDataParallel`` (DDP), which
averages the gradients of all ranks inside every ``backward()``.

Why N ranks with B/N rows each compute exactly the step of one process with the global batch of B rows: each rank
gets a disjoint share of B/N rows (:func:`shard`), so its loss is the mean over its share,
L_r = (N/B) Σ_{i ∈ share r} ℓ_i, and the average of the ranks' gradients is

    (1/N) Σ_r ∇L_r = (1/B) Σ_i ∇ℓ_i = ∇L,

the gradient of the mean loss over the global batch. That holds when every share has as many loss terms; when
they differ (BERT's masked tokens, ELMo's sentences of different lengths) the loss function returns
:func:`mean_over_ranks` of its mean instead, which weights each rank by its share of the terms. Every rank then
takes that same optimizer step from the same weights, so the weights stay identical on all ranks (equal up to float
rounding to the one-process run).

Run without torchrun (none of the variables set), nothing here joins or needs a process group: :func:`rank` is 0,
:func:`world_size` is 1, :func:`shard` returns the whole batch, and the Trainer behaves as it always did.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..runtime import map_tensors

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
DEFAULT_TIMEOUT = datetime.timedelta(minutes=5)
_timeout: datetime.timedelta | None = None  # the one init_distributed was given, quoted in error messages


# -- joining -----------------------------------------------------------------------------------------------
def launched_by_torchrun() -> bool:
    """True when the environment has all the variables torchrun sets, False when it has none.

    Some but not all is a half-done manual launch, which would otherwise hang waiting for a rank 0 that never comes,
    so it is an error that names what is missing."""
    present = [name for name in TORCHRUN_VARIABLES if name in os.environ]
    if not present:
        return False
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise ValueError(f"the environment sets {', '.join(present)} but not {', '.join(missing)}: launch with "
                         f"`torchrun --nproc_per_node=N script.py`, which sets all of {', '.join(TORCHRUN_VARIABLES)}, "
                         f"or unset them to train in one process")
    return True


def init_distributed(timeout: datetime.timedelta = DEFAULT_TIMEOUT, backend: str = "auto") -> bool:
    """Join the process group torchrun set up, if it did; return whether this process is now one of several.

    ``backend="auto"`` picks NCCL when CUDA is available (one GPU per process: this rank's ``LOCAL_RANK``) and gloo
    on the CPU. ``timeout`` bounds every collective operation: when a rank dies or hangs, the others fail with an
    error after at most this long instead of waiting forever (gloo raises it; NCCL's watchdog ends the process).
    Without torchrun's variables it does nothing and returns False, so the same script runs in one process unchanged.
    Calling it again is harmless."""
    global _timeout
    if not isinstance(timeout, datetime.timedelta) or timeout.total_seconds() <= 0:
        raise ValueError(f"timeout must be a positive datetime.timedelta, got {timeout!r}")
    if not launched_by_torchrun():
        return False
    if not dist.is_initialized():
        if backend == "auto":
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend, timeout=timeout)
        _timeout = timeout
    return is_distributed()


def close_distributed() -> None:
    """Leave the process group; does nothing in one process. A torchrun script should end with
    :func:`exit_distributed` instead, which also leaves the group."""
    if in_process_group():
        dist.destroy_process_group()


def exit_distributed(code: int = 0) -> None:
    """End a process that joined a process group at once with exit status ``code``: leave the group, flush stdout
    and stderr, and exit without the interpreter's shutdown (``os._exit``). In a process that joined no group it
    does nothing and returns, so a script's last line works in one process too. Call it last, once every file it
    writes is closed.

    Why skip the shutdown: a gloo worker thread releases each finished collective a moment after it returns, which
    needs the interpreter's lock; during shutdown it cannot take it and the process aborts ("terminate called
    without an active exception", SIGABRT) after all its work is done (tests/benchmarks/bench_torchrun_exit.py)."""
    if not in_process_group():
        return
    close_distributed()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def in_process_group() -> bool:
    """True once this process has joined a process group, even a group of one (``torchrun --nproc_per_node=1``)."""
    return dist.is_available() and dist.is_initialized()


def is_distributed() -> bool:
    """True when this process is one of several in an initialised process group."""
    return in_process_group() and dist.get_world_size() > 1


def rank() -> int:
    """This process's index, 0 … world_size() − 1 (0 in a single process)."""
    return dist.get_rank() if in_process_group() else 0


def world_size() -> int:
    """How many processes train together (1 in a single process)."""
    return dist.get_world_size() if in_process_group() else 1


def is_main_process() -> bool:
    """Rank 0: the one process that prints, draws and writes files."""
    return rank() == 0


# -- splitting the data ------------------------------------------------------------------------------------
def _position(r: int | None, n: int | None) -> tuple[int, int]:
    r, n = rank() if r is None else r, world_size() if n is None else n
    if n < 1 or not 0 <= r < n:
        raise ValueError(f"rank must be in 0 … world_size − 1, got rank {r} of world size {n}")
    return r, n


def shard(batch: Any, rank: int | None = None, world_size: int | None = None) -> Any:
    """This rank's share of a global ``batch``: rows r·B/N … (r+1)·B/N − 1 of every tensor in it.

    ``batch`` is a batch-major tensor ``(B, ...)`` (e.g. :func:`~lmlib.text.batching.batchify`'s ``(B, n)`` streams,
    whose rows are independent texts, so a stateful RNN loss carries each row's state exactly as in one process) or
    a tuple, named tuple, list, dict or dataclass of them, all with the same B. The N shares are disjoint and of equal
    size, like ``DistributedSampler``'s, so together they are the global batch. ``rank`` and ``world_size`` default
    to this process's; in a single process the whole batch is this rank's share."""
    r, n = _position(rank, world_size)
    if n == 1:
        return batch
    sizes = set()
    map_tensors(batch, lambda t: (sizes.add(t.size(0)) or t) if t.dim() > 0 else t)  # walked only to read the sizes
    if len(sizes) != 1:
        raise ValueError(f"shard needs batch-major tensors (B, ...) that share one B; this batch's tensors have first "
                         f"dimensions {sorted(sizes)}")
    (size,) = sizes
    if size % n != 0:
        near = " or ".join(str(b) for b in sorted({n * (size // n), n * (size // n + 1)} - {0}))
        raise ValueError(f"a global batch of {size} rows cannot be split evenly between {n} processes: make the global "
                         f"batch size a multiple of the world size {n} (e.g. {near}), so that every rank gets the "
                         f"same number of rows")
    k = size // n
    return map_tensors(batch, lambda t: t[r * k: (r + 1) * k] if t.dim() > 0 else t)


def shard_batches(data: Any, rank: int | None = None, world_size: int | None = None) -> Any:
    """:func:`shard` of every batch in ``data``: a list of batches gives a list, a function ``epoch -> batches``
    (the Trainer's other data form) gives such a function, whose batches stay lazy when the original's are (a
    generator). Each rank then takes as many steps as the others."""
    def shard_all(batches):
        shares = (shard(b, rank, world_size) for b in batches)
        return list(shares) if hasattr(batches, "__len__") else shares

    return (lambda epoch: shard_all(data(epoch))) if callable(data) else shard_all(data)


# -- agreeing on numbers -----------------------------------------------------------------------------------
def _collective_device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(values: list[float]) -> list[float]:
    """Each of ``values`` summed over all ranks (one collective call; float64 so counts stay exact)."""
    if not is_distributed():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_collective_device())
    dist.all_reduce(t)
    return t.tolist()


def all_reduce_mean(value: float | torch.Tensor) -> float | torch.Tensor:
    """The mean of ``value`` over all ranks, for reported metrics (a float gives a float, a tensor a tensor).
    In a single process it is ``value`` itself. Every rank must call it, or the others wait for it until the timeout."""
    if not is_distributed():
        return value
    if isinstance(value, torch.Tensor):
        t = value.detach().to(_collective_device(), torch.float64, copy=True)
        dist.all_reduce(t)
        return (t / world_size()).to(value.device, value.dtype)
    return all_reduce_sum([float(value)])[0] / world_size()


def mean_over_ranks(local_mean: torch.Tensor, local_count: int | torch.Tensor) -> torch.Tensor:
    """A loss to return in place of ``local_mean`` when the ranks' shares hold different numbers of the items it
    averages (masked tokens, the words of sentences of different lengths): after DDP's gradient average it trains
    on the mean over every rank's items, as one process with the whole batch does.

    With rank r's mean m_r over n_r items and n = Σ_r n_r items in all, rank r returns L_r = N·n_r·m_r / n
    (N ranks), so DDP's (1/N) Σ_r ∇L_r = (1/n) Σ_r n_r ∇m_r, the gradient of the global mean; the ranks' L_r also
    average to the global mean, the loss the Trainer reports. Equal shares (n_r = n/N) give L_r = m_r. In a single
    process it returns ``local_mean`` unchanged. Every rank must call it (one collective sum)."""
    if not is_distributed():
        return local_mean
    count = float(local_count)
    total = all_reduce_sum([count])[0]
    if total == 0:
        raise ValueError("no rank has a single item to average (local_count is 0 everywhere): the global batch has "
                         "nothing to learn from; check how its loss terms are chosen")
    if count == 0:  # the mean of no items is nan; this rank adds nothing, and its gradients stay finite
        return torch.nan_to_num(local_mean) * 0.0
    return local_mean * (world_size() * count / total)


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is True on any: ranks that stop at different steps would deadlock."""
    return bool(all_reduce_sum([float(flag)])[0] > 0)


def all_gather(value: Any) -> list[Any]:
    """``value`` from every rank, in rank order (any picklable object; one collective). ``[value]`` in one process."""
    if not is_distributed():
        return [value]
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, value)
    return gathered


# -- random numbers ----------------------------------------------------------------------------------------
def split_random_streams() -> None:
    """Give each rank its own stream of torch random numbers (dropout masks, noise), still fixed by the run's seed.

    Every rank runs the same script with the same seed, so without this each would draw the same masks for its own
    rows: with N ranks, every mask would be used N times in a global batch, where one process draws a new one for
    every row. One number u drawn from the shared stream (the same draw on every rank) reseeds rank r's torch
    generators with u + r. Only torch's generators change: the data order comes from the batch streams' own seeded
    generators, and Python's and NumPy's stay shared. In one process it does nothing, so a single-process run is
    unchanged. Every rank must call it."""
    if not is_distributed():
        return
    shared_draw = int(torch.randint(2**62, (), dtype=torch.int64))
    torch.manual_seed(shared_draw + rank())


# -- the model ---------------------------------------------------------------------------------------------
class _DDP(nn.parallel.DistributedDataParallel):
    """DDP that also answers the wrapped model's own attributes (``model.config``, ``model.lm_logits``), so a loss
    function written for the plain model runs unchanged. Only a call ``model(...)`` goes through DDP's hooks, so it
    counts those calls: a loss that never makes one would train without averaging gradients."""

    forward_calls = 0

    def forward(self, *args, **kwargs):
        self.forward_calls += 1
        return super().forward(*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "module":
                raise
            return getattr(self.module, name)


def wrap_model(model: nn.Module) -> nn.parallel.DistributedDataParallel:
    """``model`` in DistributedDataParallel, on this rank's GPU when there is one. Building it copies rank 0's
    weights to every rank, and DDP syncs only the parameters that require grad *now*: rebuild it when that changes."""
    if not is_distributed():
        raise ValueError("DistributedDataParallel needs a process group of several ranks: launch with "
                         "`torchrun --nproc_per_node=N script.py` and call init_distributed() first")
    device = next(model.parameters()).device
    return _DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


# -- failing clearly ---------------------------------------------------------------------------------------
class LostRankError(RuntimeError):
    """Another rank stopped answering: it crashed, hangs, or was killed."""


_COMMUNICATION = re.compile(r"gloo|nccl|timed out|connection (reset|closed|refused)|broken pipe", re.IGNORECASE)


@contextmanager
def explain_lost_ranks(where: Callable[[], str]) -> Iterator[None]:
    """Inside the block, turn a communication failure into an error that says what probably happened and where.

    Gloo and NCCL report a dead or hanging peer as a bare RuntimeError ("Connection reset by peer", "Timed out
    waiting 3000ms for recv operation"); any other error passes through untouched."""
    try:
        yield
    except LostRankError:
        raise
    except RuntimeError as err:
        lost = isinstance(err, getattr(dist, "DistError", ())) or _COMMUNICATION.search(str(err))
        if not (lost and is_distributed()):
            raise
        timeout = f" of {_timeout.total_seconds():g} s" if _timeout is not None else ""
        raise LostRankError(
            f"rank {rank()} of {world_size()} stopped while {where()}: another rank closed its connection or did not "
            f"answer within the timeout{timeout}. A rank has probably crashed or hangs; its own log shows the first "
            f"error. (The timeout is init_distributed(timeout=...); the backend said: {err})"
        ) from err
