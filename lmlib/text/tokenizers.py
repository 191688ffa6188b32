"""Subword tokenizers: byte-level BPE (GPT-2) and WordPiece (BERT), trained and applied in plain Python.

A word-level vocabulary maps every unseen word to one unknown token; a subword vocabulary spells any word
with pieces it knows. Both schemes here learn their pieces the same way: start from single symbols and
repeatedly merge the best adjacent pair. They differ in what "best" means and in how text is cut into words.

- **BPE** (Sennrich, Haddow & Birch 2016, *Neural Machine Translation of Rare Words with Subword Units*):
  merge the most frequent adjacent pair; apply the learned merges in the order they were learned.
- **Byte-level BPE** (Radford et al. 2019, *Language Models are Unsupervised Multitask Learners*, GPT-2):
  the symbols are the 256 bytes of UTF-8, each shown as a printable character, so every string can be
  encoded and nothing is ever unknown. Text is first cut into words by GPT-2's regular expression.
- **WordPiece** (Schuster & Nakajima 2012, *Japanese and Korean Voice Search*; Wu et al. 2016, *Google's
  Neural Machine Translation System*): merge the pair that most raises the likelihood of the training data
  under a unigram model of pieces, score ``freq(ab) / (freq(a) * freq(b))``.
- **BERT** (Devlin et al. 2019, *BERT: Pre-training of Deep Bidirectional Transformers*): a basic tokenizer
  (clean, lower-case, strip accents, split punctuation and CJK characters), then greedy longest-match-first
  WordPiece with ``##`` marking a piece that continues a word: ``unaffable -> un ##aff ##able``.

Training is deterministic. Among pairs with the same score, the trainer takes the pair with the higher
count, then the pair ``(a, b)`` that sorts first as a tuple of Python strings (code point order). Hugging
Face ``tokenizers`` breaks ties by its internal ids instead, so the two merge lists part at the first such tie.

>>> bpe = ByteLevelBPE.train(["low lower lowest", "new newer newest"], vocab_size=262)
>>> bpe.decode(bpe.encode("lowest newer!")) == "lowest newer!"
True
>>> WordPiece(["[UNK]", "un", "##aff", "##able", "!"]).tokenize("Unaffable!")
['un', '##aff', '##able', '!']
>>> WordPiece.train(["unable, unaffable; affable?"] * 2, vocab_size=26, score="frequency").tokenize("Unaffable!")
['unaffable', '[UNK]']
"""

from __future__ import annotations

import heapq
import json
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import regex

from .vocab import checked_ids

# ---------------------------------------------------------------------------------------------------------------------
# Special tokens: one table, the role each token plays and its spelling in each scheme. BERT's bracketed names are
# what its checkpoints and `transformers` expect; GPT-2 has one token that ends (and separates) documents. lmlib's
# word-level vocabularies (lmlib.text.translation) spell theirs "<pad>", "<unk>", "<bos>", "<eos>".
# ---------------------------------------------------------------------------------------------------------------------
SPECIAL_TOKENS: dict[str, dict[str, str]] = {
    "wordpiece": {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
    "bpe": {"eos": "<|endoftext|>"},
    # GPT-1's fine-tuning tokens (Radford et al. 2018, §3.3): the start of an input, the delimiter between the two
    # texts of a pair, and the token whose final state the task head reads.
    "gpt_finetune": {"start": "<|start|>", "delim": "<|delim|>", "extract": "<|extract|>"},
}
WORDPIECE_SPECIALS = tuple(SPECIAL_TOKENS["wordpiece"].values())
BPE_SPECIALS = tuple(SPECIAL_TOKENS["bpe"].values())

# GPT-2's pre-tokenizer: contractions, letters, digits, other symbols (each optionally after one space), and runs
# of whitespace. `\s+(?!\S)` leaves the last space of a run to the next word, so " world" stays one word.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2_REGEX = regex.compile(GPT2_PATTERN)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from the 256 byte values to 256 printable characters.

    Printable Latin-1 bytes (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) stand for themselves; the other 68
    (control bytes, space, ...) are shifted to U+0100 onwards in byte order, so the space byte is ``Ġ`` and
    ``\\n`` is ``Ċ``. Merges and vocabularies can then be stored as ordinary text.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + k) for k, b in enumerate(shifted)}}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
