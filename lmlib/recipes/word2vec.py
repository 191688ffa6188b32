"""Training skip-gram with negative sampling (Mikolov et al. 2013a, 2013b) the way the C tool does.

The model and its math are :mod:`lmlib.models.word2vec`; this recipe adds the data pipeline and the
schedule. Each epoch subsamples frequent words afresh, builds the dynamic-window pairs, shuffles them
and takes plain SGD steps on large batches of pairs, so that PyTorch's sparse embedding updates keep
one CPU core busy; the rate falls linearly from ``alpha`` to ``min_alpha``, as in the C code.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..models.word2vec import (
    SkipGramNS,
    Word2VecConfig,
    keep_probability,
    noise_distribution,
    skipgram_pairs,
)
from ..text.vocab import Vocab
from ..training.callbacks import LRSchedule
from ..training.objectives import NegativeSamplingLoss
from ..training.trainer import Trainer


@dataclass
class Word2Vec:
    """A trained model: ``vocab`` (word <-> row), ``vectors`` (|V|, d), the loss per epoch and the time taken."""

    vocab: Vocab
    model: SkipGramNS
    config: Word2VecConfig
    epoch_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def vectors(self) -> torch.Tensor:
        return self.model.vectors


def _vocab(sentences: Sequence[Sequence[str]], min_count: int) -> Vocab:
    counts = Counter(w for s in sentences for w in s)
    if not counts:
        raise ValueError("the corpus is empty: pass a list of tokenised sentences")
    frequent = sum(c >= min_count for c in counts.values())
    if frequent < 2:
        raise ValueError(f"only {frequent} word(s) occur at least min_count={min_count} times; lower min_count")
    return Vocab(counts, min_freq=min_count, unk=None)


def _stream(sentences: Sequence[Sequence[str]], vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """The id of every kept token and the number of its sentence, both ``(N,)``."""
    kept = [(vocab.stoi[w], n) for n, s in enumerate(sentences) for w in s if w in vocab.stoi]
    return torch.tensor([i for i, _ in kept]), torch.tensor([n for _, n in kept])


def train_word2vec(sentences: Sequence[Sequence[str]], config: Word2VecConfig | None = None,
                   callbacks: Sequence = ()) -> Word2Vec:
    """Train SGNS on tokenised ``sentences`` (windows never cross a sentence boundary, as in gensim).

    Each epoch: subsample (a fresh draw), build the dynamic-window pairs, shuffle them, and take SGD
    steps on batches. The loss is the batch mean, so the rate is ``alpha · batch_size``: the same step
    as the C code's per-pair SGD on the summed loss. The rate decays linearly to ``min_alpha``.
    """
    config = config or Word2VecConfig()
    vocab = _vocab(sentences, config.min_count)
    ids, sentence = _stream(sentences, vocab)
    word_counts = torch.tensor([vocab.counts[w] for w in vocab.itos], dtype=torch.float64)
    keep = keep_probability(word_counts / word_counts.sum(), config.sample, config.subsampling).float()
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)  # the initial vectors are drawn from the global generator

    def epoch_batches(epoch: int):
        mask = torch.rand(len(ids), generator=generator) < keep[ids]
        centres, contexts = skipgram_pairs(ids[mask], sentence[mask], config.window, generator)
        order = torch.randperm(len(centres), generator=generator)
        return list(zip(centres[order].split(config.batch_size), contexts[order].split(config.batch_size)))

    # The linear decay needs the total number of steps; the expected pairs per epoch give it.
    mean_pairs = float(keep[ids].sum()) * (config.window + 1)  # E[2r] = window + 1 pairs per centre (fewer at edges)
    total_steps = max(1, math.ceil(config.epochs * mean_pairs / config.batch_size))
    floor = config.min_alpha / config.alpha

    model = SkipGramNS(len(vocab), config.vector_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.alpha * config.batch_size)
    schedule = LRSchedule(lambda step: max(floor, 1.0 - step / total_steps))
    loss = NegativeSamplingLoss(noise_distribution(word_counts, config.ns_exponent), config.negative, generator)
    trainer = Trainer(model, optimizer, loss, callbacks=[schedule, *callbacks], device="cpu")
    start = time.perf_counter()
    trainer.fit(epoch_batches, epochs=config.epochs)
    return Word2Vec(vocab, model, config, [h["train_loss"] for h in trainer.history], time.perf_counter() - start)
