"""Loaders that turn verified dataset files into ready Python objects.

Each loader verifies its files' sha256 (fetching them first if missing) and decodes them with the
encoding the publisher used: rt-polarity is Windows-1252, everything else UTF-8.
"""

from __future__ import annotations

import csv
import io
from typing import NamedTuple

from .store import path

PTB_SPLITS = ("train", "valid", "test")
SST2_SPLITS = ("train", "dev")


class LabelledTexts(NamedTuple):
    texts: list[str]
    labels: list[int]


class Analogy(NamedTuple):
    """``a`` is to ``b`` as ``c`` is to ``d`` (one line of questions-words.txt)."""

    section: str
    a: str
    b: str
    c: str
    d: str


class WordPair(NamedTuple):
    word1: str
    word2: str
    score: float


def _check_split(split: str, allowed: tuple[str, ...], dataset: str) -> None:
    if split not in allowed:
        raise ValueError(f"{dataset} has no split {split!r}; choose one of {', '.join(allowed)}")


def _text(file_path: str, encoding: str = "utf-8") -> str:
    return path(file_path).read_bytes().decode(encoding)


def load_ptb(split: str = "train") -> list[list[str]]:
    """Penn Treebank sentences as token lists, each ending in ``<eos>`` (Mikolov's convention).

    Token counts: 929,589 train, 73,760 valid, 82,430 test; 10,000 types including ``<eos>``.
    """
    _check_split(split, PTB_SPLITS, "ptb")
    return [line.split() + ["<eos>"] for line in _text(f"ptb/ptb.{split}.txt").split("\n") if line.strip()]


def load_tiny_shakespeare() -> str:
    """The 1,115,394 characters of Tiny Shakespeare."""
    return _text("tinyshakespeare/input.txt")


def load_time_machine() -> str:
    """H. G. Wells' *The Time Machine* as d2l trimmed it (raw text, not lower-cased)."""
    return _text("timemachine/timemachine.txt")


def load_rt_polarity() -> LabelledTexts:
    """10,662 review snippets: 5,331 positive (label 1) then 5,331 negative (label 0).

    The files are Windows-1252, and are split on ``\\n`` only: byte 0x85 is an ellipsis here, not a line break.
    """
    texts, labels = [], []
    for name, label in (("pos", 1), ("neg", 0)):
        for line in _text(f"rt-polarity/rt-polarity.{name}", "cp1252").split("\n"):
            if line.strip():
                texts.append(line.strip())
                labels.append(label)
    return LabelledTexts(texts, labels)


def load_sst2(split: str = "dev") -> LabelledTexts:
    """SST-2 sentences (train also holds phrases) with labels 1 = positive, 0 = negative."""
    _check_split(split, SST2_SPLITS, "sst2")
    lines = _text(f"sst2/{split}.tsv").split("\n")
    if lines[0] != "sentence\tlabel":
        raise ValueError(f"sst2/{split}.tsv: unexpected header {lines[0]!r}")
    texts, labels = [], []
    for line in lines[1:]:
        if line:
            sentence, label = line.rsplit("\t", 1)
            texts.append(sentence.strip())
            labels.append(int(label))
    return LabelledTexts(texts, labels)


def load_eng_fra(normalize_spaces: bool = True) -> list[tuple[str, str]]:
    """167,130 (English, French) pairs, roughly sorted by length.

    French typography puts a narrow no-break space (U+202F) or a no-break space (U+00A0) before
    ``! ? : ;``; with ``normalize_spaces`` both become ordinary spaces so a whitespace tokenizer sees them.
    """
    pairs = []
    for line in _text("eng-fra/fra.txt").split("\n"):
        if not line:
            continue
        english, french = line.split("\t")[:2]
        if normalize_spaces:
            french = french.replace("\u202f", " ").replace("\u00a0", " ")
            english = english.replace("\u202f", " ").replace("\u00a0", " ")
        pairs.append((english, french))
    return pairs


def load_analogies() -> list[Analogy]:
    """The 19,544 questions of Mikolov et al.'s analogy set, with their section (e.g. ``capital-common-countries``)."""
    questions, section = [], ""
    for line in _text("word-eval/questions-words.txt").split("\n"):
        if line.startswith(":"):
            section = line[1:].strip()
        elif line.strip():
            questions.append(Analogy(section, *line.split()))
    return questions


def load_wordsim353() -> list[WordPair]:
    """353 word pairs with mean human relatedness scores (0-10)."""
    rows = list(csv.reader(io.StringIO(_text("word-eval/wordsim353/combined.csv"), newline="")))
    return [WordPair(w1, w2, float(score)) for w1, w2, score in rows[1:]]


def load_simlex999() -> list[WordPair]:
    """999 word pairs with SimLex similarity scores (0-10)."""
    lines = _text("word-eval/SimLex-999/SimLex-999.txt").replace("\r\n", "\n").split("\n")
    pairs = []
    for line in lines[1:]:
        if line:
            cols = line.split("\t")
            pairs.append(WordPair(cols[0], cols[1], float(cols[3])))
    return pairs


LOADERS = {
    "ptb": load_ptb,
    "tinyshakespeare": load_tiny_shakespeare,
    "timemachine": load_time_machine,
    "rt-polarity": load_rt_polarity,
    "sst2": load_sst2,
    "eng-fra": load_eng_fra,
    "analogies": load_analogies,
    "wordsim353": load_wordsim353,
    "simlex999": load_simlex999,
}


def load(name: str, **kwargs):
    """Load a dataset by name, e.g. ``load("ptb", split="valid")``; see ``LOADERS`` for the names."""
    if name not in LOADERS:
        raise KeyError(f"no loader called {name!r}; choose one of {', '.join(LOADERS)}")
    return LOADERS[name](**kwargs)
