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

import torch
import torch.nn.functional as F
from torch import nn

from .multihead import MultiHeadAttention, causal_mask
from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from .trainer import BatchResult


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
    pad_id: int = 0

    def __post_init__(self):
        if self.src_vocab_size < 2 or self.tgt_vocab_size < 2:
            raise ValueError(f"vocabularies need at least 2 entries, got {self.src_vocab_size}, {self.tgt_vocab_size}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        if self.d_model % 2 != 0:
            raise ValueError(f"d_model must be even for sin/cos positional pairs, got {self.d_model}")
        if min(self.num_encoder_layers, self.num_decoder_layers, self.d_ff, self.max_len) < 1:
            raise ValueError("layers, d_ff and max_len must all be at least 1")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
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
        def attend(h):
            return self.self_attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=need_weights)

        if self.norm_first:
            out, weights = attend(self.norm1(x))
            x = x + self.dropout1(out)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            out, weights = attend(x)
            x = self.norm1(x + self.dropout1(out))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x, weights


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
        def self_attend(h):
            return self.self_attn(h, h, h, causal=True, need_weights=need_weights)

        def cross_attend(h):
            return self.cross_attn(h, memory, memory, key_padding_mask=memory_padding_mask, need_weights=need_weights)

        if self.norm_first:
            out, self_w = self_attend(self.norm1(y))
            y = y + self.dropout1(out)
            out, cross_w = cross_attend(self.norm2(y))
            y = y + self.dropout2(out)
            y = y + self.dropout3(self.ffn(self.norm3(y)))
        else:
            out, self_w = self_attend(y)
            y = self.norm1(y + self.dropout1(out))
            out, cross_w = cross_attend(y)
            y = self.norm2(y + self.dropout2(out))
            y = self.norm3(y + self.dropout3(self.ffn(y)))
        return y, self_w, cross_w


@dataclass
class AttentionMaps:
    """Per-layer attention weights, each ``(batch, heads, query, key)``: bertviz's format."""

    encoder_self: list[torch.Tensor]
    decoder_self: list[torch.Tensor]
    cross: list[torch.Tensor]


