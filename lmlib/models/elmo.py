"""ELMo: word vectors read from every layer of a bidirectional language model.

Peters et al. (2018), "Deep contextualized word representations" (NAACL). A forward and a backward LSTM
language model share the token representation Θ_x and the softmax Θ_s and are trained together to
maximise the log likelihood of both directions (the joint objective of §3.1, unnumbered in the paper):

    Σ_k [ log p(t_k | t_1, ..., t_{k−1}; Θ_x, →Θ_LSTM, Θ_s) + log p(t_k | t_{k+1}, ..., t_N; Θ_x, ←Θ_LSTM, Θ_s) ]

Afterwards a task reads every layer j of the biLM at token k, h_{k,j} = [→h_{k,j}; ←h_{k,j}] (layer 0 is the
token representation x_k, written twice so every layer is 2·d wide), and learns its own mix (the paper's Equation 1):

    ELMo_k = γ · Σ_j s_j h_{k,j},    s = softmax(w)

The tokens are read through their characters (Kim et al. 2016, "Character-aware neural language models";
Peters et al. sec. 3.4): character embeddings, convolutions of several widths max-pooled over the word, highway
layers (Srivastava et al. 2015, "Highway networks") and a linear projection. Every string gets a vector,
including words never seen in training. Only the softmax has a word vocabulary.

Left out of the paper's model, to stay small: the sampled softmax over a 793k-word vocabulary (the softmax here
is full), and the clipping of LSTM cell and projection values.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime import eval_mode
from ..text.vocab import BOS, EOS, PAD, UNK, Vocab
from .config_checks import check_positive_ints, check_probability
from .state_dicts import check_state_dict

# --- characters -------------------------------------------------------------------------------------------


class CharVocab:
    """The token encoder's fixed character table: the bytes of a word's UTF-8 encoding plus six reserved ids.

    ====================  ===========================================================================
    id 0  ``PAD_CHAR``    fills the window after end-of-word; a row of only ``PAD_CHAR`` is a padding word
    id 1  ``BOW``         begin-of-word marker
    id 2  ``EOW``         end-of-word marker
    ids 3, 4, 5           lmlib's special tokens ``UNK``, ``BOS``, ``EOS``, each written as one reserved
                          character, so ``<bos>`` is not read as the five characters ``<``, ``b``, ...
    id 6 + b              byte b (0..255) of the word's UTF-8 encoding
    ====================  ===========================================================================

    Using bytes means no character is ever outside the table: any Python string, accented letters,
    CJK, emoji and lone surrogates included (``errors="surrogatepass"``), encodes; a character that takes
    several bytes takes several slots. So there is no unknown-character id.

    A word becomes ``[BOW, bytes..., EOW, PAD_CHAR, ...]``, ``max_chars`` ids in all. **Truncation rule**: a
    word of more than ``max_chars − 2`` bytes keeps its first ``max_chars − 2`` bytes (the end-of-word marker
    always follows), so all long words with the same beginning share a vector. The cut may fall inside a
    multi-byte character. The word ``PAD`` (``<pad>``) encodes as a padding row.
    """

    PAD_CHAR, BOW, EOW = 0, 1, 2
    SPECIAL_CHARS = {UNK: 3, BOS: 4, EOS: 5}
    BYTE_OFFSET = 6
    size = BYTE_OFFSET + 256  # 262 character ids

    def __init__(self, max_chars: int = 50):
        self.max_chars = max_chars
        check_positive_ints(self, ("max_chars",), minimum=3)  # begin-of-word, one byte, end-of-word

    def encode(self, word: str) -> list[int]:
        """``max_chars`` character ids of one word (see the class docstring for the layout)."""
        if not isinstance(word, str):
            raise TypeError(f"a word must be a str, got {type(word).__name__}: {word!r}")
        if word == PAD:
            return [self.PAD_CHAR] * self.max_chars
        if not word:
            raise ValueError("a word must hold at least one character, got the empty string ''; "
                             "drop empty tokens before encoding")
        if word in self.SPECIAL_CHARS:
            body = [self.SPECIAL_CHARS[word]]
        else:
            body = [self.BYTE_OFFSET + b for b in word.encode("utf-8", errors="surrogatepass")]
        body = body[: self.max_chars - 2]  # the truncation rule: first max_chars − 2 bytes
        ids = [self.BOW, *body, self.EOW]
        return ids + [self.PAD_CHAR] * (self.max_chars - len(ids))

    def decode(self, ids: Sequence[int]) -> str:
        """The word a row of ids spells (``<pad>`` for a padding row); a byte sequence cut inside a character
        ends in U+FFFD."""
        ids = [int(i) for i in ids]
        if not any(ids):
            return PAD
        body = ids[1: ids.index(self.EOW)] if self.EOW in ids else ids[1:]
        specials = {v: k for k, v in self.SPECIAL_CHARS.items()}
        if len(body) == 1 and body[0] in specials:
            return specials[body[0]]
        return bytes(i - self.BYTE_OFFSET for i in body).decode("utf-8", errors="replace")

    def encode_words(self, words: Sequence[str]) -> torch.Tensor:
        """``(len(words), max_chars)`` character ids; no words give a ``(0, max_chars)`` tensor."""
        if isinstance(words, str):
            raise TypeError(f"pass a list of words, not one string ({words!r}); for one word use [{words!r}]")
        return torch.tensor([self.encode(w) for w in words], dtype=torch.long).view(-1, self.max_chars)


def encode_words(words: Sequence[str], max_chars: int = 50) -> torch.Tensor:
    """``(len(words), max_chars)`` character ids, laid out and truncated as :class:`CharVocab` describes."""
    return CharVocab(max_chars).encode_words(words)


def _sentence_tokens(sentences: Sequence[Sequence[str]], boundaries: bool) -> list[list[str]]:
    if isinstance(sentences, str) or not len(sentences):
        raise ValueError(f"expected a non-empty list of sentences, each a list of words, got {sentences!r}")
    strings = [i for i, sentence in enumerate(sentences) if isinstance(sentence, str)]
    if strings:
        raise TypeError(f"sentence {strings[0]} is a string ({sentences[strings[0]]!r}); split it into a list of words first")
    return [[BOS, *sentence, EOS] if boundaries else list(sentence) for sentence in sentences]


def encode_sentences(sentences: Sequence[Sequence[str]], max_chars: int = 50, boundaries: bool = True) -> torch.Tensor:
    """``(batch, time, max_chars)`` character ids of a batch of tokenised sentences, shorter ones padded at the end
    with padding words (rows of ``PAD_CHAR``).

    With ``boundaries`` each sentence is read as ``<bos> w_1 ... w_N <eos>``, as the biLM is trained, so an empty
    sentence is the two boundary tokens; without them an empty sentence is a row of padding only.
    """
    tokens = _sentence_tokens(sentences, boundaries)
    chars = CharVocab(max_chars)
    time = max(len(t) for t in tokens)
    return torch.stack([chars.encode_words(t + [PAD] * (time - len(t))) for t in tokens])


def encode_word_ids(sentences: Sequence[Sequence[str]], vocab: Vocab, boundaries: bool = True) -> torch.Tensor:
    """``(batch, time)`` ids of the words in the softmax's vocabulary, aligned with :func:`encode_sentences`.

    Padding takes ``vocab[PAD]`` when the vocabulary has it, else 0 (the loss never reads padding); a word outside
    the vocabulary takes its unknown-token id, or raises if it has none.
    """
    tokens = _sentence_tokens(sentences, boundaries)
    pad = vocab.stoi.get(PAD, 0)
    time = max(len(t) for t in tokens)
    return torch.tensor([vocab.encode(t) + [pad] * (time - len(t)) for t in tokens], dtype=torch.long).view(len(tokens), time)


def word_mask(char_ids: torch.Tensor) -> torch.Tensor:
    """``(..., time)`` True where a word is real: a padding word is a row of ``PAD_CHAR`` only."""
    return char_ids.ne(CharVocab.PAD_CHAR).any(dim=-1)


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first ``lengths[b]`` steps of each sequence of ``x`` ``(batch, time, ...)``, padding left in place.

    (x_1, ..., x_L, pad, ...) -> (x_L, ..., x_1, pad, ...). It is its own inverse.
    """
    batch, time = x.shape[:2]
    t = torch.arange(time, device=x.device).expand(batch, time)
    L = lengths.to(x.device).view(batch, 1)
    index = torch.where(t < L, L - 1 - t, t)  # (B, T): where step t of the reversed sequence comes from
    return x.gather(1, index.view(batch, time, *[1] * (x.dim() - 2)).expand_as(x))


