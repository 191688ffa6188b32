"""Each score function against its formula written out by hand, loop by loop; masking; shapes."""

import math

import pytest
import torch

from lmlib.models.attention import (
    SCORE_FUNCTIONS,
    AdditiveAttention,
    ContentAttention,
    GeneralAttention,
    LocationAttention,
    make_attention,
    masked_softmax,
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


def test_fully_masked_row_is_an_error(qkv):
    q, k, v = qkv
    mask = torch.tensor([[True] * 5, [False] * 5])
    with pytest.raises(ValueError, match="every key is masked"):
        make_attention("dot", D, D)(q, k, v, mask)
    with pytest.raises(ValueError, match="bool"):
        masked_softmax(torch.zeros(2, 3), torch.ones(2, 3))


def test_shape_errors(qkv):
    q, k, v = qkv
    att = make_attention("dot", D, D)
    with pytest.raises(ValueError, match="must agree"):
        att(q, k, v[:, :3])
    with pytest.raises(ValueError, match="query must be"):
        att(q[:1], k, v)
    with pytest.raises(ValueError, match="mask must be"):
        att(q, k, v, torch.ones(B, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="unknown attention"):
        make_attention("cosine", D, D)
    with pytest.raises(ValueError, match="beta"):
        ContentAttention(0.0)


def test_no_keys_is_an_error(qkv):
    q, k, v = qkv
    # a softmax over zero keys would hand back an all-zero context as if it were an answer
    for name in SCORE_FUNCTIONS:
        att = make_attention(name, D, D, d_attn=6, max_keys=N)
        with pytest.raises(ValueError, match="no keys to attend to"):
            att(q, k[:, :0], v[:, :0])


def test_mask_rows_must_match_the_queries(qkv):
    q, k, v = qkv
    queries = torch.stack([q, -q, 2 * q], dim=1)  # m = 3 queries per example
    att = make_attention("dot", D, D)
    keep = torch.tensor([[True, True, False, True, True], [True, False, True, True, True]])
    # one mask row shared by every query, or one row per query: the same weights
    shared = att(queries, k, v, keep[:, None])[1]
    per_query = att(queries, k, v, keep[:, None].expand(B, 3, N))[1]
    torch.testing.assert_close(shared, per_query)
    assert (shared[~keep[:, None].expand(B, 3, N)] == 0).all()
    with pytest.raises(ValueError, match=r"\(batch, m, n\) = \(2, 3, 5\); got \(2, 2, 5\)"):
        att(queries, k, v, torch.ones(B, 2, N, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"does not broadcast to the scores' shape \(2, 3, 5\)"):
        masked_softmax(torch.zeros(B, 3, N), torch.ones(B, 2, N, dtype=torch.bool))


@pytest.mark.parametrize("name", ["general", "additive"])
def test_learned_scores_name_the_widths_they_expect(name, qkv):
    q, k, v = qkv
    att = make_attention(name, D, D + 2, d_attn=6)
    with pytest.raises(ValueError, match=f"keys of width d_k={D + 2}, got {D}"):
        att(q, k, v)
    with pytest.raises(ValueError, match=f"queries of width d_q={D}, got 3"):
        att(q[:, :3], torch.randn(B, N, D + 2), v)
    # the right widths go through, and prepared keys of the wrong length are refused
    wide_keys = torch.randn(B, N, D + 2)
    context, _ = att(q, wide_keys, v)
    assert context.shape == (B, 3)
    with pytest.raises(ValueError, match="prepared_keys"):
        att(q, wide_keys, v, prepared_keys=att.prepare_keys(wide_keys[:, :3]))


def test_widths_checked_for_the_other_scores(qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="queries of width d_q=7, got 4"):
        LocationAttention(7, max_keys=N)(q, k, v)
    with pytest.raises(ValueError, match="d_q == d_k"):
        ContentAttention()(q[:, :3], k, v)
    with pytest.raises(ValueError, match="d_attn must be a positive integer, got 0"):
        AdditiveAttention(D, D, 0)
    with pytest.raises(ValueError, match="d_key must be a positive integer"):
        GeneralAttention(D, 0)
    with pytest.raises(ValueError, match="max_keys must be a positive integer"):
        LocationAttention(D, max_keys=0)
