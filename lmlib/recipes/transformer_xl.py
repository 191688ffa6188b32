"""Transformer-XL on Tiny Shakespeare's characters: the training recipe of the committed experiment and notebook 11,
and the two ways of evaluating a language model with a long context.

Training walks ``batch_size`` contiguous streams of the text segment by segment (``bptt_batches``, as the RNNs of
notebook 03 do), so each segment's memory is the segment just before it in the same stream. A model without memory
(``mem_len=0``) trains on exactly the same segments: same tokens, same steps, same optimizer.

Evaluation, as in Dai et al. (2019, §4.4):

* :func:`evaluate_with_memory` reads the held-out text in segments and carries the memory from one to the next:
  each token attends to up to ``mem_len`` earlier positions plus those of its own segment, and each token is
  computed once. (Each cached state of a higher layer was itself computed with a memory, so the text that reaches
  a prediction grows by up to ``mem_len`` per layer, §3.2);
* :func:`evaluate_sliding_window` is what a fixed-context model must do to give *every* token ``context`` earlier
  tokens: one forward pass over the ``context`` tokens before each prediction, of which only the last is used.

Both score the same targets, so their losses and their speed compare directly.

A task that needs the memory: on characters at this size a 64-character segment already holds most of what predicts
the next one, so a memory barely helps. :func:`copy_stream` builds text whose every second block repeats the block
before it, one segment length back: a model without memory never sees the original, a model with a memory of one
segment can copy it (``COPY_TASK`` holds the settings notebook 11 and ``bench_transformer_xl_copy.py`` use).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from ..models.transformer_xl import TransformerXL, TransformerXLConfig
from ..runtime import eval_mode, seed_everything
from ..text.batching import LMBatch, batchify, bptt_batches
from ..training.callbacks import GradientClipping, MaxSteps
from ..training.objectives import StatefulLMLoss
from ..training.schedules import WarmupCosine, weight_decay_groups
from ..training.trainer import Callback, Trainer

MODEL = dict(num_layers=4, num_heads=4, d_model=128, segment_len=64, dropout=0.0)
RECIPE = dict(seed=0, batch_size=12, lr=1e-3, warmup=100, min_ratio=0.1, weight_decay=0.1, betas=(0.9, 0.99),
              clip=1.0)
# The three models of the experiment: same sizes, same data, same steps; they differ in memory and positions.
VARIANTS = {
    "xl": dict(mem_len=64, positions="relative"),  # Transformer-XL: memory of one segment, relative positions
    "relative_no_memory": dict(mem_len=0, positions="relative"),  # relative positions only
    "vanilla": dict(mem_len=0, positions="absolute"),  # the plain decoder: sinusoids, no memory
}


# The copy task: blocks of COPY_TASK["segment_len"] random symbols, each followed by its copy, so that every copied
# symbol sits exactly one segment after its original.
COPY_TASK = dict(vocab_size=16, segment_len=16, mem_len=16, num_layers=2, num_heads=2, d_model=64, steps=200,
                 recipe=dict(batch_size=16, lr=3e-3, warmup=20), train_units=4000, held_out_units=200)


def copy_stream(units: int, block: int, vocab_size: int, seed: int) -> torch.Tensor:
    """``units`` random blocks of ``block`` symbols from ``range(vocab_size)``, each followed by a copy of itself:
    ``[x_1..x_B, x_1..x_B, y_1..y_B, y_1..y_B, ...]``, a 1-D stream of ``2 · units · block`` ids (seeded).

    Half the symbols are random (no model can beat ln V nats on them); each of the other half equals the symbol
    ``block`` positions back. With ``block`` equal to the segment length that symbol is never inside the current
    segment, so only a memory can supply it."""
    if units < 1 or block < 1 or vocab_size < 2:
        raise ValueError(f"need units >= 1, block >= 1 and vocab_size >= 2, got {units}, {block}, {vocab_size}")
    g = torch.Generator().manual_seed(seed)
    first = torch.randint(0, vocab_size, (units, block), generator=g)  # (units, B)
    return torch.cat([first, first], dim=1).flatten()  # (2 · units · B,)


def build(variant: str, vocab_size: int, seed: int = RECIPE["seed"], **overrides) -> TransformerXL:
    """A seeded model of the experiment: ``MODEL`` sizes with the ``variant``'s memory and positions. The data
    order is fixed (consecutive segments), so the seed changes the initial weights only."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {sorted(VARIANTS)}")
    seed_everything(seed)
    return TransformerXL(TransformerXLConfig(vocab_size=vocab_size, **{**MODEL, **VARIANTS[variant], **overrides}))