# --- configs ----------------------------------------------------------------------------------------------

# Peters et al.'s character CNN: (width, number of filters), 2048 filters in all.
ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclass
class CharCNNConfig:
    """The token encoder's sizes (defaults: Peters et al.'s, output ``embed_size`` 512).

    ``filters`` lists (width, count) of the convolutions; every width must fit in ``max_chars``. ``num_highway``
    highway layers (0 or more) follow, then a projection to ``embed_size``.
    """

    embed_size: int = 512
    char_embed_size: int = 16
    filters: tuple[tuple[int, int], ...] = ELMO_FILTERS
    num_highway: int = 2
    max_chars: int = 50

    def __post_init__(self):
        check_positive_ints(self, ("embed_size", "char_embed_size"))
        check_positive_ints(self, ("num_highway",), minimum=0)
        check_positive_ints(self, ("max_chars",), minimum=3)
        try:
            self.filters = tuple((int(w), int(n)) for w, n in self.filters)
        except (TypeError, ValueError):
            raise ValueError(f"filters must be (width, count) pairs, e.g. ((1, 32), (2, 32)), got {self.filters!r}") from None
        if not self.filters or any(n < 1 for _, n in self.filters):
            raise ValueError(f"filters needs at least one (width, count) pair, each count positive, got {self.filters}")
        bad = [w for w, _ in self.filters if not 1 <= w <= self.max_chars]
        if bad:
            raise ValueError(f"filter widths {bad} do not fit a window of max_chars={self.max_chars} characters; "
                             f"use widths from 1 to {self.max_chars}")

    @property
    def num_filters(self) -> int:
        return sum(n for _, n in self.filters)


