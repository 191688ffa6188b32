"""Scaled dot-product attention and multi-head attention (Vaswani et al., 2017, "Attention Is All You Need", §3.2).

Two routes compute the same numbers:

* :func:`scaled_dot_product_attention` is the equation written out, and returns the weights, so a
  reader can draw them as heatmaps (and hand them, per layer, to bertviz later in the course);
* the fast route calls ``torch.nn.functional.scaled_dot_product_attention``, a fused kernel that
  never returns the weights. :class:`MultiHeadAttention` takes it whenever no weights are asked for.

Masks follow PyTorch's convention for boolean masks in ``nn.MultiheadAttention``: **True means
"may not attend"** (a padding key, or a future position). Tensors are batch-first throughout:
``(batch, seq, d_model)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config_checks import check_heads, check_positive_ints, check_probability


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``(size, size)`` bool mask, True above the diagonal: position t may attend to positions ≤ t only.

    The decoder's self-attention uses it so that predicting token t cannot look at tokens after t
    ("masking out (setting to −∞) all values in the input of the softmax which correspond to illegal
    connections", §3.2.3).
    """
    if size < 1:
        raise ValueError(f"a causal mask needs at least one position, got size={size}")
    return torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)


def padding_mask(lengths: torch.Tensor | list[int], max_len: int | None = None) -> torch.Tensor:
    """``(batch, max_len)`` bool mask, True at padding positions (index ≥ the sequence's length)."""
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or len(lengths) == 0:
        raise ValueError(f"lengths must be a non-empty 1-D list of sequence lengths, got shape {tuple(lengths.shape)}")
    if (lengths < 1).any():
        raise ValueError("every sequence needs at least one real token; drop empty sequences first")
    width = int(lengths.max()) if max_len is None else max_len
    return torch.arange(width, device=lengths.device)[None, :] >= lengths[:, None]


def _combined_mask(key_padding_mask: torch.Tensor | None, attn_mask: torch.Tensor | None) -> torch.Tensor | None:
    """Merge a ``(batch, k_len)`` padding mask and a ``(q_len, k_len)`` or ``(batch, q_len, k_len)`` attention mask
    into one mask broadcastable to ``(batch, 1, q_len, k_len)`` (True = blocked), or None when neither is given."""
    mask = None if key_padding_mask is None else key_padding_mask[:, None, None, :]  # (B, 1, 1, n_k)
    if attn_mask is not None:
        extra = attn_mask[None, None] if attn_mask.dim() == 2 else attn_mask[:, None]  # (1 or B, 1, n_q, n_k)
        mask = extra if mask is None else mask | extra
    return mask


