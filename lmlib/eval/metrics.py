"""Translation metrics: corpus BLEU (Papineni et al. 2002) and chrF as nltk computes it.

Both compare a system's output with human references and are reported over sets of sentences (the
whole test set, or all sentences of one length bucket), because a single sentence's BLEU is often 0
(no matching 4-gram). They pool differently:

* BLEU is a corpus statistic: n-gram matches and lengths are summed over all sentences first.
* chrF here is nltk's ``corpus_chrf``: an F-score is computed per sentence and per n-gram order,
  and those are averaged. Popović (2015) defines chrF_β from precision and recall averaged over the
  orders, and sacrebleu's default (the usual source of published chrF) sums the character n-gram
  counts over the whole corpus, averages precision and recall over the orders, and only then takes
  F_β (with β = 2, where nltk and this module default to β = 3). The definitions give different
  numbers on the same outputs: scores from this module compare with nltk's, not with sacrebleu's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

Tokens = Sequence[str]


def _ngrams(tokens: Sequence, n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _check_corpus(hypotheses, references) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists; give one list per hypothesis")
    if len(hypotheses) == 0:
        raise ValueError("cannot score an empty corpus")
    if any(isinstance(h, str) for h in hypotheses):
        raise ValueError("hypotheses must be token lists, not strings; split them first")
    if any(len(refs) == 0 or isinstance(refs[0], str) for refs in references):
        raise ValueError("each item of references must be a non-empty list of token lists (one or more references)")


def corpus_bleu(hypotheses: Sequence[Tokens], references: Sequence[Sequence[Tokens]], max_n: int = 4) -> float:
    """BLEU in [0, 1] (Papineni et al. 2002, section 2.3):

        BLEU = BP · exp(Σ_{n=1..N} w_n log p_n),   w_n = 1/N,
        p_n  = Σ_sentences Σ_{g ∈ n-grams(hyp)} min(count_hyp(g), max_ref count_ref(g)) / Σ count_hyp(g),
        BP   = 1 if c > r else exp(1 - r/c),

    c the total hypothesis length and r the sum over sentences of the reference length closest to the
    hypothesis length (the shorter one on a tie). No smoothing: if some p_n is 0, BLEU is 0.
    A hypothesis shorter than n adds nothing to p_n (nltk adds 1 to the denominator instead, which
    lowers BLEU on corpora of very short sentences; otherwise the two agree).
    ``references[i]`` is the list of references of hypothesis i.
    """
    _check_corpus(hypotheses, references)
    if max_n < 1:
        raise ValueError(f"max_n must be at least 1, got {max_n}")
    matched, total = [0] * max_n, [0] * max_n
    hyp_len = ref_len = 0
    for hyp, refs in zip(hypotheses, references):
        hyp_len += len(hyp)
        ref_len += min((abs(len(r) - len(hyp)), len(r)) for r in refs)[1]
        for n in range(1, max_n + 1):
            counts = _ngrams(hyp, n)
            max_ref: Counter = Counter()
            for ref in refs:
                max_ref |= _ngrams(ref, n)
            matched[n - 1] += sum(min(c, max_ref[g]) for g, c in counts.items())
            total[n - 1] += sum(counts.values())
    if min(matched) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matched, total)) / max_n
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return brevity * math.exp(log_precision)


def sentence_chrf(hypothesis: Tokens | str, reference: Tokens | str, max_n: int = 6, beta: float = 3.0) -> float:
    """chrF_β in [0, 1] of one sentence as nltk's ``sentence_chrf`` computes it, on characters with
    whitespace removed:

        chrF_β = (1/N) Σ_{n=1..N} F_n,    F_n = (1 + β²) chrP_n chrR_n / (β² chrP_n + chrR_n),

    chrP_n (chrR_n) the fraction of the hypothesis' (reference's) character n-grams matched in the other
    side, counts clipped. β = 3 weighs recall 3 times as much as precision. An n-gram order with no
    match, or where a side is shorter than n, contributes F_n = 0 (nltk: 1e-16). Note the order of the
    averages: F per order, then the mean over orders; Popović (2015) averages chrP_n and chrR_n over n
    first and takes one F_β of the two means.
    """
    if beta <= 0 or max_n < 1:
        raise ValueError(f"beta must be positive and max_n at least 1, got beta={beta}, max_n={max_n}")
    # joining tokens and dropping all whitespace gives the same string for a token list or a sentence
    hyp = "".join("".join(hypothesis).split())
    ref = "".join("".join(reference).split())
    total = 0.0
    for n in range(1, max_n + 1):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        hits = sum((h & r).values())
        if hits == 0:
            continue
        precision, recall = hits / sum(h.values()), hits / sum(r.values())
        total += (1 + beta**2) * precision * recall / (beta**2 * precision + recall)
    return total / max_n


def corpus_chrf(hypotheses: Sequence[Tokens], references: Sequence[Sequence[Tokens]], max_n: int = 6,
                beta: float = 3.0) -> float:
    """chrF as computed by nltk's ``corpus_chrf``: the mean of the sentence scores,

        chrF_β = (1/|S|) Σ_{s ∈ S} (1/N) Σ_{n=1..N} F_{s,n},

    F_{s,n} the F_β of sentence s's character n-grams of order n (see :func:`sentence_chrf`). Every
    sentence weighs the same whatever its length; sacrebleu's corpus chrF sums the n-gram counts over
    sentences instead and gives different numbers. nltk takes one reference per sentence; with
    several, a sentence here scores against its best-matching one (with one reference this is exactly
    nltk's value, up to nltk's 1e-16 for orders without a match)."""
    _check_corpus(hypotheses, references)
    return sum(max(sentence_chrf(h, r, max_n, beta) for r in refs)
               for h, refs in zip(hypotheses, references)) / len(hypotheses)


def scores_by_length(hypotheses: Sequence[Tokens], references: Sequence[Sequence[Tokens]],
                     lengths: Sequence[int], edges: Sequence[int]) -> list[dict]:
    """:func:`corpus_bleu` and :func:`corpus_chrf` within each length bucket: bucket k holds the items with
    edges[k] <= length < edges[k+1]. Returns one dict per non-empty bucket: label, n, bleu, chrf."""
    if not len(hypotheses) == len(references) == len(lengths):
        raise ValueError(f"got {len(hypotheses)} hypotheses, {len(references)} reference lists, {len(lengths)} lengths")
    if len(edges) < 2 or any(a >= b for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be at least two increasing numbers, got {list(edges)}")
    rows = []
    for lo, hi in zip(edges, edges[1:]):
        idx = [i for i, n in enumerate(lengths) if lo <= n < hi]
        if idx:
            hyps, refs = [hypotheses[i] for i in idx], [references[i] for i in idx]
            label = f"{lo}" if hi == lo + 1 else f"{lo}-{hi - 1}"
            rows.append(dict(label=label, n=len(idx), bleu=corpus_bleu(hyps, refs), chrf=corpus_chrf(hyps, refs)))
    return rows
