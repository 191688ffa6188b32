"""Transformer-XL: segment-level recurrence with relative positional attention (Dai et al. 2019, "Transformer-XL:
Attentive Language Models Beyond a Fixed-Length Context").

A GPT (notebook 09) reads text in fixed windows: the first token of a window sees nothing of the text before it,
and evaluating with a context of L tokens means re-running the whole window for every new token. Transformer-XL
keeps the hidden states of the previous segment and lets the current one attend to them (§3.2):

    h̃_{τ+1}^{n−1} = [SG(h_τ^{n−1}) ∘ h_{τ+1}^{n−1}]                       (memory, concatenated along time)
    q_{τ+1}^n, k_{τ+1}^n, v_{τ+1}^n = h_{τ+1}^{n−1} W_q, h̃_{τ+1}^{n−1} W_k, h̃_{τ+1}^{n−1} W_v
    h_{τ+1}^n = Transformer-Layer(q, k, v)

SG is stop-gradient: the memory is a constant, so training still back-propagates through one segment only, but
information flows forward across segments, one segment further per layer. Absolute positions no longer work (the
memory's position 0 and the segment's position 0 would look the same), so attention uses *relative* positions:
the score of query i on key j is (§3.3)

    A_{i,j}^rel = q_iᵀ k_j  +  q_iᵀ W_{k,R} R_{i−j}  +  uᵀ k_j  +  vᵀ W_{k,R} R_{i−j}
                  (a) content  (b) content-position  (c) global content bias  (d) global position bias

with q_i = W_q E_i, k_j = W_{k,E} E_j, R the sinusoid table of notebook 05 indexed by the *distance* i − j, and
u, v two learned vectors shared by every query position (they replace the query in (c) and (d)). Computing (b) and
(d) for every pair (i, j) directly gathers a different row of R per pair; :func:`rel_shift` gets the same numbers
from one matrix product and a reshape (appendix B); :func:`naive_relative_scores` writes the equation pair by pair.

``positions="absolute"`` with ``mem_len=0`` is the plain decoder of notebooks 05 and 09 (sinusoids added to the
embeddings, standard causal attention), which gives the same logits as lmlib's ``GPT``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config_checks import check_choice, check_heads, check_positive_ints, check_probability, check_token_ids
from .gpt import ACTIVATIONS, MLP, NORMS
from .multihead import scaled_dot_product_attention
from .positional import sinusoidal_encoding
from .state_dicts import normal_init

POSITIONS = ("relative", "absolute")


@dataclass
class TransformerXLConfig:
    """Sizes of a Transformer-XL. ``segment_len`` is the training segment (the paper's L); ``mem_len`` (M) how many
    earlier positions each layer keeps as memory, which may be raised for evaluation (``model.mem_len = ...``).

    ``positions="absolute"`` adds the sinusoids of positions 0..segment_len−1 to the embeddings instead and uses
    plain attention: with ``mem_len=0`` that is the vanilla decoder the paper compares against.
    ``scale_embeddings`` multiplies the token embeddings by √d_model (Vaswani et al. §3.4, notebook 05, and the
    paper's code): with N(0, 0.02) embeddings and sinusoids of amplitude 1, the positions would otherwise drown the
    tokens. The other fields mean what they mean in :class:`~lmlib.models.gpt.GPTConfig`.
    """

    vocab_size: int
    segment_len: int = 64
    mem_len: int = 64
    num_layers: int = 4
    num_heads: int = 4
    d_model: int = 128
    d_ff: int | None = None
    dropout: float = 0.0
    positions: str = "relative"
    norm: str = "pre"
    layer_norm_eps: float = 1e-5
    activation: str = "gelu_tanh"
    bias: bool = True
    scale_embeddings: bool = True

    def __post_init__(self):
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        check_positive_ints(self, ("vocab_size", "segment_len", "num_layers", "num_heads", "d_model", "d_ff"))
        check_positive_ints(self, ("mem_len",), minimum=0)  # 0: no memory
        check_heads(self.d_model, self.num_heads, head_multiple=2)  # the sinusoid pairs sin and cos
        check_probability(self.dropout, "dropout")
        check_choice(self, "positions", POSITIONS)
        check_choice(self, "norm", NORMS)
        check_choice(self, "activation", ACTIVATIONS)
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be positive (1e-5 as in GPT-2), got {self.layer_norm_eps}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


def relative_encoding(key_len: int, d_model: int) -> torch.Tensor:
    """``(key_len, d_model)``: row c is the sinusoid R_d of distance d = key_len − 1 − c (distances from key_len − 1
    down to 0), the order :func:`rel_shift` expects. Only distances matter, so any length works: unlike a learned
    table, nothing caps the context at evaluation time."""
    return sinusoidal_encoding(key_len, d_model).flip(0)


def rel_shift(scores: torch.Tensor) -> torch.Tensor:
    """Re-index ``(..., T, K)`` position scores from "column c = distance K−1−c" to "column j = key j" (appendix B).

    Query i of the segment sits at position M + i among the K = M + T keys (M memory positions first), so its
    distance to key j is M + i − j, which is column c = T − 1 − i + j of the input. Rather than gathering a
    different column per row, pad one zero column on the left, read the (T, K+1) block as (K+1, T), drop its first
    row and read the rest as (T, K): every row moves left by one more than the row above, which is exactly the
    shift wanted. Entries with j > M + i (future keys: negative distances) come out as leftovers and must be masked.
    """
    *lead, T, K = scores.shape
    padded = F.pad(scores, (1, 0))  # (..., T, K+1): a zero column in front
    padded = padded.view(*lead, K + 1, T)  # (..., K+1, T): the same numbers, read in rows of T
    return padded[..., 1:, :].reshape(*lead, T, K)  # (..., T, K): row i shifted left by T − 1 − i


def future_mask(query_len: int, mem_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``(T, M+T)`` bool, True where query i may **not** attend: key j lies after the query's own position M + i."""
    return torch.ones(query_len, mem_len + query_len, dtype=torch.bool, device=device).triu(diagonal=mem_len + 1)


def naive_relative_scores(q: torch.Tensor, k: torch.Tensor, rel: torch.Tensor, u: torch.Tensor,
                          v: torch.Tensor) -> torch.Tensor:
    """The four terms of A^rel, pair by pair, with two loops: the reference :func:`rel_shift` is tested against.

    ``q`` (H, T, hs) the segment's queries, ``k`` (H, K, hs) keys of memory + segment, ``rel`` (K, H, hs) with
    ``rel[d]`` = W_{k,R} R_d (the projected encoding of distance d), ``u``, ``v`` (H, hs). Returns the
    unscaled ``(H, T, K)`` scores, −inf where key j is in query i's future.
    """
    H, T, _ = q.shape
    K = k.size(1)
    M = K - T
    scores = torch.full((H, T, K), float("-inf"), dtype=q.dtype)
    for i in range(T):
        for j in range(K):
            d = M + i - j  # distance from query i (at position M + i) back to key j
            if d < 0:
                continue
            a = (q[:, i] * k[:, j]).sum(-1)  # (a) content: q_iᵀ k_j
            b = (q[:, i] * rel[d]).sum(-1)  # (b) content-dependent position bias: q_iᵀ W_{k,R} R_{i−j}
            c = (u * k[:, j]).sum(-1)  # (c) global content bias: uᵀ k_j
            e = (v * rel[d]).sum(-1)  # (d) global position bias: vᵀ W_{k,R} R_{i−j}
            scores[:, i, j] = a + b + c + e
    return scores


class RelativeSelfAttention(nn.Module):
    """Multi-head attention of a segment over [memory ∘ segment], scored by relative distance (or, with
    ``positions="absolute"``, by content alone, as in a GPT).

    ``qkv`` is one ``d_model → 3·d_model`` projection (W_q, W_{k,E}, W_v; no bias: a query bias is what u and v
    are, and a key bias adds the same amount to every score of a query, which the softmax ignores); ``r_proj`` is
    W_{k,R}. u and v belong to the model (one pair shared by all layers, as in the paper's equation) and are passed in.
    """

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        self.num_heads, self.d_model = config.num_heads, config.d_model
        self.relative = config.positions == "relative"
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.r_proj = nn.Linear(config.d_model, config.d_model, bias=False) if self.relative else None
        self.proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.attn_dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mem: torch.Tensor | None, u: torch.Tensor | None, v: torch.Tensor | None,
                need_weights: bool = False):
        B, T, C = x.shape  # batch, segment positions, d_model
        H, hs = self.num_heads, C // self.num_heads
        context = x if mem is None else torch.cat([mem, x], dim=1)  # (B, K, C): h̃ = [SG(memory) ∘ segment]
        K, M = context.size(1), context.size(1) - T
        q, k, val = self.qkv(context).split(C, dim=2)  # 3 × (B, K, C)
        q = q[:, M:].view(B, T, H, hs).transpose(1, 2)  # (B, H, T, hs): queries from the segment only
        k = k.view(B, K, H, hs).transpose(1, 2)  # (B, H, K, hs)
        val = val.view(B, K, H, hs).transpose(1, 2)  # (B, H, K, hs)
        mask = future_mask(T, M, x.device)  # (T, K)
        p = self.attn_dropout if self.training else 0.0
        if self.relative:
            r = self.r_proj(relative_encoding(K, C).to(x))  # (K, C): W_{k,R} R, distances K−1 .. 0
            r = r.view(K, H, hs).transpose(0, 1)  # (H, K, hs)
            ac = (q + u[:, None]) @ k.transpose(-2, -1)  # (B, H, T, K): terms (a) + (c)
            bd = rel_shift((q + v[:, None]) @ r.transpose(-2, -1))  # (B, H, T, K): terms (b) + (d), by key
            scores = ((ac + bd) / math.sqrt(hs)).masked_fill(mask, float("-inf"))  # (B, H, T, K)
            weights = torch.softmax(scores, dim=-1)  # (B, H, T, K)
            y = F.dropout(weights, p) @ val  # (B, H, T, hs)
        else:
            y, weights = scaled_dot_product_attention(q, k, val, mask, p)  # (B, H, T, hs), (B, H, T, K)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C): heads side by side
        return self.resid_dropout(self.proj(y)), (weights if need_weights else None)


class TransformerXLBlock(nn.Module):
    """One layer: attention over [memory ∘ segment], then the MLP, with GPT's residual and norm placement."""

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        self.pre_norm = config.norm == "pre"
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
        self.attn = RelativeSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, h, mem, u, v, need_weights=False):
        if self.pre_norm:
            a, weights = self.attn(self.ln_1(h), None if mem is None else self.ln_1(mem), u, v, need_weights)
            h = h + a  # (B, T, C)
            h = h + self.mlp(self.ln_2(h))  # (B, T, C)
        else:
            a, weights = self.attn(h, mem, u, v, need_weights)  # (B, T, C)
            h = self.ln_1(h + a)  # (B, T, C)
            h = self.ln_2(h + self.mlp(h))  # (B, T, C)
        return h, weights