@dataclass
class BiLMConfig:
    """Sizes of the biLM (defaults: Peters et al.'s model, 2 layers of 4096 cells projected to 512).

    ``embed_size`` d is the width of the token representation and of every LSTM layer's output, so residual
    connections can add them; each LSTM has ``hidden_size`` cells projected down to d (Sak et al. 2014; what
    ``nn.LSTM(proj_size=d)`` computes), or no projection when ``hidden_size == embed_size``. ``dropout`` is
    applied to each LSTM layer's input and to the softmax's input. The character fields are those of
    :class:`CharCNNConfig`.
    """

    vocab_size: int
    embed_size: int = 512
    hidden_size: int = 4096
    num_layers: int = 2
    dropout: float = 0.1
    char_embed_size: int = 16
    filters: tuple[tuple[int, int], ...] = ELMO_FILTERS
    num_highway: int = 2
    max_chars: int = 50

    def __post_init__(self):
        check_positive_ints(self, ("vocab_size", "embed_size", "hidden_size", "num_layers"))
        if self.hidden_size < self.embed_size:
            raise ValueError(f"hidden_size={self.hidden_size} is below embed_size={self.embed_size}: each LSTM's "
                             f"cells are projected down to embed_size, so use hidden_size >= embed_size")
        check_probability(self.dropout, "dropout")
        self.filters = self.char_cnn.filters  # validates the character fields

    @property
    def char_cnn(self) -> CharCNNConfig:
        return CharCNNConfig(self.embed_size, self.char_embed_size, self.filters, self.num_highway, self.max_chars)


# --- the token encoder ------------------------------------------------------------------------------------


