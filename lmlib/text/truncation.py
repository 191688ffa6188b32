"""Cutting a long text to a model's input length: GPT, BERT and ULMFiT fine-tuning all keep a review's head and
tail."""

from __future__ import annotations

from collections.abc import Sequence


def head_and_tail(seq: Sequence, max_len: int) -> list:
    """``seq`` if it has at most ``max_len`` items, else its first ``max_len // 2`` and last
    ``max_len - max_len // 2`` items: a review's opening and its verdict, which usually comes last.
    Sun et al. (2019, "How to Fine-Tune BERT for Text Classification", table 3) found head+tail the best
    of their truncation rules on IMDb."""
    if max_len < 2:
        raise ValueError(f"max_len must be at least 2 (one head and one tail token), got {max_len}")
    if len(seq) <= max_len:
        return list(seq)
    head = max_len // 2
    return [*seq[:head], *seq[len(seq) - (max_len - head):]]
