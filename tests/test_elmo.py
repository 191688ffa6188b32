"""lmlib.models.elmo: the character table, the char-CNN worked by hand, the residual LSTM stack against nn.LSTM,
the backward LM as the forward computation on reversed sentences, ScalarMix against eq. 2, a tiny biLM that
learns a tiny corpus, and bad input."""

import math

import pytest
import torch
from host_reads import no_host_reads
from torch import nn

from lmlib.models.elmo import (
    BiLM,
    BiLMConfig,
    CharCNNConfig,
    CharCNNEncoder,
    CharVocab,
    LSTMStack,
    ScalarMix,
    check_inputs,
    elmo_representations,
    encode_sentences,
    encode_word_ids,
    encode_words,
    reverse_padded,
)
from lmlib.text.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab

pytestmark = pytest.mark.usefixtures("one_thread")

MAX_CHARS = 10
SENTENCES = [["the", "cat", "sat"], ["a", "dog"], ["dogs", "bark", "at", "night", "here"]]


def tiny_config(**overrides) -> BiLMConfig:
    settings = dict(vocab_size=24, embed_size=8, hidden_size=12, num_layers=2, dropout=0.0, char_embed_size=4,
                    filters=((1, 4), (2, 4), (3, 4)), num_highway=1, max_chars=MAX_CHARS)
    settings.update(overrides)
    return BiLMConfig(**settings)


def tiny(**overrides) -> BiLM:
    torch.manual_seed(0)
    return BiLM(tiny_config(**overrides)).eval()


# --- the character table ----------------------------------------------------------------------------------

def test_a_word_is_begin_bytes_end_then_padding():
    ids = encode_words(["cat"], MAX_CHARS)
    assert ids.shape == (1, MAX_CHARS) and ids.dtype == torch.long
    o = CharVocab.BYTE_OFFSET
    assert ids[0].tolist() == [CharVocab.BOW, o + ord("c"), o + ord("a"), o + ord("t"), CharVocab.EOW] + [0] * 5
    assert CharVocab(MAX_CHARS).decode(ids[0]) == "cat"


def test_long_words_keep_their_first_max_chars_minus_two_bytes():
    long_word = "internationalization"
    ids = encode_words([long_word, long_word[:8]], MAX_CHARS)
    assert torch.equal(ids[0], ids[1])  # the documented rule: the first max_chars − 2 = 8 bytes
    assert ids[0, -1] == CharVocab.EOW  # the end-of-word marker survives the cut
    assert CharVocab(MAX_CHARS).decode(ids[0]) == "internat"


def test_no_character_is_outside_the_table():
    words = ["naïve", "日本", "🙂", "\ud800", "\x00", "tab\there"]  # accents, CJK, emoji, a lone surrogate, NUL
    ids = encode_words(words, 16)
    assert int(ids.min()) >= 0 and int(ids.max()) < CharVocab.size
    assert (ids[:, 0] == CharVocab.BOW).all()
    assert ids[0, 1:8].tolist() == [CharVocab.BYTE_OFFSET + b for b in "naïve".encode()] + [CharVocab.EOW]
    assert ids[2, 1:6].tolist() == [CharVocab.BYTE_OFFSET + b for b in "🙂".encode()] + [CharVocab.EOW]  # 4 bytes
    assert [CharVocab(16).decode(row) for row in ids[[0, 1, 2, 5]]] == ["naïve", "日本", "🙂", "tab\there"]
    assert len({tuple(r) for r in ids.tolist()}) == len(words)


def test_special_tokens_are_one_reserved_character_and_pad_is_a_padding_row():
    ids = encode_words([BOS, EOS, UNK, PAD, "<bos"], MAX_CHARS)
    for row, token in zip(ids[:3], (BOS, EOS, UNK)):
        assert row[:3].tolist() == [CharVocab.BOW, CharVocab.SPECIAL_CHARS[token], CharVocab.EOW]
        assert CharVocab(MAX_CHARS).decode(row) == token
    assert not ids[3].any()
    assert ids[4, 1] == CharVocab.BYTE_OFFSET + ord("<")  # only the exact token is special
    assert set(CharVocab.SPECIAL_CHARS) | {PAD} == set(SPECIALS)


