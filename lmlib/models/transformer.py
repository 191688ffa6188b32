"""The Transformer encoder-decoder of Vaswani et al. (2017), "Attention Is All You Need".

    x → Embedding·√d_model + PE → N × EncoderLayer → memory
    y → Embedding·√d_model + PE → N × DecoderLayer(masked self-attn, cross-attn to memory) → linear → softmax

Every sub-layer (attention or feed-forward) is wrapped in a residual connection and a layer norm
(§3.1). The paper puts the norm *after* the residual sum ("post-norm"): LayerNorm(x + Sublayer(x)).
Most later models put it *before* the sub-layer ("pre-norm", Xiong et al. 2020): x + Sublayer(LayerNorm(x)),
plus one final norm after the stack. Pre-norm leaves an identity path from input to output untouched by
any norm, so gradients reach the lower layers at full strength and training is stable without a long
learning-rate warm-up; post-norm rescales the residual stream after every block, which needs warm-up
but often ends slightly better when it trains. ``norm_first`` chooses.

Attention weights can be returned per layer and per head, shaped ``(batch, heads, query, key)``:
exactly what bertviz's ``head_view`` / ``model_view`` want, one tensor per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime import eval_mode
from ..text.vocab import check_special_ids
from .config_checks import check_choice, check_heads, check_positive_ints, check_probability, check_token_ids
from .multihead import MultiHeadAttention, causal_mask
from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding


@dataclass
class TransformerConfig:
    """Sizes of the model; the paper's base model is d_model=512, heads=8, layers=6, d_ff=2048, dropout=0.1."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 128
    num_heads: int = 4
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 512
    dropout: float = 0.1
    max_len: int = 128
    positional: str = "sinusoidal"  # or "learned"
    norm_first: bool = False  # False: post-norm as in the paper; True: pre-norm
    share_embeddings: bool = False  # one table for source and target (needs one joint vocabulary)
    tie_output: bool = True  # the pre-softmax projection reuses the target embedding matrix (§3.4)
    pad_id: int = 0  # the ids of lmlib.text.translation's specials: <pad> <unk> <bos> <eos>
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self):
        check_positive_ints(self, ("src_vocab_size", "tgt_vocab_size"), minimum=2)
        check_positive_ints(self, ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff", "max_len"))
        check_heads(self.d_model, self.num_heads)
        if self.d_model % 2 != 0:
            raise ValueError(f"d_model must be even for sin/cos positional pairs, got {self.d_model}")
        check_probability(self.dropout, "dropout")
        check_choice(self, "positional", ("sinusoidal", "learned"))
        check_special_ids(self, self.src_vocab_size, self.tgt_vocab_size)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("share_embeddings needs one joint vocabulary (equal sizes), got "
                             f"{self.src_vocab_size} and {self.tgt_vocab_size}; build a joint Vocab or set it False")


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2   (eq. 2): the same two-layer MLP at every position."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention then FFN, each as LayerNorm(x + Dropout(Sublayer(x))) (or pre-norm, see module doc).

    Parameter names mirror ``nn.TransformerEncoderLayer`` (``linear1``, ``norm1``...) so weights copy across.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None, need_weights: bool = False):
        """``x`` (batch, S, d_model), ``key_padding_mask`` (batch, S) True at padding -> (x, weights | None)."""
        attend = dict(key_padding_mask=key_padding_mask, need_weights=need_weights)
        if self.norm_first:  # x + Sublayer(LayerNorm(x))
            h = self.norm1(x)
            out, weights = self.self_attn(h, h, h, **attend)
            x = x + self.dropout1(out)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:  # LayerNorm(x + Sublayer(x))
            out, weights = self.self_attn(x, x, x, **attend)
            x = self.norm1(x + self.dropout1(out))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x, weights  # (B, S, d_model), (B, h, S, S) or None


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, FFN; each with residual + norm (§3.1)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))
        self.norm_first = norm_first

    def forward(self, y, memory, memory_padding_mask=None, need_weights: bool = False):
        """``y`` (batch, T, d_model), ``memory`` (batch, S, d_model), ``memory_padding_mask`` (batch, S)
        True at padding. Returns (y, self-attention weights | None, cross-attention weights | None).

        The self-attention is causal, so position t sees targets ≤ t only. Padding at the end of a
        target needs no mask of its own: real positions never look right, and the loss ignores pads.
        """
        cross = dict(key_padding_mask=memory_padding_mask, need_weights=need_weights)
        if self.norm_first:  # y + Sublayer(LayerNorm(y))
            h = self.norm1(y)
            out, self_w = self.self_attn(h, h, h, causal=True, need_weights=need_weights)
            y = y + self.dropout1(out)
            out, cross_w = self.cross_attn(self.norm2(y), memory, memory, **cross)
            y = y + self.dropout2(out)
            y = y + self.dropout3(self.ffn(self.norm3(y)))
        else:  # LayerNorm(y + Sublayer(y))
            out, self_w = self.self_attn(y, y, y, causal=True, need_weights=need_weights)
            y = self.norm1(y + self.dropout1(out))
            out, cross_w = self.cross_attn(y, memory, memory, **cross)
            y = self.norm2(y + self.dropout2(out))
            y = self.norm3(y + self.dropout3(self.ffn(y)))
        return y, self_w, cross_w  # (B, T, d_model), (B, h, T, T) or None, (B, h, T, S) or None


