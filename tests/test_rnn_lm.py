"""lmlib.models.rnn_lm: the two recurrent cores agree, state carries across windows, Zaremba's schedule and update."""

import copy

import pytest
import torch
import torch.nn.functional as F

from lmlib.models.rnn import copy_from_torch
from lmlib.models.rnn_lm import (
    RNNLM,
    RNNLMConfig,
    TrainSettings,
    check_inputs,
    sample,
    zaremba_lr_factor,
    zaremba_small,
)
from lmlib.text.batching import batchify, bptt_batches
from lmlib.training.objectives import StatefulLMLoss


def _models(cell="lstm"):
    torch.manual_seed(0)
    fast = RNNLM(RNNLMConfig(vocab_size=13, embed_size=5, hidden_size=6, num_layers=2, cell=cell))
    slow = RNNLM(RNNLMConfig(vocab_size=13, embed_size=5, hidden_size=6, num_layers=2, cell=cell, backend="lmlib"))
    slow.embedding.load_state_dict(fast.embedding.state_dict())
    slow.decoder.load_state_dict(fast.decoder.state_dict())
    copy_from_torch(slow.rnn, fast.rnn)
    return fast, slow


@pytest.mark.parametrize("cell", ["lstm", "rnn"])
def test_lmlib_core_gives_the_same_language_model(cell):
    fast, slow = _models(cell)
    x = torch.randint(0, 13, (3, 7))
    (a, sa), (b, sb) = fast(x), slow(x)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    for u, v in zip(sa if cell == "lstm" else [sa], sb if cell == "lstm" else [sb]):
        torch.testing.assert_close(u, v, atol=1e-5, rtol=1e-5)


def test_carried_state_equals_reading_the_whole_stream():
    fast, _ = _models()
    streams = batchify(torch.randint(0, 13, (3 * 25,)), 3)
    whole, _ = fast(streams[:, :-1])
    loss = StatefulLMLoss()
    pieces, state = [], None
    for x, _ in bptt_batches(streams, 6):
        logits, state = fast(x, state)
        pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, atol=1e-6, rtol=1e-5)
    # the loss object does the same bookkeeping and reports the per-token mean
    total = sum(loss(fast, b).loss.item() * b.y.numel() for b in bptt_batches(streams, 6))
    expected = F.cross_entropy(whole.reshape(-1, 13), streams[:, 1:].reshape(-1), reduction="sum").item()
    assert total == pytest.approx(expected, rel=1e-5)


def test_init_is_uniform_within_range():
    model = RNNLM(RNNLMConfig(vocab_size=50, embed_size=8, hidden_size=8, init_range=0.05))
    for p in model.parameters():
        assert p.abs().max() <= 0.05


def test_zaremba_schedule_is_the_papers():
    assert [zaremba_lr_factor(e) for e in range(1, 8)] == [1, 1, 1, 1, 0.5, 0.25, 0.125]
    assert zaremba_lr_factor(13) == 0.5**9
    with pytest.raises(ValueError, match="got 0"):
        zaremba_lr_factor(0)
    config, settings = zaremba_small()
    assert (config.num_layers, config.hidden_size, config.vocab_size, config.dropout) == (2, 200, 10_000, 0.0)
    assert (settings.batch_size, settings.bptt, settings.epochs, settings.clip) == (20, 20, 13, 5.0)


@pytest.mark.parametrize("clip", [5.0, 0.01])  # 0.01: the clip is active, so its rescaling is tested too
def test_mean_loss_update_equals_the_papers_summed_loss_update(clip):
    """SGD(lr, clip) on the loss summed over the window == SGD(lr * bptt, clip / bptt) on the mean loss."""
    fast, _ = _models()
    other = copy.deepcopy(fast)
    settings = TrainSettings(bptt=6, lr=1.0, clip=clip)
    x, y = torch.randint(0, 13, (2, 6)), torch.randint(0, 13, (2, 6))

    def step(model, lr, max_norm, summed):
        logits, _ = model(x)
        per_step = F.cross_entropy(logits.reshape(-1, 13), y.reshape(-1), reduction="none").view(2, 6)
        loss = per_step.mean(0).sum() if summed else per_step.mean()
        model.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad

    step(fast, settings.lr, settings.clip, summed=True)
    step(other, settings.mean_lr, settings.mean_clip, summed=False)
    for a, b in zip(fast.parameters(), other.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_sampling():
    fast, _ = _models()
    g = torch.Generator().manual_seed(0)
    a = sample(fast, [1, 2], 10, temperature=0.8, generator=g)
    b = sample(fast, [1, 2], 10, temperature=0.8, generator=torch.Generator().manual_seed(0))
    assert a == b and len(a) == 10 and all(0 <= t < 13 for t in a)
    # A tiny temperature is greedy decoding.
    greedy = []
    logits, state = fast(torch.tensor([[1, 2]]))
    for _ in range(5):
        greedy.append(int(logits[0, -1].argmax()))
        logits, state = fast(torch.tensor([[greedy[-1]]]), state)
    assert sample(fast, [1, 2], 5, temperature=1e-4) == greedy
    with pytest.raises(ValueError, match="temperature"):
        sample(fast, [1], 3, temperature=0)
    with pytest.raises(ValueError, match="prompt"):
        sample(fast, [], 3)


def test_bad_config_and_input():
    with pytest.raises(ValueError, match="'cuda'"):
        RNNLMConfig(vocab_size=10, backend="cuda")
    with pytest.raises(ValueError, match="dropout.*1.0"):
        RNNLMConfig(vocab_size=10, dropout=1.0)
    with pytest.raises(ValueError, match="vocab_size"):
        RNNLMConfig(vocab_size=0)
    fast, _ = _models()
    check_inputs(fast, torch.zeros(2, 3, dtype=torch.long))
    for x, named in [(torch.tensor([1, 2, 3]), "(3,)"), (torch.zeros(2, 3), "torch.float32"),
                     (torch.tensor([[1, fast.config.vocab_size]]), str(fast.config.vocab_size))]:
        with pytest.raises(ValueError) as err:
            check_inputs(fast, x)
        assert named in str(err.value), (named, str(err.value))
    with pytest.raises(ValueError) as err:
        sample(fast, [fast.config.vocab_size], 3)  # sample is a boundary: it checks the prompt
    assert str(fast.config.vocab_size) in str(err.value)