@pytest.mark.parametrize("call, error, words", [
    (lambda: encode_words([""], 10), ValueError, "at least one character"),
    (lambda: encode_words("cat", 10), TypeError, "list of words"),
    (lambda: encode_words([3], 10), TypeError, "must be a str"),
    (lambda: encode_words(["cat"], 2), ValueError, "at least 3"),
    (lambda: encode_sentences([], 10), ValueError, "non-empty list of sentences"),
    (lambda: encode_sentences(["the cat"], 10), TypeError, "split it into a list of words"),
])
def test_bad_words_are_refused(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_sentences_are_padded_at_the_end_and_wrapped_in_boundaries():
    chars = encode_sentences([["a", "dog"], []], MAX_CHARS)
    assert chars.shape == (2, 4, MAX_CHARS)
    assert [CharVocab(MAX_CHARS).decode(r) for r in chars[0]] == [BOS, "a", "dog", EOS]
    assert [CharVocab(MAX_CHARS).decode(r) for r in chars[1]] == [BOS, EOS, PAD, PAD]  # an empty sentence
    bare = encode_sentences([["a", "dog"], []], MAX_CHARS, boundaries=False)
    assert bare.shape == (2, 2, MAX_CHARS) and not bare[1].any()
    vocab = Vocab(["a", "dog"], specials=SPECIALS)
    ids = encode_word_ids([["a", "dog"], ["cat"]], vocab)
    assert ids.tolist() == [vocab.encode([BOS, "a", "dog", EOS]), vocab.encode([BOS, UNK, EOS]) + [vocab[PAD]]]


def test_reverse_padded_reverses_each_sentence_and_leaves_padding():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [6, 0, 0, 0]])
    lengths = torch.tensor([3, 2, 1])
    assert reverse_padded(x, lengths).tolist() == [[3, 2, 1, 0], [5, 4, 0, 0], [6, 0, 0, 0]]
    assert torch.equal(reverse_padded(reverse_padded(x, lengths), lengths), x)


# --- the character CNN, by hand ---------------------------------------------------------------------------

def test_char_cnn_on_one_word_equals_the_hand_computation():
    config = CharCNNConfig(embed_size=2, char_embed_size=2, filters=((1, 1), (2, 2)), num_highway=1, max_chars=4)
    enc = CharCNNEncoder(config)
    a = CharVocab.BYTE_OFFSET + ord("a")
    E = {CharVocab.BOW: [1.0, -1.0], a: [0.5, 2.0], CharVocab.EOW: [-1.0, 0.5], CharVocab.PAD_CHAR: [0.0, 0.0]}
    conv1_w, conv1_b = [[[0.5], [1.0]]], [-0.5]  # (filters, channels, width)
    conv2_w, conv2_b = [[[1.0, -0.5], [0.25, 0.5]], [[-1.0, 0.0], [0.5, -0.25]]], [0.1, -1.5]
    W_H, b_H = [[0.2, -0.1, 0.3], [0.0, 0.4, -0.2], [-0.3, 0.1, 0.5]], [0.1, -0.1, 0.0]
    W_T, b_T = [[0.1, 0.2, -0.1], [-0.2, 0.0, 0.3], [0.4, -0.3, 0.1]], [-1.0, 0.5, 0.0]
    W_P, b_P = [[1.0, -0.5, 0.25], [0.5, 0.5, -1.0]], [0.0, 0.3]
    with torch.no_grad():
        enc.char_embedding.weight.zero_()
        for i, vec in E.items():
            enc.char_embedding.weight[i] = torch.tensor(vec)
        for conv, w, b in ((enc.convs[0], conv1_w, conv1_b), (enc.convs[1], conv2_w, conv2_b)):
            conv.weight.copy_(torch.tensor(w))
            conv.bias.copy_(torch.tensor(b))
        for layer, w, b in ((enc.highway.transforms[0], W_H, b_H), (enc.highway.gates[0], W_T, b_T),
                            (enc.projection, W_P, b_P)):
            layer.weight.copy_(torch.tensor(w))
            layer.bias.copy_(torch.tensor(b))

    ids = encode_words(["a"], 4)[0].tolist()
    assert ids == [CharVocab.BOW, a, CharVocab.EOW, CharVocab.PAD_CHAR]
    e = [E[i] for i in ids]  # e_1..e_4, each (char_embed,)

    def conv_max(w, b, width):  # max over the 4 − width + 1 windows of Σ_c Σ_s w[c][s] · e_{i+s}[c] + b
        return max(sum(w[c][s] * e[i + s][c] for c in range(2) for s in range(width)) + b for i in range(4 - width + 1))

    z = [conv_max(conv1_w[0], conv1_b[0], 1)] + [conv_max(conv2_w[f], conv2_b[f], 2) for f in range(2)]
    assert z[0] == pytest.approx(1.75)  # window 2: 0.5·0.5 + 1·2 − 0.5, the word's letter
    assert z[2] == pytest.approx(-0.25)  # every window of this filter is negative: the ReLU zeroes it
    z = [max(v, 0.0) for v in z]  # ReLU

    def affine(W, b, x):
        return [sum(W[r][c] * x[c] for c in range(len(x))) + b[r] for r in range(len(W))]

    t = [1 / (1 + math.exp(-v)) for v in affine(W_T, b_T, z)]  # t = σ(W_T z + b_T)
    g = [max(v, 0.0) for v in affine(W_H, b_H, z)]  # g(W_H z + b_H)
    y = [t_i * g_i + (1 - t_i) * z_i for t_i, g_i, z_i in zip(t, g, z)]
    expected = affine(W_P, b_P, y)

    got = enc(encode_words(["a"], 4))
    assert got.shape == (1, 2)
    assert got[0].tolist() == pytest.approx(expected, abs=1e-6)