_BYTE_TABLE = [BYTE_TO_CHAR[b] for b in range(256)]


def gpt2_pretokenize(text: str) -> list[str]:
    """Cut ``text`` into GPT-2's pre-tokens; their concatenation is ``text`` again."""
    return _GPT2_REGEX.findall(text)


def word_to_byte_symbols(word: str) -> list[str]:
    """The UTF-8 bytes of ``word``, each as its printable character: ``"é" -> ["Ã", "©"]``."""
    try:
        data = word.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"the text holds {word[err.start:err.end]!r}, a lone surrogate that UTF-8 cannot encode; "
                         f"clean it first, e.g. text.encode('utf-8', 'replace').decode('utf-8')") from None
    return [_BYTE_TABLE[b] for b in data]


def _check_texts(texts: Iterable[str], name: str = "texts") -> Iterable[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be an iterable of strings (one per document), not a single "
                        f"{type(texts).__name__}; wrap it in a list: [{name}]")
    return texts


def _check_str(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"expected a str to tokenize, got {type(text).__name__}; decode bytes with "
                        f".decode('utf-8') and tokenize lists one string at a time")
    return text


# ---------------------------------------------------------------------------------------------------------------------
# Learning merges (shared by BPE and WordPiece)
# ---------------------------------------------------------------------------------------------------------------------
def frequency_score(pair_count: int, count_a: int, count_b: int) -> float:
    """BPE's score (Sennrich et al. 2016; Hugging Face's WordPiece trainer): ``score(a, b) = freq(ab)``."""
    return float(pair_count)


def likelihood_score(pair_count: int, count_a: int, count_b: int) -> float:
    """WordPiece's score (Schuster & Nakajima 2012): ``score(a, b) = freq(ab) / (freq(a) * freq(b))``.

    Up to constants this is the gain in training log-likelihood under a unigram model of pieces when ``a b``
    becomes one piece: it prefers pairs whose parts rarely occur apart, not merely frequent pairs.
    """
    return pair_count / (count_a * count_b)


SCORES: dict[str, Callable[[int, int, int], float]] = {"frequency": frequency_score, "likelihood": likelihood_score}


def merge_word(symbols: list[str], a: str, b: str, merged: str) -> list[str]:
    """Replace every adjacent ``a b`` in ``symbols`` by ``merged``, scanning left to right (``a a a -> aa a``)."""
    out, i, n = [], 0, len(symbols)
    while i < n:
        if i + 1 < n and symbols[i] == a and symbols[i + 1] == b:
            out.append(merged)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


class _PairStats:
    """Counts of adjacent pairs (and, for the likelihood score, of single symbols) over a corpus of words with
    frequencies, kept up to date as pairs are merged, plus an index from each pair to the words that hold it."""

    def __init__(self, words: list[list[str]], freqs: list[int], count_symbols: bool):
        self.words, self.freqs, self.count_symbols = words, freqs, count_symbols
        self.pairs: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.symbols: defaultdict[str, int] = defaultdict(int)
        self.where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
        self.pairs_of: defaultdict[str, set[tuple[str, str]]] = defaultdict(set)
        for i, (word, f) in enumerate(zip(words, freqs, strict=True)):
            if count_symbols:
                for s in word:
                    self.symbols[s] += f
            for p in zip(word, word[1:], strict=False):
                self.pairs[p] += f
                self._index(i, p)

    def _index(self, i: int, p: tuple[str, str]) -> None:
        self.where[p].add(i)
        if self.count_symbols:
            self.pairs_of[p[0]].add(p)
            self.pairs_of[p[1]].add(p)

    def merge(self, a: str, b: str, merged: str) -> set[tuple[str, str]]:
        """Merge ``a b`` everywhere; return the pairs holding ``merged`` (the only ones whose counts can grow)."""
        grown, pairs = set(), self.pairs
        for i in self.where.pop((a, b), ()):
            old = self.words[i]
            new = merge_word(old, a, b, merged)
            if len(new) == len(old):  # the index is a superset: this word no longer holds the pair
                continue
            f = self.freqs[i]
            for p in zip(old, old[1:], strict=False):
                pairs[p] -= f
            for p in zip(new, new[1:], strict=False):
                pairs[p] += f
                if p[0] == merged or p[1] == merged:  # every other pair of `new` was in `old`, already indexed
                    self._index(i, p)
                    grown.add(p)
            if self.count_symbols:
                self.symbols[a] -= f * (len(old) - len(new))
                self.symbols[b] -= f * (len(old) - len(new))
                self.symbols[merged] += f * (len(old) - len(new))
            self.words[i] = new
        return grown


