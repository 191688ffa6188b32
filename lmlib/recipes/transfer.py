"""Does what a language model learned transfer? A frozen-feature sentiment probe on IMDb reviews, for ULMFiT's
AWD-LSTM language model and for ELMo's biLM, each beside the same architecture at random init.

A *probe* asks what a frozen network's features already hold: no weight of the network moves, only a linear
classifier on top is trained (Conneau et al. 2018, "What you can cram into a single $&!#* vector", probe sentences
so). If a pretrained model's features classify no better than a randomly initialised copy's, pretraining has taught
the model nothing the task can read off. Every model reads a review's first and last 64 tokens
(:func:`lmlib.text.truncation.head_and_tail`); the probe is a logistic regression with its C chosen by
cross-validation on the training labels only (:func:`fit_probe`). The features:

* ULMFiT (:func:`ulmfit_features`): ``"concat"``, concat pooling h_c = [h_T, maxpool(H), meanpool(H)] (Howard &
  Ruder 2018, "Universal Language Model Fine-tuning for Text Classification", sec. 3.3) of every LSTM layer's
  output, the layers side by side; ``"embeddings"``, the mean of the input word vectors;
* ELMo (:func:`elmo_features`): each layer mean-pooled over the kept words (0 = the character CNN, 1.. = the LSTM
  layers, each [forward; backward]), each probed alone as Peters et al. (2018, "Deep contextualized word
  representations", sec. 5.2-5.3) do, and ``"all"``, the layers side by side.

:func:`ulmfit_probes` and :func:`elmo_probes` return one row per (init, feature, labels, seed);
``tests/benchmarks/bench_transfer_milestones.py`` runs them on checkpoints saved during pretraining.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

try:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the transfer probes need scikit-learn: pip install -r requirements.txt "
                      "(or pip install scikit-learn)") from error

MAX_TOKENS = 128  # a review's first 64 and last 64 tokens


@dataclass(frozen=True)
class ProbeConfig:
    """``Cs``: the inverse regularisation strengths tried; ``folds``: k of the cross-validation that picks one;
    ``max_iter``: L-BFGS iterations allowed per fit."""

    Cs: tuple[float, ...] = tuple(float(10.0 ** (k / 2)) for k in range(-8, 3))  # 1e-4, 3e-4, ..., 10
    folds: int = 5
    max_iter: int = 2000

    def __post_init__(self) -> None:
        if not self.Cs or any(not c > 0 for c in self.Cs):
            raise ValueError(f"Cs must be one or more positive numbers, got {self.Cs}")
        if self.folds < 2:
            raise ValueError(f"folds must be at least 2 for cross-validation, got {self.folds}")


@dataclass
class ProbeData:
    """What every probe reads: ``test`` ``(texts, labels)`` and ``train[(n_labels, seed)] = (texts, labels)``."""

    test: tuple[Sequence[str], Sequence[int]]
    train: Mapping[tuple[int, int], tuple[Sequence[str], Sequence[int]]]

    def texts(self) -> list[str]:
        """Every distinct text once (label samples overlap), test texts first."""
        return list(dict.fromkeys([*self.test[0], *(t for texts, _ in self.train.values() for t in texts)]))


# -- the probe ------------------------------------------------------------------------------------------------

def fit_probe(x: np.ndarray, y: Sequence[int], config: ProbeConfig = ProbeConfig(), seed: int = 0) -> GridSearchCV:
    """Logistic regression on ``x`` ``(n, D)`` standardised (each feature shifted and scaled by its mean and
    standard deviation on ``x``), p(y = 1 | x) = σ(w·z + b) with w, b minimising

        ½‖w‖² + C Σ_i −[y_i ln p_i + (1 − y_i) ln(1 − p_i)],

    C picked from ``config.Cs`` by accuracy over stratified k-fold cross-validation (folds shuffled with ``seed``;
    the scaler is fitted inside each fold) and refitted on all of ``x``; ties go to the smallest C. Returns the
    fitted :class:`~sklearn.model_selection.GridSearchCV` (``predict``, ``best_params_``, ``best_score_``)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y)
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(f"x must be (n, D) with one row per label; got {x.shape} and {len(y)} labels")
    counts = np.bincount(y.astype(int), minlength=2)
    if counts.min() < config.folds:
        raise ValueError(f"{config.folds}-fold cross-validation needs at least {config.folds} examples of each class; "
                         f"got {counts.tolist()}")
    search = GridSearchCV(Pipeline([("scale", StandardScaler()),
                                    ("logreg", LogisticRegression(max_iter=config.max_iter))]),
                          {"logreg__C": list(config.Cs)},
                          cv=StratifiedKFold(config.folds, shuffle=True, random_state=seed), scoring="accuracy")
    return search.fit(x, y)