class DecoderState(NamedTuple):
    """What decoding one more token needs: the target prefix so far (batch, t) and the encoder output.

    Unlike an RNN, the decoder has no running state: each step re-reads the whole prefix (a key/value
    cache would avoid recomputing the earlier positions; for sentences of ten words it is not worth it).
    """

    prefix: torch.Tensor
    memory: torch.Tensor
    src_mask: torch.Tensor


@dataclass
class AttentionMaps:
    """Per-layer attention weights, each ``(batch, heads, query, key)``: bertviz's format."""

    encoder_self: list[torch.Tensor]
    decoder_self: list[torch.Tensor]
    cross: list[torch.Tensor]


class Transformer(nn.Module):
    """The encoder-decoder model. ``forward(src, src_mask, tgt_in)`` -> logits ``(batch, T, tgt_vocab)``.

    ``src`` (batch, S) ids with ``src_mask`` (batch, S) True at real tokens (as in
    :class:`lmlib.text.translation.Seq2SeqBatch`); ``tgt_in`` (batch, T) = ``<bos> y_1 .. y_{T-1}``.
    Embeddings are multiplied by √d_model (§3.4) so that they are not drowned by the positional
    encodings, whose entries are of size ~1, while the embedding entries start small.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model,
                                                                               padding_idx=c.pad_id)
        for emb in dict.fromkeys((self.src_embed, self.tgt_embed)):  # once when shared
            nn.init.normal_(emb.weight, std=c.d_model ** -0.5)  # times √d_model gives unit-variance inputs
            with torch.no_grad():
                emb.weight[c.pad_id].zero_()
        Positional = SinusoidalPositionalEncoding if c.positional == "sinusoidal" else LearnedPositionalEncoding
        self.src_pos = Positional(c.d_model, c.max_len, c.dropout)
        self.tgt_pos = Positional(c.d_model, c.max_len, c.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
                                            for _ in range(c.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
                                            for _ in range(c.num_decoder_layers))
        # pre-norm stacks end with a norm: their residual stream is otherwise never normalized
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)
        if c.tie_output:
            self.generator.weight = self.tgt_embed.weight

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False):
        """-> memory (batch, S, d_model) and the list of per-layer self-attention weights (empty unless asked)."""
        x = self.src_pos(self.src_embed(src) * math.sqrt(self.config.d_model))  # E x · √d_model + PE: (B, S, d_model)
        maps = []
        for layer in self.encoder_layers:
            x, w = layer(x, ~src_mask, need_weights)  # (B, S, d_model), (B, h, S, S) or None
            if need_weights:
                maps.append(w)
        return self.encoder_norm(x), maps

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False,
               last_only: bool = False):
        """-> logits (batch, T, tgt_vocab), decoder self-attention maps, cross-attention maps.

        ``last_only`` projects only the last position to the vocabulary (batch, 1, tgt_vocab): all that
        decoding needs, and the projection is the most expensive matrix product of a small model.
        """
        y = self.tgt_pos(self.tgt_embed(tgt_in) * math.sqrt(self.config.d_model))  # (B, T, d_model)
        self_maps, cross_maps = [], []
        for layer in self.decoder_layers:
            y, sw, cw = layer(y, memory, ~src_mask, need_weights)  # (B, T, d_model); maps (B, h, T, T), (B, h, T, S)
            if need_weights:
                self_maps.append(sw)
                cross_maps.append(cw)
        if last_only:
            y = y[:, -1:]
        return self.generator(self.decoder_norm(y)), self_maps, cross_maps

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, _ = self.encode(src, src_mask)
        return self.decode(tgt_in, memory, src_mask)[0]

    # -- the step interface of lmlib.models.seq2seq's greedy_decode and beam_search ---------------------------
    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> DecoderState:
        memory, _ = self.encode(src, src_mask)
        return DecoderState(src.new_empty(src.size(0), 0), memory, src_mask)

    def step(self, y_prev: torch.Tensor, state: DecoderState):
        """Append y_prev (batch,) to the prefix -> (log p(next | prefix, x) (batch, V), new state,
        last layer's cross-attention of the new position averaged over heads (batch, S))."""
        prefix = torch.cat([state.prefix, y_prev[:, None]], dim=1)
        logits, _, cross = self.decode(prefix, state.memory, state.src_mask, need_weights=True, last_only=True)
        weights = cross[-1][:, :, -1].mean(dim=1)
        return torch.log_softmax(logits[:, -1], dim=-1), DecoderState(prefix, state.memory, state.src_mask), weights

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor) -> AttentionMaps:
        """Every attention weight of one teacher-forced pass, per layer ``(batch, heads, query, key)``."""
        with eval_mode(self):
            memory, enc = self.encode(src, src_mask, need_weights=True)
            _, dec_self, cross = self.decode(tgt_in, memory, src_mask, need_weights=True)
        return AttentionMaps(enc, dec_self, cross)