def learn_merges(word_counts: dict[tuple[str, ...], int], n_tokens: int, *, known: Iterable[str],
                 join: Callable[[str, str], str], score: str = "frequency",
                 min_frequency: int = 2) -> list[tuple[str, str]]:
    """Learn merges until ``n_tokens`` distinct tokens exist (``known`` ones included) or no pair qualifies.

    Args:
        word_counts: each word as a tuple of its initial symbols, with its corpus frequency.
        n_tokens: target number of distinct tokens (a merge whose result is already known adds none).
        known: the tokens that exist before the first merge (the alphabet and special tokens).
        join: how a pair becomes one token (``a + b`` for BPE; WordPiece drops ``b``'s ``##``).
        score: ``"frequency"`` or ``"likelihood"`` (see ``frequency_score`` and ``likelihood_score``).
        min_frequency: pairs seen fewer times than this are never merged.

    Each step takes the pair with the highest score; ties go to the higher pair count, then to the pair
    ``(a, b)`` that sorts first. Counts are updated only in the words that held the merged pair. A heap holds,
    for every pair, an entry at least as good as its current one: a merge pushes the pairs whose entry may have
    improved (more occurrences; for the likelihood score also a smaller ``freq(a)`` or ``freq(b)``), and an
    entry found out of date at the top is pushed again with the pair's current score.
    """
    if score not in SCORES:
        raise ValueError(f"score must be one of {sorted(SCORES)}, got {score!r}")
    score_fn, likelihood = SCORES[score], score == "likelihood"
    stats = _PairStats([list(w) for w in word_counts], list(word_counts.values()), count_symbols=likelihood)

    def entry(p: tuple[str, str]) -> tuple:
        count = stats.pairs[p]
        return (-score_fn(count, stats.symbols[p[0]], stats.symbols[p[1]]), -count, p[0], p[1])

    heap = [entry(p) for p, c in stats.pairs.items() if c > 0]
    heapq.heapify(heap)
    tokens, merges = set(known), []
    while len(tokens) < n_tokens and heap:
        top = heapq.heappop(heap)
        pair = (top[2], top[3])
        count = stats.pairs.get(pair, 0)
        if count <= 0:
            continue  # merged already
        current = entry(pair)
        if top != current:  # the pair's score fell since this entry was pushed
            heapq.heappush(heap, current)
            continue
        if count < min_frequency:
            if not likelihood:
                break  # the most frequent pair is too rare: so is every other
            continue  # too rare for now; if its count grows, a new entry is pushed
        merged = join(*pair)
        improved = stats.merge(*pair, merged)
        if likelihood:  # freq(a) and freq(b) fell: the score of every pair holding them rose
            improved |= stats.pairs_of[pair[0]] | stats.pairs_of[pair[1]]
        for p in improved:
            if stats.pairs.get(p, 0) > 0:
                heapq.heappush(heap, entry(p))
        merges.append(pair)
        tokens.add(merged)
    return merges