class TransformerXL(nn.Module):
    """A Transformer-XL language model: ``logits, mems = model(idx, mems)``.

    ``idx`` is ``(batch, T)`` token ids of the next segment of each stream; ``mems`` the tuple returned for the
    previous segment (None at the start of the streams). ``logits`` ``(batch, T, vocab)`` score the next token at
    each position; the new ``mems`` hold, per layer, the last ``mem_len`` inputs of that layer (memory first,
    then this segment), detached from the graph. With ``return_attentions=True`` a third value holds each layer's
    ``(batch, heads, T, M+T)`` weights, keys in the order [memory ∘ segment].
    """

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        self.config = config
        self.mem_len = config.mem_len
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.emb_dropout = nn.Dropout(config.dropout)
        if config.positions == "absolute":
            self.register_buffer("absolute_pe", sinusoidal_encoding(config.segment_len, config.d_model),
                                 persistent=False)
            self.u = self.v = None
        else:
            self.u = nn.Parameter(torch.zeros(config.num_heads, config.head_dim))  # global content bias
            self.v = nn.Parameter(torch.zeros(config.num_heads, config.head_dim))  # global position bias
        self.blocks = nn.ModuleList(TransformerXLBlock(config) for _ in range(config.num_layers))
        self.ln_f = (nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
                     if config.norm == "pre" else nn.Identity())
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied, as in GPT
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """GPT-2's initialisation (N(0, 0.02), zero biases, projections into the residual stream scaled by
        1/√(2·num_layers)); u and v start at N(0, 0.02) too, as in the paper's code."""
        normal_init(self)
        if self.u is not None:
            nn.init.normal_(self.u, std=0.02)
            nn.init.normal_(self.v, std=0.02)
        for block in self.blocks:
            for proj in (block.attn.proj, block.mlp.proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * self.config.num_layers))

    def num_parameters(self) -> int:
        """Parameters counted once (the tied output layer is the token embedding)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, mems: tuple[torch.Tensor, ...] | None = None, return_attentions: bool = False):
        """Each layer n attends over h̃ = [SG(m^{n−1}) ∘ h^{n−1}] (§3.2) with relative-position scores (§3.3);
        returns the logits (B, T, V) and each layer's new memory (inputs as :func:`check_inputs` accepts them)."""
        h = self.tok_emb(idx) * (math.sqrt(self.config.d_model) if self.config.scale_embeddings else 1.0)  # (B, T, C)
        if self.config.positions == "absolute":
            h = h + self.absolute_pe[: idx.size(1)]  # (B, T, C): U W_e + PE, positions restart every segment
        h = self.emb_dropout(h)
        new_mems, attentions = [], []
        for layer, block in enumerate(self.blocks):
            mem = None if mems is None or mems[layer].size(1) == 0 else mems[layer]  # (B, M, C) or None
            if self.mem_len > 0:
                new_mems.append(self._updated_memory(mem, h))
            h, weights = block(h, mem, self.u, self.v, return_attentions)  # (B, T, C)
            attentions.append(weights)
        logits = self.lm_head(self.ln_f(h))  # (B, T, V)
        mems_out = tuple(new_mems) if self.mem_len > 0 else None
        return (logits, mems_out, tuple(attentions)) if return_attentions else (logits, mems_out)

    def _updated_memory(self, mem: torch.Tensor | None, layer_input: torch.Tensor) -> torch.Tensor:
        """SG([memory ∘ this segment's input to the layer]), keeping the last ``mem_len`` positions: ``(B, ≤M, C)``."""
        full = layer_input if mem is None else torch.cat([mem, layer_input], dim=1)  # (B, M+T, C)
        return full[:, max(0, full.size(1) - self.mem_len):].detach()


