"""Attention as a family of score functions behind one interface.

Every member turns a query and a set of keys into scores ``e_j``, normalizes them with a softmax
over the real (unmasked) positions, and returns the weighted average of the values:

    α_j = exp(e_j) / Σ_k exp(e_k),        c = Σ_j α_j v_j

They differ only in the score ``e_j = score(q, k_j)``:

============  =======================================  =================================
name          score                                    paper
============  =======================================  =================================
content       β · cos(q, k_j)                           Graves, Wayne & Danihelka 2014 (NTM)
additive      v_aᵀ tanh(W_a q + U_a k_j)                Bahdanau, Cho & Bengio 2015
location      (W_a q)_j  (ignores the keys' content)    Luong, Pham & Manning 2015
general       qᵀ W_a k_j                                Luong, Pham & Manning 2015
dot           qᵀ k_j                                    Luong, Pham & Manning 2015
scaled_dot    qᵀ k_j / √d_k                             Vaswani et al. 2017
============  =======================================  =================================

Shapes: ``query`` is ``(batch, d_q)`` (one query per example, as in an RNN decoder step) or
``(batch, m, d_q)`` (m queries at once); ``keys`` ``(batch, n, d_k)``; ``values`` ``(batch, n, d_v)``;
``mask`` ``(batch, n)`` or ``(batch, m, n)``, True at real positions. The call returns
``(context, weights)`` with shapes ``(batch, [m,] d_v)`` and ``(batch, [m,] n)``.

Masked positions get exactly zero weight (their score is set to -inf before the softmax). A query
whose keys are *all* masked has no distribution to return; that is an error, not a silent NaN.
Multi-head attention, which runs several scaled dot-products in parallel, lives in
:mod:`lmlib.models.multihead`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .config_checks import check_positive_ints


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """α_j = exp(e_j) / Σ_{k real} exp(e_k) over the last axis, with exactly 0 where ``mask`` is False.

    ``scores`` (..., n); ``mask`` a bool tensor broadcastable to it, True at real positions, with at least one
    real position per row (:func:`check_inputs` checks both).
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


