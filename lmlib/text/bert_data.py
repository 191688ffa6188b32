"""Pre-training data for BERT (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
Language Understanding", §3.1 and Appendix A.1): sentence pairs for next sentence prediction, and masked tokens
for the masked language model.

The path from text to a batch, one pure step each:

1. :func:`sentence_pairs`: documents (lists of sentences of token ids) -> pairs (A, B, is_next). "When choosing
   the sentences A and B for each pre-training example, 50% of the time B is the actual next sentence that
   follows A (labeled as IsNext), and 50% of the time it is a random sentence from the corpus (labeled as
   NotNext)." Here the random sentence always comes from another document.
2. :func:`truncate_pair` and :func:`encode_pair`: ``[CLS] A [SEP] B [SEP]`` with segment ids 0 (for [CLS], A
   and the first [SEP]) and 1 (B and the last [SEP]), cut to a maximum length.
3. :func:`mask_tokens`: "we mask 15% of all WordPiece tokens in each sequence at random"; a chosen token is
   replaced by [MASK] 80% of the time, by a random token 10% of the time, and left unchanged 10% of the time,
   and the model predicts the original token at every chosen position.
4. :func:`pretraining_batch` does 2 and 3 for a list of pairs and pads them into tensors for
   :class:`lmlib.models.bert.Bert`.

For runs sized for a GPU, :func:`packed_instances` fills each segment up to the full length with consecutive
sentences, as the released pre-processing does ("sequences of up to 512 tokens", Appendix A.2), and
:func:`instance_tensors` lays the instances out as fixed-size tensors once, so batches are cut and masked on the
device (:func:`mask_tokens` draws where its input lives).

Labels follow ``transformers``: the MLM label is the original id at chosen positions and ``IGNORE_INDEX``
(-100, what ``F.cross_entropy`` skips by default) elsewhere; the NSP label is 0 for IsNext and 1 for NotNext.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .batching import pad_batch
from .tokenizers import SPECIAL_TOKENS
from .vocab import check_ids_in_range

IGNORE_INDEX = -100  # MLM label of a position that is not predicted
IS_NEXT, NOT_NEXT = 0, 1  # NSP labels, as in the released checkpoints
# What mask_tokens did at each position (the `how` tensor).
NOT_CHOSEN, MASKED, RANDOM, UNCHANGED = 0, 1, 2, 3


@dataclass(frozen=True)
class SpecialIds:
    """The ids of BERT's five special tokens in one vocabulary."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    @classmethod
    def from_tokenizer(cls, tokenizer) -> SpecialIds:
        """The ids in a tokenizer with ``token_to_id`` (lmlib's :class:`~lmlib.text.tokenizers.WordPiece`),
        spelled as in ``SPECIAL_TOKENS["wordpiece"]``."""
        return cls(**{role: tokenizer.token_to_id(token) for role, token in SPECIAL_TOKENS["wordpiece"].items()})

    def all(self) -> tuple[int, ...]:
        return (self.pad, self.unk, self.cls, self.sep, self.mask)


@dataclass(frozen=True)
class SentencePair:
    """Sentence A, sentence B (token ids) and whether B is A's next sentence in the same document."""

    a: list[int]
    b: list[int]
    is_next: bool

    @property
    def nsp_label(self) -> int:
        return IS_NEXT if self.is_next else NOT_NEXT


