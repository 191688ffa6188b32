"""The baseline a student tries first: a bag of words (TF-IDF of unigrams and bigrams) and logistic regression.

Wang & Manning (2012), "Baselines and Bigrams: Simple, Good Sentiment and Topic Classification", show that a linear
model on word and word-pair counts is hard to beat on long reviews such as IMDb's (Maas et al. 2011). Every transfer
result of the course (ULMFiT, ELMo, GPT, BERT) is read beside this number, on the same test reviews, label samples
and seeds (``tests/benchmarks/bench_bow_baseline.py``).

scikit-learn does the work (TF-IDF, then C chosen by k-fold cross-validation on the training labels only); this
module fixes the settings, checks the inputs, and cuts a review to the text a classifier of the course reads: the
fine-tuned GPT's BPE head and tail (:func:`model_view`), or the words of a word-level model (:func:`words_view`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..text.truncation import head_and_tail

try:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the bag-of-words baseline needs scikit-learn: pip install -r requirements.txt "
                      "(or pip install scikit-learn)") from error


@dataclass(frozen=True)
class BowConfig:
    """Settings of the baseline.

    ``ngram_range``: the shortest and longest word n-grams counted; ``sublinear_tf``: weigh a count by 1 + ln(tf)
    instead of tf; ``Cs``: the inverse regularisation strengths tried; ``folds``: k of the k-fold cross-validation
    that picks one; ``max_iter``: L-BFGS iterations allowed per fit."""

    ngram_range: tuple[int, int] = (1, 2)
    sublinear_tf: bool = True
    Cs: tuple[float, ...] = tuple(float(10.0 ** (k / 2)) for k in range(-4, 9))  # 0.01, 0.03, ..., 10,000
    folds: int = 5
    max_iter: int = 1000

    def __post_init__(self) -> None:
        low, high = self.ngram_range
        if not 1 <= low <= high:
            raise ValueError(f"ngram_range must be (low, high) with 1 <= low <= high, got {self.ngram_range}")
        if not self.Cs or any(not c > 0 for c in self.Cs):
            raise ValueError(f"Cs must be one or more positive numbers, got {self.Cs}")
        if self.folds < 2:
            raise ValueError(f"folds must be at least 2 for cross-validation, got {self.folds}")
        if self.max_iter < 1:
            raise ValueError(f"max_iter must be at least 1, got {self.max_iter}")


def _check_labelled(texts: Sequence[str], labels: Sequence[int]) -> None:
    if isinstance(texts, str):
        raise ValueError("texts must be a list of texts, not one string; wrap it in a list")
    if len(texts) == 0:
        raise ValueError("texts is empty: give at least one text")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise ValueError(f"texts[{bad}] is a {type(texts[bad]).__name__}, not a str: give raw texts, not token ids")
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels: give one label per text")
    if any(y not in (0, 1) for y in labels):
        raise ValueError(f"labels must be 0 (negative) or 1 (positive), got {sorted(set(labels) - {0, 1})[:5]}")


def fit_bow(texts: Sequence[str], labels: Sequence[int], config: BowConfig = BowConfig(), seed: int = 0) -> Pipeline:
    """TF-IDF features of ``texts``, then logistic regression with C chosen by stratified k-fold cross-validation
    (folds shuffled with ``seed``) on ``labels``; returns the fitted scikit-learn pipeline ``[tfidf, logreg]``.

    The weight of n-gram t in text d, before each text's vector is scaled to unit ℓ2 norm, is

        w_{t,d} = (1 + ln tf_{t,d}) · idf_t,    idf_t = ln((1 + n) / (1 + df_t)) + 1

    with tf_{t,d} the count of t in d (sublinear tf; plain tf_{t,d} when ``sublinear_tf`` is off), n the number
    of training texts and df_t the number of them containing t. The vocabulary and idf come from the training
    texts (no labels). Logistic regression gives p(y = 1 | x) = σ(w·x + b), with w and b minimising

        ½‖w‖² + C Σ_i −[y_i ln p_i + (1 − y_i) ln(1 − p_i)]

    (the bias b is not penalised). Each C of ``config.Cs`` is scored by held-out accuracy over the folds; the best
    is refitted on every training text (ties go to the smallest C). ``pipeline[-1].best_params_["C"]`` is the C chosen,
