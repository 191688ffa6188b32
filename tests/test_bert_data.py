"""lmlib.text.bert_data: sentence pairs (NSP), truncation and packing, and BERT's 15% / 80-10-10 masking.

The statistical tests draw many samples and accept a share within 5 binomial standard deviations of its
expected value: sqrt(p (1 − p) / n) for a share of n independent draws. A correct implementation fails one of
them with probability below 1e-6; a rate off by a tenth of its value fails all of them.
"""

import math
import random

import pytest
import torch

from lmlib.text.bert_data import (
    IGNORE_INDEX,
    IS_NEXT,
    MASKED,
    NOT_CHOSEN,
    NOT_NEXT,
    RANDOM,
    UNCHANGED,
    SpecialIds,
    encode_pair,
    instance_tensors,
    mask_tokens,
    packed_instances,
    pretraining_batch,
    sentence_pairs,
    truncate_pair,
)

torch.set_num_threads(1)
SPECIALS = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
VOCAB = 30


def within(share: float, p: float, n: int, sigmas: float = 5.0) -> bool:
    return abs(share - p) <= sigmas * math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def big_batch():
    """400 rows of 250 ids, with specials sprinkled in and the last positions of half the rows padding."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (400, 250), generator=g)
    ids[:, 0], ids[:, 120], ids[:, -1] = SPECIALS.cls, SPECIALS.sep, SPECIALS.sep
    attention_mask = torch.ones_like(ids)
    attention_mask[::2, 200:] = 0
    ids[attention_mask == 0] = SPECIALS.pad
    result = mask_tokens(ids, SPECIALS, VOCAB, attention_mask, mask_rate=0.15,
                         generator=torch.Generator().manual_seed(1))
    return ids, attention_mask, result


def test_chosen_share_is_fifteen_percent_of_maskable_positions(big_batch):
    ids, attention_mask, result = big_batch
    maskable = ~torch.isin(ids, torch.tensor(SPECIALS.all())) & attention_mask.bool()
    n = int(maskable.sum())
    assert n > 60_000
    chosen = result.how != NOT_CHOSEN
    assert within(chosen.sum().item() / n, 0.15, n)  # ±5σ ≈ ±0.0069 at n ≈ 67k


def test_specials_and_padding_are_never_chosen(big_batch):
    ids, attention_mask, result = big_batch
    chosen = result.how != NOT_CHOSEN
    assert not chosen[torch.isin(ids, torch.tensor(SPECIALS.all()))].any()
    assert not chosen[attention_mask == 0].any()
    assert torch.equal(result.input_ids[~chosen], ids[~chosen])  # what is not chosen is untouched
    assert (result.labels[~chosen] == IGNORE_INDEX).all()
    assert torch.equal(result.labels[chosen], ids[chosen])  # the label is the original token


def test_eighty_ten_ten_split_of_chosen_positions(big_batch):
    ids, _, result = big_batch
    chosen = result.how != NOT_CHOSEN
    k = int(chosen.sum())
    for code, p in ((MASKED, 0.8), (RANDOM, 0.1), (UNCHANGED, 0.1)):
        assert within((result.how == code).sum().item() / k, p, k), code  # ±5σ ≈ ±0.019 / ±0.014 at k ≈ 10k
    assert (result.input_ids[result.how == MASKED] == SPECIALS.mask).all()
    assert torch.equal(result.input_ids[result.how == UNCHANGED], ids[result.how == UNCHANGED])


def test_random_replacements_are_never_specials_and_cover_the_rest(big_batch):
    _, _, result = big_batch
    drawn = result.input_ids[result.how == RANDOM]
    assert not torch.isin(drawn, torch.tensor(SPECIALS.all())).any()
    counts = torch.bincount(drawn, minlength=VOCAB)[5:]  # ids 5..29, 25 of them, ~40 draws each
    n = len(drawn)
    assert all(within(c / n, 1 / 25, n) for c in counts.tolist())


def test_random_positions_hold_a_uniform_draw_in_the_input_ids(big_batch):
    # What the model reads, not the library's record: at positions recorded as RANDOM the input id is a uniform
    # draw over the 25 ordinary ids, so it differs from the original with probability 24/25.
    ids, _, result = big_batch
    random = result.how == RANDOM
    n = int(random.sum())
    assert n > 800
    assert within((result.input_ids[random] != ids[random]).sum().item() / n, 24 / 25, n)
    # Every original the same ordinary token: the draws still cover all 25 ids evenly, 7 included.
    same = torch.full((400, 100), 7)
    result = mask_tokens(same, SPECIALS, VOCAB, generator=torch.Generator().manual_seed(2))
    drawn = result.input_ids[result.how == RANDOM]
    n = len(drawn)
    assert within((drawn != 7).sum().item() / n, 24 / 25, n)
    counts = torch.bincount(drawn, minlength=VOCAB)
    assert counts[:5].sum() == 0 and all(within(c / n, 1 / 25, n) for c in counts[5:].tolist())


def test_random_replacements_skip_special_ids_wherever_they_sit():
    specials = SpecialIds(pad=0, unk=7, cls=2, sep=11, mask=4)  # not the first five ids
    ids = torch.full((400, 100), 9)
    result = mask_tokens(ids, specials, 16, generator=torch.Generator().manual_seed(3))
    drawn = result.input_ids[result.how == RANDOM]
    assert set(drawn.tolist()) == set(range(16)) - {0, 7, 2, 11, 4}


def test_masking_is_repeatable_with_a_seed():
    ids = torch.randint(5, VOCAB, (4, 20), generator=torch.Generator().manual_seed(0))
    a = mask_tokens(ids, SPECIALS, VOCAB, generator=torch.Generator().manual_seed(7))
    b = mask_tokens(ids, SPECIALS, VOCAB, generator=torch.Generator().manual_seed(7))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("rate", [0, 0.0, 1.0, 1.5, -0.1, True, "0.15"])
def test_mask_rate_outside_zero_one_is_refused(rate):
    with pytest.raises(ValueError, match=r"mask_rate must be in \(0, 1\) \(BERT uses 0.15\)"):
        mask_tokens(torch.tensor([[2, 7, 3]]), SPECIALS, VOCAB, mask_rate=rate)


def test_masking_refuses_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match=r"input_ids holds ids from 2 to 30"):
        mask_tokens(torch.tensor([[2, 30, 3]]), SPECIALS, VOCAB)
    with pytest.raises(ValueError, match=r"special ids \[40\]"):
        mask_tokens(torch.tensor([[2, 7, 3]]), SpecialIds(0, 1, 2, 3, 40), VOCAB)


# --- pairs ----------------------------------------------------------------------------------------------------

def documents(n_docs: int, n_sentences: int) -> list[list[list[int]]]:
    """Sentence j of document d is [d, j]: a pair says where its sentences came from."""
    return [[[d, j] for j in range(n_sentences)] for d in range(n_docs)]


def test_half_the_pairs_are_true_next_sentences():
    pairs = sentence_pairs(documents(1000, 21), seed=0)
    n = len(pairs)
    assert n == 20_000
    assert within(sum(p.is_next for p in pairs) / n, 0.5, n)  # ±5σ ≈ ±0.018
    for p in pairs:
        if p.is_next:
            assert p.b == [p.a[0], p.a[1] + 1] and p.nsp_label == IS_NEXT
        else:
            assert p.b[0] != p.a[0] and p.nsp_label == NOT_NEXT  # from another document


def test_random_sentences_come_evenly_from_the_other_documents():
    pairs = [p for p in sentence_pairs(documents(5, 2001), seed=2) if not p.is_next]
    for source in range(5):
        drawn = [p.b[0] for p in pairs if p.a[0] == source]
        n = len(drawn)  # ~1,000 NotNext pairs per document
        assert n > 800 and source not in drawn
        assert all(within(drawn.count(other) / n, 1 / 4, n) for other in range(5) if other != source)


def test_pairs_are_seeded_and_need_two_documents():
    docs = documents(5, 4)
    assert sentence_pairs(docs, seed=3) == sentence_pairs(docs, seed=3)
    assert sentence_pairs(docs, seed=3) != sentence_pairs(docs, seed=4)
    with pytest.raises(ValueError, match="at least two"):
        sentence_pairs(documents(1, 5))
    with pytest.raises(ValueError, match="no document has two sentences"):
        sentence_pairs(documents(3, 1))
    with pytest.raises(ValueError, match="sentence 1 of document 0 is empty"):
        sentence_pairs([[[1], []], [[2]]])


def test_truncation_trims_the_longer_sentence_first():
    a, b = truncate_pair(list(range(10)), list(range(100, 104)), max_len=12)
    assert (a, b) == ([0, 1, 2, 3, 4], [100, 101, 102, 103])  # 9 = 12 − 3 tokens: A lost its last 5
    a, b = truncate_pair([1, 2, 3], [4, 5, 6], max_len=7)  # equal lengths: B first, then A
    assert (a, b) == ([1, 2], [4, 5])
    assert truncate_pair([1], [2, 3], max_len=5) == ([1], [2])
    assert truncate_pair([1, 2], [3], max_len=50) == ([1, 2], [3])  # short pairs are left alone


def test_pairs_with_no_room_are_refused():
    with pytest.raises(ValueError, match=r"max_len=4 leaves no room.*max_len must be >= 5"):
        truncate_pair([1, 2], [3, 4], max_len=4)
    with pytest.raises(ValueError, match="at least one token"):
        truncate_pair([], [3, 4], max_len=10)


def test_encode_pair_layout_and_segments():
    ids, segments = encode_pair([7, 8, 9], [10, 11], SPECIALS, max_len=7)
    assert ids == [2, 7, 8, 3, 10, 11, 3]  # [CLS] A [SEP] B [SEP], A trimmed to fit 7
    assert segments == [0, 0, 0, 0, 1, 1, 1]


def test_pretraining_batch_pads_and_never_masks_padding():
    pairs = sentence_pairs(documents(6, 5), seed=1)
    pairs = [type(p)([5 + t % 20 for t in range(3 + i)], [6, 7], p.is_next) for i, p in enumerate(pairs)]
    batch = pretraining_batch(pairs, SPECIALS, VOCAB, max_len=16, generator=torch.Generator().manual_seed(0))
    width = batch.input_ids.size(1)
    assert width == 16 and batch.segment_ids.shape == batch.attention_mask.shape == (len(pairs), 16)
    assert (batch.input_ids[batch.attention_mask == 0] == SPECIALS.pad).all()
    assert (batch.mlm_labels[batch.attention_mask == 0] == IGNORE_INDEX).all()
    assert (batch.segment_ids[batch.attention_mask == 0] == 0).all()
    assert batch.nsp_labels.tolist() == [p.nsp_label for p in pairs]
    lengths = batch.attention_mask.sum(1)
    assert lengths.tolist() == [min(16, len(p.a) + len(p.b) + 3) for p in pairs]


def test_special_ids_from_a_wordpiece_tokenizer():
    from lmlib.text.tokenizers import WordPiece

    tok = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    assert SpecialIds.from_tokenizer(tok) == SpecialIds(0, 1, 2, 3, 4)


# --- segments packed to the full length (the gpu preset) ------------------------------------------------------

def _documents(n_docs=60, seed=0):
    rng = random.Random(seed)
    token = iter(range(5, 10**6))  # every token unique, so a span can be traced back to where it came from
    return [[[next(token) for _ in range(rng.randint(1, 30))] for _ in range(rng.randint(1, 15))]
            for _ in range(n_docs)]


def _where(documents):
    return {t: (d, s) for d, doc in enumerate(documents) for s, sentence in enumerate(doc) for t in sentence}


def test_without_nsp_every_instance_is_one_contiguous_span_and_no_text_is_lost():
    docs = _documents()
    instances = packed_instances(docs, 64, random.Random(0), nsp=False, short_seq_prob=0.0)
    where = _where(docs)
    seen = set()
    for a, b, is_next in instances:
        assert is_next and a and b and len(a) + len(b) <= 64 - 3
        text = a + b
        assert len({where[t][0] for t in text}) == 1  # one document
        assert all(y == x + 1 for x, y in zip(text, text[1:])) or len(a) + len(b) == 61  # contiguous unless trimmed
        seen.update(text)
    kept_documents = {where[t][0] for t in seen}
    short = [d for d, doc in enumerate(docs) if sum(map(len, doc)) >= 2]  # a one-token document gives no pair
    assert set(short) <= kept_documents


def test_segments_are_filled_towards_the_full_length():
    docs = _documents(seed=1)
    instances = packed_instances(docs, 64, random.Random(0), nsp=False, short_seq_prob=0.0)
    lengths = [len(a) + len(b) for a, b, _ in instances]
    long_docs = sum(1 for doc in docs if sum(map(len, doc)) > 61)
    assert long_docs > 5 and sum(n >= 50 for n in lengths) >= long_docs  # one sentence per segment would not


def test_with_nsp_half_the_pairs_are_not_next_and_their_b_comes_from_another_document():
    docs = _documents(400, seed=2)
    where = _where(docs)
    instances = packed_instances(docs, 64, random.Random(0), nsp=True, short_seq_prob=0.1)
    not_next = [(a, b) for a, b, is_next in instances if not is_next]
    assert 0.45 < len(not_next) / len(instances) < 0.7  # 50%, plus the one-sentence chunks that must take a random B
    for a, b in not_next:
        assert where[a[0]][0] != where[b[0]][0]
    for a, b, is_next in instances:
        if is_next:
            assert where[a[0]][0] == where[b[0]][0] and b[0] == a[-1] + 1 or len(a) + len(b) == 61


def test_with_nsp_the_sentences_a_random_b_displaced_are_read_again():
    docs = _documents(200, seed=5)
    instances = packed_instances(docs, 512, random.Random(0), nsp=True, short_seq_prob=0.0)  # nothing is trimmed
    own = {t for a, b, is_next in instances for t in (a + b if is_next else a)}  # text read in its own document
    assert own == {t for doc in docs for sentence in doc for t in sentence}


def test_instance_tensors_lay_out_pairs_as_encode_pair():
    instances = packed_instances(_documents(20), 48, random.Random(3), nsp=True)
    ids, segments, labels = instance_tensors(instances, SPECIALS, 48)
    for row, (a, b, is_next) in enumerate(instances):
        expect_ids, expect_segments = encode_pair(a, b, SPECIALS, 48)
        n = len(expect_ids)
        assert ids[row, :n].tolist() == expect_ids and (ids[row, n:] == SPECIALS.pad).all()
        assert segments[row, :n].tolist() == expect_segments and (segments[row, n:] == 0).all()
        assert labels[row].item() == (0 if is_next else 1)
