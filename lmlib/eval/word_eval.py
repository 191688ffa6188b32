"""Intrinsic evaluation of word vectors: nearest neighbours, analogies, and similarity benchmarks.

* Analogies (Mikolov et al. 2013a, the "questions-words" set): a is to b as c is to ?, answered with
  3CosAdd, d* = argmax_{d ∉ {a, b, c}} cos(d, b − a + c) on unit-length vectors (Levy & Goldberg 2014
  name it). Accuracy is over the questions whose four words are all in the vocabulary; coverage is
  that share of all questions. Both are needed: a small vocabulary answers few, easy questions.
* Word-pair similarity: Spearman's ρ between cosine similarity and human scores, on WordSim-353
  (Finkelstein et al. 2002, relatedness and similarity mixed) and SimLex-999 (Hill et al. 2015,
  similarity only), over the pairs with both words in the vocabulary (coverage reported).

The numbers agree with gensim's ``KeyedVectors.evaluate_word_analogies`` / ``evaluate_word_pairs``
on the same vectors (tests/test_word2vec.py checks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch


def unit_rows(vectors: torch.Tensor) -> torch.Tensor:
    """Each row divided by its length: ``(|V|, d)`` -> ``(|V|, d)``; cosine similarity is then a dot product."""
    if vectors.dim() != 2:
        raise ValueError(f"vectors must be a (vocab, dim) matrix, got shape {tuple(vectors.shape)}")
    return vectors / vectors.norm(dim=1, keepdim=True).clamp(min=1e-12)


def _check_rows(vectors: torch.Tensor, itos: Sequence[str]) -> None:
    """Row i of ``vectors`` must be the vector of ``itos[i]``; a count mismatch means the two do not belong together."""
    if vectors.dim() != 2:
        raise ValueError(f"vectors must be a (vocab, dim) matrix, got shape {tuple(vectors.shape)}")
    if vectors.size(0) != len(itos):
        raise ValueError(f"vectors has {vectors.size(0)} rows but itos has {len(itos)} words; row i must be the "
                         "vector of itos[i], so pass the vocabulary the vectors were trained with")


def _items(vectors: torch.Tensor, itos: Sequence[str], items, what: str) -> tuple[list, dict[str, int]]:
    """``items`` as a list, refused when empty, and the word -> row map of checked ``vectors``."""
    items = list(items)
    if not items:
        raise ValueError(f"no {what} given")
    _check_rows(vectors, itos)
    return items, {w: i for i, w in enumerate(itos)}


def _index(stoi: dict[str, int], word: str) -> int:
    if word not in stoi:
        raise ValueError(f"{word!r} is not in the vocabulary; try a more frequent word")
    return stoi[word]


def nearest_neighbours(vectors: torch.Tensor, itos: Sequence[str], word: str, k: int = 10) -> list[tuple[str, float]]:
    """The k words with the highest cosine similarity to ``word`` (itself excluded), with their cosines."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    _check_rows(vectors, itos)
    stoi = {w: i for i, w in enumerate(itos)}
    unit = unit_rows(vectors)
    sims = unit @ unit[_index(stoi, word)]
    sims[stoi[word]] = -float("inf")
    best = sims.topk(min(k, len(itos) - 1))
    return [(itos[i], float(s)) for s, i in zip(best.values, best.indices)]


def analogy(vectors: torch.Tensor, itos: Sequence[str], a: str, b: str, c: str, k: int = 5) -> list[tuple[str, float]]:
    """3CosAdd: the k best d for "a is to b as c is to d", d ∉ {a, b, c}, scored by cos(d, b̂ − â + ĉ)."""
    _check_rows(vectors, itos)
    stoi = {w: i for i, w in enumerate(itos)}
    unit = unit_rows(vectors)
    ia, ib, ic = (_index(stoi, w) for w in (a, b, c))
    target = unit[ib] - unit[ia] + unit[ic]
    sims = unit @ (target / target.norm())
    sims[[ia, ib, ic]] = -float("inf")
    best = sims.topk(min(k, len(itos) - 3))
    return [(itos[i], float(s)) for s, i in zip(best.values, best.indices)]


@dataclass
class AnalogyResult:
    accuracy: float  # correct / answered
    coverage: float  # answered / total
    correct: int
    answered: int
    total: int
    sections: dict[str, tuple[int, int]] = field(default_factory=dict)  # section -> (correct, answered)


def evaluate_analogies(vectors: torch.Tensor, itos: Sequence[str], questions, lowercase: bool = True,
                       batch_size: int = 1024) -> AnalogyResult:
    """3CosAdd accuracy and coverage on analogy ``questions`` (objects with ``section, a, b, c, d``)."""
    questions, stoi = _items(vectors, itos, questions, "analogy questions")
    norm = str.lower if lowercase else str
    rows, kept = [], []
    for q in questions:
        words = [norm(w) for w in (q.a, q.b, q.c, q.d)]
        if all(w in stoi for w in words):
            rows.append([stoi[w] for w in words])
            kept.append(q.section)
    hits = []
    if rows:
        unit = unit_rows(vectors.float())
        for chunk in torch.tensor(rows).split(batch_size):
            target = unit[chunk[:, 1]] - unit[chunk[:, 0]] + unit[chunk[:, 2]]
            sims = target @ unit.T
            sims.scatter_(1, chunk[:, :3], -float("inf"))  # the question words may not be the answer
            hits += (sims.argmax(1) == chunk[:, 3]).tolist()
    sections: dict[str, tuple[int, int]] = {}
    for section, hit in zip(kept, hits):
        correct, answered = sections.get(section, (0, 0))
        sections[section] = (correct + hit, answered + 1)
    correct, answered = sum(hits), len(rows)
    return AnalogyResult(correct / answered if answered else 0.0, answered / len(questions), correct, answered,
                         len(questions), sections)


@dataclass
class PairResult:
    spearman: float
    coverage: float  # pairs used / all pairs
    pairs_used: int
    total: int


def evaluate_word_pairs(vectors: torch.Tensor, itos: Sequence[str], pairs, lowercase: bool = True) -> PairResult:
    """Spearman's ρ between cos(w1, w2) and the human score, over ``pairs`` (``word1, word2, score``) in vocabulary."""
    from scipy.stats import spearmanr

    pairs, stoi = _items(vectors, itos, pairs, "word pairs")
    norm = str.lower if lowercase else str
    used = [(stoi[norm(p.word1)], stoi[norm(p.word2)], p.score) for p in pairs
            if norm(p.word1) in stoi and norm(p.word2) in stoi]
    if len(used) < 3:
        raise ValueError(f"only {len(used)} pairs have both words in the vocabulary; Spearman needs at least 3")
    unit = unit_rows(vectors.double())
    i, j, gold = zip(*used)
    cosines = (unit[list(i)] * unit[list(j)]).sum(1)
    rho = spearmanr(gold, cosines.numpy()).statistic
    return PairResult(float(rho), len(used) / len(pairs), len(used), len(pairs))


def to_keyed_vectors(vectors: torch.Tensor, itos: Sequence[str]):
    """The same vectors as a gensim ``KeyedVectors`` (for cross-checks and gensim's tools)."""
    from gensim.models import KeyedVectors

    _check_rows(vectors, itos)
    kv = KeyedVectors(vector_size=vectors.size(1))
    kv.add_vectors(list(itos), vectors.detach().cpu().numpy())
    return kv
