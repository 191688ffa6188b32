"""The Transformer: layers against torch.nn.Transformer*Layer on copied weights, masking, decoding, training."""

import math

import pytest
import torch
from torch import nn

from lmlib.models.multihead import causal_mask, padding_mask
from lmlib.models.transformer import (
    DecoderLayer,
    EncoderLayer,
    Transformer,
    TransformerConfig,
    check_inputs,
    translate,
)
from lmlib.training.objectives import translation_loss

D, H, FF = 16, 4, 32


def copy_layer(ours, ref):
    """Copy an nn.TransformerEncoderLayer / DecoderLayer into ours (parameter names mirror PyTorch's)."""
    ours.self_attn.load_from_torch(ref.self_attn)
    if hasattr(ref, "multihead_attn"):
        ours.cross_attn.load_from_torch(ref.multihead_attn)
    with torch.no_grad():
        ours.ffn.linear1.load_state_dict(ref.linear1.state_dict())
        ours.ffn.linear2.load_state_dict(ref.linear2.state_dict())
        for name in ("norm1", "norm2", "norm3"):
            if hasattr(ref, name):
                getattr(ours, name).load_state_dict(getattr(ref, name).state_dict())


def randomize_norms(module):
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.normal_(1.0, 0.2)
                m.bias.normal_(0.0, 0.2)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_matches_torch(norm_first):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ref = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    randomize_norms(ref)
    ours = [EncoderLayer(D, H, FF, 0.0, norm_first) for _ in range(2)]
    for o, r in zip(ours, ref.layers):
        copy_layer(o, r)
    x = torch.randn(3, 6, D)
    kpm = padding_mask([6, 4, 2])
    want = ref(x, src_key_padding_mask=kpm)
    got = x
    for o in ours:
        got, _ = o.eval()(got, kpm)
    real = ~kpm  # PyTorch's eval fast path may zero padded rows; compare real positions
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    torch.manual_seed(1)
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    randomize_norms(ref)
    ours = DecoderLayer(D, H, FF, 0.0, norm_first).eval()
    copy_layer(ours, ref)
    y, memory = torch.randn(3, 5, D), torch.randn(3, 7, D)
    mpm = padding_mask([7, 3, 5])
    want = ref(y, memory, tgt_mask=causal_mask(5), memory_key_padding_mask=mpm)
    got, self_w, cross_w = ours(y, memory, mpm, need_weights=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    fast, none, _ = ours(y, memory, mpm)
    assert none is None
    torch.testing.assert_close(fast, want, atol=1e-5, rtol=1e-4)
    assert self_w.shape == (3, H, 5, 5) and cross_w.shape == (3, H, 5, 7)
    assert torch.all(cross_w[1, :, :, 3:] == 0)  # padded memory positions get no attention


def small_model(**kw):
    cfg = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=D, num_heads=H, num_encoder_layers=2,
               num_decoder_layers=2, d_ff=FF, dropout=0.0, max_len=32)
    cfg.update(kw)
    torch.manual_seed(0)
    return Transformer(TransformerConfig(**cfg)).eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_output_at_t_has_zero_gradient_from_later_targets(norm_first):
    model = small_model(norm_first=norm_first)
    captured = {}

    def keep(module, args, output):
        output.retain_grad()
        captured["emb"] = output

    model.tgt_embed.register_forward_hook(keep)
    src = torch.randint(4, 11, (2, 5))
    tgt = torch.randint(4, 13, (2, 6))
    logits = model(src, torch.ones_like(src, dtype=torch.bool), tgt)
    for t in range(6):
        model.zero_grad()
        captured["emb"].grad = None
        logits[:, t].sum().backward(retain_graph=True)
        grad = captured["emb"].grad
        assert torch.all(grad[:, t + 1:] == 0), f"target position {t} sees later targets"
        assert grad[:, : t + 1].abs().sum() > 0


