"""English -> French translation data: tokenization, short-sentence filtering, splits, vocabularies, batches.

The corpus is the Tatoeba English-French sentence pairs (``lmlib.data.load_eng_fra``). This module turns
it into what a sequence-to-sequence model trains on, the same way for every notebook that translates
(the RNN encoder-decoder with and without attention, the Transformer)::

    data = prepare_translation(max_len=10, prefixes=SIMPLE_PREFIXES, min_freq=2, seed=0)
    batches = translation_batches(data.train, data.src_vocab, data.tgt_vocab, batch_size=64, seed=epoch)

Design choices, and why:

* Lowercase, punctuation split off as tokens, French elisions split after the apostrophe
  (``l'aide`` -> ``l'`` ``aide``) so ``l'`` is shared across nouns; English contractions stay whole
  (``don't``), because splitting them gives meaningless pieces such as ``don'`` ``t``.
* One English sentence often has several French translations. The split into train / valid / test is
  made by **distinct English sentence**, so a test source is never seen in training with another
  translation, and each test item keeps *all* its French references (multi-reference BLEU).
* Vocabularies are built from the training split only; unseen words become ``<unk>``.
* ``prefixes`` narrows the corpus to sentences that open the same way ("i am", "you are", ...): a
  small domain that a small model learns in seconds on a CPU, with sentences of every length up to
  ``max_len``. Without it the full corpus is used (a much larger vocabulary for the same data size).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .batching import pad_batch
from .vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab

#: English openings of a small, learnable domain: descriptions of people ("she is taller than me.").
SIMPLE_PREFIXES = (
    "i am ", "i'm ", "you are ", "you're ", "he is ", "he's ", "she is ", "she's ",
    "we are ", "we're ", "they are ", "they're ",
)

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u00a0": " ", "\u202f": " "})
# A word (letters/digits, inner hyphens and apostrophes allowed) or a single punctuation mark.
_EN_TOKEN = re.compile(r"\w+(?:['-]\w+)*|[^\w\s]")
# French: an elided clitic keeps its apostrophe and stands alone (l' j' qu' aujourd'hui stays whole).
_FR_TOKEN = re.compile(r"aujourd'hui|\w+'(?=\w)|\w+(?:-\w+)*|[^\w\s]")


def tokenize(text: str, lang: str) -> list[str]:
    """Lowercased tokens of ``text`` in ``lang`` ("en" or "fr"), punctuation as separate tokens.

    >>> tokenize("I don't know!", "en")
    ['i', "don't", 'know', '!']
    >>> tokenize("Je ne l'ai pas vu.", "fr")
    ['je', 'ne', "l'", 'ai', 'pas', 'vu', '.']
    """
    if lang not in ("en", "fr"):
        raise ValueError(f"lang must be 'en' or 'fr', got {lang!r}")
    pattern = _EN_TOKEN if lang == "en" else _FR_TOKEN
    return pattern.findall(text.translate(_APOSTROPHES).lower())


def detokenize(tokens: Sequence[str]) -> str:
    """A readable string from tokens (spaces joined, no space after a French elision)."""
    return re.sub(r"' ", "'", " ".join(tokens))


class Example(NamedTuple):
    """One source sentence with every reference translation of it (token lists)."""

    src: list[str]
    refs: list[list[str]]


@dataclass
class TranslationData:
    """Splits and vocabularies. ``train`` holds (src, tgt) token-list pairs, one per reference;
    ``valid`` and ``test`` hold :class:`Example` items grouped by source sentence."""

    train: list[tuple[list[str], list[str]]]
    valid: list[Example]
    test: list[Example]
    src_vocab: Vocab
    tgt_vocab: Vocab
    max_len: int

    def summary(self) -> str:
        n_valid = sum(len(e.refs) for e in self.valid)
        n_test = sum(len(e.refs) for e in self.test)
        return (f"train {len(self.train):,} pairs | valid {len(self.valid):,} sources ({n_valid:,} pairs) | "
                f"test {len(self.test):,} sources ({n_test:,} pairs) | vocab en {len(self.src_vocab):,}, "
                f"fr {len(self.tgt_vocab):,} | at most {self.max_len} tokens per side")


def _short_pairs(pairs: Iterable[tuple[str, str]], max_len: int,
                 prefixes: Sequence[str] | None) -> list[tuple[list[str], list[str]]]:
    """The tokenized pairs with 1..max_len tokens on both sides whose English opens with one of ``prefixes``."""
    starts = tuple(p.lower() for p in prefixes) if prefixes is not None else None
    kept = []
    for en, fr in pairs:
        if starts is not None and not en.translate(_APOSTROPHES).lower().startswith(starts):
            continue
        # every whitespace-separated chunk gives at least one token, so this skips long pairs cheaply
        if len(en.split()) > max_len or len(fr.split()) > max_len:
            continue
        src, tgt = tokenize(en, "en"), tokenize(fr, "fr")
        if 0 < len(src) <= max_len and 0 < len(tgt) <= max_len:
            kept.append((src, tgt))
    if not kept:
        raise ValueError(f"no pair has at most {max_len} tokens on both sides (with prefixes={prefixes}); "
                         "raise max_len or loosen the prefixes")
    return kept


def prepare_translation(
    max_len: int = 8,
    max_pairs: int | None = None,
    valid_frac: float = 0.05,
    test_frac: float = 0.1,
    min_freq: int = 1,
    seed: int = 0,
    prefixes: Sequence[str] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> TranslationData:
    """Tokenize, keep pairs with at most ``max_len`` tokens on *both* sides, split by source sentence.

    Args:
        max_len: longest sentence kept, in tokens (punctuation counts), before ``<eos>`` is added.
        max_pairs: keep a seeded random sample of this many pairs (after filtering), for fast runs.
        valid_frac, test_frac: fractions of the *distinct English sentences* held out.
        min_freq: words seen fewer times in training become ``<unk>``.
        seed: fixes the sample and the split.
        prefixes: keep only pairs whose lowercased English side starts with one of these strings
            (e.g. :data:`SIMPLE_PREFIXES`); ``None`` keeps every opening.
        pairs: raw (English, French) strings; default ``lmlib.data.load_eng_fra()``.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    if not (0 <= valid_frac < 1 and 0 <= test_frac < 1 and valid_frac + test_frac < 1):
        raise ValueError(f"valid_frac={valid_frac} and test_frac={test_frac} must be in [0, 1) and sum below 1")
    if max_pairs is not None and max_pairs < 1:
        raise ValueError(f"max_pairs must be positive or None, got {max_pairs}")
    if pairs is None:
        from ..data import load_eng_fra

        pairs = load_eng_fra()
    kept = _short_pairs(pairs, max_len, prefixes)
    rng = random.Random(seed)
    if max_pairs is not None and max_pairs < len(kept):
        kept = rng.sample(kept, max_pairs)
    # every translation of one English sentence goes to the same split, so no test source is seen in training
    by_source: dict[tuple[str, ...], list[list[str]]] = defaultdict(list)
    for src, tgt in kept:
        by_source[tuple(src)].append(tgt)
    sources = sorted(by_source)
    rng.shuffle(sources)
    n_test, n_valid = int(len(sources) * test_frac), int(len(sources) * valid_frac)
    test_src, valid_src, train_src = sources[:n_test], sources[n_test:n_test + n_valid], sources[n_test + n_valid:]
    if not train_src:
        raise ValueError("the training split is empty; use more pairs or smaller valid/test fractions")
    train = [(list(s), t) for s in train_src for t in by_source[s]]
    src_vocab = Vocab((tok for s, _ in train for tok in s), min_freq=min_freq, specials=SPECIALS, unk=UNK)
    tgt_vocab = Vocab((tok for _, t in train for tok in t), min_freq=min_freq, specials=SPECIALS, unk=UNK)
    return TranslationData(train=train, valid=[Example(list(s), by_source[s]) for s in valid_src],
                           test=[Example(list(s), by_source[s]) for s in test_src],
                           src_vocab=src_vocab, tgt_vocab=tgt_vocab, max_len=max_len)