def test_padding_characters_embed_to_zero_and_stay_there():
    # The docstring's "padding characters embed to 0": zero from the start (so a short word's padded window
    # adds nothing to a convolution), and no gradient reaches the row, so training keeps it zero.
    torch.manual_seed(0)
    enc = CharCNNEncoder(tiny_config().char_cnn)
    pad_row = enc.char_embedding.weight[CharVocab.PAD_CHAR]
    assert not pad_row.any()
    assert not enc.char_embedding(torch.tensor([CharVocab.PAD_CHAR])).any()
    words = encode_words(["a", "dog"], MAX_CHARS)  # mostly padding
    assert (words == CharVocab.PAD_CHAR).sum() > 10
    enc(words).square().sum().backward()
    grad = enc.char_embedding.weight.grad
    assert not grad[CharVocab.PAD_CHAR].any()
    assert grad[CharVocab.BYTE_OFFSET + ord("a")].abs().sum() > 0  # a real character's row does learn
    assert not tiny().token_encoder.char_embedding.weight[CharVocab.PAD_CHAR].any()  # inside a BiLM too


def test_any_word_gets_a_vector_and_leading_dimensions_are_kept():
    torch.manual_seed(0)
    enc = CharCNNEncoder(tiny_config().char_cnn)
    vecs = enc(encode_words(["zyxwv", "qqq", "🙂"], MAX_CHARS))  # never-seen strings
    assert vecs.shape == (3, 8) and torch.isfinite(vecs).all()
    assert not torch.allclose(vecs[0], vecs[1])
    batch = encode_sentences(SENTENCES, MAX_CHARS)
    torch.testing.assert_close(enc(batch)[2, 1:3], enc(encode_words(["dogs", "bark"], MAX_CHARS)))


# --- the LSTM stack and the two directions ----------------------------------------------------------------

@pytest.mark.parametrize("hidden_size", [8, 12])  # 8: no projection; 12: cells projected down to embed_size 8
def test_lstm_stack_equals_nn_lstm_layers_composed_by_hand_with_residuals(hidden_size):
    torch.manual_seed(0)
    stack = LSTMStack(tiny_config(num_layers=3, hidden_size=hidden_size)).eval()
    layers = []
    for j in range(3):
        lstm = nn.LSTM(8, hidden_size, proj_size=8 if hidden_size > 8 else 0, batch_first=True)
        lstm.load_state_dict(stack.layers[j].state_dict())
        layers.append(lstm)
    x = torch.randn(2, 5, 8)
    h1 = layers[0](x)[0]
    h2 = layers[1](h1)[0] + h1
    h3 = layers[2](h2)[0] + h2
    for got, want in zip(stack(x), (h1, h2, h3)):
        torch.testing.assert_close(got, want)


def test_backward_lm_is_the_forward_computation_on_the_reversed_sentence():
    bilm = tiny()
    out = bilm(encode_sentences(SENTENCES, MAX_CHARS, boundaries=False))
    for b, sentence in enumerate(SENTENCES):
        n = len(sentence)
        x_rev = bilm.token_encoder(encode_words(sentence[::-1], MAX_CHARS))[None]  # (1, n, d), no padding
        for j, h in enumerate(bilm.backward_lm(x_rev)):  # the backward weights, run left to right
            torch.testing.assert_close(out.backward[j][b, :n], h[0].flip(0))
            assert not out.backward[j][b, n:].any()


