"""Each score function against its formula written out by hand, loop by loop; masking; shapes."""

import math

import pytest
import torch
from host_reads import no_host_reads

from lmlib.models.attention import (
    SCORE_FUNCTIONS,
    AdditiveAttention,
    ContentAttention,
    GeneralAttention,
    LocationAttention,
    check_inputs,
    make_attention,
)

B, N, D = 2, 5, 4


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, D, generator=g), torch.randn(B, N, D, generator=g), torch.randn(B, N, 3, generator=g))


def by_hand(scores_fn, query, keys, values):
    """Scores from ``scores_fn(q, k_j)`` one pair at a time, then softmax and the weighted sum."""
    ctx, wts = [], []
    for b in range(query.shape[0]):
        e = [float(scores_fn(query[b], keys[b, j], j)) for j in range(keys.shape[1])]
        z = sum(math.exp(x) for x in e)
        alpha = [math.exp(x) / z for x in e]
        wts.append(alpha)
        ctx.append(sum(a * values[b, j] for j, a in enumerate(alpha)))
    return torch.stack(ctx), torch.tensor(wts)


def check(att, qkv, scores_fn):
    q, k, v = qkv
    context, weights = att(q, k, v)
    want_ctx, want_w = by_hand(scores_fn, q, k, v)
    torch.testing.assert_close(weights, want_w.float(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(context, want_ctx, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B))


def test_content_cosine(qkv):
    beta = 2.5

    def cos(a, b):
        return sum(float(x) * float(y) for x, y in zip(a, b)) / (float(a.norm()) * float(b.norm()))

    check(ContentAttention(beta), qkv, lambda q, k, j: beta * cos(q, k))


def test_additive_bahdanau(qkv):
    att = AdditiveAttention(D, D, 6)
    W, U, v = att.W_a.weight.detach(), att.U_a.weight.detach(), att.v_a.weight.detach()[0]
    check(att, qkv, lambda q, k, j: sum(v[a] * math.tanh(float(W[a] @ q + U[a] @ k)) for a in range(6)))


def test_location_luong(qkv):
    att = LocationAttention(D, max_keys=7)
    W = att.W_a.weight.detach()
    check(att, qkv, lambda q, k, j: float(W[j] @ q))
    # the keys' content plays no part: shuffling them leaves the weights unchanged
    q, k, v = qkv
    assert torch.equal(att(q, k, v)[1], att(q, k.flip(1), v)[1])
    with pytest.raises(ValueError, match="max_keys"):
        LocationAttention(D, max_keys=3)(q, k, v)


def test_general_luong(qkv):
    att = GeneralAttention(D, D)
    W = att.W_a.detach()
    check(att, qkv, lambda q, k, j: sum(q[a] * W[a, b] * k[b] for a in range(D) for b in range(D)))


def test_dot_and_scaled_dot(qkv):
    check(make_attention("dot", D, D), qkv, lambda q, k, j: sum(q[a] * k[a] for a in range(D)))
    check(make_attention("scaled_dot", D, D), qkv, lambda q, k, j: sum(q[a] * k[a] for a in range(D)) / math.sqrt(D))
    q, k, v = qkv
    with pytest.raises(ValueError, match="d_q == d_k"):
        make_attention("dot", 3, D)(q[:, :3], k, v)


def test_scaled_dot_matches_pytorch(qkv):
    q, k, v = qkv
    mask = torch.tensor([[True] * 5, [True, True, False, True, False]])
    ctx, _ = make_attention("scaled_dot", D, D)(q, k, v, mask)
    want = torch.nn.functional.scaled_dot_product_attention(q[:, None], k, v, attn_mask=mask[:, None])
    torch.testing.assert_close(ctx, want[:, 0])


@pytest.mark.parametrize("name", SCORE_FUNCTIONS)
def test_masking_gives_exact_zeros(name, qkv):
    torch.manual_seed(0)
    att = make_attention(name, D, D, d_attn=6, max_keys=N)
    q, k, v = qkv
    mask = torch.tensor([[True, True, True, False, False], [True, False, True, False, True]])
    context, weights = att(q, k, v, mask)
    assert (weights[~mask] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B))
    # the padded keys' values can be anything: the context does not change
    v2 = v.clone()
    v2[~mask] = 1e6
    torch.testing.assert_close(att(q, k, v2, mask)[0], context)
    # several queries at once give the same rows as one at a time
    qs = torch.stack([q, -q], dim=1)
    ctx_m, w_m = att(qs, k, v, mask)
    assert ctx_m.shape == (B, 2, 3) and w_m.shape == (B, 2, N)
    torch.testing.assert_close(w_m[:, 0], weights)