def sentence_pairs(documents: Sequence[Sequence[Sequence[int]]], seed: int = 0) -> list[SentencePair]:
    """One pair per pair of adjacent sentences in each document: A is sentence i; with probability 0.5
    B is sentence i+1 of the same document (IsNext), otherwise a sentence drawn uniformly from a document drawn
    uniformly among the other documents (NotNext). ``seed`` makes the draws repeatable.

    Simpler than the released pre-processing, which packs several sentences into each segment up to a target
    length: here a segment is one sentence. A document with one sentence gives no pair of its own but can
    supply random B's.
    """
    documents = [list(doc) for doc in documents]
    for d, doc in enumerate(documents):
        for s, sentence in enumerate(doc):
            if len(sentence) == 0:
                raise ValueError(f"sentence {s} of document {d} is empty; drop empty sentences first")
    usable = [d for d, doc in enumerate(documents) if doc]
    if len(usable) < 2:
        raise ValueError(f"{len(usable)} non-empty document(s): a NotNext sentence comes from another document, "
                         f"so give at least two")
    if not any(len(doc) >= 2 for doc in documents):
        raise ValueError("no document has two sentences, so there is no true next sentence; split the documents "
                         "into sentences first")
    rank = {d: k for k, d in enumerate(usable)}
    rng = random.Random(seed)
    pairs = []
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            if rng.random() < 0.5:
                pairs.append(SentencePair(list(doc[i]), list(doc[i + 1]), True))
            else:
                k = rng.randrange(len(usable) - 1)  # uniform over the other usable documents
                other = usable[k + (k >= rank[d])]
                pairs.append(SentencePair(list(doc[i]), list(rng.choice(documents[other])), False))
    return pairs


def truncate_pair(a: Sequence[int], b: Sequence[int], max_len: int) -> tuple[list[int], list[int]]:
    """Cut A and B so that ``[CLS] A [SEP] B [SEP]`` fits in ``max_len`` positions: while len(A) + len(B) >
    max_len − 3, drop the last token of the longer one (of B when they are equally long), as the released
    ``truncate_seq_pair`` does (which drops from the front or the back at random). Both keep at least one token.
    """
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 5:
        raise ValueError(f"max_len={max_len!r} leaves no room for a pair: [CLS] A [SEP] B [SEP] needs 3 special "
                         f"tokens and at least one token of each sentence, so max_len must be >= 5")
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"both sentences need at least one token, got lengths {len(a)} and {len(b)}")
    a, b = list(a), list(b)
    while len(a) + len(b) > max_len - 3:
        (a if len(a) > len(b) else b).pop()
    return a, b


def encode_pair(a: Sequence[int], b: Sequence[int], specials: SpecialIds,
                max_len: int) -> tuple[list[int], list[int]]:
    """``([CLS] A [SEP] B [SEP], segment ids)`` after :func:`truncate_pair`; segment 0 covers [CLS], A and the
    first [SEP], segment 1 covers B and the last [SEP]."""
    a, b = truncate_pair(a, b, max_len)
    ids = [specials.cls, *a, specials.sep, *b, specials.sep]
    segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return ids, segments