def test_source_padding_is_invisible():
    model = small_model()
    src = torch.tensor([[5, 6, 7, 3, 0, 0]])
    mask = src != 0
    tgt = torch.tensor([[2, 5, 6]])
    other = src.clone()
    other[0, 4:] = torch.tensor([9, 10])  # change what sits in the padded slots
    torch.testing.assert_close(model(src, mask, tgt), model(other, mask, tgt))
    torch.testing.assert_close(model(src, mask, tgt), model(src[:, :4], mask[:, :4], tgt), atol=1e-5, rtol=1e-5)


def test_attention_maps_for_bertviz():
    model = small_model()
    src, tgt = torch.randint(4, 11, (2, 5)), torch.randint(4, 13, (2, 4))
    maps = model.attention_maps(src, torch.ones_like(src, dtype=torch.bool), tgt)
    assert [m.shape for m in maps.encoder_self] == [(2, H, 5, 5)] * 2
    assert [m.shape for m in maps.decoder_self] == [(2, H, 4, 4)] * 2
    assert [m.shape for m in maps.cross] == [(2, H, 4, 5)] * 2
    for m in maps.encoder_self + maps.decoder_self + maps.cross:
        torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[:-1]))


def test_embeddings_shared_and_tied():
    model = small_model(src_vocab_size=13, share_embeddings=True)
    assert model.src_embed is model.tgt_embed and model.generator.weight is model.tgt_embed.weight
    with pytest.raises(ValueError, match="11 and 13"):
        TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, share_embeddings=True)