def test_with_the_same_weights_backward_on_a_sentence_equals_forward_on_its_reverse():
    bilm = tiny()
    bilm.backward_lm.load_state_dict(bilm.forward_lm.state_dict())
    tokens = [[BOS, *s, EOS] for s in SENTENCES]
    vocab = Vocab([w for s in SENTENCES for w in s], specials=SPECIALS)
    rev = [t[::-1] for t in tokens]
    chars, chars_rev = (encode_sentences(t, MAX_CHARS, boundaries=False) for t in (tokens, rev))
    ids, ids_rev = (encode_word_ids(t, vocab, boundaries=False) for t in (tokens, rev))
    out, out_rev = bilm(chars), bilm(chars_rev)
    lengths = out.mask.sum(1)
    for b_layer, f_layer in zip(out.backward, out_rev.forward):
        torch.testing.assert_close(b_layer, reverse_padded(f_layer, lengths))
    forward, backward = bilm.nll(chars, ids)
    forward_rev, backward_rev = bilm.nll(chars_rev, ids_rev)
    torch.testing.assert_close(backward, forward_rev)
    torch.testing.assert_close(forward, backward_rev)


def test_a_sentence_reads_the_same_alone_and_padded_in_a_batch():
    bilm = tiny()
    batch = bilm(encode_sentences(SENTENCES, MAX_CHARS))
    alone = bilm(encode_sentences(SENTENCES[1:2], MAX_CHARS))  # 4 tokens, padded to 7 in the batch
    for got, want in zip(batch.layers(), alone.layers()):
        torch.testing.assert_close(got[1, :4], want[0])
        assert not got[1, 4:].any()


def test_outputs_shapes_and_an_empty_sentence_inside_a_batch():
    bilm = tiny()
    out = bilm(encode_sentences([["a"], []], MAX_CHARS, boundaries=False))
    assert out.mask.tolist() == [[True], [False]]
    assert len(out.layers()) == 3 and all(h.shape == (2, 1, 16) for h in out.layers())
    assert all(not h[1].any() for h in out.layers())  # an empty sentence gets zeros
    torch.testing.assert_close(out.layers()[0], torch.cat([out.token, out.token], -1))


def test_joint_loss_is_the_sum_of_both_directions_and_reaches_every_part():
    bilm = tiny()
    vocab = Vocab([w for s in SENTENCES for w in s], specials=SPECIALS)
    chars, ids = encode_sentences(SENTENCES, MAX_CHARS), encode_word_ids(SENTENCES, vocab)
    forward, backward = bilm.nll(chars, ids)
    loss = bilm.loss(chars, ids)
    torch.testing.assert_close(loss, forward + backward)
    loss.backward()
    for name, p in bilm.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # the forward NLL by hand: position k predicts word k + 1, over the real next words only
    out = bilm(chars)
    logp = torch.log_softmax(bilm.softmax(out.forward[-1]), -1)
    terms = [-logp[b, k, ids[b, k + 1]] for b, s in enumerate(SENTENCES) for k in range(len(s) + 1)]
    torch.testing.assert_close(forward, torch.stack(terms).mean())


def test_a_tiny_bilm_learns_a_tiny_corpus():
    """Four sentences of five words each, no word repeated: after <bos> any of the four first words may come
    (and before <eos> any of the four last ones), every other word is fixed by its neighbour. The best possible
    NLL is log 4 over 6 predictions per sentence, perplexity 4^(1/6) ≈ 1.26 in each direction; a model that
    ignores the context does no better than the unigram distribution, perplexity ≈ 19 (24 words in the softmax).
    Below 1.35 the model must read the context and be within 7% of the optimum; with Adam at 0.01 it gets
    there in about 100 full-batch steps (1.262 to 1.265 after 150 steps for seeds 0, 1, 2). Going below the
    optimum would mean a direction sees the words it predicts."""
    corpus = [["the", "cat", "sat", "on", "mats"], ["a", "dog", "ran", "past", "trees"],
              ["my", "bird", "sang", "loud", "songs"], ["old", "fish", "swam", "in", "ponds"]]
    vocab = Vocab([w for s in corpus for w in s], specials=SPECIALS)
    torch.manual_seed(0)
    bilm = BiLM(tiny_config(vocab_size=len(vocab), embed_size=16, hidden_size=32))
    chars, ids = encode_sentences(corpus, MAX_CHARS), encode_word_ids(corpus, vocab)
    opt = torch.optim.Adam(bilm.parameters(), lr=0.01)
    for _ in range(150):
        opt.zero_grad()
        bilm.loss(chars, ids).backward()
        opt.step()
    bilm.eval()
    with torch.no_grad():
        forward, backward = bilm.nll(chars, ids)
    assert math.log(4) / 6 - 1e-3 < forward < math.log(1.35), f"forward perplexity {math.exp(forward):.3f}"
    assert math.log(4) / 6 - 1e-3 < backward < math.log(1.35), f"backward perplexity {math.exp(backward):.3f}"