def _check_attention_inputs(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> None:
    if Q.size(-1) != K.size(-1) or K.size(-2) != V.size(-2):
        raise ValueError(f"Q (..., n_q, d_k), K (..., n_k, d_k) and V (..., n_k, d_v) must share d_k and n_k; "
                         f"got Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)}")


def _check_mask(mask: torch.Tensor | None, scores_shape: torch.Size) -> None:
    if mask is None:
        return
    try:  # the mask must broadcast to exactly the scores' shape, not enlarge them
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if mask.dtype != torch.bool or not fits:
        raise ValueError(f"mask must be a bool tensor broadcastable to the scores' shape {tuple(scores_shape)} "
                         f"(True = may not attend); got {mask.dtype} {tuple(mask.shape)}")


def scaled_dot_product_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor | None = None, dropout: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V   (eq. 1), written out.

    ``Q`` (..., n_q, d_k), ``K`` (..., n_k, d_k), ``V`` (..., n_k, d_v); ``mask`` broadcastable to
    (..., n_q, n_k), True where a query may not look. Returns the output (..., n_q, d_v) and the weights
    (..., n_q, n_k), each row a probability distribution over the keys.

    Dividing by √d_k keeps the dot products at unit variance when q and k have unit-variance
    components, so the softmax does not saturate as d_k grows (footnote 4 of the paper).
    """
    _check_attention_inputs(Q, K, V)
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)
    _check_mask(mask, scores.shape)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if dropout > 0.0:
        weights = F.dropout(weights, p=dropout)
    return weights @ V, weights


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) Wᴼ,  head_i = Attention(Q W_iᐞ, K W_iᴷ, V W_iⱽ)   (§3.2.2).

    The h projections W_iᐞ ∈ R^{d_model×d_k} are stored side by side as one ``d_model → h·d_k``
    linear layer per role (``w_q``, ``w_k``, ``w_v``), with d_k = d_v = d_model / h, so all heads are
    computed by one matrix product and then split. ``w_o`` is Wᴼ ∈ R^{h·d_v×d_model}.

    ``forward(query, key, value)`` takes ``(batch, n_q, d_model)`` and ``(batch, n_k, d_model)``
    tensors and returns ``(output, weights)``: output ``(batch, n_q, d_model)``; weights ``None``
    unless ``need_weights=True``, then per head ``(batch, h, n_q, n_k)`` (or averaged over heads,
    ``(batch, n_q, n_k)``, with ``average_heads=True``, like ``nn.MultiheadAttention``'s default).
    Without weights the fused kernel (``F.scaled_dot_product_attention``) does the work.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        check_positive_ints(self, ("d_model", "num_heads"))
        check_heads(d_model, num_heads)
        self.d_k, self.dropout = d_model // num_heads, check_probability(dropout, "dropout")
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, h·d_k) -> (batch, h, n, d_k)"""
        batch, n, _ = x.shape
        return x.view(batch, n, self.num_heads, self.d_k).transpose(1, 2)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        average_heads: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) Wᴼ,  head_i = softmax(Q W_iᐞ (K W_iᴷ)ᵀ / √d_k) V W_iⱽ,
        a query never looking where a mask is True (inputs as :func:`check_inputs` accepts them)."""
        B, n_q, _ = query.shape
        mask = _combined_mask(key_padding_mask, attn_mask)  # (B or 1, 1, n_q or 1, n_k), True = blocked; or None
        if causal and mask is not None:
            mask = mask | causal_mask(n_q, query.device)  # (B, 1, n_q, n_k)
        q = self._split_heads(self.w_q(query))  # Q W^Q, split: (B, h, n_q, d_k)
        k = self._split_heads(self.w_k(key))  # K W^K: (B, h, n_k, d_k)
        v = self._split_heads(self.w_v(value))  # V W^V: (B, h, n_k, d_k)
        p = self.dropout if self.training else 0.0
        if need_weights:
            if causal and mask is None:
                mask = causal_mask(n_q, query.device)
            heads, weights = scaled_dot_product_attention(q, k, v, mask, p)  # (B, h, n_q, d_k), (B, h, n_q, n_k)
        else:
            # the fused kernel's bool mask means the opposite: True = may attend
            heads = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None if mask is None else ~mask, dropout_p=p, is_causal=causal and mask is None
            )
            weights = None
        out = self.w_o(heads.transpose(1, 2).reshape(B, n_q, self.d_model))  # Concat(head_1..head_h) W^O: (B, n_q, d_model)
        if weights is not None and average_heads:
            weights = weights.mean(dim=1)  # (B, n_q, n_k)
        return out, weights

    @torch.no_grad()
    def load_from_torch(self, reference: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (same d_model and heads) into this module.

        PyTorch stacks Wᐞ, Wᴷ, Wⱽ into one ``in_proj_weight`` of shape (3·d_model, d_model).
        """
        if reference.embed_dim != self.d_model or reference.num_heads != self.num_heads:
            raise ValueError(f"reference has d_model={reference.embed_dim}, heads={reference.num_heads}; "
                             f"this module has {self.d_model}, {self.num_heads}")
        if reference.in_proj_weight is None:
            raise ValueError("reference uses separate key/value sizes (kdim/vdim); only the stacked form is supported")
        for layer, w in zip((self.w_q, self.w_k, self.w_v), reference.in_proj_weight.chunk(3)):
            layer.weight.copy_(w)
        if reference.in_proj_bias is not None:
            for layer, b in zip((self.w_q, self.w_k, self.w_v), reference.in_proj_bias.chunk(3)):
                layer.bias.copy_(b)
        self.w_o.weight.copy_(reference.out_proj.weight)
        if reference.out_proj.bias is not None:
            self.w_o.bias.copy_(reference.out_proj.bias)
        return self


def check_inputs(attention: MultiHeadAttention, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 key_padding_mask: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None,
                 causal: bool = False) -> None:
    """Refuse inputs that :meth:`MultiHeadAttention.forward` would misread, saying what is wrong."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim != 3 or x.size(-1) != attention.d_model:
            raise ValueError(f"{name} must have shape (batch, seq, d_model={attention.d_model}), got {tuple(x.shape)}")
        if x.size(0) == 0 or x.size(1) == 0:
            raise ValueError(f"{name} is empty (shape {tuple(x.shape)}): attention needs at least one position")
    (batch, n_q, _), n_k = query.shape, key.size(1)
    if value.shape[:2] != key.shape[:2] or query.size(0) != key.size(0):
        raise ValueError(f"query {tuple(query.shape)}, key {tuple(key.shape)} and value {tuple(value.shape)} "
                         f"must share the batch size, and key and value the sequence length")
    if causal and n_q != n_k:
        raise ValueError(f"causal=True needs as many queries as keys (self-attention), got {n_q} and {n_k}")
    for name, mask, shapes in (("key_padding_mask", key_padding_mask, [(batch, n_k)]),
                               ("attn_mask", attn_mask, [(n_q, n_k), (batch, n_q, n_k)])):
        if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) not in shapes):
            raise ValueError(f"{name} must be a bool tensor (True where attention is forbidden) of shape "
                             f"{' or '.join(map(str, shapes))}, got {mask.dtype} {tuple(mask.shape)}")
    mask = _combined_mask(key_padding_mask, attn_mask)
    if mask is not None and causal:
        mask = mask | causal_mask(n_q, query.device)
    if mask is not None and mask.all(dim=-1).any():
        raise ValueError("some query may attend to no key at all (every key masked); check the padding "
                         "mask: each sequence needs at least one real token")
