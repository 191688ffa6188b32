"""lmlib.recipes.transformer_xl: the cached evaluation against the sliding window it replaces, and the training loop."""

import pytest
import torch

from lmlib.recipes import transformer_xl as X

torch.set_num_threads(1)


def small(variant="xl", **overrides):
    settings = dict(num_layers=2, num_heads=2, d_model=16, segment_len=8)
    settings.update(overrides)
    return X.build(variant, 13, **settings).eval()


def test_cached_segments_of_one_token_equal_the_sliding_window_in_one_layer():
    """With one-token segments and a memory of context − 1 positions, a one-layer model sees exactly the context
    tokens before each token, as in the sliding window: the two evaluations must give the same loss. With more
    layers they differ, and must: a cached state of layer 2 was computed with its own memory, so it carries text
    from before the window (the context grows by mem_len per layer, Dai et al. §3.2)."""
    model = small(num_layers=1)
    stream = torch.randint(0, 13, (40,), generator=torch.Generator().manual_seed(0))
    sliding = X.evaluate_sliding_window(model, stream, context=10, targets=30)
    cached = X.evaluate_with_memory(model, stream, mem_len=9, streams=1, skip=9, segment_len=1)
    assert cached == pytest.approx(sliding, abs=1e-5)
    deeper = small(num_layers=2)
    with torch.no_grad():  # away from the near-uniform initial model, so the difference is far above rounding
        for p in deeper.parameters():
            p.add_(0.5 * torch.randn_like(p))
    assert X.evaluate_with_memory(deeper, stream, 9, streams=1, skip=9, segment_len=1) != pytest.approx(
        X.evaluate_sliding_window(deeper, stream, context=10, targets=30), abs=1e-3)


def test_skip_scores_the_same_targets_whatever_the_memory():
    model = small()
    stream = torch.randint(0, 13, (200,), generator=torch.Generator().manual_seed(1))
    no_memory = X.evaluate_with_memory(model, stream, mem_len=0, streams=2, skip=0)
    by_hand = []
    for row in stream[:200].view(2, 100):
        for s in range(0, 99, 8):
            x, y = row[s:min(s + 8, 99)], row[s + 1:min(s + 9, 100)]
            logits, _ = model(x[None])
            by_hand.append(torch.nn.functional.cross_entropy(logits[0], y, reduction="none"))
    assert no_memory == pytest.approx(torch.cat(by_hand).mean().item(), abs=1e-5)
    with pytest.raises(ValueError, match="no target"):
        X.evaluate_with_memory(model, stream, mem_len=8, streams=2, skip=99)


def test_evaluation_speed_reports_both_paths_on_the_same_targets():
    model = small()
    stream = torch.randint(0, 13, (80,), generator=torch.Generator().manual_seed(2))
    row = X.evaluation_speed(model, stream, context=16, targets=32, segment_len=8)
    assert row["speedup"] > 0 and row["targets"] == 32
    assert abs(row["cached_loss"] - row["sliding_loss"]) < 0.5  # different contexts (16-23 vs 16), same targets


def test_training_lowers_the_loss_and_unknown_variants_are_refused():
    stream = torch.arange(13).repeat(30)
    model = small()
    before = X.evaluate_with_memory(model, stream, mem_len=8, streams=2)
    trainer = X.train(model, stream, steps=120, recipe=dict(batch_size=2, lr=1e-2))
    assert trainer.step == 120  # several passes over the text
    assert X.evaluate_with_memory(model, stream, mem_len=8, streams=2) < before / 10  # a period-13 text is learnt
    with pytest.raises(ValueError, match="unknown variant"):
        X.build("xxl", 13)


def test_copy_stream_repeats_each_block_one_block_later_and_nowhere_else():
    block = 5
    stream = X.copy_stream(units=30, block=block, vocab_size=7, seed=0)
    assert stream.shape == (2 * 30 * block,) and 0 <= int(stream.min()) and int(stream.max()) < 7
    units = stream.view(30, 2, block)
    assert torch.equal(units[:, 0], units[:, 1])  # the second half of each unit copies the first
    assert not torch.equal(units[1:, 0], units[:-1, 1])  # a new block is not the previous copy again
    assert torch.equal(X.copy_stream(30, block, 7, seed=0), stream) and not torch.equal(X.copy_stream(30, block, 7, 1), stream)
    with pytest.raises(ValueError, match="vocab_size"):
        X.copy_stream(3, 4, 1, 0)


def test_copy_task_models_differ_only_in_memory_and_copies_sit_one_segment_back():
    xl, plain = X.build_copy_model("xl"), X.build_copy_model("relative_no_memory")
    task = X.COPY_TASK
    assert (xl.config.mem_len, plain.config.mem_len) == (task["segment_len"], 0)
    assert {k: v for k, v in xl.config.__dict__.items() if k != "mem_len"} == \
        {k: v for k, v in plain.config.__dict__.items() if k != "mem_len"}
    train, held_out = X.copy_task()
    L = task["segment_len"]
    copies = train.view(-1, 2, L)[:, 1].flatten()
    originals = train.view(-1, 2, L)[:, 0].flatten()
    assert torch.equal(copies, originals)  # each copied symbol is exactly L (one segment) after its original
    assert not set(map(tuple, held_out.view(-1, L).tolist())) & set(map(tuple, train.view(-1, L)[:200].tolist()))
    with pytest.raises(ValueError, match="copy task"):
        X.build_copy_model("vanilla")
