"""Multi-head attention against the paper's formula and against torch.nn.MultiheadAttention on copied weights."""

import math

import pytest
import torch
from host_reads import no_host_reads
from torch import nn

from lmlib.models.multihead import (
    MultiHeadAttention,
    causal_mask,
    check_inputs,
    padding_mask,
    scaled_dot_product_attention,
)

D, H = 16, 4


def pair(seed=0, dropout=0.0):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(D, H, dropout=dropout, batch_first=True)
    with torch.no_grad():  # random biases so that a mix-up of q/k/v biases would show
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    ours = MultiHeadAttention(D, H, dropout=dropout).load_from_torch(ref)
    return ours.eval(), ref.eval()


def inputs(batch=3, n_q=5, n_k=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n_q, D, generator=g), torch.randn(batch, n_k, D, generator=g)


def test_formula_by_hand():
    g = torch.Generator().manual_seed(0)
    Q, K, V = (torch.randn(2, 3, 4, generator=g) for _ in range(3))
    out, w = scaled_dot_product_attention(Q, K, V)
    for b in range(2):
        for i in range(3):
            scores = torch.tensor([float(Q[b, i] @ K[b, j]) / math.sqrt(4) for j in range(3)])
            p = torch.exp(scores) / torch.exp(scores).sum()
            torch.testing.assert_close(w[b, i], p)
            torch.testing.assert_close(out[b, i], (p[:, None] * V[b]).sum(0))


@pytest.mark.parametrize("average", [True, False])
def test_self_attention_with_padding_matches_torch(average):
    ours, ref = pair()
    x, _ = inputs(n_q=6)
    kpm = padding_mask([6, 4, 2])
    want, want_w = ref(x, x, x, key_padding_mask=kpm, need_weights=True, average_attn_weights=average)
    got, got_w = ours(x, x, x, key_padding_mask=kpm, need_weights=True, average_heads=average)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_w, want_w, atol=1e-6, rtol=1e-5)
    assert got_w.shape == ((3, 6, 6) if average else (3, H, 6, 6))


def test_cross_attention_with_padding_matches_torch():
    ours, ref = pair()
    q, kv = inputs()
    kpm = padding_mask([7, 3, 5])
    want, want_w = ref(q, kv, kv, key_padding_mask=kpm, average_attn_weights=False)
    got, got_w = ours(q, kv, kv, key_padding_mask=kpm, need_weights=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_w, want_w, atol=1e-6, rtol=1e-5)
    # the fast path (no weights) gives the same output
    fast, none = ours(q, kv, kv, key_padding_mask=kpm)
    assert none is None
    torch.testing.assert_close(fast, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("with_padding", [False, True])
def test_causal_self_attention_matches_torch_on_both_paths(with_padding):
    ours, ref = pair()
    x, _ = inputs(n_q=6)
    kpm = padding_mask([6, 5, 3]) if with_padding else None
    want, want_w = ref(x, x, x, key_padding_mask=kpm, attn_mask=causal_mask(6), average_attn_weights=False)
    explicit, w = ours(x, x, x, key_padding_mask=kpm, causal=True, need_weights=True)
    fast, _ = ours(x, x, x, key_padding_mask=kpm, causal=True)
    as_mask, _ = ours(x, x, x, key_padding_mask=kpm, attn_mask=causal_mask(6))
    for got in (explicit, fast, as_mask):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, want_w, atol=1e-6, rtol=1e-5)
    assert torch.all(w.masked_select(causal_mask(6)) == 0)


def test_fast_path_matches_explicit_with_batch_mask_and_gradients():
    ours, _ = pair()
    q, kv = inputs()
    mask = torch.rand(3, 5, 7, generator=torch.Generator().manual_seed(3)) < 0.4
    mask[..., 0] = False  # every query keeps one key
    q1, q2 = q.clone().requires_grad_(), q.clone().requires_grad_()
    slow, _ = ours(q1, kv, kv, attn_mask=mask, need_weights=True)
    fast, _ = ours(q2, kv, kv, attn_mask=mask)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    slow.square().sum().backward()
    fast.square().sum().backward()
    torch.testing.assert_close(q2.grad, q1.grad, atol=1e-5, rtol=1e-4)


def test_training_gradients_match_torch():
    ours, ref = pair()
    ours.train(), ref.train()
    x, _ = inputs(n_q=6)
    ours(x, x, x, causal=True)[0].sum().backward()
    ref(x, x, x, attn_mask=causal_mask(6), need_weights=False)[0].sum().backward()
    torch.testing.assert_close(ours.w_o.weight.grad, ref.out_proj.weight.grad, atol=1e-5, rtol=1e-4)
    want_q = ref.in_proj_weight.grad[:D]
    torch.testing.assert_close(ours.w_q.weight.grad, want_q, atol=1e-5, rtol=1e-4)


def test_causal_mask_leaks_nothing():
    ours, _ = pair()
    x = torch.randn(2, 6, D, requires_grad=True)
    for need_weights in (False, True):
        out, _ = ours(x, x, x, causal=True, need_weights=need_weights)
        for t in range(6):
            (grad,) = torch.autograd.grad(out[:, t].sum(), x, retain_graph=True)
            assert torch.all(grad[:, t + 1:] == 0), f"position {t} sees the future"
            assert grad[:, : t + 1].abs().sum() > 0


def test_causal_and_padding_masks():
    assert causal_mask(3).tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    assert padding_mask([2, 3]).tolist() == [[False, False, True], [False, False, False]]
    with pytest.raises(ValueError, match="size=0"):
        causal_mask(0)
    with pytest.raises(ValueError, match="at least one real token"):
        padding_mask([2, 0])


def test_clear_errors():
    with pytest.raises(ValueError, match="d_model=10.*num_heads=3"):
        MultiHeadAttention(10, 3)
    Q, K = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match=r"\(2, 3, 5\).*\(2, 4, 5\)"):
        scaled_dot_product_attention(Q, K, K, mask=torch.zeros(2, 4, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="torch.float32"):
        scaled_dot_product_attention(Q, K, K, mask=torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"\(2, 4, 4\)"):
        scaled_dot_product_attention(Q, K, K[:, :4])
    ours, _ = pair()
    q, kv = inputs()
    check_inputs(ours, q, kv, kv, key_padding_mask=torch.zeros(3, 7, dtype=torch.bool))
    bad = [
        (dict(key_padding_mask=torch.zeros(3, 5, dtype=torch.bool)), "(3, 5)"),
        (dict(attn_mask=torch.zeros(7, 5, dtype=torch.bool)), "(7, 5)"),
        (dict(attn_mask=torch.zeros(5, 7)), "torch.float32"),
        (dict(query=q[:, :0]), "(3, 0, 16)"),
        (dict(query=torch.randn(3, 5, 8)), "(3, 5, 8)"),
        (dict(key_padding_mask=torch.ones(3, 7, dtype=torch.bool)), "every key masked"),
        (dict(causal=True), "5 and 7"),
    ]
    for change, named in bad:
        args = {"query": q, "key": kv, "value": kv, **change}
        with pytest.raises(ValueError) as err:
            check_inputs(ours, **args)
        assert named in str(err.value), (change, str(err.value))


def test_forward_reads_nothing_back_from_the_device():
    ours, _ = pair()
    q, kv = inputs()
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[0, 4:] = True
    with no_host_reads():
        for need_weights in (False, True):
            ours(q, kv, kv, key_padding_mask=padding, need_weights=need_weights)
            ours(kv, kv, kv, key_padding_mask=padding, causal=True, need_weights=need_weights)
