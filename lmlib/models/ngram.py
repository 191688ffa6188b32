"""N-gram language models: MLE, add-k, Jelinek-Mercer interpolation and (modified) Kneser-Ney.

A language model factors a sentence by the chain rule, P(w_1..w_m) = prod_i p(w_i | w_1..w_{i-1}),
and an n-gram model keeps only the last n-1 words of the history (the Markov assumption).
Everything here is counted with NumPy on integer-coded n-grams.

Papers:
* F. Jelinek and R. Mercer (1980), Interpolated estimation of Markov source parameters from sparse data.
* R. Kneser and H. Ney (1995), Improved backing-off for m-gram language modeling.
* S. F. Chen and J. Goodman (1998), An empirical study of smoothing techniques for language modeling
  (TR-10-98): interpolated Kneser-Ney and modified Kneser-Ney with three discounts D1, D2, D3+.
* T. Mikolov et al. (2011), Empirical evaluation and combination of advanced language modeling
  techniques: KN5 = 141.2 perplexity on PTB test, the number this module is checked against.

Conventions (the same as SRILM and KenLM):
* Vocabulary: the training types plus ``<unk>``; a word outside it is read as ``<unk>``, in the predicted
  word and in the context alike. PTB already has a closed vocabulary of 10,000 types (with ``<eos>``),
  so nothing is mapped there.
* Sentences: each sentence is a list of tokens (PTB lines end with ``<eos>``, which is predicted like
  any word). A start symbol ``<s>`` is put in front; it is context only, never predicted, and is not in
  the vocabulary. ``padding="single"`` (default, SRILM/KenLM) puts one ``<s>`` and lets no n-gram reach
  further back, so the first word is predicted from the bigram context ``<s>``. ``padding="full"`` puts
  order-1 copies (nltk's ``pad_both_ends`` on the left), so every word has a full-length context.
* Perplexity = exp(-(1/N) sum_i ln p(w_i | history)), N = number of predicted tokens (82,430 on PTB test).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain, repeat

import numpy as np

from ..text.vocab import EOS, UNK, Vocab

SMOOTHINGS = ("mle", "add_k", "interp", "kn", "mkn")
BOS = "<s>"


def ngrams(sentence: Sequence[str], order: int, padding: str = "single") -> list[tuple[str, ...]]:
    """Every n-gram (n = 1..order) that ends on a predicted token of ``sentence``, as the model counts them.

    >>> ngrams(["a", "b"], 2)
    [('a',), ('<s>', 'a'), ('b',), ('a', 'b')]
    """
    _check_order(order)
    pad = _pad_length(order, padding)
    tokens = [BOS] * pad + list(sentence)
    return [tuple(tokens[t - n + 1:t + 1]) for t in range(pad, len(tokens)) for n in range(1, order + 1) if t - n + 1 >= 0]


def _check_order(order: int) -> None:
    if not isinstance(order, (int, np.integer)) or order < 1:
        raise ValueError(f"order must be an integer >= 1 (1 = unigram, 2 = bigram, ...), got {order!r}")


def _pad_length(order: int, padding: str) -> int:
    if padding == "single":
        return 1
    if padding == "full":
        return max(order - 1, 1)
    raise ValueError(f"padding must be 'single' (one <s>, as SRILM/KenLM) or 'full' (order-1 copies, as nltk), got {padding!r}")


def _check_corpus(sentences: Iterable[Sequence[str]]) -> tuple[list, Counter]:
    """The sentences as a list, and the count of every token; refuses an empty corpus, strings for token
    lists and the start symbol in the text."""
    sentences = sentences if isinstance(sentences, list) else list(sentences)
    if not sentences or not any(sentences):
        raise ValueError("cannot fit an n-gram model on an empty corpus: give at least one non-empty sentence")
    if any(isinstance(s, str) for s in sentences):
        raise ValueError("each sentence must be a list of tokens, not a string; split it first")
    counts = Counter(chain.from_iterable(sentences))
    if BOS in counts:
        raise ValueError(f"{BOS!r} is the start symbol the model adds itself; remove it from the training text")
    return sentences, counts


class NGramLM:
    """An order-``order`` n-gram language model over words.

    Args:
        order: n, the length of the longest n-gram (context of n-1 words).
        smoothing: ``"mle"`` (relative frequencies), ``"add_k"`` (Lidstone; k=1 is Laplace), ``"interp"``
            (Jelinek-Mercer: every order mixed with weight ``lam``), ``"kn"`` (interpolated Kneser-Ney, one
            discount per order) or ``"mkn"`` (modified Kneser-Ney, three discounts per order).
        k: the pseudo-count of add-k smoothing, > 0 (k = 0 would be the MLE: use ``"mle"``).
        lam: the Jelinek-Mercer weight of the higher order, 0 < lam < 1.
        discount: KN/MKN discounts. ``None`` estimates them from counts of counts (Chen & Goodman 1998);
            a number fixes one discount for every order; a sequence gives one per order (index 0 = unigrams),
            each a number, or for ``"mkn"`` a triple (D1, D2, D3+).
        padding: ``"single"`` or ``"full"`` start symbols, see the module docstring.
    """

    def __init__(self, order: int, smoothing: str = "kn", *, k: float = 1.0, lam: float = 0.6,
                 discount: float | Sequence | None = None, padding: str = "single"):
        _check_order(order)
        if smoothing not in SMOOTHINGS:
            raise ValueError(f"smoothing must be one of {SMOOTHINGS}, got {smoothing!r}")
        if not (k >= 0 and math.isfinite(k)):
            raise ValueError(f"k is a pseudo-count and must be a finite number >= 0, got {k}")
        if smoothing == "add_k" and k == 0:
            raise ValueError("add-k smoothing needs k > 0 (k = 0 is the unsmoothed MLE, and an unseen context "
                             "would get 0/0); use smoothing='mle' for relative frequencies, or a small k such as 0.01")
        if not 0 < lam < 1:
            raise ValueError(f"lam is an interpolation weight and must lie strictly between 0 and 1, got {lam}")
        _pad_length(order, padding)
        self.order, self.smoothing, self.k, self.lam, self.padding = int(order), smoothing, float(k), float(lam), padding
        self._discount_arg = discount
        self.vocab: Vocab | None = None

    def __repr__(self) -> str:
        fitted = f", {len(self.vocab)} types" if self.vocab is not None else ", not fitted"
        return f"NGramLM(order={self.order}, smoothing={self.smoothing!r}{fitted})"

    # ---------------------------------------------------------------- counting
    def _encode(self, sentences: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Flat ids of the padded sentences and each token's position in its padded sentence, both (T,)."""
        pad = _pad_length(self.order, self.padding)
        if any(isinstance(s, str) for s in sentences):
            raise ValueError("each sentence must be a list of tokens, not a string; split it first")
        lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences)) + pad
        stoi = dict(self.vocab.stoi, **{BOS: self.bos_id})
        words = np.fromiter(map(stoi.get, chain.from_iterable(sentences), repeat(self.vocab.unk_id)), dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        pos = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
        ids = np.full(len(pos), self.bos_id, dtype=np.int64)
        ids[pos >= pad] = words
        return ids, pos

    def fit(self, sentences: Iterable[Sequence[str]]) -> NGramLM:
        """Count every n-gram of ``sentences`` (lists of tokens) and precompute what smoothing needs."""
        sentences, counts = _check_corpus(sentences)
        self.vocab = Vocab(counts, unk=UNK)
        self.bos_id = len(self.vocab)
        self.base = len(self.vocab) + 1  # ids 0..V-1 are words, V is <s>
        ids, pos = self._encode(sentences)
        pad = _pad_length(self.order, self.padding)
        predicted = pos >= pad
        N, B = self.order, self.base
        # Table n holds the distinct n-grams that end anywhere (also on <s>, so that contexts exist), sorted
        # by key = (id of its first n-1 words in table n-1) * B + last word. Table 1 is indexed by word id.
        self.keys, self.count, self.first = [None] * (N + 1), [None] * (N + 1), [None] * (N + 1)
        self.prefix, self.suffix = [None] * (N + 1), [None] * (N + 1)
        self.count[1] = np.bincount(ids[predicted], minlength=B)
        self.first[1] = np.arange(B)
        position_ids = ids.copy()  # id (in table n-1) of the (n-1)-gram ending at each position, -1 if none
        for n in range(2, N + 1):
            valid = np.flatnonzero(pos >= n - 1)
            keys = position_ids[valid - 1] * B + ids[valid]
            uniq, first_at, inverse = np.unique(keys, return_index=True, return_inverse=True)
            self.keys[n] = uniq
            self.prefix[n] = uniq // B
            self.count[n] = np.bincount(inverse[predicted[valid]], minlength=len(uniq))
            self.first[n] = self.first[n - 1][self.prefix[n]]
            new_ids = np.full_like(ids, -1)
            new_ids[valid] = inverse
            # the suffix of the n-gram ending at t is the (n-1)-gram ending at t, already in position_ids
            self.suffix[n] = position_ids[valid[first_at]]
            position_ids = new_ids
        self._prepare_smoothing()
        return self

    def with_settings(self, order: int | None = None, smoothing: str | None = None, **options) -> NGramLM:
        """A model with another order (not above this one) or smoothing that shares this model's counts.

        Counting is the slow part, so an experiment over orders and smoothings counts once at the highest
        order and only recomputes the smoothing statistics. ``options``: k, lam, discount (else this model's).
        """
        self._check_fitted()
        order = self.order if order is None else order
        _check_order(order)
        if order > self.order:
            raise ValueError(f"this model counted n-grams up to order {self.order}; fit a new model for order {order}")
        if self.padding == "full" and order != self.order:
            raise ValueError("with padding='full' the number of start symbols depends on the order; fit a new model")
        settings = dict(k=self.k, lam=self.lam, discount=self._discount_arg, padding=self.padding)
        settings.update(options)
        model = NGramLM(order, self.smoothing if smoothing is None else smoothing, **settings)
        model.vocab, model.bos_id, model.base = self.vocab, self.bos_id, self.base
        for table in ("keys", "count", "first", "prefix", "suffix"):
            setattr(model, table, getattr(self, table)[: order + 1])
        model._prepare_smoothing()
        return model

    def _prepare_smoothing(self) -> None:
        """Per order n: the counts it uses, its discounts, and per-context totals (indexed by table n-1 ids)."""
        N, kn = self.order, self.smoothing in ("kn", "mkn")
        # the counts each order uses: raw, or KN's adjusted (continuation) counts below the top order
        self.used = [None] + [self.continuation_counts(n) if kn and n < N else self.count[n].astype(np.float64)
                              for n in range(1, N + 1)]
        self.discounts = self._discounts() if kn else None
        self.context_total, self.context_gamma = [None] * (N + 1), [None] * (N + 1)
        for n in range(1, N + 1):
            c = self.used[n]
            groups = np.zeros(len(c), dtype=np.int64) if n == 1 else self.prefix[n]
            size = 1 if n == 1 else len(self.count[n - 1])
            self.context_total[n] = np.bincount(groups, weights=c, minlength=size)
            if self.discounts is not None:
                d = self.discounts[n - 1]
                removed = np.where(c >= 3, d[2], np.where(c == 2, d[1], np.where(c == 1, d[0], 0.0)))
                with np.errstate(invalid="ignore", divide="ignore"):
                    self.context_gamma[n] = np.bincount(groups, weights=removed, minlength=size) / self.context_total[n]

    def continuation_counts(self, n: int) -> np.ndarray:
        """Kneser-Ney's adjusted counts of table n (n < order): N1+(. w_{i-n+1}^i) = |{v : c(v w_{i-n+1}^i) > 0}|.

        The number of distinct words seen just before the n-gram, not how often it occurs. With single padding
        an n-gram that starts with <s> has no word before it, so it keeps its raw count (as SRILM and KenLM).
        """
        if not 1 <= n < self.order:
            raise ValueError(f"continuation counts exist for orders 1..{self.order - 1}, got n={n}")
        seen_above = self.count[n + 1] > 0
        counts = np.bincount(self.suffix[n + 1][seen_above], minlength=len(self.count[n])).astype(np.float64)
        if self.padding == "single":
            starts = self.first[n] == self.bos_id
            counts[starts] = self.count[n][starts]
        return counts

    def _given_discounts(self) -> np.ndarray:
        """The ``discount`` argument as an (order, 3) array: one number or triple for all orders, or one per order."""
        N, arg = self.order, self._discount_arg
        rows = [arg] * N if np.ndim(arg) == 0 else list(arg)
        if len(rows) != N:
            raise ValueError(f"discount has {len(rows)} entries but the model has {N} orders")
        out = np.array([[float(r)] * 3 if np.ndim(r) == 0 else [float(x) for x in r] for r in rows])
        if out.shape != (N, 3):
            raise ValueError(f"each discount must be a number or a triple (D1, D2, D3+), got {arg!r}")
        if np.any(out < 0) or np.any(out > np.array([1.0, 2.0, 3.0])):
            raise ValueError(f"discounts must satisfy 0 <= D1 <= 1, 0 <= D2 <= 2, 0 <= D3+ <= 3, got {out.tolist()}")
        return out

    def _discounts(self) -> np.ndarray:
        """(order, 3) discounts D1, D2, D3+ per order (row 0 = unigrams), unless given as ``discount``.

        Estimated from the counts of counts n_r of the counts each order uses (Chen & Goodman 1998, eq. 26):
        Y = n1 / (n1 + 2 n2); KN: D = Y; MKN: D1 = 1 - 2Y n2/n1, D2 = 2 - 3Y n3/n2, D3+ = 3 - 4Y n4/n3.
        """
        if self._discount_arg is not None:
            return self._given_discounts()
        N = self.order
        out = np.zeros((N, 3))
        for n in range(1, N + 1):
            c = self.used[n]
            n1, n2, n3, n4 = (float(np.sum(c == r)) for r in (1, 2, 3, 4))
            if n1 == 0 or n2 == 0 or (self.smoothing == "mkn" and (n3 == 0 or n4 == 0)):
                raise ValueError(f"cannot estimate Kneser-Ney discounts for order {n}: counts of counts n1..n4 = "
                                 f"{n1:.0f}, {n2:.0f}, {n3:.0f}, {n4:.0f} (the corpus is too small); pass discount=")
            y = n1 / (n1 + 2 * n2)
            out[n - 1] = [y] * 3 if self.smoothing == "kn" else [1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3]
            if np.any(out[n - 1] < 0) or np.any(out[n - 1] > [1, 2, 3]):
                raise ValueError(f"the estimated discounts of order {n}, {np.round(out[n - 1], 3).tolist()}, leave the range "
                                 f"0 <= D_r <= r: its counts of counts n1..n4 = {n1:.0f}, {n2:.0f}, {n3:.0f}, {n4:.0f} do not "
                                 f"fall off as in natural text (e.g. the unigrams of a closed vocabulary); pass discount=")
        return out

    # ---------------------------------------------------------------- probabilities
    def _check_fitted(self) -> None:
        if self.vocab is None:
            raise ValueError("the model is not fitted yet: call .fit(sentences) first")

    def _lookup(self, n: int, context_ids: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Row of each (context, word) n-gram in table n, or -1 where it was never seen (or context_ids is -1)."""
        if n == 1:
            return words.copy()
        keys = context_ids * self.base + words
        at = np.minimum(np.searchsorted(self.keys[n], keys), len(self.keys[n]) - 1)
        return np.where((context_ids >= 0) & (self.keys[n][at] == keys), at, -1)

    def _probabilities(self, contexts: list[np.ndarray], grams: list[np.ndarray], top: int | None = None) -> np.ndarray:
        """p(w | h) for M (history, word) pairs, h' being h without its first word and V the vocabulary size:

        * mle:    p(w | h) = c(h w) / c(h .)
        * add_k:  p(w | h) = (c(h w) + k) / (c(h .) + k V)                              (Lidstone)
        * interp: p_n(w | h) = lam c(h w) / c(h .) + (1 - lam) p_{n-1}(w | h')          (Jelinek & Mercer 1980)
        * kn/mkn: p_n(w | h) = max(c(h w) - D(c(h w)), 0) / c(h .) + gamma(h) p_{n-1}(w | h'),
                  gamma(h) = (D1 N1(h .) + D2 N2(h .) + D3+ N3+(h .)) / c(h .)          (Chen & Goodman 1998)

        with p_0(w) = 1/V, p_n = p_{n-1} where c(h .) = 0, and for kn/mkn c the continuation count below
        the top order. Given for each order n the row of the context in table n-1
        (``contexts[n]``: -1 if never seen, -2 if the history is shorter than n-1 words; 0 for n = 1) and of
        the n-gram in table n (``grams[n]``, -1 if unseen). ``top`` stops the recursion at a lower order
        (for ``explain``). Returns (M,)."""
        N = self.order if top is None else top
        if self.smoothing in ("mle", "add_k"):
            return self._backoff(contexts, grams, N)
        return self._interpolate(contexts, grams, N)

    def _backoff(self, contexts: list[np.ndarray], grams: list[np.ndarray], N: int) -> np.ndarray:
        """MLE and add-k: the estimate of the highest order n <= N whose context is usable, else 1/V."""
        V, M = len(self.vocab), len(grams[1])
        p = np.full(M, 1.0 / V)
        found = np.zeros(M, dtype=bool)
        for n in range(N, 0, -1):
            h, g = contexts[n], grams[n]
            total = np.where(h >= 0, self.context_total[n][np.maximum(h, 0)], 0.0)
            count = np.where(g >= 0, self.used[n][np.maximum(g, 0)], 0.0)
            # add-k uses the full context even when it was never seen (then p = 1/V); MLE has no value for an
            # unseen context (0/0), so it falls back to the longest seen suffix of the history
            usable = ~found & ((h != -2) if self.smoothing == "add_k" else (total > 0))
            with np.errstate(invalid="ignore", divide="ignore"):
                if self.smoothing == "add_k":
                    value = (count + self.k) / (total + self.k * V)
                else:
                    value = count / total
            p = np.where(usable, value, p)
            found |= usable
        return p

    def _interpolate(self, contexts: list[np.ndarray], grams: list[np.ndarray], N: int) -> np.ndarray:
        """Jelinek-Mercer and (modified) Kneser-Ney: from p_0 = 1/V up, each order n <= N mixes its own
        estimate with p_{n-1}; an order whose context was never seen passes p_{n-1} on unchanged."""
        p = np.full(len(grams[1]), 1.0 / len(self.vocab))
        for n in range(1, N + 1):
            h, g = contexts[n], grams[n]
            total = np.where(h >= 0, self.context_total[n][np.maximum(h, 0)], 0.0)
            count = np.where(g >= 0, self.used[n][np.maximum(g, 0)], 0.0)
            seen = total > 0
            safe_total = np.where(seen, total, 1.0)
            if self.smoothing == "interp":
                higher = self.lam * count / safe_total + (1 - self.lam) * p
            else:
                d = self.discounts[n - 1]
                discount = np.where(count >= 3, d[2], np.where(count == 2, d[1], np.where(count == 1, d[0], 0.0)))
                gamma = self.context_gamma[n][np.maximum(h, 0)]
                higher = np.maximum(count - discount, 0.0) / safe_total + np.where(seen, gamma, 0.0) * p
            p = np.where(seen, higher, p)
        return p

    def _context_rows(self, history: Sequence[int]) -> list[int]:
        """rows[m] = row of the last m words of ``history`` (ids) in table m, for m = 0..order-1;
        0 for m = 0, -1 if that m-gram was never seen, -2 if the history is shorter than m."""
        return [0] + [self._row_of(history[-m:]) if m <= len(history) else -2 for m in range(1, self.order)]

    def _row_of(self, gram: Sequence[int]) -> int:
        row = int(gram[0])
        for n in range(2, len(gram) + 1):
            row = int(self._lookup(n, np.array([row]), np.array([gram[n - 1]]))[0])
            if row < 0:
                return -1
        return row

    def _history_ids(self, context: Sequence[str]) -> list[int]:
        if isinstance(context, str):
            raise ValueError("context must be a list of tokens, not a string; split it first")
        pad = _pad_length(self.order, self.padding)
        ids = [self.bos_id if t == BOS else self.vocab[t] for t in context]
        if BOS not in context:  # a context is read from the sentence start, as in training
            ids = [self.bos_id] * pad + ids
        return ids[-(self.order - 1):] if self.order > 1 else []

    def next_distribution(self, context: Sequence[str] = ()) -> np.ndarray:
        """p(w | context) for every word w of the vocabulary, shape (V,), in ``vocab.itos`` order; sums to 1.

        ``context`` is read as the start of a sentence (start symbols are added unless it already has ``<s>``).
        """
        self._check_fitted()
        history = self._history_ids(context)
        V = len(self.vocab)
        words = np.arange(V)
        rows = self._context_rows(history)
        contexts = [None, np.zeros(V, dtype=np.int64)] + [np.full(V, rows[n - 1]) for n in range(2, self.order + 1)]
        grams = [None] + [self._lookup(n, contexts[n], words) for n in range(1, self.order + 1)]
        return self._probabilities(contexts, grams)

    def prob(self, word: str, context: Sequence[str] = ()) -> float:
        """p(word | context); unknown words are read as ``<unk>``."""
        return float(self.next_distribution(context)[self.vocab[word]])

    def token_probabilities(self, sentences: Iterable[Sequence[str]]) -> np.ndarray:
        """p(w_i | history) for every predicted token of ``sentences`` (all tokens, <eos> included), shape (N,)."""
        self._check_fitted()
        sentences = sentences if isinstance(sentences, list) else list(sentences)
        if not sentences or not any(sentences):
            raise ValueError("cannot evaluate on an empty corpus: give at least one non-empty sentence")
        ids, pos = self._encode(sentences)
        pad = _pad_length(self.order, self.padding)
        position_rows = [None, ids.copy()]
        for n in range(2, self.order + 1):
            rows = np.full_like(ids, -1)
            valid = np.flatnonzero(pos >= n - 1)
            rows[valid] = self._lookup(n, position_rows[n - 1][valid - 1], ids[valid])
            position_rows.append(rows)
        targets = np.flatnonzero(pos >= pad)
        contexts = [None, np.zeros(len(targets), dtype=np.int64)] + [
            np.where(pos[targets] >= n - 1, position_rows[n - 1][targets - 1], -2) for n in range(2, self.order + 1)]
        grams = [None] + [position_rows[n][targets] for n in range(1, self.order + 1)]
        return self._probabilities(contexts, grams)

    def perplexity(self, sentences: Iterable[Sequence[str]]) -> float:
        """PP = exp(-(1/N) sum_i ln p(w_i | w_{i-n+1}..w_{i-1})) over the N predicted tokens (inf if any p is 0)."""
        p = self.token_probabilities(sentences)
        with np.errstate(divide="ignore"):
            return float(np.exp(-np.mean(np.log(p))))

    def _check_sampling(self, max_tokens: int, temperature: float) -> None:
        self._check_fitted()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if not isinstance(max_tokens, (int, np.integer)) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer >= 1 (the most words to draw), got {max_tokens!r}")

    def sample(self, context: Sequence[str] = (), max_tokens: int = 30, temperature: float = 1.0,
               seed: int | None = 0, stop: str | None = EOS) -> list[str]:
        """Draw words one at a time from p(w | history)^(1/temperature), renormalised, until ``stop``."""
        self._check_sampling(max_tokens, temperature)
        rng = np.random.default_rng(seed)
        words = list(context)
        out: list[str] = []
        for _ in range(max_tokens):
            p = self.next_distribution(words)
            logits = np.log(np.maximum(p, 1e-300)) / temperature
            q = np.exp(logits - logits.max()) * (p > 0)
            w = self.vocab.itos[int(rng.choice(len(q), p=q / q.sum()))]
            out.append(w)
            words.append(w)
            if w == stop:
                break
        return out

    def explain(self, word: str, context: Sequence[str] = ()) -> list[dict]:
        """How p(word | context) is built, order by order (interp/kn/mkn): the count used, the context total,
        the discount, gamma (the mass passed down) and p_n, the probability after mixing in order n."""
        self._check_fitted()
        if self.smoothing not in ("interp", "kn", "mkn"):
            raise ValueError(f"explain() shows the interpolation of interp/kn/mkn, not {self.smoothing!r}")
        history = self._history_ids(context)
        rows = self._context_rows(history)
        w = np.array([self.vocab[word]])
        out, contexts, grams = [], [None], [None]
        for n in range(1, self.order + 1):
            contexts.append(np.array([0 if n == 1 else rows[n - 1]]))
            grams.append(self._lookup(n, contexts[n], w))
            h, g = int(contexts[n][0]), int(grams[n][0])
            count = float(self.used[n][g]) if g >= 0 else 0.0
            total = float(self.context_total[n][h]) if h >= 0 else 0.0
            shown = [self.vocab.itos[i] if i < len(self.vocab) else BOS for i in history[len(history) - n + 1:]] if n > 1 else []
            row = {"order": n, "context": " ".join(shown), "count": count, "context_total": total,
                   "p_n": float(self._probabilities(contexts, grams, top=n)[0])}
            if self.discounts is not None:
                d = self.discounts[n - 1]
                row["discount"] = float(0 if count == 0 else d[min(int(count), 3) - 1])
                row["gamma"] = float(self.context_gamma[n][h]) if total > 0 else 1.0
            out.append(row)
        return out

