import pytest
import torch

from lmlib.text.batching import batchify, bptt_batches, classification_batches, pad_batch, random_blocks


def test_batchify_lays_streams_out_row_by_row_and_drops_the_ragged_tail():
    streams = batchify(list(range(10)), 3)
    assert streams.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    with pytest.raises(ValueError, match="too few"):
        batchify([1, 2, 3], 2)
    with pytest.raises(ValueError, match="batch_size"):
        batchify([1, 2, 3], 0)


def test_bptt_windows_cover_every_target_once_with_shifted_targets():
    streams = batchify(torch.arange(2 * 11), 2)
    windows = list(bptt_batches(streams, 4))
    assert [w.x.shape[1] for w in windows] == [4, 4, 2]
    xs = torch.cat([w.x for w in windows], 1)
    ys = torch.cat([w.y for w in windows], 1)
    assert torch.equal(xs, streams[:, :-1]) and torch.equal(ys, streams[:, 1:])


def test_bptt_accepts_a_length_function_for_variable_windows():
    lengths = iter([3, 5, 100])
    windows = list(bptt_batches(batchify(torch.arange(40), 2), lambda: next(lengths)))
    assert [w.x.shape[1] for w in windows] == [3, 5, 11]
    with pytest.raises(ValueError, match="at least 1"):
        list(bptt_batches(batchify(torch.arange(40), 2), 0))


def test_random_blocks_targets_are_the_next_tokens():
    ids = torch.arange(100)
    x, y = random_blocks(ids, 8, 5, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 8)
    assert torch.equal(y, x + 1)
    x2, _ = random_blocks(ids, 8, 5, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)
    with pytest.raises(ValueError, match="needs at least 9"):
        random_blocks(torch.arange(8), 8, 1)


def test_pad_batch_masks_real_tokens_and_refuses_silent_truncation():
    b = pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert b.ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert b.mask.tolist() == [[True, True, True], [True, False, False]]
    with pytest.raises(ValueError, match="truncate=True"):
        pad_batch([[1, 2, 3]], 0, max_len=2)
    assert pad_batch([[1, 2, 3]], 0, max_len=2, truncate=True).ids.tolist() == [[1, 2]]
    with pytest.raises(ValueError, match="max_len must be at least 1"):
        pad_batch([[1, 2, 3]], 0, max_len=0, truncate=True)
    with pytest.raises(ValueError, match="empty"):
        pad_batch([[1], []], 0)


def test_classification_batches_keep_pairs_together_and_reproduce_with_a_seed():
    seqs = [[i] * (1 + i % 3) for i in range(10)]
    labels = [i % 2 for i in range(10)]
    batches = classification_batches(seqs, labels, 4, pad_id=-1, seed=3)
    assert [len(b.labels) for b in batches] == [4, 4, 2]
    for b in batches:
        for row, label in zip(b.ids, b.labels):
            assert row[0].item() % 2 == label.item()
    again = classification_batches(seqs, labels, 4, pad_id=-1, seed=3)
    assert all(torch.equal(a.ids, b.ids) for a, b in zip(batches, again))
    with pytest.raises(ValueError, match="labels"):
        classification_batches(seqs, labels[:-1], 4, 0)