def probe_rows(features: Mapping[str, torch.Tensor], index: Mapping[str, int], data: ProbeData, init: str,
               config: ProbeConfig = ProbeConfig()) -> list[dict]:
    """One row per feature set of ``features`` (``name -> (n_texts, D)``, rows in the order of ``index``: text ->
    row) and per labelled sample of ``data``: the probe's test accuracy, the C chosen and its cross-validated
    accuracy."""
    test_rows = [index[t] for t in data.test[0]]
    rows = []
    for (n_labels, seed), (texts, labels) in sorted(data.train.items()):
        train_rows = [index[t] for t in texts]
        for name, x in features.items():
            x = x.double().numpy()
            search = fit_probe(x[train_rows], labels, config, seed)
            accuracy = float(np.mean(search.predict(x[test_rows]) == np.asarray(data.test[1])))
            rows.append({"init": init, "feature": name, "n_labels": n_labels, "seed": seed, "accuracy": accuracy,
                         "C": search.best_params_["logreg__C"], "cv_accuracy": float(search.best_score_)})
    return rows


# -- ULMFiT: the AWD-LSTM language model ----------------------------------------------------------------------

@torch.no_grad()
def ulmfit_features(lm, vocab, texts: Sequence[str], max_tokens: int = MAX_TOKENS,
                    batch_size: int = 64) -> dict[str, torch.Tensor]:
    """``{"concat": (n, Σ_l 3 d_l), "embeddings": (n, embed_size)}`` for an AWD-LSTM language model ``lm`` (its
    encoder is read, in evaluation mode): each review as ULMFiT's classifier reads it (``review_tokens``, ids in
    ``vocab``, :func:`head_and_tail` to ``max_tokens``), then concat pooling (:func:`lmlib.models.ulmfit.concat_pool`)
    of each LSTM layer's output, and the mean of the input embeddings."""
    from ..models.ulmfit import concat_pool
    from ..runtime import eval_mode
    from . import ulmfit as U

    encoder = lm.encoder
    seqs = [U.head_and_tail(ids, max_tokens) for ids in U.encode_texts(vocab, [U.review_tokens(t) for t in texts])]
    pad = encoder.config.pad_id
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))  # similar lengths together: little padding
    concat, embeddings = [None] * len(seqs), [None] * len(seqs)
    with eval_mode(encoder):
        for start in range(0, len(order), batch_size):
            idx = order[start: start + batch_size]
            width = max(len(seqs[i]) for i in idx)
            ids = torch.tensor([seqs[i] + [pad] * (width - len(seqs[i])) for i in idx])  # (B, T), right padding
            mask = torch.arange(width)[None] < torch.tensor([len(seqs[i]) for i in idx])[:, None]  # (B, T)
            outputs, _, _ = encoder(ids)  # L of (B, T, d_l)
            pooled = torch.cat([concat_pool(h, mask) for h in outputs], dim=1)  # (B, Σ 3 d_l)
            m = mask[..., None].float()
            mean_embed = (encoder.embedding(ids) * m).sum(1) / m.sum(1)  # (B, embed_size)
            for b, i in enumerate(idx):
                concat[i], embeddings[i] = pooled[b], mean_embed[b]
    return {"concat": torch.stack(concat), "embeddings": torch.stack(embeddings)}


def ulmfit_probes(lm, vocab, data: ProbeData, config: ProbeConfig = ProbeConfig(), seed: int = 0,
                  max_tokens: int = MAX_TOKENS) -> list[dict]:
    """:func:`probe_rows` on :func:`ulmfit_features` of ``lm`` (``init`` "pretrained") and of the same architecture
    at random init (seeded by ``seed``, ``init`` "random"), on every text of ``data``."""
    from ..models.awd_lstm import AWDLSTMLanguageModel

    torch.manual_seed(seed)
    return _both_inits(lm, AWDLSTMLanguageModel(lm.config),
                       lambda m, texts: ulmfit_features(m, vocab, texts, max_tokens), data, config)


def _both_inits(pretrained, random, features: Callable, data: ProbeData, config: ProbeConfig) -> list[dict]:
    """:func:`probe_rows` on ``features(model, texts)`` of the ``pretrained`` and of the ``random`` model, on every
    text of ``data``."""
    texts = data.texts()
    index = {t: i for i, t in enumerate(texts)}
    return [row for init, model in (("pretrained", pretrained), ("random", random))
            for row in probe_rows(features(model, texts), index, data, init, config)]


# -- ELMo: the biLM -------------------------------------------------------------------------------------------

