"""The answers some exercises are checked against, computed here so that the check cell does not show them.

A check cell compares the reader's value with a reference (:mod:`lmlib.course.exercises`). Where the reference is a
function of the library (``corpus_bleu``, ``NGramLM.prob``), the cell calls it; where it would be a formula or a
number typed into the cell, the reader could copy it as the answer, so it lives here instead. Each function says
which exercise it answers; the worked answer is in the notebook's solution, which the reader opens on purpose.

:data:`EXERCISES` names each exercise of the notebooks (``"01 add-k bigram"``) with its reference: the check cell
calls ``exercises.check(name, answer, *inputs)`` and shows no expression that computes the expected value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


# -- the exercises of the notebooks, by name: what `exercises.check(name, answer, *inputs)` compares with ----------

@dataclass(frozen=True)
class Exercise:
    """One notebook exercise. ``kind`` is ``"value"`` (``reference(*inputs)`` is the expected value) or
    ``"function"`` (the reader writes a function; ``cases(*inputs)`` are the argument tuples it is called on and
    ``reference`` gives the expected result for each)."""

    kind: str
    reference: Callable
    cases: Callable[..., list[tuple]] | None = None
    rtol: float = 1e-4
    atol: float = 1e-6


EXERCISES: dict[str, Exercise] = {}


def exercise(name: str) -> Exercise:
    """The exercise registered as ``name``; an unknown name is refused with the known ones."""
    if name not in EXERCISES:
        raise KeyError(f"no exercise named {name!r}; the exercises are: {', '.join(sorted(EXERCISES))}")
    return EXERCISES[name]


def _value(name: str, rtol: float = 1e-4, atol: float = 1e-6):
    def register(reference: Callable) -> Callable:
        EXERCISES[name] = Exercise("value", reference, None, rtol, atol)
        return reference
    return register


def _function(name: str, cases: Callable[..., list[tuple]], rtol: float = 1e-4, atol: float = 1e-6):
    def register(reference: Callable) -> Callable:
        EXERCISES[name] = Exercise("function", reference, cases, rtol, atol)
        return reference
    return register


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# notebook 00
_value("00 perplexity on four characters")(lambda: perplexity([0.02, 0.9, 0.3, 0.1]))


@_value("00 p(u | q)")
def _p_u_given_q(counts: torch.Tensor, vocab) -> float:
    return add_one_bigram(counts, vocab["q"], vocab["u"])


# notebook 01: the tiny corpus of its exercises
@_value("01 add-k bigram")
def _add_k_bigram(tiny) -> float:
    from ..models.ngram import NGramLM

    return NGramLM(2, "add_k", k=0.5).fit(tiny).prob("<eos>", ["a"])


@_value("01 continuation count of a")
def _continuation_count(tiny) -> int:
    """N1+(· a): the distinct tokens (<s> included) seen right before a."""
    from ..models.ngram import NGramLM

    model = NGramLM(2, "kn", discount=0.5).fit(tiny)
    return int(model.continuation_counts(1)[model.vocab["a"]])


@_value("01 unigram perplexity")
def _unigram_perplexity(tiny) -> float:
    from ..models.ngram import NGramLM

    return NGramLM(1, "mle").fit(tiny).perplexity([["b", "a", "<eos>"]])


# notebook 02
def _sgns_cases() -> list[tuple]:
    g = _generator(1)
    return [(torch.randn(4, generator=g), torch.randn(4, generator=g), torch.randn(3, 4, generator=g))
            for _ in range(3)]


@_function("02 gradient of the SGNS loss", lambda: _sgns_cases())
def _sgns_gradient(v_c: torch.Tensor, u_o: torch.Tensor, u_neg: torch.Tensor) -> torch.Tensor:
    """∂/∂v_c of −log σ(u_oᵀv_c) − Σ_k log σ(−u_kᵀv_c), by autograd through lmlib's SGNS loss."""
    from ..models.word2vec import sgns_loss

    v = v_c.detach().clone().requires_grad_(True)
    sgns_loss(v[None], u_o[None], u_neg[None])[0].backward()
    return v.grad


@_function("02 expected kept occurrences", lambda: [(500, 10_000, 1e-3), (3, 10_000, 1e-3), (40_000, 1_000_000, 1e-5),
                                                    (10, 1_000_000, 1e-5)])