def copy_task(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The copy task's training and held-out streams (:func:`copy_stream` with ``COPY_TASK``'s sizes; the held-out
    blocks are drawn with another seed, so no block is shared)."""
    c = COPY_TASK
    return (copy_stream(c["train_units"], c["segment_len"], c["vocab_size"], seed),
            copy_stream(c["held_out_units"], c["segment_len"], c["vocab_size"], seed + 10_000))


def build_copy_model(variant: str, seed: int = RECIPE["seed"]) -> TransformerXL:
    """A small model for the copy task: ``"xl"`` with a memory of one segment, or ``"relative_no_memory"``."""
    if variant not in ("xl", "relative_no_memory"):
        raise ValueError(f"the copy task compares 'xl' and 'relative_no_memory', got {variant!r}")
    c = COPY_TASK
    return build(variant, c["vocab_size"], seed=seed, num_layers=c["num_layers"], num_heads=c["num_heads"],
                 d_model=c["d_model"], segment_len=c["segment_len"], mem_len=c["mem_len"] if variant == "xl" else 0)


def segments(stream: torch.Tensor, batch_size: int, segment_len: int) -> Iterator[LMBatch]:
    """Consecutive ``(batch_size, segment_len)`` segments of ``batch_size`` contiguous streams of ``stream``."""
    return bptt_batches(batchify(stream, batch_size), segment_len)


def train(model: TransformerXL, stream: torch.Tensor, steps: int, callbacks: list[Callback] = (),
          recipe: dict | None = None) -> Trainer:
    """Train on consecutive segments of ``stream`` for ``steps`` steps (wrapping around the text if needed) with
    AdamW, warm-up + cosine and gradient clipping; the memory flows from segment to segment through
    :class:`~lmlib.training.objectives.StatefulLMLoss` and restarts at each pass over the text."""
    recipe = {**RECIPE, **(recipe or {})}
    opt = torch.optim.AdamW(weight_decay_groups(model, recipe["weight_decay"]), lr=recipe["lr"], betas=recipe["betas"])
    trainer = Trainer(model, opt, StatefulLMLoss(state_batch_dim=0),
                      [WarmupCosine(steps, min(recipe["warmup"], steps // 10), recipe["min_ratio"]),
                       GradientClipping(recipe["clip"]), MaxSteps(steps), *callbacks], device="cpu")
    per_pass = math.ceil((stream.numel() // recipe["batch_size"] - 1) / model.config.segment_len)
    trainer.fit(lambda epoch: segments(stream, recipe["batch_size"], model.config.segment_len),
                epochs=math.ceil(steps / per_pass))
    return trainer


@contextmanager
def memory_length(model: TransformerXL, mem_len: int):
    """Evaluate ``model`` with a memory of ``mem_len`` positions inside the block, restoring its own afterwards."""
    saved, model.mem_len = model.mem_len, mem_len
    try:
        yield model
    finally:
        model.mem_len = saved


@torch.no_grad()
def evaluate_with_memory(model: TransformerXL, stream: torch.Tensor, mem_len: int, streams: int = 8,
                         skip: int = 0, segment_len: int | None = None) -> float:
    """Mean NLL (nats per token) of ``stream`` read in segments with a memory of ``mem_len`` positions.

    The text is cut into ``streams`` contiguous streams read in parallel; the first ``skip`` targets of each stream
    are not scored, so that settings with different memories score the same targets, each with its full memory.
    """
    segment_len = segment_len or model.config.segment_len
    per_stream = stream.numel() // streams
    if skip >= per_stream - 1:
        raise ValueError(f"skip={skip} leaves no target in streams of {per_stream} tokens; lower skip or streams")
    total, count, mems = 0.0, 0, None
    with memory_length(model, mem_len), eval_mode(model):
        for start, (x, y) in zip(range(0, per_stream, segment_len), segments(stream, streams, segment_len)):
            logits, mems = model(x, mems)
            nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view_as(y)  # (S, T)
            keep = max(0, skip - start)
            total += nll[:, keep:].sum().item()
            count += nll[:, keep:].numel()
    return total / count


@torch.no_grad()
def evaluate_sliding_window(model: TransformerXL, stream: torch.Tensor, context: int, targets: int) -> float:
    """Mean NLL of the ``targets`` tokens after the first ``context`` of ``stream``, each predicted by a separate
    forward pass over exactly the ``context`` tokens before it (no memory), one window at a time."""
    if stream.numel() < context + targets:
        raise ValueError(f"the stream holds {stream.numel()} tokens; context {context} + targets {targets} need more")
    total = 0.0
    with memory_length(model, 0), eval_mode(model):
        for t in range(context, context + targets):
            logits, _ = model(stream[None, t - context:t])  # (1, context, V)
            total += F.cross_entropy(logits[:, -1], stream[t:t + 1]).item()  # only the last position is new
    return total / targets


@torch.no_grad()
def evaluation_speed(model: TransformerXL, stream: torch.Tensor, context: int, targets: int,
                     segment_len: int | None = None) -> dict:
    """Time both evaluations on the same ``targets`` tokens (batch 1): cached segments with ``mem_len = context``
    (each token attends to ``context`` to ``context + segment_len − 1`` earlier positions) against a sliding window
    of exactly ``context``. Returns tokens per second of each, the speed-up, and both losses. The cached path's
    time includes reading the first ``context`` tokens to fill the memory."""
    segment_len = segment_len or model.config.segment_len
    piece = stream[: context + targets]
    start = time.perf_counter()
    sliding = evaluate_sliding_window(model, piece, context, targets)
    sliding_seconds = time.perf_counter() - start
    start = time.perf_counter()
    cached = evaluate_with_memory(model, piece, context, streams=1, skip=context - 1, segment_len=segment_len)
    cached_seconds = time.perf_counter() - start
    return {"context": context, "targets": targets, "segment_len": segment_len,
            "sliding_tokens_per_s": targets / sliding_seconds, "cached_tokens_per_s": targets / cached_seconds,
            "speedup": sliding_seconds / cached_seconds, "sliding_loss": sliding, "cached_loss": cached}