def paper_positional_encoding(positions, d_model):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same) (§3.5), one entry at a time."""
    pe = torch.zeros(positions, d_model)
    for pos in range(positions):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_first_layer_reads_scaled_embedding_plus_position(side):
    # what layer 0 actually receives during encode / decode: Embedding(x)·√d_model + PE (§3.4, §3.5)
    model = small_model()
    seen = {}

    def record(module, args):
        seen["input"] = args[0].detach().clone()  # returning None leaves the call's arguments as they were

    layers = model.encoder_layers if side == "encoder" else model.decoder_layers
    layers[0].register_forward_pre_hook(record)
    src, tgt = torch.tensor([[4, 7, 5, 3]]), torch.tensor([[2, 9, 12]])
    mask = torch.ones_like(src, dtype=torch.bool)
    memory, _ = model.encode(src, mask)
    ids, table = (src, model.src_embed) if side == "encoder" else (tgt, model.tgt_embed)
    if side == "decoder":
        model.decode(tgt, memory, mask)
    want = table.weight.detach()[ids] * math.sqrt(D) + paper_positional_encoding(ids.size(1), D)
    torch.testing.assert_close(seen["input"], want, atol=1e-5, rtol=1e-5)


def test_clear_errors():
    with pytest.raises(ValueError, match="d_model=30.*num_heads=4"):
        TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=30, num_heads=4)
    model = small_model()
    src, tgt = torch.randint(4, 11, (2, 5)), torch.randint(4, 13, (2, 3))
    real = torch.ones_like(src, dtype=torch.bool)
    check_inputs(model, src, real, tgt)
    # src_vocab_size=11, tgt_vocab_size=13: id 11 is a target id but not a source id
    bad = [
        ((src, torch.ones(2, 4, dtype=torch.bool)), "(2, 4)"),
        ((src[:, :0], torch.ones(2, 0, dtype=torch.bool)), "(2, 0)"),
        ((torch.ones(1, 40, dtype=torch.long), torch.ones(1, 40, dtype=torch.bool)), "40"),
        ((src, torch.ones(2, 5)), "torch.float32"),
        ((torch.tensor([[4, 11, 5], [6, 7, 8]]), torch.ones(2, 3, dtype=torch.bool), tgt), "11"),
        ((src, real, torch.tensor([[2, -1, 5]] * 2)), "-1"),
        ((src, real, torch.tensor([[2, 13, 5]] * 2)), "13"),
    ]
    for args, named in bad:
        with pytest.raises(ValueError) as err:
            check_inputs(model, *args)
        assert named in str(err.value), (args, str(err.value))
    with pytest.raises(ValueError, match="num_heads"):
        TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, num_heads=0)
    with pytest.raises(ValueError, match="eos_id=3"):
        TransformerConfig(src_vocab_size=3, tgt_vocab_size=10)


def test_multihead_errors_reach_the_model():
    # d_model % heads is checked once, in MultiHeadAttention; the layers pass it on
    with pytest.raises(ValueError, match="d_model=18.*num_heads=4"):
        EncoderLayer(18, 4, FF)


# -- decoding (lmlib.models.seq2seq's greedy_decode and beam_search, through Transformer.start/step) -----------
def test_transformer_learns_to_copy_and_decodes():
    from lmlib.models.seq2seq import beam_search, greedy_decode
    from lmlib.text.translation import Seq2SeqBatch

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=32, num_heads=2,
                                          num_encoder_layers=1, num_decoder_layers=1, d_ff=64, dropout=0.0,
                                          max_len=16))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def batch(n=32):
        seq = torch.randint(4, 8, (n, 4))
        src = torch.cat([seq, torch.full((n, 1), 3)], 1)
        tgt_in = torch.cat([torch.full((n, 1), 2), seq], 1)
        tgt_out = torch.cat([seq, torch.full((n, 1), 3)], 1)
        return Seq2SeqBatch(src, src != 0, tgt_in, tgt_out, tgt_out != 0)

    for _ in range(250):
        loss = translation_loss(model, batch()).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    test = batch(8)
    want = test.tgt_out[:, :4].tolist()
    tokens, log_probs, weights = greedy_decode(model, test.src, test.src_mask, max_len=8)
    assert tokens == want and weights.shape == (8, 5, 5)
    # step() log-probabilities agree with one teacher-forced pass over the same tokens
    model.eval()
    logits = model(test.src, test.src_mask, test.tgt_in)
    teacher = torch.log_softmax(logits, -1).gather(-1, test.tgt_out[..., None]).squeeze(-1).sum(1)
    torch.testing.assert_close(torch.tensor(log_probs), teacher, atol=1e-4, rtol=1e-4)
    for i in range(3):
        hyps = beam_search(model, test.src[i:i + 1], test.src_mask[i:i + 1], beam_size=3, max_len=8)
        assert hyps[0].tokens == want[i]
        assert beam_search(model, test.src[i:i + 1], test.src_mask[i:i + 1], beam_size=1, max_len=8)[0].tokens == want[i]


def test_translate_strings():
    from lmlib.text.translation import prepare_translation

    pairs = [("I am cold.", "J'ai froid."), ("I am tall.", "Je suis grand."), ("You are tall.", "Tu es grand.")] * 4
    data = prepare_translation(max_len=6, valid_frac=0.0, test_frac=0.0, pairs=pairs)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(len(data.src_vocab), len(data.tgt_vocab), d_model=16, num_heads=2,
                                          d_ff=16, max_len=20)).eval()
    assert (model.config.bos_id, model.config.eos_id) == (data.tgt_vocab["<bos>"], data.tgt_vocab["<eos>"])
    for method in ("greedy", "beam"):
        out = translate(model, ["I am tall.", "you are cold"], data.src_vocab, data.tgt_vocab, method=method,
                        max_len=5)
        assert len(out) == 2 and all(len(o) <= 5 and all(isinstance(t, str) for t in o) for o in out)
    with pytest.raises(ValueError, match="'sample'"):
        translate(model, ["hi"], data.src_vocab, data.tgt_vocab, method="sample")


# -- the layers written out from the paper's equations, with the modules' own weights --------------------------
def hand_attention(mha, q_in, kv_in, blocked):
    """MultiHead = Concat(head_1..head_h) Wᴼ, head_i = softmax(Q_i K_iᵀ / √d_k) V_i (eq. 1, §3.2.2); blocked:
    bool, broadcastable to (batch, heads, n_q, n_k), True where a query may not look."""
    def heads(x, linear):
        return nn.functional.linear(x, linear.weight, linear.bias).unflatten(-1, (H, D // H)).transpose(1, 2)

    q, k, v = heads(q_in, mha.w_q), heads(kv_in, mha.w_k), heads(kv_in, mha.w_v)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(D // H)).masked_fill(blocked, float("-inf"))
    out = (torch.softmax(scores, -1) @ v).transpose(1, 2).flatten(-2)
    return nn.functional.linear(out, mha.w_o.weight, mha.w_o.bias)


def hand_layer_norm(norm, x):
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def hand_ffn(ffn, x):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (eq. 2)."""
    hidden = torch.clamp(x @ ffn.linear1.weight.T + ffn.linear1.bias, min=0)
    return hidden @ ffn.linear2.weight.T + ffn.linear2.bias


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_the_equations_written_out(norm_first):
    # post-norm (§3.1): LayerNorm(x + Sublayer(x)); pre-norm: x + Sublayer(LayerNorm(x)). Dropout 0.1 is set
    # but the layer is in eval mode, where it must be the identity.
    torch.manual_seed(10)
    layer = EncoderLayer(D, H, FF, 0.1, norm_first).eval()
    randomize_norms(layer)
    x, kpm = torch.randn(3, 6, D), padding_mask([6, 4, 2])
    blocked = kpm[:, None, None, :]
    if norm_first:
        h = x + hand_attention(layer.self_attn, hand_layer_norm(layer.norm1, x), hand_layer_norm(layer.norm1, x), blocked)
        want = h + hand_ffn(layer.ffn, hand_layer_norm(layer.norm2, h))
    else:
        h = hand_layer_norm(layer.norm1, x + hand_attention(layer.self_attn, x, x, blocked))
        want = hand_layer_norm(layer.norm2, h + hand_ffn(layer.ffn, h))
    for need_weights in (False, True):  # the fused kernel and the written-out route
        got, _ = layer(x, kpm, need_weights=need_weights)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_the_equations_written_out(norm_first):
    torch.manual_seed(11)
    layer = DecoderLayer(D, H, FF, 0.1, norm_first).eval()
    randomize_norms(layer)
    y, memory, mpm = torch.randn(2, 5, D), torch.randn(2, 7, D), padding_mask([7, 3])
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)  # query t may not see keys after t (§3.2.3)
    ln1, ln2, ln3 = (lambda t, n=n: hand_layer_norm(n, t) for n in (layer.norm1, layer.norm2, layer.norm3))
    if norm_first:
        a = y + hand_attention(layer.self_attn, ln1(y), ln1(y), future)
        b = a + hand_attention(layer.cross_attn, ln2(a), memory, mpm[:, None, None, :])
        want = b + hand_ffn(layer.ffn, ln3(b))
    else:
        a = ln1(y + hand_attention(layer.self_attn, y, y, future))
        b = ln2(a + hand_attention(layer.cross_attn, a, memory, mpm[:, None, None, :]))
        want = ln3(b + hand_ffn(layer.ffn, b))
    for need_weights in (False, True):
        got, _, _ = layer(y, memory, mpm, need_weights=need_weights)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("norm_first", [False, True])