def _expected_kept(count: int, total: int, t: float) -> float:
    """Occurrences of a word seen ``count`` times in ``total`` tokens that the paper's subsampling keeps, on average:
    count · min(1, √(t / f)) with f = count / total (Mikolov et al. 2013b, eq. 5)."""
    from ..models.word2vec import keep_probability

    return count * keep_probability(torch.tensor(count / total, dtype=torch.float64), t, "paper").item()


def _neighbour_cases() -> list[tuple]:
    g = _generator(2)
    words = [f"w{i}" for i in range(30)]
    return [(torch.randn(30, 5, generator=g), words, "w3", 4), (torch.randn(30, 8, generator=g), words, "w17", 6)]


@_function("02 cosine nearest neighbours", lambda: _neighbour_cases())
def _neighbours(vectors, itos, word, k) -> list[str]:
    from ..eval.word_eval import nearest_neighbours

    return [w for w, _ in nearest_neighbours(vectors, itos, word, k)]


# notebook 03
def _cifg_cases() -> list[tuple]:
    from ..models.rnn import LSTMCell

    torch.manual_seed(0)
    cell = LSTMCell(3, 4)
    g = _generator(3)
    return [(torch.randn(2, 3, generator=g), torch.randn(2, 4, generator=g), torch.randn(2, 4, generator=g), cell)
            for _ in range(3)]


@_function("03 one coupled-gate LSTM step", lambda: _cifg_cases())
def _cifg_step(X, H, C, cell) -> torch.Tensor:
    """One step of the LSTM variant with coupled input and forget gates (Greff et al. 2017, "CIFG"): I_t = 1 − F_t,
    the input gate's own weights unused. Returns (H_t, C_t)."""
    g = cell.gates(X, H)
    C_t = g["F"] * C + (1 - g["F"]) * g["C_tilde"]
    return (g["O"] * torch.tanh(C_t)).detach(), C_t.detach()


_value("03 parameters of nn.LSTM(200, 200)")(lambda: lstm_parameter_count(200, 200))


@_value("03 windows per epoch")
def _windows(train_ids) -> int:
    from ..text.batching import batchify, bptt_batches

    return len(list(bptt_batches(batchify(train_ids, 20), 35)))


@_value("03 shape of the last x")
def _last_shape(train_ids) -> tuple:
    from ..text.batching import batchify, bptt_batches

    return tuple(list(bptt_batches(batchify(train_ids, 20), 35))[-1].x.shape)


# notebook 04
def _masked_attention_cases() -> list[tuple]:
    g = _generator(1)
    cases = []
    for n, real in ((5, 3), (4, 4), (6, 1)):
        mask = torch.arange(n) < real
        cases.append((torch.randn(4, generator=g), torch.randn(n, 4, generator=g), torch.randn(n, 3, generator=g),
                      mask))
    return cases


@_function("04 scaled dot-product attention over real keys", lambda: _masked_attention_cases())
def _masked_scaled_dot(query, keys, values, mask) -> torch.Tensor:
    """One query's context Σ_j α_j v_j, α = softmax(K q / √d) over the keys where ``mask`` is True only."""
    from ..models.attention import make_attention

    return make_attention("scaled_dot", 0, 0)(query[None], keys[None], values[None], mask[None])[0][0].detach()


@_function("04 circular shift by up to two", lambda: [
    (torch.tensor([0.7, 0.2, 0.1, 0.0, 0.0]), torch.tensor([0.1, 0.2, 0.4, 0.2, 0.1])),
    (torch.tensor([0.0, 0.0, 1.0, 0.0]), torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0])),
    (torch.tensor([0.1, 0.2, 0.3, 0.4, 0.0, 0.0]), torch.tensor([0.5, 0.0, 0.0, 0.3, 0.2]))])
def _shift_by_two(w, s) -> torch.Tensor:
    """The NTM's circular shift (Graves et al. 2014, eq. 8) with s over the five offsets −2 … +2."""
    from ..models.ntm import shift

    return shift(w, s, offsets=(-2, -1, 0, 1, 2))


@_value("04 BLEU-2 of 'il est grand'")
def _bleu2() -> float:
    from ..eval.metrics import corpus_bleu

    return corpus_bleu([["il", "est", "grand"]], [[["il", "est", "très", "grand"]]], max_n=2)