class Transformer(nn.Module):
    """The encoder-decoder model. ``forward(src, src_mask, tgt_in)`` -> logits ``(batch, T, tgt_vocab)``.

    ``src`` (batch, S) ids with ``src_mask`` (batch, S) True at real tokens (as in
    :class:`lmlib.translation.Seq2SeqBatch`); ``tgt_in`` (batch, T) = ``<bos> y_1 .. y_{T-1}``.
    Embeddings are multiplied by √d_model (§3.4) so that they are not drowned by the positional
    encodings, whose entries are of size ~1, while the embedding entries start small.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model,
                                                                               padding_idx=c.pad_id)
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
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

    def _check_ids(self, name: str, ids: torch.Tensor, vocab_size: int) -> None:
        if ids.ndim != 2 or ids.dtype != torch.long:
            raise ValueError(f"{name} must be a (batch, seq) tensor of token ids (long), got "
                             f"{tuple(ids.shape)} {ids.dtype}")
        if ids.numel() == 0:
            raise ValueError(f"{name} is empty (shape {tuple(ids.shape)})")
        if ids.size(1) > self.config.max_len:
            raise ValueError(f"{name} has {ids.size(1)} positions, more than max_len={self.config.max_len}")

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False):
        """-> memory (batch, S, d_model) and the list of per-layer self-attention weights (empty unless asked)."""
        self._check_ids("src", src, self.config.src_vocab_size)
        if src_mask.shape != src.shape or src_mask.dtype != torch.bool:
            raise ValueError(f"src_mask must be a bool tensor shaped like src {tuple(src.shape)} (True at real "
                             f"tokens), got {tuple(src_mask.shape)} {src_mask.dtype}")
        x = self.src_pos(self.src_embed(src) * math.sqrt(self.config.d_model))
        maps = []
        for layer in self.encoder_layers:
            x, w = layer(x, ~src_mask, need_weights)
            if need_weights:
                maps.append(w)
        return self.encoder_norm(x), maps

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False):
        """-> logits (batch, T, tgt_vocab), decoder self-attention maps, cross-attention maps."""
        self._check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        y = self.tgt_pos(self.tgt_embed(tgt_in) * math.sqrt(self.config.d_model))
        self_maps, cross_maps = [], []
        for layer in self.decoder_layers:
            y, sw, cw = layer(y, memory, ~src_mask, need_weights)
            if need_weights:
                self_maps.append(sw)
                cross_maps.append(cw)
        return self.generator(self.decoder_norm(y)), self_maps, cross_maps

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, _ = self.encode(src, src_mask)
        return self.decode(tgt_in, memory, src_mask)[0]

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor) -> AttentionMaps:
        """Every attention weight of one teacher-forced pass, per layer ``(batch, heads, query, key)``."""
        was_training = self.training
        self.eval()
        memory, enc = self.encode(src, src_mask, need_weights=True)
        _, dec_self, cross = self.decode(tgt_in, memory, src_mask, need_weights=True)
        self.train(was_training)
        return AttentionMaps(enc, dec_self, cross)


def translation_loss(model: nn.Module, batch) -> BatchResult:
    """Mean cross-entropy per real target token of a :class:`lmlib.translation.Seq2SeqBatch`
    (padding ignored), with the number of tokens and how many the model predicted right."""
    logits = model(batch.src, batch.src_mask, batch.tgt_in)
    mask = batch.tgt_mask
    n = int(mask.sum())
    loss = F.cross_entropy(logits[mask], batch.tgt_out[mask])
    correct = int((logits.argmax(-1)[mask] == batch.tgt_out[mask]).sum())
    return BatchResult(loss, n, correct)


def label_smoothed_loss(epsilon: float = 0.1):
    """The same loss with label smoothing ε (§5.4: ε_ls = 0.1 "hurts perplexity ... but improves BLEU")."""
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon must be in [0, 1), got {epsilon}")

    def loss_fn(model: nn.Module, batch) -> BatchResult:
        logits = model(batch.src, batch.src_mask, batch.tgt_in)
        mask = batch.tgt_mask
        loss = F.cross_entropy(logits[mask], batch.tgt_out[mask], label_smoothing=epsilon)
        correct = int((logits.argmax(-1)[mask] == batch.tgt_out[mask]).sum())
        return BatchResult(loss, int(mask.sum()), correct)

    return loss_fn


def noam_schedule(d_model: int, warmup: int):
    """lrate = d_model^{-0.5} · min(step^{-0.5}, step · warmup^{-1.5})   (eq. 3), as a factor of step (0-based).

    Use it with ``LRSchedule`` and a base learning rate of 1.0 for the paper's exact rates.
    """
    if warmup < 1:
        raise ValueError(f"warmup must be at least 1 step, got {warmup}")

    def factor(step: int) -> float:
        step = step + 1
        return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)

    return factor


# -- decoding -------------------------------------------------------------------------------------------
@torch.no_grad()
def greedy_decode(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, bos_id: int, eos_id: int,
                  max_len: int) -> list[list[int]]:
    """Pick the most probable next token each step, for a whole batch at once; stops at ``<eos>``.

    Returns one id list per sentence, without ``<bos>`` and without the ``<eos>``. The decoder is re-run
    over the whole prefix each step (no key/value cache): simpler, and cheap for short sentences.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    was_training = model.training
    model.eval()
    memory, _ = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        next_token = model.decode(ys, memory, src_mask)[0][:, -1].argmax(-1)
        next_token = next_token.masked_fill(done, eos_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done |= next_token == eos_id
        if done.all():
            break
    model.train(was_training)
    return [_until_eos(row[1:].tolist(), eos_id) for row in ys]


def _until_eos(ids: list[int], eos_id: int) -> list[int]:
    return ids[: ids.index(eos_id)] if eos_id in ids else ids


def length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6)^α  (Wu et al., 2016, eq. 14); hypotheses are ranked by log P(Y) / lp(Y).

    Without it beam search prefers short outputs, since every extra token multiplies in a probability < 1.
    Vaswani et al. used beam size 4 and α = 0.6.
    """
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def beam_search(step_log_probs, bos_id: int, eos_id: int, max_len: int, beam_size: int = 4,
                alpha: float = 0.6) -> list[int]:
    """Keep the ``beam_size`` best prefixes by total log-probability; return the best finished one.

    ``step_log_probs(prefixes)`` maps a ``(k, t)`` tensor of k prefixes to ``(k, vocab)`` log-probabilities
    of the next token, so any model that can score a prefix can use this search. Finished hypotheses
    (ending in ``<eos>``) are ranked by log P / lp (:func:`length_penalty`); the search stops when
    ``beam_size`` of them are found or after ``max_len`` tokens. Returns ids without ``<bos>``/``<eos>``.
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(f"beam_size and max_len must be at least 1, got {beam_size} and {max_len}")
    prefixes = torch.tensor([[bos_id]])
    scores = torch.zeros(1)
    finished: list[tuple[float, list[int]]] = []
    for _ in range(max_len):
        log_probs = step_log_probs(prefixes)
        total = (scores[:, None] + log_probs).flatten()
        top_scores, top_index = total.topk(min(2 * beam_size, total.numel()))
        vocab = log_probs.size(1)
        keep_rows, keep_tokens, keep_scores = [], [], []
        for rank, (score, index) in enumerate(zip(top_scores.tolist(), top_index.tolist())):
            row, token = divmod(index, vocab)
            if token == eos_id:
                if rank < beam_size:  # an ending counts only if it is among the k best continuations
                    hyp = prefixes[row, 1:].tolist()
                    finished.append((score / length_penalty(len(hyp) + 1, alpha), hyp))
            else:
                keep_rows.append(row)
                keep_tokens.append(token)
                keep_scores.append(score)
            if len(keep_rows) == beam_size:
                break
        if len(finished) >= beam_size or not keep_rows:
            break
        prefixes = torch.cat([prefixes[keep_rows], torch.tensor(keep_tokens)[:, None]], dim=1)
        scores = torch.tensor(keep_scores)
    if not finished:  # nothing ended within max_len: fall back to the best unfinished prefix
        finished = [(float(s) / length_penalty(prefixes.size(1), alpha), p[1:].tolist()) for s, p in zip(scores, prefixes)]
    return max(finished, key=lambda f: f[0])[1]


