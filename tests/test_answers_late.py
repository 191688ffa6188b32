"""The hidden references of notebooks 09-12's exercises (lmlib.course.answers_late): each against a hand-computed
case or the library function it varies, and each check passing the notebook's solution and failing a near miss."""

import math

import pytest
import torch

from lmlib.course import answers_late as A
from lmlib.models.gpt import top_p_filter
from lmlib.models.gpt_finetune import FinetuneTokens
from lmlib.models.transformer_xl import future_mask, rel_shift
from lmlib.text.bert_data import encode_pair
from lmlib.text.tokenizers import WordPiece

TOKENS = FinetuneTokens(pad=0, start=1, delim=2, extract=3)


def test_multiple_choice_cut_keeps_the_answer_and_the_end_of_the_context():
    out = A.multiple_choice_cut([7, 8, 9, 10, 11], [[20], [21, 22]], TOKENS, 8)
    assert out == [[1, 8, 9, 10, 11, 2, 20, 3], [1, 9, 10, 11, 2, 21, 22, 3]]
    assert all(len(s) <= 8 for s in out)
    assert A.multiple_choice_cut([7, 8], [[20]], TOKENS, 16) == [[1, 7, 8, 2, 20, 3]]


def test_min_p_keeps_tokens_above_a_share_of_the_top_probability():
    assert A.min_p_kept(torch.tensor([0.5, 0.2, 0.2, 0.06, 0.04]), 0.3) == [0, 1, 2]  # threshold 0.15
    assert A.min_p_kept(torch.tensor([0.1, 0.6, 0.3]), 0.5) == [1, 2]  # threshold 0.3, kept at equality
    # min-p is not top-p: on a flat distribution top-p 0.3 keeps every tie, min-p 0.9 too, but on a peaked one
    # min-p keeps fewer
    probs = torch.tensor([0.8, 0.15, 0.05])
    kept_top_p = (top_p_filter(probs.log(), 0.9) > float("-inf")).nonzero().flatten().tolist()
    assert kept_top_p == [0, 1] and A.min_p_kept(probs, 0.25) == [0]


def test_l3_batch_ignores_padding_and_weighs_l1_by_lambda():
    cls, y = torch.tensor([[0.0, 0.0]]), [1]
    lm = torch.zeros(1, 3, 4)  # uniform next-token distributions: NLL ln 4 per real token
    targets = torch.tensor([[1, 2, 3]])
    assert A.l3_batch(cls, y, lm, targets, [2], 0.0) == pytest.approx(math.log(2))
    assert A.l3_batch(cls, y, lm, targets, [2], 0.5) == pytest.approx(math.log(2) + 0.5 * math.log(4))
    lm2 = lm.clone()
    lm2[0, 2] = torch.tensor([0.0, 0.0, 0.0, 50.0])  # only the padded position changes
    assert A.l3_batch(cls, y, lm2, targets, [2], 1.0) == pytest.approx(A.l3_batch(cls, y, lm, targets, [2], 1.0))


def exact_mask(ids, maskable, mask_id, vocab_size, g):  # the notebook's solution
    chosen = torch.zeros_like(ids, dtype=torch.bool)
    for row in range(ids.size(0)):
        where = maskable[row].nonzero().flatten()
        k = round(0.15 * len(where))
        chosen[row, where[torch.randperm(len(where), generator=g)[:k]]] = True
    u = torch.rand(ids.shape, generator=g)
    random_ids = torch.randint(5, vocab_size, ids.shape, generator=g)
    out = torch.where(chosen & (u < 0.8), torch.full_like(ids, mask_id), ids)
    return torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, out), chosen


def bernoulli_mask(ids, maskable, mask_id, vocab_size, g):  # the notebook's earlier rule: right shares, counts vary
    chosen = maskable & (torch.rand(ids.shape, generator=g) < 0.15)
    u = torch.rand(ids.shape, generator=g)
    random_ids = torch.randint(5, vocab_size, ids.shape, generator=g)
    out = torch.where(chosen & (u < 0.8), torch.full_like(ids, mask_id), ids)
    return torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, out), chosen


def test_exact_count_masking_passes_the_solution_and_fails_bernoulli_masking():
    assert A.check("10 exactly 15% per row", exact_mask)
    assert not A.check("10 exactly 15% per row", bernoulli_mask)


def test_truncated_segments_match_encode_pair():
    from lmlib.text.bert_data import SpecialIds

    specials = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
    for la, lb, max_len in [(1, 1, 512), (7, 11, 12), (10, 3, 9), (4, 4, 8)]:
        assert A.truncated_segments(la, lb, max_len) == encode_pair([5] * la, [6] * lb, specials, max_len)[1]
    assert A.truncated_segments(7, 11, 12) == [0] * 7 + [1] * 5  # 9 tokens left: A 5, B 4 (a tie cuts B)


def test_right_to_left_wordpiece_differs_from_greedy_where_it_should():
    vocab = {"un", "una", "u", "##aff", "##able", "##a", "##f", "##b", "##l", "##e", "play", "##ing", "##s", "p",
             "##ay", "##ble"}
    wp = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(vocab)])
    assert A.right_to_left_pieces("playing", vocab) == wp.word_pieces("playing") == ["play", "##ing"]
    assert wp.word_pieces("unable") == ["una", "##ble"]  # the longest prefix first
    assert A.right_to_left_pieces("unable", vocab) == ["un", "##able"]  # the longest suffix first
    assert A.right_to_left_pieces("xyz", vocab) == ["[UNK]"]


def test_ascending_shift_is_the_descending_shift_of_the_flipped_columns():
    x = torch.randn(3, 5)
    T, K = x.shape
    mask = future_mask(T, K - T)
    assert torch.equal(A.rel_shift_ascending(x).masked_fill(mask, 0), rel_shift(x.flip(1)).masked_fill(mask, 0))


def test_memory_after_two_segments_and_the_size_near_the_floor():
    assert A.memory_after(2) == ((8, 80, 256), 6)
    assert A.memory_after(3)[0] == (8, 100, 256)

    class Law:
        a, alpha, c = 12.0, 0.5, 5.0

    n = A.size_for_loss_above_floor(Law)
    assert Law.a * n ** -Law.alpha == pytest.approx(0.05)


def test_tied_with_best_uses_two_standard_errors_of_the_difference():
    rows = [dict(dataset="IMDb", n_labels=100, method="a", mean=0.80, se=0.01),
            dict(dataset="IMDb", n_labels=100, method="b", mean=0.78, se=0.01),  # 0.02 <= 2·0.0141
            dict(dataset="IMDb", n_labels=100, method="c", mean=0.75, se=0.01),
            dict(dataset="IMDb", n_labels=100, method="e", mean=0.77, se=0.01),  # 0.03 > 2·0.0141, < 2·(0.01 + 0.01)
            dict(dataset="IMDb", n_labels=100, method="d", mean=0.80, se=None),
            dict(dataset="IMDb", n_labels=1000, method="a", mean=0.9, se=0.0)]
    assert A.tied_with_best(rows, "IMDb", 100) == ["a", "b", "d"]


def test_value_checks_and_unknown_names():
    assert A.check("12 perplexity", math.exp(400_000 / 82_430))
    assert not A.check("12 perplexity", 400_000 / 82_430)
    assert not A.check("11 memory count", None)
    with pytest.raises(KeyError):
        A.check("no such exercise", 1)