class _Tokenizer:
    """What both tokenizers share: the token -> id table ``stoi``, a per-word cache, and saving as JSON."""

    _kind = ""  # the "type" its saved file records

    def __len__(self) -> int:
        return len(self.stoi)

    def token_to_id(self, token: str) -> int:
        if token not in self.stoi:
            raise KeyError(f"{token!r} is not one of this {type(self).__name__}'s {len(self)} tokens")
        return self.stoi[token]

    def _cached(self, word: str, compute: Callable[[str], list]) -> list:
        """``compute(word)``, remembered; the cache is emptied when it holds ``cache_size`` words."""
        value = self._cache.get(word)
        if value is None:
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            value = self._cache[word] = compute(word)
        return value

    def _save(self, path: str | Path, state: dict) -> None:
        Path(path).write_text(json.dumps({"type": self._kind, **state}, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path):
        """The tokenizer that :meth:`save` wrote to ``path``."""
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        kind = state.pop("type", None)
        if kind != cls._kind:
            raise ValueError(f"{path} holds a {kind!r} tokenizer, not a {cls._kind!r} one; "
                             f"load it with the class that saved it")
        return cls(**state)


# ---------------------------------------------------------------------------------------------------------------------
# Byte-level BPE (GPT-2)
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class ByteLevelBPE(_Tokenizer):
    """GPT-2's byte-level BPE: ``merges`` in the order learned, applied to each pre-token's bytes.

    Ids: special tokens first, then the 256 byte symbols in byte order, then each new merge result in merge
    order. Encoding never produces special tokens (a literal ``"<|endoftext|>"`` in the text is spelled in
    bytes); add their ids with ``token_to_id``. Any Python string encodes, the empty string to ``[]``;
    ``decode(encode(text)) == text`` for every string UTF-8 can encode (lone surrogates are refused).
    """

    merges: list[tuple[str, str]]
    special_tokens: tuple[str, ...] = BPE_SPECIALS
    cache_size: int = 200_000
    itos: list[str] = field(init=False, repr=False)
    stoi: dict[str, int] = field(init=False, repr=False)
    ranks: dict[tuple[str, str], int] = field(init=False, repr=False)
    _kind = "byte_level_bpe"

    def __post_init__(self) -> None:
        self.merges = [tuple(m) for m in self.merges]
        self.special_tokens = tuple(self.special_tokens)
        bad = [m for m in self.merges if len(m) != 2 or not all(isinstance(s, str) and s for s in m)]
        if bad:
            raise ValueError(f"each merge must be a pair of non-empty strings, got {bad[:3]}")
        if len(set(self.special_tokens)) != len(self.special_tokens):
            raise ValueError(f"special tokens repeat: {self.special_tokens}")
        self.itos = list(self.special_tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        for rank, token in enumerate([*_BYTE_TABLE, *(a + b for a, b in self.merges)]):
            if rank >= 256 and not {*self.merges[rank - 256]} <= self.stoi.keys():
                raise ValueError(f"merge {rank - 256} {self.merges[rank - 256]} joins a token that is neither a byte "
                                 f"symbol nor the result of an earlier merge; merges must be listed in learned order")
            if token not in self.stoi:
                self.stoi[token] = len(self.itos)
                self.itos.append(token)
        self.ranks = {m: r for r, m in enumerate(self.merges)}
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2,
              special_tokens: Iterable[str] = BPE_SPECIALS) -> ByteLevelBPE:
        """Learn merges from ``texts`` until the vocabulary holds ``vocab_size`` tokens (or no pair is seen
        ``min_frequency`` times). Words are GPT-2 pre-tokens counted over the corpus; merging is by frequency."""
        special_tokens = tuple(special_tokens)
        floor = len(set(special_tokens)) + 256
        if not isinstance(vocab_size, int) or vocab_size < floor:
            raise ValueError(f"vocab_size={vocab_size!r} is smaller than the 256 byte symbols plus "
                             f"{floor - 256} special tokens that every byte-level BPE vocabulary holds; "
                             f"use vocab_size >= {floor}")
        counts: Counter[str] = Counter()
        for text in _check_texts(texts):
            counts.update(gpt2_pretokenize(_check_str(text)))
        words = {tuple(word_to_byte_symbols(w)): c for w, c in counts.items()}
        merges = learn_merges(words, vocab_size, known=[*special_tokens, *_BYTE_TABLE],
                              join=str.__add__, min_frequency=min_frequency)
        return cls(merges, special_tokens)

    def bpe(self, symbols: list[str]) -> list[str]:
        """Apply the merges to one word: repeatedly merge the adjacent pair learned earliest (lowest rank)."""
        ranks, never = self.ranks, len(self.ranks)
        while len(symbols) > 1:
            pair = min(zip(symbols, symbols[1:], strict=False), key=lambda p: ranks.get(p, never))
            if pair not in ranks:
                break
            symbols = merge_word(symbols, pair[0], pair[1], pair[0] + pair[1])
        return symbols

    def _word_ids(self, word: str) -> list[int]:
        return [self.stoi[s] for s in self.bpe(word_to_byte_symbols(word))]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: GPT-2 pre-tokens, each spelled in bytes and merged (results are cached per word)."""
        ids: list[int] = []
        for word in _GPT2_REGEX.findall(_check_str(text)):
            ids.extend(self._cached(word, self._word_ids))
        return ids

    def tokenize(self, text: str) -> list[str]:
        """The tokens of ``text`` as strings of byte symbols (``" world"`` is ``"Ġworld"``)."""
        return [self.itos[i] for i in self.encode(text)]

    def piece(self, token_id: int) -> str:
        """One token's text, for showing tokens one by one: its characters, or, where its bytes hold only part of a
        character's UTF-8 (a rare character split over tokens), each byte of that part as ``<C3>`` (decoding the
        token alone would give U+FFFD instead). Special tokens are their own spelling."""
        token = self.itos[int(token_id)]
        if token in self.special_tokens:
            return token
        raw = bytes(CHAR_TO_BYTE[c] for c in token)
        out, start = [], 0
        while start < len(raw):
            for end in range(len(raw), start, -1):  # the longest run from here that decodes
                try:
                    out.append(raw[start:end].decode("utf-8"))
                    start = end
                    break
                except UnicodeDecodeError:
                    continue
            else:
                out.append(f"<{raw[start]:02X}>")
                start += 1
        return "".join(out)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``. Special tokens decode to their own spelling. Ids that cut a character's UTF-8
        bytes apart (a slice of a longer sequence) decode that character as U+FFFD."""
        specials, out, chunk = set(self.special_tokens), [], []
        for i in checked_ids(ids, len(self)):
            token = self.itos[i]
            if token in specials:
                out.append(bytes(chunk).decode("utf-8", errors="replace") + token)
                chunk = []
            else:
                chunk.extend(CHAR_TO_BYTE[c] for c in token)
        out.append(bytes(chunk).decode("utf-8", errors="replace"))
        return "".join(out)

    def save(self, path: str | Path) -> None:
        self._save(path, {"special_tokens": list(self.special_tokens), "merges": [list(m) for m in self.merges]})