def check_inputs(model: TransformerXL, idx: torch.Tensor, mems: tuple[torch.Tensor, ...] | None = None) -> None:
    """Refuse a segment that :meth:`TransformerXL.forward` would misread, saying what to do: ``idx`` (batch, seq)
    integer ids inside the vocabulary (at most ``segment_len`` with absolute positions), ``mems`` the tuple the model
    returned for the previous segment of the same streams, and a ``mem_len`` of 0 or more."""
    c = model.config
    check_token_ids(idx, c.vocab_size, "idx", c.segment_len if c.positions == "absolute" else None,
                    " absolute positions; cut the text into segments of segment_len")
    check_positive_ints(model, ("mem_len",), minimum=0)
    if mems is None:
        return
    if not isinstance(mems, (tuple, list)) or len(mems) != c.num_layers:
        raise ValueError(f"mems must be the tuple of {c.num_layers} tensors this model returned for the previous "
                         f"segment (or None to start afresh), got {type(mems).__name__}"
                         f"{f' of length {len(mems)}' if isinstance(mems, (tuple, list)) else ''}")
    shape = (idx.size(0), mems[0].size(1), c.d_model) if mems[0].ndim == 3 else None
    for layer, mem in enumerate(mems):
        if mem.ndim != 3 or tuple(mem.shape) != shape:
            raise ValueError(f"mems[{layer}] has shape {tuple(mem.shape)}; every layer's memory must be "
                             f"(batch={idx.size(0)}, memory length, d_model={c.d_model}) with the same length: "
                             f"pass the mems returned for the previous segment of the same streams")


__all__ = ["TransformerXL", "TransformerXLConfig", "RelativeSelfAttention", "TransformerXLBlock", "check_inputs",
           "rel_shift", "relative_encoding", "future_mask", "naive_relative_scores"]
