"""lmlib.models.transformer_xl against its references: the relative shift against the pair-by-pair equation, the
whole attention against the four terms written out, the memory-free absolute-position model against lmlib's GPT,
recurrence against one long pass, and the memory's stopped gradient."""

import pytest
import torch
from host_reads import no_host_reads

from lmlib.models.gpt import GPT, GPTConfig
from lmlib.models.positional import sinusoidal_encoding
from lmlib.models.transformer_xl import (
    TransformerXL,
    TransformerXLConfig,
    check_inputs,
    future_mask,
    naive_relative_scores,
    rel_shift,
    relative_encoding,
)

torch.set_num_threads(1)


def tiny(**overrides) -> TransformerXL:
    torch.manual_seed(0)
    settings = dict(vocab_size=19, segment_len=6, mem_len=6, num_layers=2, num_heads=2, d_model=16)
    settings.update(overrides)
    model = TransformerXL(TransformerXLConfig(**settings))
    with torch.no_grad():  # move every parameter off its initial value, so no 1, 0 or shared init hides a mix-up
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


# --- the relative shift ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("T, M", [(1, 0), (4, 0), (4, 3), (5, 9), (3, 1)])
def test_rel_shift_equals_gathering_the_distance_of_every_pair(T, M):
    K = M + T
    torch.manual_seed(T * 10 + M)
    raw = torch.randn(2, T, K)  # column c holds distance K − 1 − c
    shifted = rel_shift(raw)
    for i in range(T):
        for j in range(M + i + 1):  # keys at or before the query's position M + i
            d = M + i - j
            assert shifted[:, i, j].equal(raw[:, i, K - 1 - d])


def test_relative_encoding_lists_distances_from_far_to_near():
    R = relative_encoding(7, 8)
    assert R.shape == (7, 8)
    assert torch.equal(R[-1], sinusoidal_encoding(1, 8)[0])  # last row: distance 0
    assert torch.equal(R[0], sinusoidal_encoding(7, 8)[6])  # first row: distance 6


def test_future_mask_lets_query_i_see_memory_and_keys_up_to_itself():
    mask = future_mask(3, 2)
    expected = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(mask, expected)


@pytest.mark.parametrize("mem", [0, 4])
def test_attention_scores_equal_the_four_terms_pair_by_pair(mem):
    """The layer's shifted matrix computation = (a) + (b) + (c) + (d) for each (i, j), with W_{k,R} R_{i−j}."""
    model = tiny()
    attn = model.blocks[0].attn
    T, C, H = 5, 16, 2
    hs = C // H
    torch.manual_seed(1)
    x = torch.randn(1, T, C)
    memory = torch.randn(1, mem, C) if mem else None
    context = x if memory is None else torch.cat([memory, x], 1)
    K = context.size(1)
    with torch.no_grad():
        _, weights = attn(x, memory, model.u, model.v, need_weights=True)
        q, k, _ = attn.qkv(context).split(C, dim=2)
        q = q[0, mem:].view(T, H, hs).transpose(0, 1)  # (H, T, hs)
        k = k[0].view(K, H, hs).transpose(0, 1)  # (H, K, hs)
        by_distance = attn.r_proj(sinusoidal_encoding(K, C)).view(K, H, hs)  # row d: W_{k,R} R_d
        scores = naive_relative_scores(q, k, by_distance, model.u, model.v) / hs ** 0.5
    assert torch.allclose(weights[0], torch.softmax(scores, -1), atol=1e-6)


