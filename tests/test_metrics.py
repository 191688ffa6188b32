"""BLEU and chrF against nltk on the same data, plus a BLEU computed by hand."""

import math
import random

import pytest
from nltk.translate import bleu_score, chrf_score

from lmlib.eval.metrics import corpus_bleu, corpus_chrf, scores_by_length, sentence_chrf

# The examples of Papineni et al. 2002 (as used in nltk's docs), plus short French sentences.
HYP1 = "It is a guide to action which ensures that the military always obeys the commands of the party".split()
REF1 = [
    "It is a guide to action that ensures that the military will forever heed Party commands".split(),
    "It is the guiding principle which guarantees the military forces always being under the command of the Party".split(),
    "It is the practical guide for the army always to heed the directions of the party".split(),
]
HYP2 = "he read the book because he was interested in world history".split()
REF2 = ["he was interested in world history because he read the book".split()]


def random_corpus(seed, n=40, min_hyp_len=1):
    rng = random.Random(seed)
    words = "je tu il elle est suis es grand petit ici là pas ne très le la un une . !".split()
    hyps, refs = [], []
    for _ in range(n):
        ref = [rng.choice(words) for _ in range(rng.randint(3, 9))]
        hyp = [w if rng.random() < 0.7 else rng.choice(words) for w in ref]
        if rng.random() < 0.3:
            hyp = hyp[: rng.randint(min_hyp_len, len(hyp))] if len(hyp) > min_hyp_len else hyp
        refs.append([ref] + ([[rng.choice(words) for _ in range(5)]] if rng.random() < 0.3 else []))
        hyps.append(hyp)
    return hyps, refs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bleu_matches_nltk(seed):
    # hypotheses of at least 4 tokens: see test_bleu_short_hypotheses for the one difference
    hyps, refs = random_corpus(seed, min_hyp_len=4)
    hyps = [h for h in hyps if len(h) >= 4]
    refs = refs[: len(hyps)]
    hyps, refs = hyps + [HYP1, HYP2], refs + [REF1, REF2]
    assert corpus_bleu(hyps, refs) == pytest.approx(bleu_score.corpus_bleu(refs, hyps), abs=1e-12)
    assert corpus_bleu([HYP1, HYP2], [REF1, REF2]) == pytest.approx(bleu_score.corpus_bleu([REF1, REF2], [HYP1, HYP2]))


def test_bleu_short_hypotheses():
    """nltk counts a hypothesis with no n-gram of order n as 1 n-gram in p_n's denominator
    (``max(1, ...)``); Papineni's p_n, used here, counts 0. Adding that 1 back reproduces nltk."""
    hyps, refs = random_corpus(3)
    short = [sum(1 for h in hyps if len(h) < n) for n in range(1, 5)]
    assert short[3] > 0
    mine = corpus_bleu(hyps, refs)
    assert mine != pytest.approx(bleu_score.corpus_bleu(refs, hyps))
    # recompute nltk's version from the same counts
    matched, total = [0] * 4, [0] * 4
    for h, rs in zip(hyps, refs):
        for n in range(1, 5):
            grams = [tuple(h[i:i + n]) for i in range(len(h) - n + 1)]
            total[n - 1] += max(1, len(grams))
            matched[n - 1] += sum(min(grams.count(g), max([tuple(r[i:i + n]) for i in range(len(r) - n + 1)].count(g)
                                                           for r in rs)) for g in set(grams))
    c = sum(len(h) for h in hyps)
    r = sum(min((abs(len(x) - len(h)), len(x)) for x in rs)[1] for h, rs in zip(hyps, refs))
    nltk_like = min(1.0, math.exp(1 - r / c)) * math.exp(sum(math.log(m / t) for m, t in zip(matched, total)) / 4)
    assert nltk_like == pytest.approx(bleu_score.corpus_bleu(refs, hyps))


def test_bleu_by_hand():
    # hypothesis "the cat sat" vs reference "the cat sat down": p_1 = 3/3, p_2 = 2/2, c = 3, r = 4
    got = corpus_bleu(["the cat sat".split()], [["the cat sat down".split()]], max_n=2)
    assert got == pytest.approx(math.exp(1 - 4 / 3))
    # clipping: "the the the" against "the cat": p_1 = min(3, 1) / 3
    got = corpus_bleu(["the the the".split()], [["the cat".split()]], max_n=1)
    assert got == pytest.approx(1 / 3)
    # no matching 2-gram anywhere: BLEU-2 is 0
    assert corpus_bleu(["cat the".split()], [["the cat".split()]], max_n=2) == 0.0