class MaskedTokens(NamedTuple):
    """The result of :func:`mask_tokens`: the corrupted ``input_ids``, the MLM ``labels`` (original id where
    chosen, ``IGNORE_INDEX`` elsewhere) and ``how`` each position was treated (``NOT_CHOSEN``, ``MASKED``,
    ``RANDOM``, ``UNCHANGED``), all shaped like the input."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    how: torch.Tensor


def mask_tokens(input_ids: torch.Tensor, specials: SpecialIds, vocab_size: int,
                attention_mask: torch.Tensor | None = None, mask_rate: float = 0.15,
                generator: torch.Generator | None = None) -> MaskedTokens:
    """BERT's masking (§3.1, Task #1): each maskable position is chosen independently with probability
    ``mask_rate`` (15%); a chosen token becomes [MASK] with probability 0.8, a random token with probability
    0.1, and stays itself with probability 0.1. The labels hold the original token at chosen positions.

    Maskable means: not one of the five special tokens and not padding (``attention_mask`` 0). Random tokens
    are drawn uniformly from the vocabulary without the special tokens (they may equal the original token, as
    in BERT). The released code picks exactly round(15% · n) positions per sequence instead of deciding each
    position on its own; the expected share is the same.

    The draws are made where ``input_ids`` lives (``generator`` must be on that device), and nothing is read back
    from it: on a GPU a whole batch is masked without the host waiting.
    """
    _check_masking_inputs(input_ids, specials, vocab_size, attention_mask, mask_rate)
    device, special = input_ids.device, sorted(set(specials.all()))
    maskable = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    for s in special:
        maskable &= input_ids != s  # (B, T)
    chosen = maskable & (torch.rand(input_ids.shape, generator=generator, device=device) < mask_rate)
    u = torch.rand(input_ids.shape, generator=generator, device=device)  # which of the three treatments
    how = torch.full_like(input_ids, NOT_CHOSEN, dtype=torch.int8)
    how[chosen & (u < 0.8)] = MASKED
    how[chosen & (u >= 0.8) & (u < 0.9)] = RANDOM
    how[chosen & (u >= 0.9)] = UNCHANGED
    # a uniform draw among the ordinary ids: the r-th of them is r shifted past each special id at or below it
    drawn = torch.randint(vocab_size - len(special), input_ids.shape, generator=generator, device=device)
    for s in special:
        drawn += drawn >= s
    corrupted = torch.where(how == MASKED, torch.full_like(input_ids, specials.mask), input_ids)
    corrupted = torch.where(how == RANDOM, drawn, corrupted)
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return MaskedTokens(corrupted, labels, how)


def _check_masking_inputs(input_ids, specials, vocab_size, attention_mask, mask_rate) -> None:
    if isinstance(mask_rate, bool) or not isinstance(mask_rate, (int, float)) or not 0.0 < mask_rate < 1.0:
        raise ValueError(f"mask_rate must be in (0, 1) (BERT uses 0.15), got {mask_rate!r}")
    if not isinstance(input_ids, torch.Tensor) or input_ids.is_floating_point() or input_ids.dtype == torch.bool:
        raise ValueError("input_ids must be an integer tensor of token ids")
    if not isinstance(specials, SpecialIds):
        raise TypeError(f"specials must be a SpecialIds (e.g. SpecialIds.from_tokenizer(tokenizer)), got "
                        f"{type(specials).__name__}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= len(set(specials.all())):
        raise ValueError(f"vocab_size={vocab_size!r} must be an int larger than the number of special tokens "
                         f"({len(set(specials.all()))}): random replacements are drawn from the other ids")
    bad = [i for i in specials.all() if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(f"special ids {bad} are outside the vocabulary of {vocab_size}; take them from the "
                         f"tokenizer (SpecialIds.from_tokenizer)")
    # the ids' range is read on the CPU only: on a GPU the read would stall it (ids from instance_tensors come from
    # the tokenizer, so they are in range)
    if input_ids.device.type == "cpu" and input_ids.numel():
        check_ids_in_range(input_ids, vocab_size, "input_ids", "the tokenizer's vocabulary")
    if attention_mask is not None and (not isinstance(attention_mask, torch.Tensor)
                                       or attention_mask.shape != input_ids.shape):
        raise ValueError("attention_mask must be a tensor shaped like input_ids (1 = real token, 0 = padding)")


@dataclass
class PretrainingBatch:
    """Padded tensors for one pre-training step: ``input_ids`` (after masking), ``segment_ids`` and
    ``attention_mask`` (batch, seq) go to :class:`~lmlib.models.bert.Bert`; ``mlm_labels`` (batch, seq) and
    ``nsp_labels`` (batch,) to the losses; ``how`` records :func:`mask_tokens`' choices."""

    input_ids: torch.Tensor
    segment_ids: torch.Tensor
    attention_mask: torch.Tensor
    mlm_labels: torch.Tensor
    nsp_labels: torch.Tensor
    how: torch.Tensor