# ---------------------------------------------------------------------------------------------------------------------
# BERT's basic tokenizer
# ---------------------------------------------------------------------------------------------------------------------
def is_whitespace(char: str) -> bool:
    """BERT's whitespace: space, tab, newline, carriage return, or any space separator (category Zs)."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """BERT's control characters: every category C* (control, format, unassigned...) except tab/newline/CR."""
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: any category P*, plus all non-alphanumeric printable ASCII (``$``, ``+``, ``^``...)."""
    cp = ord(char)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(char).startswith("P")


_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk(char: str) -> bool:
    """A CJK Unified (or Compatibility) Ideograph; BERT makes each one a word. Hangul and kana are not in it."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


class _CharMap(dict):
    """A ``str.translate`` table filled on first sight of each character, so the scan itself runs in C."""

    def __init__(self, rule: Callable[[str], str | None]):
        super().__init__()
        self.rule = rule

    def __missing__(self, cp: int) -> str | None:
        self[cp] = value = self.rule(chr(cp))
        return value


def _clean(char: str) -> str | None:
    if char in "\x00\ufffd" or is_control(char):
        return None
    return " " if is_whitespace(char) else char


_CLEAN = _CharMap(_clean)
_CLEAN_CJK = _CharMap(lambda c: f" {c} " if is_cjk(c) else _clean(c))
_PUNCT = _CharMap(lambda c: f" {c} " if is_punctuation(c) else c)
_NONSPACING = _CharMap(lambda c: None if unicodedata.category(c) == "Mn" else c)