@pytest.mark.parametrize("seed", [0, 1])
def test_chrf_matches_nltk(seed):
    hyps, refs = random_corpus(seed)
    single = [r[:1] for r in refs]
    want = chrf_score.corpus_chrf([r[0] for r in single], hyps)
    assert corpus_chrf(hyps, single) == pytest.approx(want, abs=1e-9)
    for h, r in zip(hyps[:10], single[:10]):
        assert sentence_chrf(h, r[0]) == pytest.approx(chrf_score.sentence_chrf(r[0], h), abs=1e-9)
    assert sentence_chrf(HYP1, REF1[0], beta=2.0) == pytest.approx(chrf_score.sentence_chrf(REF1[0], HYP1, beta=2.0))
    # a string and its token list score the same
    assert sentence_chrf(" ".join(HYP2), " ".join(REF2[0])) == pytest.approx(sentence_chrf(HYP2, REF2[0]))


def test_chrf_by_hand_is_the_mean_of_sentence_scores():
    # "ab" against "abc", β = 1, orders 1 and 2:
    #   n = 1: 2 of 2 hypothesis characters match (P = 1), 2 of 3 reference ones (R = 2/3): F = 0.8
    #   n = 2: "ab" matches (P = 1), "ab" of "ab", "bc" (R = 1/2):                     F = 2/3
    assert sentence_chrf("ab", "abc", max_n=2, beta=1.0) == pytest.approx((0.8 + 2 / 3) / 2)
    # β = 3: F_1 = 10 · (2/3) / (9 + 2/3) = 20/29, F_2 = 10 · (1/2) / (9 + 1/2) = 10/19
    assert sentence_chrf("ab", "abc", max_n=2) == pytest.approx((20 / 29 + 10 / 19) / 2)
    # "x" against "y" matches nothing: 0. The corpus score is the mean of the two sentences, 11/30.
    # Pooled counts (sacrebleu's corpus chrF) would give P = (2/3 + 1/1)/2, R = (2/4 + 1/2)/2, F = 5/8 instead.
    hyps, refs = [["ab"], ["x"]], [[["abc"]], [["y"]]]
    assert corpus_chrf(hyps, refs, max_n=2, beta=1.0) == pytest.approx(11 / 30)
    assert corpus_chrf(hyps, refs, max_n=2, beta=1.0) != pytest.approx(5 / 8)
    nltk_value = chrf_score.corpus_chrf(["abc", "y"], ["ab", "x"], max_len=2, beta=1.0)
    assert corpus_chrf(hyps, refs, max_n=2, beta=1.0) == pytest.approx(nltk_value, abs=1e-12)


def test_chrf_multi_reference_takes_best():
    hyp = ["il", "est", "grand", "."]
    good, bad = ["il", "est", "grand", "."], ["elle", "part", "."]
    assert corpus_chrf([hyp], [[bad, good]]) == pytest.approx(1.0)
    assert corpus_chrf([hyp], [[bad]]) < 0.5


def test_bad_input():
    with pytest.raises(ValueError, match="hypotheses but"):
        corpus_bleu([["a"]], [])
    with pytest.raises(ValueError, match="empty corpus"):
        corpus_chrf([], [])
    with pytest.raises(ValueError, match="token lists, not strings"):
        corpus_bleu(["a b"], [[["a", "b"]]])
    with pytest.raises(ValueError, match="list of token lists"):
        corpus_bleu([["a"]], [["a"]])


def test_scores_by_length_are_per_bucket_corpus_scores():
    hyps, refs = random_corpus(4)
    lengths = [len(r[0]) for r in refs]
    rows = scores_by_length(hyps, refs, lengths, [3, 6, 10])
    assert [r["label"] for r in rows] == ["3-5", "6-9"] and sum(r["n"] for r in rows) == len(hyps)
    short = [i for i, n in enumerate(lengths) if n < 6]
    assert rows[0]["bleu"] == corpus_bleu([hyps[i] for i in short], [refs[i] for i in short])
    assert rows[0]["chrf"] == corpus_chrf([hyps[i] for i in short], [refs[i] for i in short])
    with pytest.raises(ValueError, match="increasing"):
        scores_by_length(hyps, refs, lengths, [5, 5])