def pretraining_batch(pairs: Sequence[SentencePair], specials: SpecialIds, vocab_size: int, max_len: int,
                      mask_rate: float = 0.15, generator: torch.Generator | None = None) -> PretrainingBatch:
    """Encode each pair (:func:`encode_pair`, at most ``max_len`` tokens), pad the rows with [PAD] to the longest,
    and mask them (:func:`mask_tokens`)."""
    if len(pairs) == 0:
        raise ValueError("pretraining_batch needs at least one pair")
    encoded = [encode_pair(p.a, p.b, specials, max_len) for p in pairs]
    input_ids, real, _ = pad_batch([ids for ids, _ in encoded], specials.pad)
    segment_ids = pad_batch([segments for _, segments in encoded], 0).ids
    attention_mask = real.long()  # 1 at real tokens, 0 at [PAD], as BERT takes it
    masked = mask_tokens(input_ids, specials, vocab_size, attention_mask, mask_rate, generator)
    nsp_labels = torch.tensor([p.nsp_label for p in pairs], dtype=torch.long)
    return PretrainingBatch(masked.input_ids, segment_ids, attention_mask, masked.labels, nsp_labels, masked.how)


def packed_instances(documents: Sequence[Sequence[Sequence[int]]], max_len: int, rng: random.Random, nsp: bool,
                     short_seq_prob: float = 0.1) -> list[tuple[list[int], list[int], bool]]:
    """``(A, B, is_next)`` per instance, segments filled to the full length as in BERT's released pre-processing:
    consecutive sentences of a document are gathered until they reach the target length (``max_len − 3``; with
    probability ``short_seq_prob`` a shorter random target, so short inputs are seen too), then cut at a random
    sentence boundary into A and B. With ``nsp``, half the time B is instead as many sentences as fit from a random
    place in another document (NotNext), and the sentences A left unused go back to be read next. Without ``nsp``
    B is always the true continuation (one contiguous span of text). The pair is then trimmed to fit
    (:func:`truncate_pair`)."""
    target_max = max_len - 3
    out = []
    for d, doc in enumerate(documents):
        target = rng.randint(2, target_max) if rng.random() < short_seq_prob else target_max
        chunk, length, i = [], 0, 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if i == len(doc) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for s in chunk[:a_end] for t in s]
                random_next = nsp and (len(chunk) == 1 or rng.random() < 0.5)
                if random_next and len(documents) > 1:
                    other = rng.randrange(len(documents) - 1)
                    source = documents[other + (other >= d)]
                    b, j = [], rng.randrange(len(source)) if source else 0
                    while j < len(source) and len(b) < target - len(a):
                        b.extend(source[j])
                        j += 1
                    i -= len(chunk) - a_end  # the unused sentences are read again
                    is_next = False
                elif len(chunk) == 1:  # no sentence boundary to cut at: cut the sentence itself
                    half = len(a) // 2
                    a, b, is_next = a[:half], a[half:], True
                else:
                    b, is_next = [t for s in chunk[a_end:] for t in s], True
                if a and b:
                    out.append((*truncate_pair(a, b, max_len), is_next))
                target = rng.randint(2, target_max) if rng.random() < short_seq_prob else target_max
                chunk, length = [], 0
            i += 1
    return out


def instance_tensors(instances: Sequence[tuple[Sequence[int], Sequence[int], bool]], specials: SpecialIds,
                     max_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids (N, max_len) int32, segments (N, max_len) int8, nsp labels (N,))``: each instance as
    ``[CLS] A [SEP] B [SEP]`` padded with [PAD], segments as :func:`encode_pair` gives them."""
    ids = torch.full((len(instances), max_len), specials.pad, dtype=torch.int32)
    segments = torch.zeros((len(instances), max_len), dtype=torch.int8)
    labels = torch.empty(len(instances), dtype=torch.long)
    for row, (a, b, is_next) in enumerate(instances):
        seq = [specials.cls, *a, specials.sep, *b, specials.sep]
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
        segments[row, len(a) + 2: len(seq)] = 1
        labels[row] = IS_NEXT if is_next else NOT_NEXT
    return ids, segments, labels
