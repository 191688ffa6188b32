"""Turning token ids into training batches.

Three shapes of data recur through the course:

* a long token stream cut into ``batch_size`` parallel streams and read in BPTT windows (RNN LMs);
* random fixed-length blocks drawn from the stream (Transformer LMs);
* variable-length sequences padded into a rectangle with a mask (classification, translation).

All tensors are batch-first: ``(batch, time)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import torch


class LMBatch(NamedTuple):
    """Inputs ``x`` and next-token targets ``y``, both ``(batch, time)``."""

    x: torch.Tensor
    y: torch.Tensor


class PaddedBatch(NamedTuple):
    """``ids`` ``(batch, time)``, ``mask`` ``(batch, time)`` True at real tokens, ``labels`` ``(batch,)``."""

    ids: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor | None = None


def _as_long(ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
    t = torch.as_tensor(ids, dtype=torch.long)
    if t.dim() != 1:
        raise ValueError(f"expected a 1-D sequence of token ids, got shape {tuple(t.shape)}")
    return t


def batchify(ids: Sequence[int] | torch.Tensor, batch_size: int) -> torch.Tensor:
    """Cut one token stream into ``batch_size`` contiguous streams: ``(batch_size, len(ids) // batch_size)``.

    Row ``b`` holds tokens ``b*n .. (b+1)*n - 1``, so reading columns left to right continues each row's
    text. The last ``len(ids) % batch_size`` tokens do not fit a full column and are dropped (fewer than
    ``batch_size`` tokens; the standard treatment since Mikolov's RNNLM).
    """
    ids = _as_long(ids)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    n = ids.numel() // batch_size
    if n < 2:
        raise ValueError(f"{ids.numel()} tokens are too few for {batch_size} streams of at least 2 tokens")
    return ids[: n * batch_size].view(batch_size, n)


def bptt_batches(streams: torch.Tensor, seq_len: int | Callable[[], int]) -> Iterator[LMBatch]:
    """Walk ``streams`` ``(batch, n)`` left to right in windows of ``seq_len`` steps.

    ``seq_len`` may be a function called once per window, for variable-length BPTT (AWD-LSTM). The
    last window is shorter when fewer steps remain; every token except the very first is a target once.
    """
    if streams.dim() != 2:
        raise ValueError(f"streams must be (batch, n), got shape {tuple(streams.shape)}; use batchify first")
    next_len = seq_len if callable(seq_len) else (lambda: seq_len)
    i, n = 0, streams.size(1)
    while i < n - 1:
        length = int(next_len())
        if length < 1:
            raise ValueError(f"BPTT length must be at least 1, got {length}")
        length = min(length, n - 1 - i)
        yield LMBatch(streams[:, i : i + length], streams[:, i + 1 : i + 1 + length])
        i += length


def random_blocks(
    ids: Sequence[int] | torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator | None = None
) -> LMBatch:
    """``batch_size`` blocks of ``block_size`` tokens starting at uniformly random offsets."""
    ids = _as_long(ids)
    if block_size < 1 or batch_size < 1:
        raise ValueError(f"block_size and batch_size must be positive, got {block_size} and {batch_size}")
    if ids.numel() < block_size + 1:
        raise ValueError(f"a block of {block_size} needs at least {block_size + 1} tokens, got {ids.numel()}")
    starts = torch.randint(0, ids.numel() - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    return LMBatch(ids[starts[:, None] + offsets], ids[starts[:, None] + offsets + 1])


def pad_batch(
    seqs: Sequence[Sequence[int]], pad_id: int, max_len: int | None = None, truncate: bool = False
) -> PaddedBatch:
    """Right-pad ``seqs`` to a ``(batch, time)`` rectangle; ``mask`` is True at real tokens.

    A sequence longer than ``max_len`` is an error unless ``truncate=True`` asks for it to be cut.
    """
    if len(seqs) == 0:
        raise ValueError("cannot pad an empty list of sequences")
    if any(len(s) == 0 for s in seqs):
        raise ValueError("a sequence in the batch is empty; drop empty texts before batching")
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    longest = max(len(s) for s in seqs)
    width = longest if max_len is None else max_len
    if longest > width and not truncate:
        raise ValueError(f"a sequence has {longest} tokens, more than max_len={width}; pass truncate=True to cut it")
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    for row, seq in enumerate(seqs):
        seq = list(seq)[:width]
        ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = True
    return PaddedBatch(ids, mask)


def classification_batches(
    seqs: Sequence[Sequence[int]],
    labels: Sequence[int],
    batch_size: int,
    pad_id: int,
    shuffle: bool = True,
    seed: int = 0,
    max_len: int | None = None,
    truncate: bool = False,
) -> list[PaddedBatch]:
    """Padded batches with labels; shuffled with ``seed`` (pass the epoch number for a new order each epoch)."""
    if len(seqs) != len(labels):
        raise ValueError(f"{len(seqs)} sequences but {len(labels)} labels")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = torch.randperm(len(seqs), generator=torch.Generator().manual_seed(seed)) if shuffle else torch.arange(len(seqs))
    batches = []
    for start in range(0, len(seqs), batch_size):
        idx = order[start : start + batch_size].tolist()
        padded = pad_batch([seqs[i] for i in idx], pad_id, max_len, truncate)
        batches.append(PaddedBatch(padded.ids, padded.mask, torch.as_tensor([labels[i] for i in idx])))
    return batches