def test_whole_model_equals_nn_transformer_with_the_same_weights(norm_first):
    # nn.Transformer is the same encoder-decoder minus embeddings and the output projection. It always ends
    # both stacks with a LayerNorm; the paper's post-norm model has none there, so the reference drops them.
    model = small_model(norm_first=norm_first)
    torch.manual_seed(12)
    ref = nn.Transformer(D, H, 2, 2, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    randomize_norms(ref)
    for ours, theirs in zip(list(model.encoder_layers) + list(model.decoder_layers),
                            list(ref.encoder.layers) + list(ref.decoder.layers)):
        copy_layer(ours, theirs)
    if norm_first:
        model.encoder_norm.load_state_dict(ref.encoder.norm.state_dict())
        model.decoder_norm.load_state_dict(ref.decoder.norm.state_dict())
    else:
        ref.encoder.norm = ref.decoder.norm = None
    ref.train()  # dropout is 0; training mode keeps PyTorch's eval-only fast path out of the comparison
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 4, 3, 0, 0]])
    src_mask, tgt = src != 0, torch.tensor([[2, 5, 6, 7], [2, 9, 12, 4]])
    src_x = model.src_embed(src) * math.sqrt(D) + paper_positional_encoding(5, D)
    tgt_x = model.tgt_embed(tgt) * math.sqrt(D) + paper_positional_encoding(4, D)
    out = ref(src_x, tgt_x, tgt_mask=causal_mask(4), src_key_padding_mask=~src_mask,
              memory_key_padding_mask=~src_mask)
    want = out @ model.tgt_embed.weight.T + model.generator.bias  # tied output projection (§3.4)
    torch.testing.assert_close(model(src, src_mask, tgt), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_a_future_target_token_leaves_earlier_logits_unchanged(norm_first):
    model = small_model(norm_first=norm_first)
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 4, 10, 3, 0]])
    tgt = torch.tensor([[2, 5, 6, 7, 8, 9], [2, 12, 11, 10, 4, 5]])
    base = model(src, src != 0, tgt)
    for t in range(1, 6):
        changed = tgt.clone()
        changed[:, t] = (tgt[:, t] - 4 + 3) % 9 + 4  # another id in 4..12
        out = model(src, src != 0, changed)
        torch.testing.assert_close(out[:, :t], base[:, :t], atol=1e-6, rtol=0)
        assert (out[:, t] - base[:, t]).abs().amax() > 1e-3  # the changed position itself does react


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_padded_source_tokens_leaves_memory_and_logits_unchanged(norm_first):
    model = small_model(norm_first=norm_first)
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 4, 3, 0, 0], [10, 3, 0, 0, 0]])
    mask, tgt = src != 0, torch.tensor([[2, 5, 6], [2, 9, 12], [2, 4, 4]])
    junk = src.clone()
    junk[~mask] = torch.tensor([7, 8, 9, 10, 5])  # other ids where the mask says padding
    memory, _ = model.encode(src, mask)
    torch.testing.assert_close(model.encode(junk, mask)[0][mask], memory[mask], atol=1e-6, rtol=0)
    logits = model(src, mask, tgt)
    torch.testing.assert_close(model(junk, mask, tgt), logits, atol=1e-6, rtol=0)
    for i, n in enumerate(mask.sum(1).tolist()):  # each sentence alone, without any padding, gives the same
        alone = model(src[i:i + 1, :n], mask[i:i + 1, :n], tgt[i:i + 1])
        torch.testing.assert_close(alone, logits[i:i + 1], atol=1e-5, rtol=1e-5)
    real = src.clone()
    real[1, 1] = 10  # a real token: this one must matter
    assert (model(real, mask, tgt)[1] - logits[1]).abs().amax() > 1e-3