# notebook 05
def _padded_attention_cases() -> list[tuple]:
    g = _generator(1)
    return [(*(torch.randn(2, n, 8, generator=g) for n in (3, 5, 5)), torch.tensor([5, 2])),
            (*(torch.randn(3, n, 4, generator=g) for n in (4, 6, 6)), torch.tensor([1, 6, 3]))]


@_function("05 attention that skips padded keys", lambda: _padded_attention_cases())
def _padded_attention(Q, K, V, lengths) -> torch.Tensor:
    """softmax(Q Kᵀ / √d_k) V where row b's keys from index lengths[b] on are padding and get no weight."""
    from ..models.multihead import padding_mask, scaled_dot_product_attention

    mask = padding_mask(lengths, K.shape[1])[:, None, :]  # (batch, 1, m): True at padded keys
    return scaled_dot_product_attention(Q, K, V, mask=mask)[0]


_value("05 PE(3, 5) for d_model = 8")(lambda: __import__("math").cos(3 / 10000 ** (4 / 8)))


@_function("05 causal mask with a window", lambda: [(1, 1), (5, 2), (6, 3), (4, 4)])
def _windowed_causal_mask(size: int, window: int) -> torch.Tensor:
    """True where position t may not attend: keys after t, and keys more than ``window − 1`` positions before t
    (each position sees itself and the ``window − 1`` before it, as in a sliding-window decoder)."""
    from ..models.multihead import causal_mask

    t = torch.arange(size)
    return causal_mask(size) | (t[None, :] <= t[:, None] - window)


# notebook 07
@_function("07 STLR with a cosine decay", lambda: [(0, 100, 0.1, 32, 0.01), (5, 100, 0.1, 32, 0.01),
                                                  (10, 100, 0.1, 32, 0.01), (57, 100, 0.1, 32, 0.01),
                                                  (99, 100, 0.1, 32, 0.01), (3, 20, 0.25, 10, 0.004)])
def _stlr_cosine(t: int, T: int, cut_frac: float, ratio: float, eta_max: float) -> float:
    """STLR's rise (p = t / cut up to the peak), then p = (1 + cos(π (t − cut) / (T − cut))) / 2 down to 0, through
    the same η_t = η_max · (1 + p (ratio − 1)) / ratio: the triangle's straight decay bent into a half cosine."""
    import math

    cut = math.floor(T * cut_frac)
    p = t / cut if t < cut else (1 + math.cos(math.pi * (t - cut) / (T - cut))) / 2
    return eta_max * (1 + p * (ratio - 1)) / ratio


@_value("07 rates with a shared lowest pair")
def _shared_lowest_rates() -> list[float]:
    """Five groups (embedding, LSTM 1-3, head), η^L = 0.01 for the head, η^{l−1} = η^l / 2.6, except that the embedding
    trains at LSTM 1's rate."""
    rates = [0.01 / 2.6 ** k for k in (3, 3, 2, 1, 0)]
    return rates


def _left_padded_pool_cases() -> list[tuple]:
    g = _generator(7)
    H = torch.randn(3, 5, 4, generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.bool)
    return [(H, mask)]


@_function("07 first, last and max over left-padded rows", lambda: _left_padded_pool_cases())
def _first_last_max(H: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[h_first, h_T, maxpool(H)]`` ``(batch, 3d)`` over each row's real tokens, the padding on the left: the first
    real token is where the padding ends, the last is the final position."""
    rows = torch.arange(H.size(0))
    first = mask.int().argmax(1)  # the first True of each row
    h_max = H.masked_fill(~mask[..., None], float("-inf")).max(1).values
    return torch.cat([H[rows, first], H[rows, -1], h_max], dim=1)


@_function("07 head and tail by a fraction", lambda: [(list(range(10)), 4, 0.25), (list(range(10)), 8, 0.25),
                                                      (list(range(12)), 6, 0.5), (list(range(3)), 8, 0.25),
                                                      (list(range(9)), 9, 0.1), (list(range(20)), 7, 0.0)])
def _head_tail_fraction(seq, max_len: int, head_frac: float) -> list:
    """``seq`` whole when it fits, else its first ``floor(max_len · head_frac)`` items and its last ones up to
    ``max_len``: a cut that keeps more of a review's ending, where its verdict often sits."""
    import math

    if len(seq) <= max_len:
        return list(seq)
    head = math.floor(max_len * head_frac)
    return list(seq[:head]) + list(seq[len(seq) - (max_len - head):])
