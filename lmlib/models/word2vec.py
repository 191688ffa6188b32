"""word2vec: skip-gram with negative sampling (SGNS), after Mikolov et al. (2013a, 2013b).

Mikolov, Chen, Corrado & Dean (2013a), "Efficient estimation of word representations in vector space";
Mikolov, Sutskever, Chen, Corrado & Dean (2013b), "Distributed representations of words and phrases and
their compositionality". Each word w has two vectors: an input ("centre") vector v_w and an output
("context") vector u_w. For every centre word c and each word o within its window, SGNS maximises

    log σ(u_o · v_c) + Σ_{k=1..K} log σ(−u_k · v_c),      w_k ~ P_n(w) ∝ count(w)^{3/4}

that is, it tells the true context word apart from K noise words (2013b, eq. 4). Three tricks from the
paper and its C code make it fast and good, and all three are here: subsampling of frequent words,
the unigram^{3/4} noise distribution, and a "dynamic" window whose size is drawn uniformly from
1..window for each centre word (nearer words are seen more often). Training them together is the
recipe :func:`lmlib.recipes.word2vec.train_word2vec`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config_checks import check_choice, check_positive_ints

SUBSAMPLING_FORMULAS = ("word2vec", "paper")


@dataclass
class Word2VecConfig:
    """Hyper-parameters, named as in gensim's ``Word2Vec`` (and the C tool's -size, -window, -negative ...)."""

    vector_size: int = 100
    window: int = 5
    negative: int = 5  # K noise words per (centre, context) pair
    sample: float = 1e-3  # subsampling threshold t; 0 turns subsampling off
    min_count: int = 5
    epochs: int = 5
    alpha: float = 0.025  # SGD rate per pair at the start, as in the C code
    min_alpha: float = 1e-4
    batch_size: int = 4096
    ns_exponent: float = 0.75
    subsampling: str = "word2vec"  # which keep-probability formula, see keep_probability
    seed: int = 0

    def __post_init__(self):
        check_positive_ints(self, ("vector_size", "window", "negative", "min_count", "epochs", "batch_size"))
        if not 0 <= self.sample < 1:
            raise ValueError(f"sample (the threshold t) must be in [0, 1), got {self.sample}")
        if not 0 < self.min_alpha <= self.alpha:
            raise ValueError(f"need 0 < min_alpha <= alpha, got min_alpha={self.min_alpha}, alpha={self.alpha}")
        check_choice(self, "subsampling", SUBSAMPLING_FORMULAS)


def _check_subsampling(freq: torch.Tensor, t: float, formula: str) -> torch.Tensor:
    """``freq`` as float64 relative frequencies in (0, 1], with a threshold in [0, 1) and a known formula."""
    freq = torch.as_tensor(freq, dtype=torch.float64)
    valid = (freq > 0) & (freq <= 1)  # NaN fails both comparisons, so it is refused too
    if not valid.all():
        raise ValueError(f"relative frequencies must lie in (0, 1], got {freq[~valid][:5].tolist()}; divide each word's "
                         "count by the total number of tokens, and leave out words that never occur")
    if not 0 <= t < 1:
        raise ValueError(f"the threshold t must be in [0, 1), got {t}")
    if formula not in SUBSAMPLING_FORMULAS:
        raise ValueError(f"formula must be one of {SUBSAMPLING_FORMULAS}, got {formula!r}")
    return freq


def keep_probability(freq: torch.Tensor, t: float, formula: str = "word2vec") -> torch.Tensor:
    """Probability of keeping each occurrence of a word whose relative frequency is f.

    * ``"paper"`` (Mikolov et al. 2013b, eq. 5): discard with P(w) = 1 − sqrt(t / f), so keep = sqrt(t / f).
    * ``"word2vec"`` (the released C code, also gensim): keep = (sqrt(f / t) + 1) · t / f = sqrt(t/f) + t/f,
      a little gentler. This is the default, so results compare with gensim's.

    Both are probabilities only after capping at 1 (words rarer than about t are always kept);
    ``t = 0`` means no subsampling (keep everything).
    """
    freq = _check_subsampling(freq, t, formula)
    if t == 0:
        return torch.ones_like(freq)
    ratio = t / freq
    keep = ratio.sqrt() if formula == "paper" else ratio.sqrt() + ratio
    return keep.clamp(max=1.0)


def noise_distribution(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """P_n(w) = count(w)^power / Σ_w' count(w')^power  (2013b: "the unigram distribution raised to 3/4")."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.dim() != 1 or not (counts > 0).all():
        raise ValueError(f"counts must be a 1-D tensor of positive word counts, got shape {tuple(counts.shape)} with "
                         f"minimum {counts.min().item() if counts.numel() else 'none'}; leave out words that never occur")
    weights = counts**power
    return weights / weights.sum()