def strip_accents(text: str) -> str:
    """Decompose (NFD) and drop the combining marks (category Mn): ``"Café" -> "Cafe"``."""
    return unicodedata.normalize("NFD", text).translate(_NONSPACING)


@dataclass(frozen=True)
class BasicTokenizer:
    """BERT's basic tokenizer, as in ``transformers``: text into words and punctuation marks.

    1. clean: drop NUL, U+FFFD and control characters; every whitespace character becomes a space;
    2. put spaces around each CJK ideograph (``split_cjk``); normalize to NFC; split on whitespace;
    3. lower-case (``lowercase``) and strip accents (``strip_accents``; ``None`` follows ``lowercase``);
    4. make each punctuation character its own word.

    ``"Héllo, WORLD!" -> ["hello", ",", "world", "!"]``; the empty string (or only spaces) gives ``[]``.
    """

    lowercase: bool = True
    strip_accents: bool | None = None
    split_cjk: bool = True

    def __call__(self, text: str) -> list[str]:
        text = _check_str(text).translate(_CLEAN_CJK if self.split_cjk else _CLEAN)
        text = " ".join(unicodedata.normalize("NFC", text).split())
        if self.lowercase:
            text = text.lower()
        if self.strip_accents or (self.strip_accents is None and self.lowercase):
            text = strip_accents(text)
        return text.translate(_PUNCT).split()