# --- reductions and recurrence ----------------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["pre", "post"])
def test_without_memory_and_with_absolute_positions_it_is_lmlibs_gpt(norm):
    xl = tiny(positions="absolute", mem_len=0, norm=norm, segment_len=8, scale_embeddings=False)  # GPT does not scale
    gpt = GPT(GPTConfig(vocab_size=19, block_size=8, num_layers=2, num_heads=2, d_model=16, dropout=0.0, norm=norm))
    state = {k: v for k, v in xl.state_dict().items()}
    state["pos_emb.pe"] = sinusoidal_encoding(8, 16)
    for i in range(2):
        state[f"blocks.{i}.attn.qkv.bias"] = torch.zeros(48)  # lmlib's GPT has a qkv bias; Transformer-XL none
    gpt.load_state_dict(state)
    gpt.eval()
    idx = torch.randint(0, 19, (3, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, mems = xl(idx)
        expected = gpt(idx)
    assert mems is None
    assert torch.allclose(logits, expected, atol=1e-5)


def test_segment_by_segment_with_enough_memory_equals_one_long_pass():
    """With a memory holding every earlier position, each query sees the same keys at the same distances as in one
    pass over the whole text, so the logits are the same: the recurrence loses nothing."""
    model = tiny(mem_len=24)
    idx = torch.randint(0, 19, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        whole, _ = model(idx)
        mems, parts = None, []
        for start in range(0, 24, 6):
            logits, mems = model(idx[:, start:start + 6], mems)
            parts.append(logits)
    assert torch.allclose(torch.cat(parts, 1), whole, atol=1e-5)
    assert all(m.shape == (2, 24, 16) for m in mems)


def test_a_short_memory_keeps_the_last_mem_len_positions_of_each_layers_input():
    model = tiny(mem_len=4)
    a, b = torch.randint(0, 19, (2, 6), generator=torch.Generator().manual_seed(5)).chunk(2, dim=1)
    with torch.no_grad():
        _, mems = model(a)
        _, mems2 = model(b, mems)
        embedded = model.tok_emb(b)
    assert all(m.shape == (2, 3, 16) for m in mems)  # only 3 positions existed
    assert all(m.shape == (2, 4, 16) for m in mems2)
    assert torch.equal(mems2[0], torch.cat([mems[0], embedded * 4.0], 1)[:, -4:])  # layer 0's input: embedding · √16


def test_memory_changes_predictions_and_a_longer_memory_can_be_set_for_evaluation():
    model = tiny(mem_len=6)
    idx = torch.randint(0, 19, (1, 12), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        _, mems = model(idx[:, :6])
        with_memory, _ = model(idx[:, 6:], mems)
        without, _ = model(idx[:, 6:])
        model.mem_len = 12  # evaluation may keep more than training did
        _, long_mems = model(idx[:, :6])
        _, long_mems = model(idx[:, 6:], long_mems)
    assert not torch.allclose(with_memory, without, atol=1e-4)
    assert long_mems[0].size(1) == 12


def test_the_cached_memory_carries_no_gradient():
    model = tiny()
    model.train()
    idx = torch.randint(0, 19, (2, 12), generator=torch.Generator().manual_seed(2))
    _, mems = model(idx[:, :6])
    assert all(not m.requires_grad and m.grad_fn is None for m in mems)
    # the second segment's loss reaches the parameters, and its gradient equals the one computed with the memory
    # handed in as plain constants: nothing flows back into the first segment's graph
    logits, _ = model(idx[:, 6:], mems)
    logits.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits, _ = model(idx[:, 6:], tuple(m.clone() for m in mems))
    logits.sum().backward()
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad)


def test_attention_maps_cover_memory_then_segment_and_never_the_future():
    model = tiny(mem_len=4)
    idx = torch.randint(0, 19, (1, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _, mems = model(idx[:, :5])
        _, _, maps = model(idx[:, 5:], mems, return_attentions=True)
    assert len(maps) == 2 and maps[0].shape == (1, 2, 5, 9)
    assert torch.allclose(maps[0].sum(-1), torch.ones(1, 2, 5))
    assert maps[0].masked_select(future_mask(5, 4)).abs().max() == 0


def test_training_step_runs_with_dropout_and_a_tiny_model_learns_a_repeating_text():
    torch.manual_seed(0)
    model = TransformerXL(TransformerXLConfig(vocab_size=7, segment_len=8, mem_len=8, num_layers=1, num_heads=2,
                                              d_model=16, dropout=0.1))
    stream = torch.arange(7).repeat(40)[None]  # 0 1 2 ... 6 0 1 ...
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(4):
        mems = None
        for s in range(0, 272, 8):
            x, y = stream[:, s:s + 8], stream[:, s + 1:s + 9]
            logits, mems = model(x, mems)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert loss.item() < 0.1


# --- bad input -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, words", [
    ("mem_len", -1, "TransformerXLConfig.mem_len"),
    ("segment_len", 0, "TransformerXLConfig.segment_len"),
    ("num_heads", 3, "num_heads=3"),
    ("positions", "rotary", "TransformerXLConfig.positions must be one of ('relative', 'absolute'), got 'rotary'"),
    ("norm", "middle", "TransformerXLConfig.norm must be one of ('pre', 'post'), got 'middle'"),
    ("layer_norm_eps", 0.0, "positive"),
    ("d_model", 128.0, "TransformerXLConfig.d_model"),
])
def test_bad_config_is_refused(field, value, words):
    settings = dict(vocab_size=19, d_model=16, num_heads=2)
    settings[field] = value
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        TransformerXLConfig(**settings)


def test_bad_inputs_are_refused_by_check_inputs_naming_the_value():
    model = tiny()
    idx = torch.randint(0, 19, (2, 6))
    _, mems = model(idx)
    check_inputs(model, idx, mems)
    absolute = tiny(positions="absolute", mem_len=0)
    cases = [(model, (idx.float(),), "torch.float32"), (model, (idx + 19,), str(int(idx.max()) + 19)),
             (model, (idx, mems[:1]), "length 1"), (model, (idx[:1], mems), "batch=1"),
             (absolute, (torch.randint(0, 19, (1, 7)),), "7")]
    for m, args, named in cases:
        with pytest.raises(ValueError) as err:
            check_inputs(m, *args)
        assert named in str(err.value), (named, str(err.value))
    model.mem_len = -2
    with pytest.raises(ValueError) as err:
        check_inputs(model, idx)
    assert "mem_len" in str(err.value) and "-2" in str(err.value)


def test_forward_reads_nothing_back_from_the_device():
    model = tiny()
    idx = torch.randint(0, 19, (2, 6))
    with no_host_reads():
        _, mems = model(idx)
        model(idx, mems, return_attentions=True)