class Seq2SeqBatch(NamedTuple):
    """A padded batch. ``src`` (batch, S) with ``src_mask`` True at real tokens; the decoder reads
    ``tgt_in`` = ``<bos> y_1 .. y_T`` and predicts ``tgt_out`` = ``y_1 .. y_T <eos>``, both (batch, T+1),
    ``tgt_mask`` True at real target positions."""

    src: torch.Tensor
    src_mask: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    tgt_mask: torch.Tensor


def encode_source(tokens_batch: Sequence[Sequence[str]], src_vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) for a list of tokenized source sentences, each ending in ``<eos>``; shapes (batch, S)."""
    ids, mask, _ = pad_batch([src_vocab.encode([*toks, EOS]) for toks in tokens_batch], src_vocab[PAD])
    return ids, mask


def make_batch(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], src_vocab: Vocab, tgt_vocab: Vocab) -> Seq2SeqBatch:
    """One :class:`Seq2SeqBatch` from (source tokens, target tokens) pairs."""
    src, src_mask = encode_source([s for s, _ in pairs], src_vocab)
    pad, bos, eos = tgt_vocab[PAD], tgt_vocab[BOS], tgt_vocab[EOS]
    targets = [tgt_vocab.encode(t) for _, t in pairs]
    tgt_in = pad_batch([[bos, *t] for t in targets], pad).ids
    tgt_out, tgt_mask, _ = pad_batch([[*t, eos] for t in targets], pad)
    return Seq2SeqBatch(src, src_mask, tgt_in, tgt_out, tgt_mask)


def translation_batches(
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
) -> list[Seq2SeqBatch]:
    """Padded batches over ``pairs``, shuffled with ``seed`` (pass the epoch for a new order each epoch)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if len(pairs) == 0:
        raise ValueError("no pairs to batch")
    order = list(range(len(pairs)))
    if shuffle:
        random.Random(seed).shuffle(order)
    return [make_batch([pairs[i] for i in order[k:k + batch_size]], src_vocab, tgt_vocab)
            for k in range(0, len(order), batch_size)]


def example_pairs(examples: Sequence[Example]) -> list[tuple[list[str], list[str]]]:
    """Flatten grouped examples into (src, ref) pairs, e.g. to compute a validation loss."""
    return [(e.src, ref) for e in examples for ref in e.refs]