# ---------------------------------------------------------------------------------------------------------------------
# WordPiece (BERT)
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class WordPiece(_Tokenizer):
    """BERT's WordPiece: the basic tokenizer, then greedy longest-match-first pieces from ``vocab``.

    A piece that does not start its word carries ``prefix`` (``##``). A word longer than
    ``max_input_chars_per_word`` characters, or one that some position cannot be matched in (a character
    missing from the vocabulary), becomes the single token ``unk_token``, as in BERT. The empty string gives
    ``[]``. Special tokens are never produced from text (``"[CLS]"`` in text is ``[``, ``cl``..., ``]``).

    Hugging Face ``tokenizers`` (``BertNormalizer`` + ``BertPreTokenizer``) gives the same tokens on ordinary
    text, with two known differences from ``transformers`` and lmlib: it keeps code points that are unassigned
    in Python's Unicode tables (both others drop them as category ``Cn``), and it lower-cases ``Σ`` to ``σ``
    even at the end of a word, where Python's ``str.lower`` writes ``ς``.
    """

    vocab: list[str]
    unk_token: str = SPECIAL_TOKENS["wordpiece"]["unk"]
    max_input_chars_per_word: int = 100
    lowercase: bool = True
    prefix: str = "##"
    cache_size: int = 200_000
    stoi: dict[str, int] = field(init=False, repr=False)
    _kind = "wordpiece"

    def __post_init__(self) -> None:
        self.vocab = list(self.vocab)
        if not all(isinstance(t, str) and t for t in self.vocab):
            raise TypeError("vocab must be a list of non-empty strings (the token of each id, in id order)")
        self.stoi = {t: i for i, t in enumerate(self.vocab)}
        if len(self.stoi) != len(self.vocab):
            dup = [t for t, c in Counter(self.vocab).items() if c > 1]
            raise ValueError(f"vocab repeats tokens {dup[:5]}; each token needs exactly one id")
        if self.unk_token not in self.stoi:
            raise ValueError(f"vocab has no unknown token {self.unk_token!r}: a word it cannot spell would have "
                             f"no id; add {self.unk_token!r} to the vocabulary (WordPiece.train puts it first) "
                             f"or pass unk_token= the spelling your vocabulary uses")
        if not isinstance(self.max_input_chars_per_word, int) or self.max_input_chars_per_word < 1:
            raise ValueError(f"max_input_chars_per_word must be a positive int, got {self.max_input_chars_per_word!r}")
        self.basic = BasicTokenizer(lowercase=self.lowercase)
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, score: str = "likelihood", min_frequency: int = 2,
              special_tokens: Iterable[str] = WORDPIECE_SPECIALS, lowercase: bool = True,
              prefix: str = "##", **kwargs) -> WordPiece:
        """Learn a WordPiece vocabulary of ``vocab_size`` tokens from ``texts``.

        Words come from the basic tokenizer. Each starts split into characters, all but the first marked
        with ``prefix``; ``("u", "##n")`` merges into ``"un"`` and ``("##a", "##b")`` into ``"##ab"``.
        ``score="likelihood"`` picks pairs by ``freq(ab) / (freq(a) * freq(b))`` (original WordPiece);
        ``score="frequency"`` by ``freq(ab)``, as Hugging Face's ``WordPieceTrainer`` does. The vocabulary
        is: special tokens, then every character form seen (sorted), then merge results in merge order.
        """
        special_tokens = tuple(dict.fromkeys(special_tokens))
        unk = kwargs.get("unk_token", SPECIAL_TOKENS["wordpiece"]["unk"])
        if unk not in special_tokens:
            raise ValueError(f"special_tokens {special_tokens} lack the unknown token {unk!r}; include it")
        basic = BasicTokenizer(lowercase=lowercase)
        counts: Counter[str] = Counter()
        for text in _check_texts(texts):
            counts.update(basic(text))
        words = {(w[0], *(prefix + c for c in w[1:])): n for w, n in counts.items()}
        alphabet = sorted({s for w in words for s in w} - set(special_tokens))
        floor = len(special_tokens) + len(alphabet)
        if not isinstance(vocab_size, int) or vocab_size < floor:
            raise ValueError(f"vocab_size={vocab_size!r} cannot hold the {len(special_tokens)} special tokens and "
                             f"the {len(alphabet)} character forms of this corpus; use vocab_size >= {floor}")
        initial = [*special_tokens, *alphabet]
        merges = learn_merges(words, vocab_size, known=initial, score=score, min_frequency=min_frequency,
                              join=lambda a, b: a + b[len(prefix):])
        vocab = list(dict.fromkeys([*initial, *(a + b[len(prefix):] for a, b in merges)]))
        return cls(vocab, lowercase=lowercase, prefix=prefix, **kwargs)

    def word_pieces(self, word: str) -> list[str]:
        """Greedy longest-match-first: take the longest vocabulary entry that starts the rest of the word,
        then continue after it (with ``##``); ``[unk]`` if some position has no match or the word is too long."""
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.stoi:
                    break
            else:
                return [self.unk_token]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of ``text``: ``"Unaffable!" -> ["un", "##aff", "##able", "!"]``."""
        tokens: list[str] = []
        for word in self.basic(text):
            tokens.extend(self._cached(word, self.word_pieces))
        return tokens

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no ``[CLS]``/``[SEP]``; add them with ``token_to_id``)."""
        stoi = self.stoi
        return [stoi[t] for t in self.tokenize(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """Tokens joined by spaces, ``##`` pieces glued to the one before. Lossy: case, accents and the
        spacing around punctuation are gone, and an unknown word stays ``[UNK]``."""
        text = " ".join(self.vocab[i] for i in checked_ids(ids, len(self)))
        return text.replace(" " + self.prefix, "")

    def save(self, path: str | Path) -> None:
        self._save(path, {"vocab": self.vocab, "unk_token": self.unk_token, "prefix": self.prefix,
                          "max_input_chars_per_word": self.max_input_chars_per_word, "lowercase": self.lowercase})

