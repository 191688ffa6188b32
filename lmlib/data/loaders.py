"""Loaders that turn verified dataset files into ready Python objects.

Each loader reads its files once, verifies the sha256 of those bytes (fetching the file first if it is
missing) and decodes the same bytes with the encoding the publisher used: rt-polarity is Windows-1252,
everything else UTF-8.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import NamedTuple

from .store import read_verified

PTB_SPLITS = ("train", "valid", "test")
SST2_SPLITS = ("train", "dev")
IMDB_SPLITS = ("train", "test", "unsup")
UD_SPLITS = ("train", "dev", "test")
UNLABELLED = -1  # the label of IMDb's unlabelled reviews


class LabelledTexts(NamedTuple):
    texts: list[str]
    labels: list[int]


class RatedTexts(NamedTuple):
    """Texts with their labels and the reviewers' star ratings (1-10; 0 where unknown)."""

    texts: list[str]
    labels: list[int]
    ratings: list[int]


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
    return read_verified(file_path).decode(encoding)


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
    rows = [(line.strip(), label) for name, label in (("pos", 1), ("neg", 0))
            for line in _text(f"rt-polarity/rt-polarity.{name}", "cp1252").split("\n") if line.strip()]
    return LabelledTexts([text for text, _ in rows], [label for _, label in rows])


def load_sst2(split: str = "dev") -> LabelledTexts:
    """SST-2 sentences (train also holds phrases) with labels 1 = positive, 0 = negative."""
    _check_split(split, SST2_SPLITS, "sst2")
    lines = _text(f"sst2/{split}.tsv").split("\n")
    if lines[0] != "sentence\tlabel":
        raise ValueError(f"sst2/{split}.tsv: unexpected header {lines[0]!r}")
    rows = [line.rsplit("\t", 1) for line in lines[1:] if line]
    return LabelledTexts([sentence.strip() for sentence, _ in rows], [int(label) for _, label in rows])


def load_eng_fra(normalize_spaces: bool = True) -> list[tuple[str, str]]:
    """167,130 (English, French) pairs, roughly sorted by length.

    French typography puts a narrow no-break space (U+202F) or a no-break space (U+00A0) before
    ``! ? : ;``; with ``normalize_spaces`` both become ordinary spaces so a whitespace tokenizer sees them.
    """
    text = _text("eng-fra/fra.txt")
    if normalize_spaces:
        text = text.replace("\u202f", " ").replace("\u00a0", " ")
    return [tuple(line.split("\t")[:2]) for line in text.split("\n") if line]


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
    rows = [line.split("\t") for line in lines[1:] if line]
    return [WordPair(cols[0], cols[1], float(cols[3])) for cols in rows]


_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def load_imdb(split: str = "train", *, with_ratings: bool = False, keep_html: bool = False) -> LabelledTexts | RatedTexts:
    """IMDb movie reviews (Maas et al. 2011): ``train`` and ``test`` hold 25,000 each, ``unsup`` 50,000.

    Labels: 1 = positive (rated 7-10), 0 = negative (rated 1-4), ``UNLABELLED`` (-1) for ``unsup``.
    Train and test are ordered all negatives, then all positives: shuffle before training.
    ``with_ratings=True`` returns :class:`RatedTexts` with the star rating from each file name too
    (0 for ``unsup``, whose ratings were not published).

    The reviews were scraped from HTML and keep its line breaks as literal ``<br />`` tags, usually
    doubled (``<br /><br />``) between paragraphs: about 4 tags per review. Left in, a tokenizer turns them
    into frequent ``<``, ``br``, ``/``, ``>`` tokens that say nothing about the film. So by default
    every break tag (``<br />``, and the rare ``<br>`` and ``<BR>``) becomes ``"\\n"``, and a paragraph
    break reads ``"\\n\\n"``. ``keep_html=True`` returns the texts exactly as published.

    The packed file is split on ``"\\n"`` only: reviews contain characters (U+0085) that
    ``str.splitlines`` would also treat as line ends.
    """
    _check_split(split, IMDB_SPLITS, "imdb")
    reviews = [json.loads(line) for line in _text(f"imdb/{split}.jsonl").split("\n") if line]
    texts = [r["text"] if keep_html else _HTML_BREAK.sub("\n", r["text"]) for r in reviews]
    labels = [{"pos": 1, "neg": 0, "unsup": UNLABELLED}[r["label"]] for r in reviews]
    ratings = [r["rating"] for r in reviews]
    return RatedTexts(texts, labels, ratings) if with_ratings else LabelledTexts(texts, labels)


def parse_conllu_pos(text: str, source: str = "CoNLL-U text") -> list[list[tuple[str, str]]]:
    """Sentences of a CoNLL-U document as lists of (word form, UPOS tag) pairs.

    CoNLL-U has one token per line with 10 tab-separated columns (ID FORM LEMMA UPOS ...), ``#`` comment
    lines, and a blank line after each sentence. Two kinds of line are not words and are skipped:

    * multiword-token ranges (ID ``3-4``): the surface form, e.g. ``don't``, whose words ``do`` and
      ``n't`` follow on their own lines with their tags;
    * empty nodes (ID ``5.1``): elided predicates of the enhanced graph, not in the text at all.

    What remains is the sequence of syntactic words the UPOS tags belong to.
    """
    sentences, words = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line:
            if words:
                sentences.append(words)
                words = []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ValueError(f"{source}, line {number}: expected 10 tab-separated CoNLL-U columns, got {len(cols)}: {line!r}")
        if "-" in cols[0] or "." in cols[0]:
            continue
        words.append((cols[1], cols[3]))
    if words:
        sentences.append(words)
    return sentences


def load_ud_pos(split: str = "train") -> list[list[tuple[str, str]]]:
    """Universal Dependencies English-EWT r2.16 sentences as lists of (word, UPOS) pairs.

    12,544 train, 2,001 dev and 2,077 test sentences (204,577 / 25,147 / 25,094 words), tagged with the
    17 universal part-of-speech tags (NOUN, VERB, ADP, PUNCT, ...). Multiword tokens and empty nodes are
    skipped, see :func:`parse_conllu_pos`.
    """
    _check_split(split, UD_SPLITS, "ud-ewt")
    file_path = f"ud-ewt/en_ewt-ud-{split}.conllu"
    return parse_conllu_pos(_text(file_path), file_path)

