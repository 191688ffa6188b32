"""The answers some exercises are checked against, computed here so that the check cell does not show them.

A check cell compares the reader's value with a reference (:mod:`lmlib.course.exercises`). Where the reference is a
function of the library (``corpus_bleu``, ``NGramLM.prob``), the cell calls it; where it would be a formula or a
number typed into the cell, the reader could copy it as the answer, so it lives here instead. Each function says
which exercise it answers; the worked answer is in the notebook's solution, which the reader opens on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


def perplexity(probabilities: Sequence[float]) -> float:
    """Notebook 00, exercise 1: the perplexity of a model that gave the tokens of a text these probabilities,
    ``exp(-(1/N) Σ log p)``."""
    if not probabilities or any(not 0 < p <= 1 for p in probabilities):
        raise ValueError(f"probabilities must be a non-empty sequence of numbers in (0, 1], got {probabilities!r}")
    return math.exp(-sum(math.log(p) for p in probabilities) / len(probabilities))


def add_one_bigram(counts: torch.Tensor, a: int, b: int) -> float:
    """Notebook 00, exercise 2: p(b | a) of the add-one bigram model whose bigram counts are ``counts``
    (``counts[a, b]`` the times ``b`` followed ``a``; one row and column per symbol of the vocabulary)."""
    return ((counts[a, b] + 1) / (counts[a].sum() + counts.shape[1])).item()


def lstm_parameter_count(input_size: int, hidden_size: int) -> int:
    """Notebook 03, exercise 2: the parameters of one ``nn.LSTM(input_size, hidden_size)`` layer, counted."""
    return sum(p.numel() for p in nn.LSTM(input_size, hidden_size).parameters())


def dropped_in_both(p: float, one_mask_for_both: bool) -> float:
    """Notebook 06, exercise 4: the probability that a unit is zeroed in two places at once, with drop probability
    ``p``, when one mask covers both places (embedding dropout's mask per word type covers every copy of a word)
    or when each place draws its own (locked dropout draws one mask per sequence)."""
    if not 0 <= p < 1:
        raise ValueError(f"p must be in [0, 1), got {p}")
    return p if one_mask_for_both else p * p