class Attention(nn.Module):
    """Base class: subclasses define :meth:`score_prepared`; :meth:`forward` normalizes and averages.

    Subclasses with learned matrices set ``d_query`` and ``d_key`` (the widths their matrices were
    built for) so that :func:`check_inputs` can name the mismatch instead of failing inside a matmul.
    """

    name = "attention"
    d_query: int | None = None
    d_key: int | None = None

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """The part of the score that depends on the keys only. A decoder that attends to the same
        keys at every step computes it once per sentence and passes it as ``prepared_keys``."""
        return keys

    def score_prepared(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """Scores e, shape (batch, m, n), for query (batch, m, d_q) and ``prepare_keys(keys)``."""
        raise NotImplementedError

    def forward(self, query, keys, values, mask=None, prepared_keys=None) -> tuple[torch.Tensor, torch.Tensor]:
        """α_j = softmax_j(e_j) over the real keys, c = Σ_j α_j v_j, for one query ``(batch, d_q)`` or m
        queries ``(batch, m, d_q)`` at once (shapes: see the module docstring; :func:`check_inputs` checks them)."""
        single = query.dim() == 2
        query = query.unsqueeze(1) if single else query  # (batch, m, d_q)
        mask = mask.unsqueeze(1) if mask is not None and mask.dim() == 2 else mask  # (batch, 1 or m, n) or None
        prepared = self.prepare_keys(keys) if prepared_keys is None else prepared_keys
        scores = self.score_prepared(query, prepared)  # e: (batch, m, n)
        weights = masked_softmax(scores, mask)  # α: (batch, m, n)
        context = weights @ values  # c: (batch, m, d_v)
        if single:
            return context.squeeze(1), weights.squeeze(1)
        return context, weights


class ContentAttention(Attention):
    """Content-based addressing (Graves et al. 2014, eq. 5): e_j = β K[q, k_j], K the cosine similarity.

    ``beta`` (the key strength β > 0) sharpens (β large) or flattens (β small) the focus. No parameters.
    """

    name = "content"

    def __init__(self, beta: float = 1.0, eps: float = 1e-8):
        super().__init__()
        if beta <= 0:
            raise ValueError(f"key strength beta must be positive, got {beta}")
        self.beta, self.eps = beta, eps

    def prepare_keys(self, keys):
        return keys / keys.norm(dim=-1, keepdim=True).clamp_min(self.eps)

    def score_prepared(self, query, unit_keys):
        if query.shape[-1] != unit_keys.shape[-1]:
            raise ValueError(f"content (cosine) attention needs d_q == d_k, got {query.shape[-1]} and "
                             f"{unit_keys.shape[-1]}; use 'general' or 'additive' to learn a map between sizes")
        q = query / query.norm(dim=-1, keepdim=True).clamp_min(self.eps)
        return self.beta * (q @ unit_keys.transpose(1, 2))


class AdditiveAttention(Attention):
    """Bahdanau et al. 2015, eq. 6 (appendix A.1.2): e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j).

    W_a: (d_attn, d_q), U_a: (d_attn, d_k), v_a: (d_attn,). ``U_a h_j`` does not depend on the
    decoder step, so it is the prepared key: a decoder computes it once per sentence (the paper's remark).
    """

    name = "additive"

    def __init__(self, d_query: int, d_key: int, d_attn: int):
        super().__init__()
        self.d_query, self.d_key, self.d_attn = d_query, d_key, d_attn
        check_positive_ints(self, ("d_query", "d_key", "d_attn"))
        self.W_a = nn.Linear(d_query, d_attn, bias=False)
        self.U_a = nn.Linear(d_key, d_attn, bias=False)
        self.v_a = nn.Linear(d_attn, 1, bias=False)

    def prepare_keys(self, keys):
        return self.U_a(keys)

    def score_prepared(self, query, U_h):
        # (batch, m, 1, d_attn) + (batch, 1, n, d_attn) -> (batch, m, n, d_attn)
        hidden = torch.tanh(self.W_a(query).unsqueeze(2) + U_h.unsqueeze(1))
        return self.v_a(hidden).squeeze(-1)


class LocationAttention(Attention):
    """Luong et al. 2015, eq. 9: a_t = softmax(W_a h_t). The weights depend only on the query's
    position-predicting projection, not on what the keys contain.

    W_a: (max_keys, d_q). With n keys the first n scores are used, so n must not exceed ``max_keys``.
    """

    name = "location"

    def __init__(self, d_query: int, max_keys: int):
        super().__init__()
        self.d_query, self.max_keys = d_query, max_keys
        check_positive_ints(self, ("d_query", "max_keys"))
        self.W_a = nn.Linear(d_query, max_keys, bias=False)

    def score_prepared(self, query, keys):
        n = keys.shape[1]
        if n > self.max_keys:
            raise ValueError(f"location attention was built for at most {self.max_keys} keys, got {n}; "
                             "build it with a larger max_keys")
        return self.W_a(query)[..., :n]


class GeneralAttention(Attention):
    """Luong et al. 2015, eq. 8 ("general"): score(h_t, h̄_s) = h_tᵀ W_a h̄_s, W_a: (d_q, d_k)."""

    name = "general"

    def __init__(self, d_query: int, d_key: int):
        super().__init__()
        self.d_query, self.d_key = d_query, d_key
        check_positive_ints(self, ("d_query", "d_key"))
        self.W_a = nn.Parameter(torch.empty(d_query, d_key))
        nn.init.xavier_uniform_(self.W_a)

    def prepare_keys(self, keys):
        return keys @ self.W_a.T  # W_a h̄_s: (batch, n, d_q)

    def score_prepared(self, query, W_h):
        return query @ W_h.transpose(1, 2)


class DotAttention(Attention):
    """Luong et al. 2015, eq. 8 ("dot"): score(h_t, h̄_s) = h_tᵀ h̄_s; needs d_q == d_k."""

    name = "dot"

    def score_prepared(self, query, keys):
        if query.shape[-1] != keys.shape[-1]:
            raise ValueError(f"dot-product attention needs d_q == d_k, got {query.shape[-1]} and {keys.shape[-1]}; "
                             "use 'general' to learn a map between different sizes")
        return query @ keys.transpose(1, 2)


class ScaledDotAttention(DotAttention):
    """Vaswani et al. 2017, eq. 1: softmax(Q Kᵀ / √d_k) V. Dividing by √d_k keeps the scores' variance
    near 1 when q and k have unit-variance components, so the softmax does not saturate as d_k grows."""

    name = "scaled_dot"

    def score_prepared(self, query, keys):
        return super().score_prepared(query, keys) / math.sqrt(keys.shape[-1])


def check_inputs(attention: Attention, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                 mask: torch.Tensor | None = None, prepared_keys: torch.Tensor | None = None) -> None:
    """Refuse inputs :meth:`Attention.forward` would misread, naming the shapes: ``query`` ``(batch, [m,] d_q)``,
    ``keys`` and ``values`` ``(batch, n, d)`` with n ≥ 1, widths the score was built for, a bool ``mask``
    ``(batch, n)`` or ``(batch, m, n)`` leaving every query at least one real key."""
    query = query.unsqueeze(1) if query.dim() == 2 else query  # (batch, m, d_q)
    if keys.dim() != 3 or values.dim() != 3:
        raise ValueError(f"keys and values must be (batch, n, d); got keys {tuple(keys.shape)}, "
                         f"values {tuple(values.shape)}")
    if keys.shape[:2] != values.shape[:2]:
        raise ValueError(f"keys {tuple(keys.shape)} and values {tuple(values.shape)} must agree on (batch, n)")
    if keys.shape[1] == 0:  # a softmax over no keys has no distribution to return
        raise ValueError(f"there are no keys to attend to (keys {tuple(keys.shape)}, n = 0); "
                         "give every example at least one key")
    if query.dim() != 3 or query.shape[0] != keys.shape[0]:
        raise ValueError(f"query must be (batch, d_q) or (batch, m, d_q) with the keys' batch size "
                         f"{keys.shape[0]}; got {tuple(query.shape)}")
    batch, m, n = query.shape[0], query.shape[1], keys.shape[1]
    if attention.d_query is not None and query.shape[-1] != attention.d_query:
        raise ValueError(f"{attention.name} attention was built for queries of width d_q={attention.d_query}, "
                         f"got {query.shape[-1]} (query {tuple(query.shape)})")
    # prepared keys have the score's own width; only raw keys can be checked against d_k
    if prepared_keys is None and attention.d_key is not None and keys.shape[-1] != attention.d_key:
        raise ValueError(f"{attention.name} attention was built for keys of width d_k={attention.d_key}, "
                         f"got {keys.shape[-1]} (keys {tuple(keys.shape)})")
    if prepared_keys is not None and prepared_keys.shape[:2] != keys.shape[:2]:
        raise ValueError(f"prepared_keys {tuple(prepared_keys.shape)} must agree with keys "
                         f"{tuple(keys.shape)} on (batch, n); pass prepare_keys(keys)")
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = real position), got dtype {mask.dtype}")
    mask = mask.unsqueeze(1) if mask.dim() == 2 else mask
    if mask.dim() != 3 or mask.shape[0] != batch or mask.shape[1] not in (1, m) or mask.shape[2] != n:
        raise ValueError(f"mask must be (batch, n) = {(batch, n)} or (batch, m, n) = {(batch, m, n)}; "
                         f"got {tuple(mask.shape)}")
    empty = ~mask.any(dim=-1)
    if empty.any():
        raise ValueError(f"every key is masked for query rows {empty.nonzero().tolist()[:3]}: a softmax over no "
                         "positions is undefined; give each query at least one real key (or drop the fully padded "
                         "rows)")


SCORE_FUNCTIONS = ("content", "additive", "location", "general", "dot", "scaled_dot")


def make_attention(name: str, d_query: int, d_key: int, d_attn: int | None = None, max_keys: int = 64,
                   beta: float = 1.0) -> Attention:
    """Build a member of the family by name (one of :data:`SCORE_FUNCTIONS`)."""
    if name == "content":
        return ContentAttention(beta)
    if name == "additive":
        return AdditiveAttention(d_query, d_key, d_attn or d_key)
    if name == "location":
        return LocationAttention(d_query, max_keys)
    if name == "general":
        return GeneralAttention(d_query, d_key)
    if name == "dot":
        return DotAttention()
    if name == "scaled_dot":
        return ScaledDotAttention()
    raise ValueError(f"unknown attention {name!r}; choose one of {', '.join(SCORE_FUNCTIONS)}")