def _check_pairs_args(ids: torch.Tensor, sentence: torch.Tensor, window: int) -> None:
    if ids.shape != sentence.shape or ids.dim() != 1:
        raise ValueError(f"ids and sentence must be 1-D and the same length, got {tuple(ids.shape)}, {tuple(sentence.shape)}")
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")


def skipgram_pairs(ids: torch.Tensor, sentence: torch.Tensor, window: int,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """All (centre, context) pairs of a token stream, with word2vec's dynamic window.

    ``ids`` and ``sentence`` are ``(N,)``: the word id and the sentence number of each token. Each centre
    token draws its own window r uniformly from 1..``window`` and pairs with the tokens at distance
    ≤ r in the same sentence. Returns ``(centres, contexts)``, both ``(P,)``.
    """
    _check_pairs_args(ids, sentence, window)
    reach = torch.randint(1, window + 1, ids.shape, generator=generator)
    centres, contexts = [], []
    for offset in range(1, min(window, len(ids) - 1) + 1):
        left, right = slice(0, len(ids) - offset), slice(offset, None)
        same = sentence[left] == sentence[right]
        forward = same & (reach[left] >= offset)  # centre on the left, context `offset` to its right
        backward = same & (reach[right] >= offset)  # centre on the right, context to its left
        centres += [ids[left][forward], ids[right][backward]]
        contexts += [ids[right][forward], ids[left][backward]]
    if not centres:
        return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    return torch.cat(centres), torch.cat(contexts)


def sgns_loss(v_c: torch.Tensor, u_o: torch.Tensor, u_neg: torch.Tensor) -> torch.Tensor:
    """−[log σ(u_o·v_c) + Σ_k log σ(−u_k·v_c)] per pair: ``(B, d)``, ``(B, d)``, ``(B, K, d)`` -> ``(B,)``."""
    if v_c.dim() != 2 or u_o.shape != v_c.shape or u_neg.dim() != 3 or u_neg.shape[0::2] != v_c.shape:
        raise ValueError(f"expected v_c, u_o of shape (B, d) and u_neg of shape (B, K, d), got "
                         f"{tuple(v_c.shape)}, {tuple(u_o.shape)}, {tuple(u_neg.shape)}")
    positive = F.logsigmoid((u_o * v_c).sum(-1))
    negative = F.logsigmoid(-(u_neg * v_c.unsqueeze(1)).sum(-1)).sum(-1)
    return -(positive + negative)


class SkipGramNS(nn.Module):
    """The two embedding tables of SGNS: ``v`` (input/centre vectors) and ``u`` (output/context vectors).

    Initialised as in the C code: v uniform in ±0.5/d, u at zero. Embeddings use sparse gradients,
    so each step touches only the rows of the words in the batch.
    """

    def __init__(self, vocab_size: int, vector_size: int):
        super().__init__()
        self.v = nn.Embedding(vocab_size, vector_size, sparse=True)
        self.u = nn.Embedding(vocab_size, vector_size, sparse=True)
        nn.init.uniform_(self.v.weight, -0.5 / vector_size, 0.5 / vector_size)
        nn.init.zeros_(self.u.weight)

    def forward(self, centres: torch.Tensor, contexts: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """Per-pair SGNS loss: ``(B,)``, ``(B,)``, ``(B, K)`` word ids -> ``(B,)``.

        Same value as :func:`sgns_loss`, computed with one lookup of u for the true and the noise
        words together, (B, 1 + K, d), which halves the work of the backward pass.
        """
        if centres.dim() != 1 or contexts.shape != centres.shape or negatives.dim() != 2 or len(negatives) != len(centres):
            raise ValueError(f"expected centres, contexts of shape (B,) and negatives of shape (B, K), got "
                             f"{tuple(centres.shape)}, {tuple(contexts.shape)}, {tuple(negatives.shape)}")
        v_c = self.v(centres)
        u = self.u(torch.cat([contexts.unsqueeze(1), negatives], dim=1))
        scores = (u * v_c.unsqueeze(1)).sum(-1)  # (B, 1 + K): u_o·v_c, then u_k·v_c
        return -(F.logsigmoid(scores[:, 0]) + F.logsigmoid(-scores[:, 1:]).sum(-1))

    @property
    def vectors(self) -> torch.Tensor:
        """The word vectors people use: the input vectors v, ``(|V|, d)`` (gensim's ``wv`` too)."""
        return self.v.weight.detach()