``pipeline[-1].best_score_`` its mean held-out accuracy, ``pipeline[-1].best_estimator_`` the refitted model.
    """
    _check_labelled(texts, labels)
    counts = np.bincount(np.asarray(labels, dtype=int), minlength=2)
    if counts.min() < config.folds:
        raise ValueError(f"{config.folds}-fold cross-validation needs at least {config.folds} texts of each class; "
                         f"got {counts[0]} negative and {counts[1]} positive")
    folds = StratifiedKFold(config.folds, shuffle=True, random_state=seed)
    pipeline = Pipeline([
        ("tfidf", TfidfVectorizer(ngram_range=config.ngram_range, sublinear_tf=config.sublinear_tf)),
        ("logreg", GridSearchCV(LogisticRegression(solver="lbfgs", max_iter=config.max_iter), {"C": list(config.Cs)},
                                cv=folds, scoring="accuracy", n_jobs=1)),
    ])
    return pipeline.fit(list(texts), np.asarray(labels))


def bow_accuracy(pipeline: Pipeline, texts: Sequence[str], labels: Sequence[int]) -> float:
    """The fraction of ``texts`` whose predicted label is ``labels``' (0 or 1)."""
    _check_labelled(texts, labels)
    return float(np.mean(pipeline.predict(list(texts)) == np.asarray(labels)))


def model_view(tokenizer, text: str, max_tokens: int) -> str:
    """The part of ``text`` a classifier that reads ``max_tokens`` of ``tokenizer``'s tokens sees: the text itself
    if it fits, else the decoded first ⌊max_tokens/2⌋ and last ⌈max_tokens/2⌉ tokens (:func:`head_and_tail`),
    joined by a line break so that the word pieces on either side of the cut stay apart.

    For the course's fine-tuned GPT, ``max_tokens`` is ``FINETUNE_RECIPE["max_len"] - 2`` (126): the input is
    ``[start]``, 63 + 63 tokens of review, ``[extract]``."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    ids = tokenizer.encode(text)
    kept = head_and_tail(ids, max_tokens)
    if len(kept) == len(ids):
        return text
    head = max_tokens // 2
    return tokenizer.decode(kept[:head]) + "\n" + tokenizer.decode(kept[head:])


def words_view(tokens: Sequence[str], max_tokens: int, keep: str = "head_and_tail", vocab=None) -> str:
    """The words a word-level classifier reads, joined by spaces, for the bag of words to read the same text.

    ``keep="head"``: the first ``max_tokens`` tokens (ELMo's transfer benchmark reads a review's first 48 words);
    ``keep="head_and_tail"``: the first ⌊max_tokens/2⌋ and last ⌈max_tokens/2⌉ (:func:`head_and_tail`, ULMFiT's
    ``max_len`` = 128). With ``vocab`` (a :class:`lmlib.text.vocab.Vocab`) a word outside it becomes the
    vocabulary's unknown token first, as the classifier sees it: ``words_view(["a", "zyx", "film"], 2, "head",
    vocab)`` is ``"a <unk>"`` when "zyx" is not in ``vocab``."""
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of words, not one string; split the review first")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if keep not in ("head", "head_and_tail"):
        raise ValueError(f"keep must be 'head' or 'head_and_tail', got {keep!r}")
    words = list(tokens)
    if vocab is not None:
        words = [vocab.itos[i] for i in vocab.encode(words)]
    kept = words[:max_tokens] if keep == "head" else head_and_tail(words, max_tokens)
    return " ".join(kept)