# --- ScalarMix and the representations --------------------------------------------------------------------

def test_scalar_mix_equals_eq_2_with_hand_set_weights():
    torch.manual_seed(0)
    layers = [torch.randn(2, 4, 5) for _ in range(3)]
    w, gamma = [0.5, -1.0, 2.0], 1.5
    mix = ScalarMix(3, initial_weights=w, gamma=gamma)
    s = [math.exp(v) / sum(math.exp(u) for u in w) for v in w]  # s = softmax(w)
    expected = gamma * (s[0] * layers[0] + s[1] * layers[1] + s[2] * layers[2])
    torch.testing.assert_close(mix(layers), expected)
    torch.testing.assert_close(ScalarMix(3)(layers), sum(layers) / 3)  # the default: a plain average


def test_scalar_mix_with_layer_norm_uses_only_real_positions():
    torch.manual_seed(0)
    layers = [torch.randn(2, 4, 5) * (j + 1) + j for j in range(3)]
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    w, gamma = [0.3, 0.0, -0.7], 0.8
    s = torch.softmax(torch.tensor(w), 0).tolist()
    normed = []
    for h in layers:
        real = h[mask]  # (5 real positions, 5 features)
        mu, var = real.mean(), real.var(unbiased=False)
        normed.append((h - mu) / math.sqrt(var + 1e-12) * mask[..., None])
    expected = gamma * sum(s_j * n_j for s_j, n_j in zip(s, normed))
    got = ScalarMix(3, layer_norm=True, initial_weights=w, gamma=gamma)(layers, mask)
    torch.testing.assert_close(got, expected)
    changed = [h.clone() for h in layers]
    for h in changed:
        h[~mask] = 1e3  # padding values may not move the statistics
    torch.testing.assert_close(ScalarMix(3, layer_norm=True, initial_weights=w, gamma=gamma)(changed, mask), expected)


@pytest.mark.parametrize("call, words", [
    (lambda: ScalarMix(3, initial_weights=[0.0, 1.0]), "one weight per layer"),
    (lambda: ScalarMix(0), "num_layers"),
    (lambda: ScalarMix(3)([torch.zeros(1, 2, 4)] * 2), "ScalarMix(bilm.config.num_layers + 1)"),
    (lambda: ScalarMix(2)([torch.zeros(1, 2, 4), torch.zeros(1, 2, 3)]), "of one shape"),
    (lambda: ScalarMix(2)([torch.zeros(1, 2, 4)] * 2, torch.ones(1, 3, dtype=torch.bool)), "mask must be"),
    (lambda: ScalarMix(2)(torch.zeros(2, 1, 2, 4)), "list of"),
])
def test_scalar_mix_refuses_bad_input(call, words):
    with pytest.raises(ValueError) as info:
        call()
    assert words in str(info.value)


def test_elmo_representations_all_top_and_mix():
    bilm = tiny()
    every, mask = elmo_representations(bilm, SENTENCES, "all")
    assert every.shape == (3, 3, 5, 16) and mask.tolist()[1] == [True, True, False, False, False]
    top, _ = elmo_representations(bilm, SENTENCES, "top")
    torch.testing.assert_close(top, every[-1])
    average, _ = elmo_representations(bilm, SENTENCES, "mix")
    torch.testing.assert_close(average, every.mean(0))
    # words: <bos> and <eos> are read and dropped again; the same as the char-id tensor path, sliced
    from_ids, full_mask = elmo_representations(bilm, encode_sentences(SENTENCES, MAX_CHARS), "all")
    for b, s in enumerate(SENTENCES):
        torch.testing.assert_close(every[:, b, : len(s)], from_ids[:, b, 1: len(s) + 1])
        assert not every[:, b, len(s):].any()
    assert full_mask.shape == (3, 7)
    x = every[0, ..., :8]
    torch.testing.assert_close(every[0, ..., 8:], x)  # layer 0 is [x_k; x_k]


