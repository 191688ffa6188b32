"""The AWD-LSTM dropouts against their definitions and against nn.LSTM with the masked weight."""

import pytest
import torch
from torch import nn

from lmlib.models.dropouts import (
    EmbeddingDropout,
    LockedDropout,
    WeightDropLSTM,
    bernoulli_mask,
    check_probability,
    embedding_dropout,
)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, "0.2", None, True])
def test_bad_probability_is_a_clear_error(p):
    with pytest.raises(ValueError, match="input_p"):
        check_probability(p, "input_p")
    with pytest.raises(ValueError):
        LockedDropout(p)
    with pytest.raises(ValueError):
        WeightDropLSTM(3, 4, p)
    with pytest.raises(ValueError):
        EmbeddingDropout(5, 3, p)


def test_bernoulli_mask_values_and_mean():
    g = torch.Generator().manual_seed(0)
    m = bernoulli_mask((200_000,), 0.3, torch.zeros(1), g)
    values = m.unique()
    assert len(values) == 2 and values[0] == 0 and values[1].item() == pytest.approx(1 / 0.7)
    assert abs(m.mean().item() - 1.0) < 0.01  # E[mask] = 1 (binomial sd ~ 0.0015)
    assert abs((m == 0).float().mean().item() - 0.3) < 0.005


def test_embedding_dropout_drops_whole_rows_and_scales():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(50, 6)
    dropped = embedding_dropout(w, 0.4, g)
    zero_rows = (dropped == 0).all(dim=1)
    assert 0 < zero_rows.sum() < 50
    torch.testing.assert_close(dropped[~zero_rows], w[~zero_rows] / 0.6)
    # no row is partly dropped
    assert not ((dropped == 0).any(dim=1) & ~zero_rows).any()


def test_embedding_dropout_same_word_same_mask_in_the_batch():
    torch.manual_seed(2)
    emb = EmbeddingDropout(20, 4, p=0.5)
    ids = torch.tensor([[3, 7, 3, 3], [7, 3, 1, 7]])
    out = emb(ids)
    for word in (3, 7):
        rows = out[ids == word]
        assert torch.equal(rows, rows[:1].expand_as(rows))
    emb.eval()
    torch.testing.assert_close(emb(ids), emb.weight[ids])


def test_embedding_dropout_matches_a_masked_nn_embedding():
    emb = EmbeddingDropout(12, 5, p=0.3, padding_idx=0)
    ids = torch.tensor([[0, 4, 5], [4, 11, 2]])
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    got = emb(ids, generator=g1)
    mask = bernoulli_mask((12, 1), 0.3, emb.weight, g2)
    reference = nn.Embedding(12, 5, padding_idx=0)
    with torch.no_grad():
        reference.weight.copy_(emb.weight * mask)
    torch.testing.assert_close(got, reference(ids))


def test_locked_dropout_one_mask_for_all_time_steps():
    torch.manual_seed(4)
    drop = LockedDropout(0.5)
    x = torch.ones(3, 9, 8)
    y = drop(x)
    assert torch.equal(y, y[:, :1, :].expand_as(y))  # same mask at every t
    assert not torch.equal(y[0], y[1])  # a different mask per sequence
    assert set(y.unique().tolist()) <= {0.0, 2.0}
    drop.eval()
    assert torch.equal(drop(x), x)
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        drop(torch.ones(3, 4))


def test_locked_dropout_is_unbiased():
    g = torch.Generator().manual_seed(5)
    x = torch.full((4000, 2, 50), 3.0)
    y = LockedDropout(0.25)(x, generator=g)
    assert abs(y.mean().item() - 3.0) < 0.03


def _copy(src: nn.LSTM) -> nn.LSTM:
    dst = nn.LSTM(src.input_size, src.hidden_size, batch_first=True)
    dst.load_state_dict(src.state_dict())
    return dst


def test_weight_drop_matches_nn_lstm_with_the_masked_weight():
    torch.manual_seed(6)
    layer = WeightDropLSTM(4, 5, weight_p=0.5)
    x = torch.randn(2, 7, 4)
    state = (torch.randn(1, 2, 5), torch.randn(1, 2, 5))
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    out, (h, c) = layer(x, state, generator=g1)
    w_tilde = layer.lstm.weight_hh_l0 * bernoulli_mask(layer.lstm.weight_hh_l0.shape, 0.5, x, g2)
    reference = _copy(layer.lstm)
    with torch.no_grad():
        reference.weight_hh_l0.copy_(w_tilde)
    ref_out, (ref_h, ref_c) = reference(x, state)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(h, ref_h)
    torch.testing.assert_close(c, ref_c)


def test_weight_drop_uses_one_mask_for_every_time_step():
    # Run the same pass as one call and as single steps under one dropped matrix: equal only if the
    # matrix does not change from step to step inside the call.
    torch.manual_seed(8)
    layer = WeightDropLSTM(3, 4, weight_p=0.6)
    x = torch.randn(2, 6, 3)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    whole, _ = layer(x, generator=g1)
    w_tilde = layer.dropped_weight(g2)
    reference = _copy(layer.lstm)
    with torch.no_grad():
        reference.weight_hh_l0.copy_(w_tilde)
    state, steps = None, []
    for t in range(6):
        y, state = reference(x[:, t : t + 1], state)
        steps.append(y)
    torch.testing.assert_close(whole, torch.cat(steps, dim=1))


def test_weight_drop_gradient_reaches_only_kept_weights():
    torch.manual_seed(10)
    layer = WeightDropLSTM(3, 4, weight_p=0.5)
    x = torch.randn(2, 5, 3)
    g1, g2 = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    out, _ = layer(x, generator=g1)
    out.sum().backward()
    dropped = layer.dropped_weight(g2) == 0
    grad = layer.lstm.weight_hh_l0.grad
    assert grad is not None and grad[~dropped].abs().sum() > 0
    assert torch.equal(grad[dropped], torch.zeros_like(grad[dropped]))  # no gradient leaks to dropped entries
    # the raw parameter is untouched by the forward pass (no in-place masking)
    assert not (layer.lstm.weight_hh_l0 == 0).any()
    assert isinstance(layer.lstm.weight_hh_l0, nn.Parameter)


def test_weight_drop_eval_and_p_zero_are_plain_lstm():
    torch.manual_seed(12)
    layer = WeightDropLSTM(3, 4, weight_p=0.5).eval()
    x = torch.randn(2, 5, 3)
    reference = _copy(layer.lstm)
    torch.testing.assert_close(layer(x)[0], reference(x)[0])
    no_drop = WeightDropLSTM(3, 4, weight_p=0.0).train()
    torch.testing.assert_close(no_drop(x)[0], _copy(no_drop.lstm)(x)[0])
    with pytest.raises(ValueError, match=r"\(2, 5, 4\)"):
        layer(torch.randn(2, 5, 4))


def test_weight_drop_masks_differ_between_passes():
    torch.manual_seed(13)
    layer = WeightDropLSTM(3, 4, weight_p=0.5)
    assert not torch.equal(layer.dropped_weight(), layer.dropped_weight())
