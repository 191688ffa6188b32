"""The neural probabilistic language model of Bengio, Ducharme, Vincent & Jauvin (2003).

An n-gram model whose table of counts is replaced by a smooth function: each word w has a learned
feature vector C(w) in R^m, the n-1 previous words' vectors are concatenated into x, and a one-hidden-
layer network maps x to a distribution over the next word (paper, eq. 1 and section 2):

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))          (n-1)·m numbers
    y = b + W x + U tanh(d + H x)                             |V| scores
    P(w_t = i | w_{t-n+1}^{t-1}) = exp(y_i) / Σ_j exp(y_j)

``W`` are the optional "direct connections" from the features straight to the output (the paper
tries both; W = 0 switches them off). Many lectures write the same network as z = tanh(W x + p),
y = U z + q: their (W, p, U, q) are the paper's (H, d, U, b).

Because nearby words in feature space get similar predictions, an n-gram never seen in training still
gets a sensible probability: the model generalises through the geometry of C instead of backing off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime import eval_mode
from .config_checks import check_positive_ints, check_token_ids


@dataclass
class NNLMConfig:
    """Sizes of the model. ``order`` is n: the model conditions on the ``order - 1`` previous words."""

    vocab_size: int
    order: int = 5
    embed_size: int = 60  # m, the size of each feature vector C(w)
    hidden_size: int = 100  # h, the number of tanh units
    direct: bool = False  # the direct connections W from x to the output

    def __post_init__(self):
        check_positive_ints(self, ("vocab_size", "order"), minimum=2)  # order 2: one context word
        check_positive_ints(self, ("embed_size", "hidden_size"))

    @property
    def context(self) -> int:
        return self.order - 1


class NNLM(nn.Module):
    """Bengio et al. (2003): ``forward(context)`` maps ``(batch, n-1)`` word ids to ``(batch, |V|)`` logits y.

    Parameters carry the paper's names: ``C`` (|V|, m), ``H`` (h, (n-1)m) with bias ``d`` (h),
    ``U`` (|V|, h) with bias ``b`` (|V|), and ``W`` (|V|, (n-1)m) when ``direct`` is on.
    """

    def __init__(self, config: NNLMConfig):
        super().__init__()
        self.config = config
        V, m, h, k = config.vocab_size, config.embed_size, config.hidden_size, config.context
        self.C = nn.Embedding(V, m)
        self.H = nn.Parameter(torch.empty(h, k * m))
        self.d = nn.Parameter(torch.zeros(h))
        self.U = nn.Parameter(torch.empty(V, h))
        self.b = nn.Parameter(torch.zeros(V))
        self.W = nn.Parameter(torch.zeros(V, k * m)) if config.direct else None
        nn.init.normal_(self.C.weight, std=0.1)
        nn.init.uniform_(self.H, -1 / math.sqrt(k * m), 1 / math.sqrt(k * m))
        nn.init.uniform_(self.U, -1 / math.sqrt(h), 1 / math.sqrt(h))

    def features(self, context: torch.Tensor) -> torch.Tensor:
        """x: the concatenated feature vectors, ``(batch, n-1)`` ids -> ``(batch, (n-1)·m)``.

        Column j of ``context`` holds w_{t-n+1+j}, oldest word first; the order is fixed, so H learns
        a separate weight block per position.
        """
        return self.C(context).flatten(1)  # (batch, n-1, m) -> (batch, (n-1)·m)

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """y = b + W x + U tanh(d + H x): ``(batch, n-1)`` -> unnormalised log-probabilities ``(batch, |V|)``."""
        x = self.features(context)  # (batch, (n-1)·m)
        a = torch.tanh(F.linear(x, self.H, self.d))  # tanh(d + H x): (batch, h)
        y = F.linear(a, self.U, self.b)  # b + U a: (batch, |V|)
        if self.W is not None:
            y = y + F.linear(x, self.W)  # + W x, the direct connections
        return y


def check_inputs(model: NNLM, context: torch.Tensor) -> None:
    """Refuse contexts :meth:`NNLM.forward` would misread: ``(batch, n-1)`` integer ids inside the vocabulary."""
    check_token_ids(context, model.config.vocab_size, "context")
    if context.size(1) != model.config.context:
        raise ValueError(f"context must have shape (batch, {model.config.context}) for an order-"
                         f"{model.config.order} model, got {tuple(context.shape)}")


def _check_stream(ids: Sequence[int] | torch.Tensor, order: int) -> torch.Tensor:
    """``ids`` as a non-empty 1-D long tensor, for an order of at least 2."""
    if order < 2:
        raise ValueError(f"order (n) must be at least 2, got {order}")
    ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() != 1 or ids.numel() == 0:
        raise ValueError(f"ids must be a non-empty 1-D stream of token ids, got shape {tuple(ids.shape)}")
    return ids


def ngram_windows(ids: Sequence[int] | torch.Tensor, order: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every position of a token stream as (context, target): ``(N, n-1)`` and ``(N,)`` for N tokens.

    The first n-1 targets have no full history; their missing context is filled with ``pad_id``
    (for PTB, ``<eos>``: the stream starts as if a sentence had just ended). So every token is
    predicted exactly once and a perplexity over the windows is a perplexity over the whole text.
    """
    ids = _check_stream(ids, order)  # (N,)
    padded = torch.cat([torch.full((order - 1,), pad_id, dtype=torch.long), ids])
    contexts = padded.unfold(0, order, 1)[:, :-1].contiguous()
    return contexts, ids.clone()


def window_batches(contexts: torch.Tensor, targets: torch.Tensor, batch_size: int,
                   generator: torch.Generator | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Split windows into ``(x, y)`` batches, shuffled when a ``generator`` is given (training)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if contexts.size(0) != targets.size(0):
        raise ValueError(f"contexts and targets must pair up one to one, got {contexts.size(0)} contexts for "
                         f"{targets.size(0)} targets; build both with ngram_windows")
    order = torch.randperm(len(targets), generator=generator) if generator is not None else torch.arange(len(targets))
    return [(contexts[i], targets[i]) for i in order.split(batch_size)]


@torch.no_grad()
def perplexity(model: NNLM, contexts: torch.Tensor, targets: torch.Tensor, batch_size: int = 4096) -> float:
    """PPL = exp(-(1/N) Σ_t log P(w_t | context_t)) over all N windows (every token of the text)."""
    if targets.numel() == 0:
        raise ValueError("no windows to evaluate: targets is empty; build contexts and targets with ngram_windows")
    check_inputs(model, contexts)
    with eval_mode(model):
        total = 0.0
        for x, y in window_batches(contexts, targets, batch_size):
            total += F.cross_entropy(model(x), y, reduction="sum").item()
    return math.exp(total / targets.numel())