def test_elmo_representations_of_empty_sentences():
    bilm = tiny()
    top, mask = elmo_representations(bilm, [["a"], []], "top")  # the empty one is read as <bos> <eos>
    assert top.shape == (2, 1, 16) and mask.tolist() == [[True], [False]] and not top[1].any()
    none, mask = elmo_representations(bilm, [[], []], "all")
    assert none.shape == (3, 2, 0, 16) and mask.shape == (2, 0)


def test_only_the_mix_trains_and_the_bilm_stays_frozen():
    bilm = tiny().train()
    mix = ScalarMix(3, layer_norm=True)
    rep, mask = elmo_representations(bilm, SENTENCES, "mix", mix=mix)
    rep[mask].sum().backward()
    assert mix.w.grad is not None and mix.gamma.grad is not None
    assert all(p.grad is None for p in bilm.parameters())
    assert bilm.training  # its mode is given back
    with pytest.raises(ValueError, match="'second'"):
        elmo_representations(bilm, SENTENCES, "second")
    with pytest.raises(ValueError, match="ScalarMix"):
        elmo_representations(bilm, SENTENCES, "mix", mix=ScalarMix(2))


# --- bad input and configs --------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, words", [
    ("vocab_size", 0, "at least 1"),
    ("hidden_size", 4, "hidden_size >= embed_size"),
    ("dropout", 1.0, "[0, 1)"),
    ("filters", ((11, 4),), "do not fit"),
    ("filters", (), "at least one"),
    ("filters", ((2, "x"),), "(width, count) pairs"),
    ("max_chars", 2, "at least 3"),
    ("num_highway", -1, "at least 0"),
])
def test_config_refuses_bad_fields(field, value, words):
    with pytest.raises(ValueError) as info:
        tiny_config(**{field: value})
    assert words in str(info.value)


def test_bad_batches_are_refused_by_check_inputs_naming_the_value():
    bilm = tiny()
    good = encode_sentences(SENTENCES, MAX_CHARS)
    ids = torch.zeros(good.shape[:2], dtype=torch.long)
    check_inputs(bilm, good, ids)
    holes = good.clone()
    holes[0, 1] = 0  # a padding word inside a sentence
    cases = [
        ((encode_sentences([[], []], MAX_CHARS, boundaries=False),), "(2, 0, 10)"),
        ((torch.zeros(2, 3, MAX_CHARS, dtype=torch.long),), "empty"),
        ((encode_sentences(SENTENCES, 12),), "(3, 7, 12)"),
        ((good[0],), "(7, 10)"),
        ((good.float(),), "torch.float32"),
        ((good + 300,), "422"),
        ((holes,), "[0]"),
        ((good, ids[:, :-1]), "(3, 6)"),
        ((good, ids + 24), "24"),
        ((encode_sentences([["a"], []], MAX_CHARS, boundaries=False), ids[:2, :1]), "two words"),
    ]
    for args, named in cases:
        with pytest.raises(ValueError) as info:
            check_inputs(bilm, *args)
        assert named in str(info.value), (named, str(info.value))
    with pytest.raises(ValueError) as info:
        elmo_representations(bilm, holes)  # the boundary a notebook calls checks too
    assert "[0]" in str(info.value)


def test_forward_and_loss_read_nothing_back_from_the_device():
    bilm = tiny()
    chars = encode_sentences(SENTENCES, MAX_CHARS)
    ids = torch.zeros(chars.shape[:2], dtype=torch.long)
    with no_host_reads():
        loss = bilm.loss(chars, ids)
    assert torch.isfinite(loss)


def test_a_state_dict_from_another_config_is_refused_and_the_same_config_loads():
    bilm = tiny()
    with pytest.raises(ValueError, match="vocab_size or embed_size differ"):
        bilm.load_state_dict(tiny(vocab_size=30).state_dict())
    with pytest.raises(ValueError, match="filters, char_embed_size or embed_size differ"):
        bilm.load_state_dict(tiny(filters=((1, 4), (2, 4), (3, 5))).state_dict())
    with pytest.raises(ValueError, match="missing"):
        bilm.load_state_dict(tiny(num_layers=1).state_dict())
    other = tiny()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.1)
    bilm.load_state_dict(other.state_dict())
    chars = encode_sentences(SENTENCES, MAX_CHARS)
    torch.testing.assert_close(bilm(chars).layers()[-1], other(chars).layers()[-1])