class Highway(nn.Module):
    """Highway layers (Srivastava et al. 2015), each

        y = t ⊙ g(W_H x + b_H) + (1 − t) ⊙ x,    t = σ(W_T x + b_T),    g = ReLU.

    The transform gate's bias b_T starts at −1, so each layer first mostly carries x through, as the paper
    recommends (a negative initial bias).
    """

    def __init__(self, size: int, num_layers: int):
        super().__init__()
        self.transforms = nn.ModuleList(nn.Linear(size, size) for _ in range(num_layers))  # W_H, b_H
        self.gates = nn.ModuleList(nn.Linear(size, size) for _ in range(num_layers))  # W_T, b_T
        for gate in self.gates:
            nn.init.constant_(gate.bias, -1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for transform, gate in zip(self.transforms, self.gates):
            t = torch.sigmoid(gate(x))  # t = σ(W_T x + b_T)
            x = t * F.relu(transform(x)) + (1 - t) * x  # y = t ⊙ g(W_H x + b_H) + (1 − t) ⊙ x
        return x


class CharCNNEncoder(nn.Module):
    """``char_ids (..., max_chars) -> (..., embed_size)``: a vector for any word from its characters.

    For a word with character embeddings e_1..e_C (C = ``max_chars``, padding characters embed to 0), filter f of
    width w gives z_f = ReLU(max_i (W_f * e)[i] + b_f), the max over the C − w + 1 windows (Kim et al. 2016 with
    ELMo's ReLU; the max is taken first, which is the same since ReLU is monotone). The z of all filters go through
    :class:`Highway` layers and a linear projection to ``embed_size``.
    """

    def __init__(self, config: CharCNNConfig):
        super().__init__()
        self.config = c = config
        self.char_embedding = nn.Embedding(CharVocab.size, c.char_embed_size, padding_idx=CharVocab.PAD_CHAR)
        self.convs = nn.ModuleList(nn.Conv1d(c.char_embed_size, n, kernel_size=w) for w, n in c.filters)
        self.highway = Highway(c.num_filters, c.num_highway)
        self.projection = nn.Linear(c.num_filters, c.embed_size)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        lead = char_ids.shape[:-1]
        e = self.char_embedding(char_ids.reshape(-1, self.config.max_chars))  # (N, C, char_embed)
        e = e.transpose(1, 2)  # (N, char_embed, C): Conv1d slides over the last axis
        z = torch.cat([conv(e).max(dim=-1).values for conv in self.convs], dim=-1)  # (N, filters): max_i (W_f * e)[i] + b_f
        y = self.highway(F.relu(z))  # (N, filters)
        return self.projection(y).view(*lead, self.config.embed_size)  # (..., embed_size)


# --- the biLM ---------------------------------------------------------------------------------------------


# PyTorch says, once per process, that it computes a projected LSTM with its own kernel instead of oneDNN's: a note on
# speed with nothing for a reader to do, which would otherwise appear in every notebook that runs the biLM.
warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")


class LSTMStack(nn.Module):
    """One direction of the biLM: ``x (batch, time, d) -> [h_1, ..., h_L]``, each ``(batch, time, d)``, where

        h_1 = LSTM_1(x),    h_j = LSTM_j(h_{j−1}) + h_{j−1}  for j ≥ 2  (the residual connection).

    It reads left to right. The backward LM is this same computation run on the reversed sentence (see
    :meth:`BiLM.forward`). Each layer is its own ``nn.LSTM``: a multi-layer ``nn.LSTM`` feeds layer j the bare
    output of layer j − 1 and has no place for the residual, and it returns only the top layer, while ELMo reads
    all of them.
    """

    def __init__(self, config: BiLMConfig):
        super().__init__()
        c = config
        proj = c.embed_size if c.hidden_size > c.embed_size else 0  # nn.LSTM takes proj_size=0 as "none"
        self.layers = nn.ModuleList(nn.LSTM(c.embed_size, c.hidden_size, proj_size=proj, batch_first=True)
                                    for _ in range(c.num_layers))
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        outputs, h = [], x
        for j, lstm in enumerate(self.layers):
            out, _ = lstm(self.drop(h))  # LSTM_j(h_{j−1}): (B, T, d)
            h = out if j == 0 else out + h  # h_j, with the residual from layer 2 on
            outputs.append(h)
        return outputs


class BiLMOutput(NamedTuple):
    """What :class:`BiLM` computes for a batch: ``token`` x_k ``(batch, time, d)``, ``forward`` and ``backward``
    the L layers of each direction (lists of ``(batch, time, d)``, position k aligned with token k in both), and
    ``mask`` ``(batch, time)``, True at real words. Every output is 0 at padding."""

    token: torch.Tensor
    forward: list[torch.Tensor]
    backward: list[torch.Tensor]
    mask: torch.Tensor

    def layers(self) -> list[torch.Tensor]:
        """ELMo's L + 1 layers h_{k,j}, each ``(batch, time, 2d)``: [x_k; x_k], then [→h_{k,j}; ←h_{k,j}]."""
        return [torch.cat([self.token, self.token], dim=-1)] + [
            torch.cat([f, b], dim=-1) for f, b in zip(self.forward, self.backward)]


class BiLM(nn.Module):
    """``bilm(char_ids (batch, time, max_chars)) -> BiLMOutput``; :meth:`nll` gives the two directions' losses.

    Shared by both directions: the token encoder Θ_x (:class:`CharCNNEncoder`) and the softmax Θ_s. Each
    direction has its own :class:`LSTMStack` (→Θ_LSTM, ←Θ_LSTM). Sentences are padded at the end with padding
    words (rows of ``PAD_CHAR``, as :func:`encode_sentences` makes them); an empty sentence in a batch is a row of
    padding only and gets zeros.
    """

    def __init__(self, config: BiLMConfig):
        super().__init__()
        self.config = c = config
        self.token_encoder = CharCNNEncoder(c.char_cnn)  # Θ_x
        self.forward_lm = LSTMStack(c)  # →Θ_LSTM
        self.backward_lm = LSTMStack(c)  # ←Θ_LSTM
        self.drop = nn.Dropout(c.dropout)
        self.softmax = nn.Linear(c.embed_size, c.vocab_size)  # Θ_s: logits of p(t | h)

    def forward(self, char_ids: torch.Tensor) -> BiLMOutput:
        """x_k from the characters; →h_{k,j} over t_1..t_k and ←h_{k,j} over t_N..t_k for every layer j."""
        mask = word_mask(char_ids)  # (B, T)
        lengths, m = mask.sum(dim=1), mask.unsqueeze(-1)
        x = self.token_encoder(char_ids) * m  # x_k: (B, T, d)
        forward = [h * m for h in self.forward_lm(x)]  # →h_{k,j}: reads t_1..t_k
        # ←h_{k,j}: the same computation on (t_N, ..., t_1), turned back so position k is token k again
        backward = [reverse_padded(h, lengths) * m for h in self.backward_lm(reverse_padded(x, lengths))]
        return BiLMOutput(x, forward, backward, mask)

    def nll(self, char_ids: torch.Tensor, word_ids: torch.Tensor, out: BiLMOutput | None = None,
            sampled=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(forward, backward) mean negative log likelihood per predicted word, the two halves of the §3.1 objective; exp of
        each is that direction's perplexity.

        The forward LM at position k predicts t_{k+1}; the backward LM, read in its own reversed order, does
        the same, so both go through :meth:`_next_word_nll` and predict the same number of words (one fewer than
        each sentence's length). ``word_ids`` ``(batch, time)`` are the softmax's ids of the same words. ``out``:
        this model's output for ``char_ids`` when the caller has computed it (a training loss under DDP must make
        the call ``model(char_ids)`` itself, so that the gradients are averaged over the ranks). ``sampled``: a loss
        ``(h (N, d), targets (N,), weight, bias) -> mean NLL`` to use in place of the exact softmax, e.g. a
        :class:`~lmlib.training.sampled_softmax.SampledSoftmax` in training, as Peters et al. (2018) trained theirs.
        """
        out = self(char_ids) if out is None else out
        lengths = out.mask.sum(dim=1)
        forward = self._next_word_nll(out.forward[-1], word_ids, out.mask, sampled)
        backward = self._next_word_nll(reverse_padded(out.backward[-1], lengths),
                                       reverse_padded(word_ids, lengths), out.mask, sampled)
        return forward, backward

    def loss(self, char_ids: torch.Tensor, word_ids: torch.Tensor) -> torch.Tensor:
        """The joint objective: forward + backward NLL, i.e. minus the §3.1 log likelihood divided by the number of predicted words."""
        forward, backward = self.nll(char_ids, word_ids)
        return forward + backward

    def _next_word_nll(self, top: torch.Tensor, word_ids: torch.Tensor, mask: torch.Tensor,
                       sampled=None) -> torch.Tensor:
        """−mean_k log p(t_{k+1} | h_k): ``top`` ``(B, T, d)`` the top layer, read left to right."""
        h = self.drop(top[:, :-1])  # h_k: (B, T−1, d)
        targets = word_ids[:, 1:].masked_fill(~mask[:, 1:], -100)  # (B, T−1); -100: no word to predict
        if sampled is not None:
            return sampled(h.reshape(-1, h.size(-1)), targets.reshape(-1), self.softmax.weight, self.softmax.bias)
        logits = self.softmax(h)  # (B, T−1, V): p(t_{k+1} | ...) = softmax(Θ_s h_k)
        return F.cross_entropy(logits.reshape(-1, self.config.vocab_size), targets.reshape(-1), ignore_index=-100)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``, but a checkpoint of another config says which setting differs."""
        check_state_dict(self, state_dict, strict=strict, shape_hint=_config_hint,
                         structure_fields="num_layers, num_highway, filters or the projection")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)


def check_inputs(bilm: BiLM, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> None:
    """Refuse a batch that :meth:`BiLM.forward` (and, with ``word_ids``, :meth:`BiLM.nll`) would misread, saying what
    to do (:func:`elmo_representations` calls it)."""
    max_chars = bilm.config.max_chars
    if not isinstance(char_ids, torch.Tensor) or char_ids.dtype not in (torch.long, torch.int):
        got = f"a {char_ids.dtype} tensor" if isinstance(char_ids, torch.Tensor) else type(char_ids).__name__
        raise ValueError(f"char_ids must be an integer tensor of character ids, got {got}; build it with "
                         f"encode_sentences(...)")
    if char_ids.dim() != 3 or char_ids.size(-1) != max_chars or 0 in char_ids.shape[:2]:
        raise ValueError(f"char_ids must be (batch, time, max_chars={max_chars}) with at least one word, got shape "
                         f"{tuple(char_ids.shape)}; encode with max_chars={max_chars} (the model's config), and for "
                         f"one sentence add the batch dimension: char_ids[None]")
    low, high = int(char_ids.min()), int(char_ids.max())
    if low < 0 or high >= CharVocab.size:
        raise ValueError(f"char_ids holds ids from {low} to {high}; the character table has ids "
                         f"0..{CharVocab.size - 1}; encode with encode_words/encode_sentences")
    mask = word_mask(char_ids)
    if not mask.any():
        raise ValueError("every sentence in the batch is empty (all padding words): give at least one word")
    holes = (mask[:, 1:] & ~mask[:, :-1]).any(dim=1)
    if holes.any():
        raise ValueError(f"sentences {holes.nonzero().flatten().tolist()[:5]} have a padding word before a real "
                         f"one; pad at the end only (encode_sentences does)")
    if word_ids is None:
        return
    if not isinstance(word_ids, torch.Tensor) or word_ids.shape != char_ids.shape[:2]:
        got = tuple(word_ids.shape) if isinstance(word_ids, torch.Tensor) else type(word_ids).__name__
        raise ValueError(f"word_ids must be (batch, time) = {tuple(char_ids.shape[:2])} like char_ids, got {got}; "
                         f"build both from the same sentences (encode_sentences, encode_word_ids)")
    if mask.sum(dim=1).max() < 2:
        raise ValueError("no sentence in the batch has two words, so neither direction has a word to predict; "
                         "encode with boundaries=True (adds <bos> and <eos>) or give longer sentences")
    real = word_ids[mask]
    if int(real.min()) < 0 or int(real.max()) >= bilm.config.vocab_size:
        raise ValueError(f"word_ids holds ids from {int(real.min())} to {int(real.max())}, but the softmax has "
                         f"vocab_size={bilm.config.vocab_size}; encode with the Vocab the model was built for")


def _config_hint(key: str) -> str:
    """Which BiLMConfig fields set the shape of the parameter ``key``."""
    if key.startswith("softmax"):
        return "vocab_size or embed_size differ"
    if key.startswith("token_encoder.char_embedding"):
        return "char_embed_size differs"
    if key.startswith("token_encoder"):
        return "filters, char_embed_size or embed_size differ"
    return "embed_size or hidden_size differ"


# --- the task's view: ELMo ----------------------------------------------------------------------------------


def masked_layer_norm(h: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-12) -> torch.Tensor:
    """(h − μ) / √(σ² + ε) for one layer ``h`` ``(batch, time, dim)``, μ and σ² taken over every feature of every
    real position (``mask`` ``(batch, time)`` True; all positions when it is None); padding positions neither count
    nor keep a value (they come out 0).

    These are the statistics of ELMo's released code (the paper's footnote: layer normalisation of each biLM layer
    before weighting): pooled over the batch, so a word's normalised vector depends a little on its batch mates.
    """
    m = torch.ones(h.shape[:-1], dtype=torch.bool, device=h.device) if mask is None else mask
    m = m.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
    count = m.sum() * h.size(-1)  # real elements
    mu = (h * m).sum() / count
    var = (((h - mu) * m) ** 2).sum() / count
    return (h - mu) / torch.sqrt(var + eps) * m


class ScalarMix(nn.Module):
    """``mix(layers, mask=None) -> (batch, time, dim)``: Equation 1 of Peters et al.,

        ELMo_k = γ · Σ_j s_j h_{k,j},    s = softmax(w),

    with ``w`` (one weight per layer) and ``gamma`` learned by the task. They start at ``initial_weights``
    (default all 0: the plain average) and ``gamma``. With ``layer_norm`` each layer first goes through
    :func:`masked_layer_norm` (the paper's footnote).
    """

    def __init__(self, num_layers: int, layer_norm: bool = False, initial_weights: Sequence[float] | None = None,
                 gamma: float = 1.0):
        super().__init__()
        self.num_layers, self.layer_norm = num_layers, layer_norm
        check_positive_ints(self, ("num_layers",))  # a biLM of L LSTM layers gives L + 1
        weights = [0.0] * num_layers if initial_weights is None else [float(v) for v in initial_weights]
        if len(weights) != num_layers:
            raise ValueError(f"initial_weights has {len(weights)} values for num_layers={num_layers}: give one "
                             f"weight per layer, token layer included")
        self.w = nn.Parameter(torch.tensor(weights))  # s = softmax(w)
        self.gamma = nn.Parameter(torch.tensor(float(gamma)))  # γ

    def _check_inputs(self, layers: Sequence[torch.Tensor], mask: torch.Tensor | None) -> None:
        if isinstance(layers, torch.Tensor):
            raise ValueError("pass the layers as a list of (batch, time, dim) tensors, e.g. list(stacked) or "
                             "BiLMOutput.layers()")
        if len(layers) != self.num_layers:
            raise ValueError(f"got {len(layers)} layers, but this ScalarMix mixes {self.num_layers}; a biLM of L "
                             f"LSTM layers gives L + 1 (the token layer too): ScalarMix(bilm.config.num_layers + 1)")
        shapes = {tuple(h.shape) for h in layers}
        if len(shapes) != 1 or len(next(iter(shapes))) != 3:
            raise ValueError(f"the layers must all be (batch, time, dim) of one shape, got {sorted(shapes)}")
        if mask is not None and tuple(mask.shape) != tuple(layers[0].shape[:2]):
            raise ValueError(f"mask must be (batch, time) = {tuple(layers[0].shape[:2])}, got {tuple(mask.shape)}")

    def forward(self, layers: Sequence[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        self._check_inputs(layers, mask)
        s = F.softmax(self.w, dim=0)  # s_j: (L + 1,)
        if self.layer_norm:
            layers = [masked_layer_norm(h, mask) for h in layers]
        return self.gamma * sum(s_j * h_j for s_j, h_j in zip(s, layers))  # γ Σ_j s_j h_{k,j}: (B, T, dim)


MODES = ("all", "mix", "top")


def elmo_representations(bilm: BiLM, words_or_char_ids, mode: str = "all",
                         mix: ScalarMix | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """ELMo vectors of a batch and its mask ``(batch, time)``, from a frozen biLM (evaluation mode, no gradient;
    the paper freezes the biLM and trains only the mix and the task's model).

    ``words_or_char_ids``: a list of tokenised sentences (each wrapped in ``<bos> ... <eos>`` as in training;
    the two boundary positions are dropped again, so position k is word k), or a ``(batch, time, max_chars)``
    tensor of character ids, used as it is.

    ``mode``: ``"all"`` every layer, ``(L + 1, batch, time, 2d)`` (layer 0 is [x_k; x_k]); ``"top"`` the last
    layer ``(batch, time, 2d)``; ``"mix"`` ``mix(layers, mask)`` ``(batch, time, 2d)``, with a fresh
    ``ScalarMix(L + 1)`` (the plain average) when ``mix`` is None. Padding positions are 0 in every mode, and an
    empty sentence is all padding (a batch of empty sentences gives ``time`` 0).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    from_words = not isinstance(words_or_char_ids, torch.Tensor)
    char_ids = encode_sentences(words_or_char_ids, bilm.config.max_chars) if from_words else words_or_char_ids
    device = next(bilm.parameters()).device
    check_inputs(bilm, char_ids)
    with torch.no_grad(), eval_mode(bilm):
        out = bilm(char_ids.to(device))
    layers, mask = out.layers(), out.mask
    if from_words:  # drop <bos> and <eos>: a sentence of n words keeps positions 0..n−1
        n = torch.tensor([len(s) for s in words_or_char_ids], device=device)
        mask = torch.arange(mask.size(1) - 2, device=device) < n.unsqueeze(1)  # (B, T − 2)
        layers = [h[:, 1:-1] * mask.unsqueeze(-1) for h in layers]
    if mode == "all":
        return torch.stack(layers), mask
    if mode == "top":
        return layers[-1], mask
    mix = ScalarMix(len(layers)).to(device) if mix is None else mix
    return mix(layers, mask), mask


# --- task models on ELMo features ---------------------------------------------------------------------------


class FeatureProbe(nn.Module):
    """``(n, L + 1, D) -> (n, classes)`` logits from one layer (``layer`` j) or from ``ScalarMix`` of all layers
    (``layer=None``: s = softmax(w) and γ learned with the classifier), then a linear layer, or with ``hidden``
    units a one-hidden-layer MLP with dropout."""

    def __init__(self, num_layers: int, dim: int, num_classes: int, layer: int | None, hidden: int = 0,
                 dropout: float = 0.0):
        super().__init__()
        if layer is not None and not 0 <= layer < num_layers:
            raise ValueError(f"layer must be in 0..{num_layers - 1} or None for the scalar mix, got {layer}")
        self.layer = layer
        self.mix = ScalarMix(num_layers) if layer is None else None
        head = [nn.Linear(dim, num_classes)] if not hidden else [
            nn.Dropout(dropout), nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, num_classes)]
        self.head = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mix is None:
            return self.head(x[:, self.layer])
        layers = [h.unsqueeze(1) for h in x.unbind(1)]  # L + 1 of (n, 1, D): ScalarMix reads (batch, time, dim)
        return self.head(self.mix(layers).squeeze(1))


class BagOfEmbeddings(nn.Module):
    """The from-scratch baseline of the transfer experiment: ``ids (n, T) -> (n, classes)``, the mean of learned
    word vectors over a text's non-padding ids (``pad_id``), then the head of :class:`FeatureProbe`."""

    def __init__(self, vocab_size: int, embed_size: int, num_classes: int, hidden: int = 0, dropout: float = 0.0,
                 pad_id: int = 0):
        super().__init__()
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.head = FeatureProbe(1, embed_size, num_classes, 0, hidden, dropout).head

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        real = ids.ne(self.pad_id).unsqueeze(-1).float()  # (n, T, 1)
        mean = (self.embedding(ids) * real).sum(1) / real.sum(1).clamp(min=1)  # (n, embed_size)
        return self.head(mean)


class BagWithELMo(nn.Module):
    """The way the paper uses ELMo (sec. 3.3): keep the task model and its own word vectors x_k, and "concatenate the
    ELMo vector ELMo_k with x_k" at its input, the biLM frozen. Here the task model is :class:`BagOfEmbeddings`:
    ``(ids (n, T), features (n, L + 1, D)) -> (n, classes)`` from [mean_k x_k ; mean_k ELMo_k]. Mean pooling is
    linear, so this equals pooling the concatenated [x_k; ELMo_k] of every token; ``features`` are the biLM layers
    already mean-pooled over the same tokens (:func:`pooled_features`), mixed here by a learned :class:`ScalarMix`."""

    def __init__(self, vocab_size: int, embed_size: int, num_layers: int, dim: int, num_classes: int,
                 hidden: int = 0, dropout: float = 0.0, pad_id: int = 0):
        super().__init__()
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.mix = ScalarMix(num_layers)
        self.head = FeatureProbe(1, embed_size + dim, num_classes, 0, hidden, dropout).head

    def forward(self, ids: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        real = ids.ne(self.pad_id).unsqueeze(-1).float()  # (n, T, 1)
        mean = (self.embedding(ids) * real).sum(1) / real.sum(1).clamp(min=1)  # (n, embed_size)
        elmo = self.mix([h.unsqueeze(1) for h in features.unbind(1)]).squeeze(1)  # Equation 1: (n, D)
        return self.head(torch.cat([mean, elmo], dim=-1))