def check_inputs(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor,
                 tgt_in: torch.Tensor | None = None) -> None:
    """Refuse inputs that :meth:`Transformer.forward` (or ``encode``/``decode``) would misread, saying what is
    wrong: ids ``(batch, seq)`` (long) inside their vocabulary and ``max_len``, ``src_mask`` a bool tensor shaped
    like ``src``."""
    c = model.config
    for name, ids, vocab_size in (("src", src, c.src_vocab_size), ("tgt_in", tgt_in, c.tgt_vocab_size)):
        if ids is not None:
            check_token_ids(ids, vocab_size, name, c.max_len, " positions (max_len)")
    if src_mask.shape != src.shape or src_mask.dtype != torch.bool:
        raise ValueError(f"src_mask must be a bool tensor shaped like src {tuple(src.shape)} (True at real "
                         f"tokens), got {tuple(src_mask.shape)} {src_mask.dtype}")


# -- decoding -------------------------------------------------------------------------------------------
# Greedy and beam search live in lmlib.models.seq2seq and drive any model through start()/step() (see
# Transformer.start); translate() below is the string-to-string convenience used in the notebook.

def translate(model: Transformer, sentences: list[str] | list[list[str]], src_vocab, tgt_vocab,
              method: str = "greedy", beam_size: int = 4, alpha: float = 1.0,
              max_len: int | None = None) -> list[list[str]]:
    """English sentences (strings or token lists) -> French token lists, greedy or by beam search."""
    from ..text.translation import encode_source, tokenize
    from .seq2seq import beam_search, greedy_decode

    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    if not sentences:
        raise ValueError("no sentences to translate")
    device = next(model.parameters()).device
    tokens = [tokenize(s, "en") if isinstance(s, str) else list(s) for s in sentences]
    src, src_mask = encode_source(tokens, src_vocab)
    check_inputs(model, src, src_mask)
    src, src_mask = src.to(device), src_mask.to(device)
    limit = max_len or min(model.config.max_len - 1, 2 * src.size(1) + 5)
    if method == "greedy":
        ids, _, _ = greedy_decode(model, src, src_mask, limit)
    else:
        ids = []
        for i in range(src.size(0)):
            n = int(src_mask[i].sum())
            ids.append(beam_search(model, src[i:i + 1, :n], src_mask[i:i + 1, :n], beam_size, limit, alpha)[0].tokens)
    return [tgt_vocab.decode(row) for row in ids]


__all__ = ["TransformerConfig", "PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer",
           "AttentionMaps", "DecoderState",
           "causal_mask", "check_inputs", "translate"]
