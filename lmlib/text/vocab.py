"""Vocabularies: the map between tokens (words or characters) and integer ids.

Ids are assigned in a fixed order so that the same corpus always gives the same vocabulary:
special tokens first, in the order given, then the remaining types by falling frequency, ties broken
alphabetically. A character vocabulary is the same class fed a string (iterating a string yields characters).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The special tokens, spelled the same way everywhere in the course.
PAD = "<pad>"  # fills a batch's rows up to the longest sequence
UNK = "<unk>"  # stands for every word outside the vocabulary
BOS = "<bos>"  # starts a target sentence (translation)
EOS = "<eos>"  # ends a sentence (PTB lines, translation)
SPECIALS = (PAD, UNK, BOS, EOS)  # in this order they take ids 0..3 of a translation vocabulary


class Vocab:
    """Token <-> id map.

    Args:
        tokens: the training tokens (an iterable of strings, a string for characters, or a ``Counter``).
        min_freq: types seen fewer times than this are left out and map to ``unk``.
        max_size: keep at most this many types in total, specials included.
        specials: tokens that always get the first ids, e.g. ``(PAD, UNK)``.
        unk: the token unknown types map to. It is added to ``specials`` if missing. With ``unk=None``
            an unknown token is an error instead, which is what a closed vocabulary such as PTB's wants.
    """

    def __init__(
        self,
        tokens: Iterable[str] | Counter,
        *,
        min_freq: int = 1,
        max_size: int | None = None,
        specials: Iterable[str] = (),
        unk: str | None = UNK,
    ):
        if min_freq < 1:
            raise ValueError(f"min_freq must be at least 1, got {min_freq}")
        counts = tokens if isinstance(tokens, Counter) else Counter(tokens)
        specials = list(dict.fromkeys(specials))
        if unk is not None and unk not in specials:
            specials.append(unk)
        if max_size is not None and max_size < len(specials):
            raise ValueError(f"max_size={max_size} leaves no room for the {len(specials)} special tokens {specials}")
        kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in specials), key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max_size - len(specials)]
        if not specials + kept:
            raise ValueError("cannot build a vocabulary from an empty corpus")
        self._set(specials + kept, unk, Counter({t: counts[t] for t in specials + kept if t in counts}))

    def _set(self, itos: list[str], unk: str | None, counts: Counter) -> None:
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(itos)}
        self.unk = unk
        self.counts = counts

    @classmethod
    def from_itos(cls, itos: Iterable[str], unk: str | None = UNK, counts: Counter | dict | None = None) -> Vocab:
        """The vocabulary whose id i is ``itos[i]``, exactly as given (a saved vocabulary, or one extended
        with new words). ``unk`` must be one of the tokens when it is not None."""
        itos = list(itos)
        if len(set(itos)) != len(itos):
            raise ValueError("itos lists a token twice; each token needs exactly one id")
        if not itos:
            raise ValueError("cannot build a vocabulary from an empty list of tokens")
        if unk is not None and unk not in itos:
            raise ValueError(f"the unknown-token {unk!r} is not among the tokens; add it or pass unk=None")
        vocab = cls.__new__(cls)
        vocab._set(itos, unk, Counter(counts or {}))
        return vocab

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        head = ", ".join(repr(t) for t in self.itos[:6])
        return f"Vocab({len(self)} types: {head}{', ...' if len(self) > 6 else ''})"

    @property
    def unk_id(self) -> int | None:
        return None if self.unk is None else self.stoi[self.unk]

    def __getitem__(self, token: str) -> int:
        idx = self.stoi.get(token)
        if idx is not None:
            return idx
        if self.unk is None:
            raise KeyError(
                f"{token!r} is not in the vocabulary ({len(self)} types) and it has no unknown-token; "
                f"build it with unk={UNK!r} to map unseen tokens, or map the token before encoding"
            )
        return self.stoi[self.unk]

    def encode(self, tokens: Iterable[str]) -> list[int]:
        return [self[t] for t in tokens]

    def decode(self, ids: Iterable[int], sep: str | None = None) -> list[str] | str:
        """Tokens for ``ids``; joined with ``sep`` when it is given (``""`` for characters, ``" "`` for words)."""
        tokens = [self.itos[i] for i in checked_ids(ids, len(self))]
        return tokens if sep is None else sep.join(tokens)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"itos": self.itos, "unk": self.unk, "counts": dict(self.counts)}))

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        state = json.loads(Path(path).read_text())
        return cls.from_itos(state["itos"], state["unk"], state["counts"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos and self.unk == other.unk


def checked_ids(ids: Iterable[int], size: int) -> list[int]:
    """``ids`` as ints, refusing any outside [0, size): a negative id would otherwise index from the end of a list
    and decode silently."""
    ids = [int(i) for i in ids]
    bad = [i for i in ids if not 0 <= i < size]
    if bad:
        raise IndexError(f"ids {bad[:5]} are outside this vocabulary of {size} tokens (valid: 0..{size - 1})")
    return ids


def check_ids_in_range(ids: Any, vocab_size: int, name: str, vocabulary: str = "its vocabulary") -> None:
    """Refuse a tensor of token ids with any id outside [0, vocab_size): an embedding lookup would fail
    with an index error that does not say which input or which vocabulary was wrong."""
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(f"{name} holds ids from {low} to {high}, but {vocabulary} has {vocab_size} entries "
                         f"(ids 0..{vocab_size - 1}); encode it with the vocabulary the model was built for")


def check_special_ids(config: Any, src_vocab_size: int, tgt_vocab_size: int,
                      names: tuple[str, ...] = ("pad_id", "bos_id", "eos_id")) -> None:
    """A translation model shares its special ids between source and target: each must exist in both."""
    smallest = min(src_vocab_size, tgt_vocab_size)
    for name in names:
        if not 0 <= getattr(config, name) < smallest:
            raise ValueError(f"{name}={getattr(config, name)} is not an id of both vocabularies (sizes "
                             f"{src_vocab_size} and {tgt_vocab_size}); take it from the Vocab")
