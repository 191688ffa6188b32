"""Part-of-speech tagging from frozen features: where ELMo's paper shows what a biLM's layers know about syntax.

Peters et al. (2018, sec. 5.3, Table 5) tag the Penn Treebank with a linear classifier on each layer of their frozen
biLM: the first biLSTM layer tags better (97.3%) than the second (96.8%), so they read layer 1 as the more
syntactic one and the top layer as the more semantic one (word sense, Table 4). This module runs that experiment
on UD English-EWT's 17 universal tags (:func:`lmlib.data.load_ud_pos`) with few labelled sentences:

* **features**, one row per word: :func:`bilm_features` gives the biLM's L + 1 layers (layer 0 the character CNN's
  token vector x_k, then each LSTM layer, each ``[forward; backward]``); :func:`static_features` gives one
  word2vec-style vector per word (a word the vectors do not know gets zeros);
* **a tagger**: one linear softmax per word over standardized features (:func:`fit_tagger`), either on one layer or
  on the scalar mix of all layers (Peters et al.'s Equation 1, ELMo_k = γ Σ_j s_j h_{k,j}, s = softmax(w), w and γ
  learned with the tagger), trained with a fixed, seeded recipe (:data:`TAGGER`);
* **labelled sentences**: :func:`sample_sentences` draws them from a pool at seeded random, each smaller sample the
  start of the larger one of its seed;
* a **baseline** that needs no features: each word's most frequent tag in the labelled sentences
  (:func:`most_frequent_tag_accuracy`).

``tests/benchmarks/bench_elmo_pos.py`` runs it for a checkpoint and writes ``lmlib/results/elmo_pos.json``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import torch

from .elmo import fit_probe, probe_accuracy, token_features

# The tagger's recipe, fixed for every feature kind: Adam on rows drawn at random, as lmlib.recipes.elmo's probes.
TAGGER = dict(steps=300, lr=0.01, weight_decay=1e-4, batch_size=512)

Tagged = Sequence[Sequence[tuple[str, str]]]  # sentences of (word, tag) pairs, as load_ud_pos returns them


def words_of(sentences: Tagged) -> list[list[str]]:
    """The words of each tagged sentence."""
    return [[w for w, _ in s] for s in sentences]


def tag_ids(sentences: Tagged, tags: Sequence[str]) -> torch.Tensor:
    """``(n_words,)``: the index in ``tags`` of every word's tag, sentence after sentence; a tag outside ``tags``
    is refused."""
    index = {t: k for k, t in enumerate(tags)}
    unknown = sorted({t for s in sentences for _, t in s} - set(index))
    if unknown:
        raise ValueError(f"tags {unknown[:5]} are not in the tag set {list(tags)}; build the tag set from every split")
    return torch.tensor([index[t] for s in sentences for _, t in s], dtype=torch.long)


def sample_sentences(pool_size: int, sizes: Sequence[int], seed: int) -> dict[int, list[int]]:
    """``{size: indices into the pool}`` for each of ``sizes``: one seeded random order of the pool, each sample
    its first ``size`` entries, so the 100 sentences of a seed are among its 1,000."""
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes must be positive numbers of sentences, got {list(sizes)}")
    if max(sizes) > pool_size:
        raise ValueError(f"cannot draw {max(sizes)} sentences from a pool of {pool_size}")
    order = torch.randperm(pool_size, generator=torch.Generator().manual_seed(seed)).tolist()
    return {n: order[:n] for n in sizes}


def word_rows(sentences: Sequence[Sequence], chosen: Sequence[int]) -> torch.Tensor:
    """The rows (one per word, sentence after sentence as in :func:`bilm_features`) of the sentences ``chosen``."""
    starts, k = [], 0
    for s in sentences:
        starts.append(k)
        k += len(s)
    return torch.tensor([starts[i] + j for i in chosen for j in range(len(sentences[i]))], dtype=torch.long)


def bilm_features(bilm, sentences: Sequence[Sequence[str]], batch_size: int = 128) -> torch.Tensor:
    """``(n_words, L + 1, 2d)``: every layer of the frozen biLM at every word (:func:`lmlib.recipes.elmo.token_features`;
    each sentence read alone between ``<bos>`` and ``<eos>``)."""

    return token_features(bilm, sentences, batch_size).cpu()


def static_features(vectors: torch.Tensor, stoi: Mapping[str, int], sentences: Sequence[Sequence[str]],
                    lower: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(features (n_words, 1, d), known (n_words,))``: each word's static vector (looked up lower-cased when
    ``lower``), zeros where ``stoi`` has no row for it; ``known`` marks the words that had one."""
    if vectors.dim() != 2:
        raise ValueError(f"vectors must be (vocab, dim), got shape {tuple(vectors.shape)}")
    words = [w.lower() if lower else w for s in sentences for w in s]
    rows = torch.tensor([stoi.get(w, -1) for w in words], dtype=torch.long)
    known = rows >= 0
    out = torch.zeros(len(words), vectors.size(1))
    out[known] = vectors[rows[known]].float()
    return out.unsqueeze(1), known


def fit_tagger(train_x: torch.Tensor, train_y: torch.Tensor, num_tags: int, layer: int | None, seed: int,
               recipe: Mapping = TAGGER):
    """A linear softmax tagger (:class:`lmlib.models.elmo.FeatureProbe`) on one layer (``layer`` j) or on the
    scalar mix of all (``None``) of ``(n_words, L + 1, D)`` features, trained by ``recipe`` (:data:`TAGGER`) with
    seed ``seed``. Standardize the features first (:func:`lmlib.recipes.elmo.standardize`)."""

    if train_x.dim() != 3 or train_x.size(0) != train_y.numel():
        raise ValueError(f"need features (n_words, layers, dim) and one tag per word; got {tuple(train_x.shape)} "
                         f"features and {train_y.numel()} tags")
    return fit_probe(train_x, train_y, layer, num_tags, seed=seed, **recipe)


def tagger_accuracy(tagger, x: torch.Tensor, y: torch.Tensor) -> float:
    """The share of words whose predicted tag is ``y``."""

    return probe_accuracy(tagger, x, y)


def most_frequent_tag_accuracy(train: Tagged, test: Tagged) -> float:
    """Accuracy of tagging each test word with its most frequent tag among the labelled sentences ``train``, and a
    word they do not contain with their most frequent tag overall (ties: the tag seen first)."""
    by_word: dict[str, Counter] = {}
    overall: Counter = Counter()
    for s in train:
        for w, t in s:
            by_word.setdefault(w, Counter())[t] += 1
            overall[t] += 1
    if not overall:
        raise ValueError("no labelled words to count tags from")
    fallback = overall.most_common(1)[0][0]
    best = {w: c.most_common(1)[0][0] for w, c in by_word.items()}
    pairs = [(best.get(w, fallback), t) for s in test for w, t in s]
    return sum(p == t for p, t in pairs) / len(pairs)


def mix_weights(tagger) -> dict | None:
    """``{"s": softmax(w), "gamma": γ}`` of a scalar-mix tagger (None for a one-layer tagger)."""
    if tagger.mix is None:
        return None
    return {"s": torch.softmax(tagger.mix.w.detach(), 0).tolist(), "gamma": float(tagger.mix.gamma.detach())}