def refused(att, *args, named, **kwargs):
    """check_inputs refuses the call with a ValueError naming ``named``."""
    with pytest.raises(ValueError) as err:
        check_inputs(att, *args, **kwargs)
    assert named in str(err.value), (named, str(err.value))


def test_bad_inputs_are_refused_by_check_inputs_naming_the_value(qkv):
    q, k, v = qkv
    att = make_attention("dot", D, D)
    check_inputs(att, q, k, v, torch.ones(B, N, dtype=torch.bool))
    refused(att, q, k, v, torch.tensor([[True] * 5, [False] * 5]), named="[[1, 0]]")  # every key masked in row 1
    refused(att, q, k, v, torch.ones(B, N), named="torch.float32")
    refused(att, q, k, v[:, :3], named="(2, 3, 3)")
    refused(att, q[:1], k, v, named="(1, 1, 4)")
    refused(att, q, k, v, torch.ones(B, 3, dtype=torch.bool), named="(2, 1, 3)")
    queries = torch.stack([q, -q, 2 * q], dim=1)  # m = 3 queries per example
    refused(att, queries, k, v, torch.ones(B, 2, N, dtype=torch.bool), named="(2, 2, 5)")
    for name in SCORE_FUNCTIONS:  # a softmax over zero keys would hand back an all-zero context as an answer
        refused(make_attention(name, D, D, d_attn=6, max_keys=N), q, k[:, :0], v[:, :0], named="(2, 0, 4)")
    with pytest.raises(ValueError, match="cosine"):
        make_attention("cosine", D, D)
    with pytest.raises(ValueError, match="0.0"):
        ContentAttention(0.0)


def test_forward_reads_nothing_back_from_the_device(qkv):
    q, k, v = qkv
    mask = torch.tensor([[True, True, True, False, False], [True, False, True, False, True]])
    with no_host_reads():
        for name in SCORE_FUNCTIONS:
            make_attention(name, D, D, d_attn=6, max_keys=N)(q, k, v, mask)


def test_mask_rows_may_be_shared_by_the_queries(qkv):
    q, k, v = qkv
    queries = torch.stack([q, -q, 2 * q], dim=1)  # m = 3 queries per example
    att = make_attention("dot", D, D)
    keep = torch.tensor([[True, True, False, True, True], [True, False, True, True, True]])
    # one mask row shared by every query, or one row per query: the same weights
    shared = att(queries, k, v, keep[:, None])[1]
    per_query = att(queries, k, v, keep[:, None].expand(B, 3, N))[1]
    torch.testing.assert_close(shared, per_query)
    assert (shared[~keep[:, None].expand(B, 3, N)] == 0).all()


@pytest.mark.parametrize("name", ["general", "additive"])
def test_learned_scores_name_the_widths_they_expect(name, qkv):
    q, k, v = qkv
    att = make_attention(name, D, D + 2, d_attn=6)
    refused(att, q, k, v, named=f"d_k={D + 2}, got {D}")
    refused(att, q[:, :3], torch.randn(B, N, D + 2), v, named=f"d_q={D}, got 3")
    # the right widths go through, and prepared keys of the wrong length are refused
    wide_keys = torch.randn(B, N, D + 2)
    context, _ = att(q, wide_keys, v)
    assert context.shape == (B, 3)
    refused(att, q, wide_keys, v, prepared_keys=att.prepare_keys(wide_keys[:, :3]), named="prepared_keys (2, 3,")


def test_widths_checked_for_the_other_scores(qkv):
    q, k, v = qkv
    refused(LocationAttention(7, max_keys=N), q, k, v, named="d_q=7, got 4")
    with pytest.raises(ValueError, match="d_q == d_k"):
        ContentAttention()(q[:, :3], k, v)
    for build, named in [(lambda: AdditiveAttention(D, D, 0), "d_attn"), (lambda: GeneralAttention(D, 0), "d_key"),
                         (lambda: LocationAttention(D, max_keys=0), "max_keys")]:
        with pytest.raises(ValueError) as err:
            build()
        assert named in str(err.value) and "got 0" in str(err.value)