@torch.no_grad()
def beam_decode(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, bos_id: int, eos_id: int,
                max_len: int, beam_size: int = 4, alpha: float = 0.6) -> list[list[int]]:
    """:func:`beam_search` for each sentence of a batch (the encoder runs once per sentence)."""
    was_training = model.training
    model.eval()
    outputs = []
    for i in range(src.size(0)):
        length = int(src_mask[i].sum())
        one_src, one_mask = src[i : i + 1, :length], src_mask[i : i + 1, :length]
        memory, _ = model.encode(one_src, one_mask)

        def step(prefixes: torch.Tensor) -> torch.Tensor:
            k = prefixes.size(0)
            logits = model.decode(prefixes.to(src.device), memory.expand(k, -1, -1), one_mask.expand(k, -1))[0]
            return torch.log_softmax(logits[:, -1].float(), dim=-1).cpu()

        outputs.append(beam_search(step, bos_id, eos_id, max_len, beam_size, alpha))
    model.train(was_training)
    return outputs


def translate(model: Transformer, sentences: list[str], src_vocab, tgt_vocab, method: str = "greedy",
              beam_size: int = 4, max_len: int | None = None) -> list[list[str]]:
    """English strings -> French token lists, tokenized and encoded as in :mod:`lmlib.translation`."""
    from .translation import BOS, EOS, encode_source, tokenize

    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    if not sentences:
        raise ValueError("no sentences to translate")
    device = next(model.parameters()).device
    src, src_mask = encode_source([tokenize(s, "en") if isinstance(s, str) else s for s in sentences], src_vocab)
    src, src_mask = src.to(device), src_mask.to(device)
    limit = max_len or min(model.config.max_len - 1, 2 * src.size(1) + 5)
    if method == "greedy":
        ids = greedy_decode(model, src, src_mask, tgt_vocab[BOS], tgt_vocab[EOS], limit)
    else:
        ids = beam_decode(model, src, src_mask, tgt_vocab[BOS], tgt_vocab[EOS], limit, beam_size)
    return [tgt_vocab.decode(row) for row in ids]


__all__ = ["TransformerConfig", "PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer",
           "AttentionMaps", "translation_loss", "label_smoothed_loss", "noam_schedule", "causal_mask",
           "greedy_decode", "beam_search", "beam_decode", "length_penalty", "translate"]
