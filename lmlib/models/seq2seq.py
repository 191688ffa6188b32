"""RNN encoder-decoder translation, with a fixed context or with soft attention; greedy and beam decoding.

* Cho et al. 2014 ("Learning phrase representations using RNN encoder-decoder"), Sutskever, Vinyals &
  Le 2014: the encoder reads x_1..x_S into one fixed-length vector C; the decoder models
  p(y_i | y_<i, x) = g(y_{i-1}, s_i, C) with s_i = f(s_{i-1}, y_{i-1}, C). Everything the decoder knows
  about the source passes through C: the *bottleneck*.
* Bahdanau, Cho & Bengio 2015 ("Neural machine translation by jointly learning to align and
  translate"): a bidirectional encoder gives annotations h_j = [→h_j; ←h_j], and each decoder step
  gets its own context c_i = Σ_j α_ij h_j with α_ij = softmax_j a(s_{i-1}, h_j).

Both models here share the same bidirectional GRU encoder and the same decoder; the only difference
is where the context comes from (``attention=None``: C = [→h_S; ←h_1], the same at every step; else
c_i from any score function of :mod:`lmlib.models.attention`). Simplifications against the papers, so it
trains in seconds on a CPU: GRUs of a few hundred units instead of 1000, a linear output layer
instead of Bahdanau's maxout, no dropout by default. Beam search ranks translations by length-normalized
log-probability (Wu et al. 2016 use a smoothed variant of the same idea).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..runtime import eval_mode
from ..text.vocab import check_special_ids
from .attention import SCORE_FUNCTIONS, make_attention
from .config_checks import check_choice, check_positive_ints, check_probability, check_token_ids


@dataclass
class Seq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    embed_size: int = 64
    hidden_size: int = 128
    attention: str | None = "additive"
    dropout: float = 0.0
    pad_id: int = 0
    bos_id: int = 2
    eos_id: int = 3
    max_src_len: int = 64

    def __post_init__(self):
        check_positive_ints(self, ("src_vocab_size", "tgt_vocab_size", "embed_size", "hidden_size", "max_src_len"))
        check_probability(self.dropout, "dropout")
        check_choice(self, "attention", (None, *SCORE_FUNCTIONS))  # None: a fixed context
        check_special_ids(self, self.src_vocab_size, self.tgt_vocab_size)


class Encoded(NamedTuple):
    """Encoder output: annotations h (batch, S, 2·hidden), the source mask (batch, S), the
    fixed-length summary C = [→h_S; ←h_1] (batch, 2·hidden), and the attention keys in the form the
    score function wants them (computed once per sentence; the annotations again without attention)."""

    annotations: torch.Tensor
    mask: torch.Tensor
    summary: torch.Tensor
    keys: torch.Tensor


class DecoderState(NamedTuple):
    """What one decoder step needs: s_{i-1} (batch, hidden) and the encoder output."""

    hidden: torch.Tensor
    encoded: Encoded


class Seq2Seq(nn.Module):
    """Bidirectional-GRU encoder and GRU decoder; fixed context or attention (see module docstring)."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.embed_size, padding_idx=c.pad_id)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.embed_size, padding_idx=c.pad_id)
        self.encoder = nn.GRU(c.embed_size, c.hidden_size, batch_first=True, bidirectional=True)
        d_ctx = 2 * c.hidden_size
        self.init_state = nn.Linear(d_ctx, c.hidden_size)
        self.attention = (None if c.attention is None else
                          make_attention(c.attention, c.hidden_size, d_ctx, d_attn=c.hidden_size, max_keys=c.max_src_len))
        if c.attention in ("dot", "scaled_dot", "content"):
            # dot products and cosines need the query and keys in one space: project the annotations to hidden
            self.key_proj = nn.Linear(d_ctx, c.hidden_size, bias=False)
        self.decoder = nn.GRUCell(c.embed_size + d_ctx, c.hidden_size)
        # a small "deep output" layer before the softmax (Bahdanau use a maxout layer of 500 units):
        # it keeps the big vocabulary projection cheap, from embed_size units instead of hidden + emb + 2·hidden
        self.readout = nn.Linear(c.hidden_size + c.embed_size + d_ctx, c.embed_size)
        self.output = nn.Linear(c.embed_size, c.tgt_vocab_size)
        self.dropout = nn.Dropout(c.dropout)

    # -- encoder -------------------------------------------------------------------------------------
    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Encoded:
        """src (batch, S) token ids (long), src_mask (batch, S) bool, True at real tokens; each row's real
        tokens come first (right padding), as :func:`lmlib.text.translation.encode_source` builds them."""
        lengths = src_mask.sum(1)  # (batch,): real tokens per row
        emb = self.dropout(self.src_embed(src))  # (batch, S, embed_size)
        # packing skips the padding; PyTorch takes the lengths on the CPU
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, last = self.encoder(packed)
        annotations, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        # last: (2, batch, hidden) = final forward state →h_S and final backward state ←h_1
        summary = torch.cat([last[0], last[1]], dim=-1)
        keys = annotations
        if self.attention is not None:
            keys = self.key_proj(annotations) if hasattr(self, "key_proj") else annotations
            keys = self.attention.prepare_keys(keys)
        return Encoded(annotations, src_mask, summary, keys)

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> DecoderState:
        """Encode and give the first decoder state s_0 = tanh(W_s C) (Bahdanau use ←h_1 alone)."""
        encoded = self.encode(src, src_mask)
        return DecoderState(torch.tanh(self.init_state(encoded.summary)), encoded)

    # -- decoder -------------------------------------------------------------------------------------
    def context(self, s_prev: torch.Tensor, encoded: Encoded) -> tuple[torch.Tensor, torch.Tensor | None]:
        """c_i (batch, 2·hidden) and α_i (batch, S); C and None without attention."""
        if self.attention is None:
            return encoded.summary, None
        return self.attention(s_prev, encoded.keys, encoded.annotations, encoded.mask, prepared_keys=encoded.keys)

    def _advance(self, y_prev: torch.Tensor, state: DecoderState):
        """c_i = Σ_j α_ij h_j with α_ij from a(s_{i-1}, h_j);  s_i = GRU([E y_{i-1}; c_i], s_{i-1});
        t_i = tanh(W_t [s_i; E y_{i-1}; c_i]). Returns t_i (batch, embed_size), the next state, α_i or None."""
        emb = self.dropout(self.tgt_embed(y_prev))  # E y_{i-1}: (batch, embed_size)
        ctx, weights = self.context(state.hidden, state.encoded)  # c_i: (batch, 2·hidden), α_i: (batch, S) or None
        s = self.decoder(torch.cat([emb, ctx], dim=-1), state.hidden)  # s_i: (batch, hidden)
        t = torch.tanh(self.readout(torch.cat([s, emb, ctx], dim=-1)))  # t_i: (batch, embed_size)
        return self.dropout(t), DecoderState(s, state.encoded), weights

    def step(self, y_prev: torch.Tensor, state: DecoderState):
        """One decoder step: y_{i-1} (batch,) -> log p(y_i | y_<i, x) = log softmax(W_o t_i) (batch, V),
        the next state, and α_i (batch, S) or None."""
        t, state, weights = self._advance(y_prev, state)
        return F.log_softmax(self.output(t), dim=-1), state, weights

    def forward(self, src, src_mask, tgt_in) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: log-probabilities (batch, T, V) for tgt_in (batch, T), and the attention
        weights (batch, T, S) (None for the fixed-context model)."""
        state = self.start(src, src_mask)
        readouts, alphas = [], []
        for i in range(tgt_in.shape[1]):
            t, state, weights = self._advance(tgt_in[:, i], state)  # t_i: (batch, embed_size)
            readouts.append(t)
            alphas.append(weights)
        # one vocabulary projection for all steps at once is much faster than one per step
        logp = F.log_softmax(self.output(torch.stack(readouts, 1)), dim=-1)  # (batch, T, V)
        return logp, (None if self.attention is None else torch.stack(alphas, 1))  # α: (batch, T, S)


def check_inputs(model: Seq2Seq, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor | None = None) -> None:
    """Refuse a batch the model would misread, saying what to do: long ids, a bool mask, right padding, no empty
    row, within ``max_src_len`` and the vocabulary; ``tgt_in`` (batch, T)."""
    check_token_ids(src, model.config.src_vocab_size, "src", model.config.max_src_len, " positions (max_src_len)")
    if src_mask.shape != src.shape or src_mask.dtype != torch.bool:
        raise ValueError(f"src_mask must be a bool tensor shaped like src {tuple(src.shape)}, True at real tokens, "
                         f"got {src_mask.dtype} {tuple(src_mask.shape)}; encode_source builds it")
    lengths = src_mask.sum(1)
    if (lengths == 0).any():
        raise ValueError(f"source sentences {(lengths == 0).nonzero().flatten().tolist()[:3]} are empty; every row "
                         f"needs at least one real token (e.g. <eos>)")
    # the GRU is packed by length, so a mask with a hole would silently read the padding as words
    prefix = torch.arange(src.shape[1], device=src.device)[None, :] < lengths[:, None]
    if not torch.equal(prefix, src_mask):
        rows = (prefix != src_mask).any(1).nonzero().flatten().tolist()[:3]
        raise ValueError(f"src_mask rows {rows} have padding before a real token; real tokens must come "
                         "first in each row (right padding)")
    if tgt_in is not None and (tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0]):
        raise ValueError(f"tgt_in must be (batch, T) with batch {src.shape[0]}, got {tuple(tgt_in.shape)}")


# -- decoding ------------------------------------------------------------------------------------------
def _select(state, index: torch.Tensor):
    """Pick rows ``index`` of every tensor in a decoder state (a tensor or a named tuple of them, nested): how
    beams are reordered."""
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index)
    return type(state)(*(_select(s, index) for s in state))


class Hypothesis(NamedTuple):
    tokens: list[int]
    log_prob: float
    score: float


def _check_decoding(src: torch.Tensor, max_len: int, beam_size: int | None = None) -> None:
    if beam_size is not None and src.shape[0] != 1:
        raise ValueError(f"beam_search decodes one sentence at a time; got a batch of {src.shape[0]}")
    if beam_size is not None and beam_size < 1:
        raise ValueError(f"beam_size is the number of prefixes kept and must be at least 1, got {beam_size}")
    if max_len < 1:
        raise ValueError(f"max_len is the number of decoding steps and must be at least 1, got {max_len}")


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, src_mask: torch.Tensor, max_len: int = 20):
    """ŷ_i = argmax_y p(y | ŷ_<i, x), for a batch. Returns (token lists without <eos>, log-probabilities
    of those sequences including <eos> when it was produced, attention weights (batch, steps, S) or None)."""
    _check_decoding(src, max_len)
    bos, eos = model.config.bos_id, model.config.eos_id
    with eval_mode(model):
        state = model.start(src, src_mask)
        batch = src.shape[0]
        y = torch.full((batch,), bos, dtype=torch.long, device=src.device)
        done = torch.zeros(batch, dtype=torch.bool, device=src.device)
        tokens, total, alphas = [[] for _ in range(batch)], torch.zeros(batch), []
        for _ in range(max_len):
            logp, state, weights = model.step(y, state)
            y = logp.argmax(-1)
            total += torch.where(done, 0.0, logp.gather(-1, y[:, None]).squeeze(-1)).cpu()
            alphas.append(weights)
            for b in (~done).nonzero().flatten().tolist():
                if y[b].item() != eos:
                    tokens[b].append(y[b].item())
            done |= y == eos
            if done.all():
                break
    weights = None if alphas[0] is None else torch.stack(alphas, 1)
    return tokens, total.tolist(), weights


@torch.no_grad()
def beam_search(model, src: torch.Tensor, src_mask: torch.Tensor, beam_size: int = 5, max_len: int = 20,
                alpha: float = 1.0) -> list[Hypothesis]:
    """Beam search for one sentence (src: (1, S)); finished hypotheses, best first.

    Each step extends every live prefix by every word, keeps the ``beam_size`` best by total log-probability
    log p(y_1..y_i | x), and moves prefixes that just produced <eos> to the finished list. The finished
    ones are ranked by score = log p(y | x) / |y|**alpha, with |y| counting <eos>: alpha = 0 is raw
    log-probability (which favours short outputs), alpha = 1 the mean log-probability per word.
    With beam_size = 1 this is exactly greedy decoding.
    """
    _check_decoding(src, max_len, beam_size)
    bos, eos = model.config.bos_id, model.config.eos_id
    with eval_mode(model):
        state = model.start(src, src_mask)
        prefixes: list[list[int]] = [[]]
        scores = torch.zeros(1)
        y = torch.tensor([bos], device=src.device)
        finished: list[Hypothesis] = []

        def rank(tokens, log_prob):
            return Hypothesis(tokens, log_prob, log_prob / max(len(tokens) + 1, 1) ** alpha)

        for _ in range(max_len):
            logp, state, _ = model.step(y, state)
            total = (scores[:, None] + logp.cpu()).flatten()
            vocab = logp.shape[-1]
            best = total.topk(min(2 * beam_size, total.numel())).indices
            keep_rows, keep_words, keep_scores = [], [], []
            for flat in best.tolist():
                row, word = divmod(flat, vocab)
                if word == eos:
                    finished.append(rank(prefixes[row], total[flat].item()))
                else:
                    keep_rows.append(row)
                    keep_words.append(word)
                    keep_scores.append(total[flat].item())
                if len(keep_rows) == beam_size or len(finished) >= beam_size:
                    break
            if len(finished) >= beam_size or not keep_rows:
                break
            index = torch.tensor(keep_rows, device=src.device)
            state = _select(state, index)
            prefixes = [prefixes[r] + [w] for r, w in zip(keep_rows, keep_words)]
            scores = torch.tensor(keep_scores)
            y = torch.tensor(keep_words, device=src.device)
        else:
            # out of steps: unfinished prefixes compete too (their score lacks the <eos> term)
            finished.extend(rank(p, s) for p, s in zip(prefixes, scores.tolist()))
    return sorted(finished, key=lambda h: -h.score)


def translate_examples(model, examples, src_vocab, tgt_vocab, batch_size: int = 256, max_len: int = 20) -> list[list[str]]:
    """Greedy translations (token lists) of ``examples`` (each with a ``.src`` token list), in order."""
    from ..text.translation import encode_source

    device = next(model.parameters()).device
    out = []
    for k in range(0, len(examples), batch_size):
        ids, mask = encode_source([e.src for e in examples[k:k + batch_size]], src_vocab)
        check_inputs(model, ids, mask)
        tokens, _, _ = greedy_decode(model, ids.to(device), mask.to(device), max_len)
        out.extend(tgt_vocab.decode(t) for t in tokens)
    return out