def head_and_tail_sentences(sentences: Sequence[Sequence[str]], max_tokens: int = MAX_TOKENS) -> list[list[str]]:
    """The first ⌊max_tokens/2⌋ and last ⌈max_tokens/2⌉ words of a review given as sentences
    (:func:`lmlib.text.truncation.head_and_tail` on its words), still as sentences: a sentence the cut goes through
    keeps its words on the kept side, and a sentence holding both the head's end and the tail's start is read as
    two pieces, so no piece joins words that were not neighbours."""
    from ..text.truncation import head_and_tail

    words = [(s, w, word) for s, sentence in enumerate(sentences) for w, word in enumerate(sentence)]
    kept = head_and_tail(words, max_tokens)
    pieces: list[list[str]] = []
    previous = None
    for s, w, word in kept:
        if previous == (s, w - 1):
            pieces[-1].append(word)
        else:
            pieces.append([word])
        previous = (s, w)
    return pieces


@torch.no_grad()
def elmo_features(bilm, texts: Sequence[str], max_tokens: int = MAX_TOKENS,
                  batch_size: int = 128) -> dict[str, torch.Tensor]:
    """``{"0": (n, 2d), ..., "L": (n, 2d), "all": (n, (L + 1) 2d)}``: each layer of the biLM mean-pooled over the
    words of a review's :func:`head_and_tail_sentences` (sentences as :func:`lmlib.recipes.elmo.sentences_of`
    splits them, each read alone by :func:`lmlib.recipes.elmo.token_features`), and all layers side by side.
    A review with no words gets zeros."""
    from . import elmo as E

    layers = E.mean_over_words(bilm, [head_and_tail_sentences(E.sentences_of(text, min_words=1), max_tokens)
                                      for text in texts], batch_size)  # (n, L + 1, 2d)
    out = {str(j): layers[:, j] for j in range(layers.size(1))}
    out["all"] = layers.flatten(1)
    return out


def elmo_probes(bilm, data: ProbeData, config: ProbeConfig = ProbeConfig(), seed: int = 0,
                max_tokens: int = MAX_TOKENS) -> list[dict]:
    """:func:`probe_rows` on :func:`elmo_features` of ``bilm`` (``init`` "pretrained") and of a biLM of the same
    config at random init (seeded by ``seed``, ``init`` "random"), on every text of ``data``."""
    from ..models.elmo import BiLM

    torch.manual_seed(seed)
    return _both_inits(bilm.eval(), BiLM(bilm.config).eval(), lambda m, texts: elmo_features(m, texts, max_tokens),
                       data, config)


def best_layer_rows(rows: Sequence[dict], layers: Sequence[str]) -> list[dict]:
    """For each (init, labels, seed), the row of the layer among ``layers`` whose cross-validated accuracy on the
    training labels is highest (the test set plays no part in the choice), as feature ``"best"`` with the layer
    it took in ``"layer"``."""
    out = []
    keys = sorted({(r["init"], r["n_labels"], r["seed"]) for r in rows})
    for init, n, seed in keys:
        candidates = [r for r in rows if (r["init"], r["n_labels"], r["seed"]) == (init, n, seed)
                      and r["feature"] in layers]
        if candidates:
            best = max(candidates, key=lambda r: (r["cv_accuracy"], -layers.index(r["feature"])))
            out.append({**best, "feature": "best", "layer": best["feature"]})
    return out


# -- the bag of words on the same words ------------------------------------------------------------------------

def bow_rows(data: ProbeData, view: Callable[[str], str]) -> list[dict]:
    """The bag of words (:func:`lmlib.eval.bow_baseline.fit_bow`) on ``view(text)``, the words a model reads, for
    every labelled sample of ``data``: one row per (labels, seed), ``init`` "bag of words"."""
    from ..eval.bow_baseline import bow_accuracy, fit_bow

    cut = {t: view(t) for t in data.texts()}
    test = [cut[t] for t in data.test[0]]
    rows = []
    for (n_labels, seed), (texts, labels) in sorted(data.train.items()):
        pipeline = fit_bow([cut[t] for t in texts], labels, seed=seed)
        rows.append({"init": "bag of words", "feature": "tf-idf", "n_labels": n_labels, "seed": seed,
                     "accuracy": bow_accuracy(pipeline, test, data.test[1]),
                     "C": pipeline[-1].best_params_["C"], "cv_accuracy": float(pipeline[-1].best_score_)})
    return rows


def summary(rows: Sequence[dict]) -> list[dict]:
    """Mean accuracy and its standard error (n − 1 deviation / √n) over seeds, per (init, feature, labels)."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((r["init"], r["feature"], r["n_labels"]), []).append(r["accuracy"])
    out = []
    for (init, feature, n), accs in sorted(groups.items()):
        se = statistics.stdev(accs) / len(accs) ** 0.5 if len(accs) > 1 else None
        out.append({"init": init, "feature": feature, "n_labels": n, "seeds": len(accs), "mean": statistics.fmean(accs),
                    "se": se})
    return out