def test_greedy_translation_is_the_argmax_of_a_teacher_forced_pass_over_itself(one_thread):
    # greedy decoding picks argmax p(y_t | y_<t, x) at every step, so feeding its own output back with
    # teacher forcing must give the same tokens, and <eos> right after them unless max_len cut it short
    from lmlib.text.translation import encode_source, make_batch, prepare_translation, tokenize

    pairs = [("I am cold.", "J'ai froid."), ("I am tall.", "Je suis grand."), ("You are tall.", "Tu es grand.")]
    data = prepare_translation(max_len=6, valid_frac=0.0, test_frac=0.0, pairs=pairs)
    torch.manual_seed(3)
    model = Transformer(TransformerConfig(len(data.src_vocab), len(data.tgt_vocab), d_model=16, num_heads=2,
                                          d_ff=32, dropout=0.0, max_len=20))
    batch = make_batch(data.train, data.src_vocab, data.tgt_vocab)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(40):  # enough to learn three pairs, so that the outputs are sentences that end in <eos>
        loss = translation_loss(model, batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    sentences = ["I am tall.", "You are tall.", "you are cold", "cold tall I"]
    out = translate(model, sentences, data.src_vocab, data.tgt_vocab, max_len=6)
    assert out[:2] == [["je", "suis", "grand", "."], ["tu", "es", "grand", "."]]
    for sentence, tokens in zip(sentences, out):
        src, src_mask = encode_source([tokenize(sentence, "en")], data.src_vocab)
        ids = data.tgt_vocab.encode(tokens)
        chosen = model(src, src_mask, torch.tensor([[model.config.bos_id] + ids]))[0].argmax(-1).tolist()
        assert chosen[:len(ids)] == ids, sentence
        assert len(ids) == 6 or chosen[len(ids)] == model.config.eos_id, sentence
