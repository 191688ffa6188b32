"""lmlib.recipes.elmo: the tokenizer and truncation rules, the features read for probes (checked against
elmo_representations and a hand mean), the probe's mix against eq. 2, and the shipped checkpoint: sha-verified,
refused when corrupt, and measuring on held-out reviews what its pretrain.json records."""

import math
import shutil

import pytest
import torch

from lmlib.models.elmo import BiLM, BiLMConfig, ScalarMix, elmo_representations
from lmlib.recipes import elmo as R
from lmlib.text.vocab import SPECIALS, UNK, Vocab

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_bilm() -> BiLM:
    torch.manual_seed(0)
    return BiLM(BiLMConfig(vocab_size=20, embed_size=8, hidden_size=12, num_layers=2, dropout=0.0, char_embed_size=4,
                           filters=((1, 4), (2, 4)), num_highway=1, max_chars=12)).eval()


def test_tokenize_keeps_case_words_with_apostrophes_numbers_and_lone_punctuation():
    text = "I didn't like Spielberg's film (1,000 times worse) - 3.5/10!"
    assert R.tokenize(text) == ["I", "didn't", "like", "Spielberg's", "film", "(", "1,000", "times", "worse", ")",
                                "-", "3.5", "/", "10", "!"]
    assert R.tokenize("naïve café_au lait") == ["naïve", "café", "_", "au", "lait"]
    assert R.tokenize("  \n ") == []


def test_sentences_end_at_stops_and_line_breaks_are_cut_and_short_ones_dropped():
    text = "A great film. Loved it!\nok\nWhy? " + " ".join(["word"] * 45) + "."
    got = R.sentences_of(text, max_words=40, min_words=3)
    assert got[:2] == [["A", "great", "film", "."], ["Loved", "it", "!"]]  # "ok" and "Why ?" are too short
    assert [len(s) for s in got[2:]] == [40, 6]  # 45 words and the stop: cut after 40
    assert R.sentences_of("ok", min_words=1) == [["ok"]]


def test_a_review_is_truncated_after_max_tokens_in_sentence_order():
    text = "One two three. Four five six seven. Eight nine."
    assert R.review_sentences(text, 6) == [["One", "two", "three", "."], ["Four", "five"]]
    assert R.review_sentences(text, 100) == R.sentences_of(text, min_words=1)
    assert R.review_sentences("", 10) == []


def test_inputs_keep_case_and_targets_are_lower_cased_with_unk():
    vocab = Vocab(["the", "film"], specials=SPECIALS, unk=UNK)
    chars, ids = R.encode_batch([["The", "Film", "zyzzyva"]], vocab, max_chars=12)
    assert ids.tolist() == [vocab.encode(["<bos>", "the", "film", UNK, "<eos>"])]
    assert not torch.equal(chars[0, 1], R.encode_batch([["the"]], vocab, 12)[0][0, 1])  # "The" is read as written
    corpus = [["A", "a", "b"], ["a", "c"]]
    assert R.target_vocab(corpus, size=6).itos == [*SPECIALS, "a", "b"]  # the most frequent lower-cased words


def test_token_features_are_elmo_representations_in_sentence_order():
    bilm = tiny_bilm()
    sentences = [["a", "longer", "sentence", "here"], [], ["short"], ["two", "words"]]
    got = R.token_features(bilm, sentences, batch_size=2)  # sorted by length inside, back in order outside
    assert got.shape == (7, 3, 16)
    rows = []
    for s in sentences:
        if s:
            layers, _ = elmo_representations(bilm, [s], "all")  # (3, 1, n, 16)
            rows.append(layers[:, 0].transpose(0, 1))
    torch.testing.assert_close(got, torch.cat(rows))


def test_pooled_features_are_the_mean_over_each_reviews_first_tokens():
    bilm = tiny_bilm()
    texts = ["Good film. Really good!", "Bad.", "", "One two three four five six"]
    got = R.pooled_features(bilm, texts, max_tokens=5)
    for text, row in zip(texts, got):
        sentences = R.review_sentences(text, 5)
        if not sentences:
            assert not row.any()
            continue
        words = R.token_features(bilm, sentences)
        assert len(words) == min(5, len(R.tokenize(text)))
        torch.testing.assert_close(row, words.mean(0))


def test_the_probes_mix_is_eq_2_and_bad_layers_are_refused():
    torch.manual_seed(0)
    x = torch.randn(6, 3, 5)
    probe = R.FeatureProbe(3, 5, 4, layer=None)
    with torch.no_grad():
        probe.mix.w.copy_(torch.tensor([0.2, -1.0, 0.5]))
        probe.mix.gamma.fill_(1.7)
    s = torch.softmax(torch.tensor([0.2, -1.0, 0.5]), 0)
    mixed = 1.7 * (s[0] * x[:, 0] + s[1] * x[:, 1] + s[2] * x[:, 2])
    torch.testing.assert_close(probe(x), probe.head(mixed))
    torch.testing.assert_close(R.FeatureProbe(3, 5, 4, layer=1)(x).shape, torch.Size([6, 4]))
    assert isinstance(probe.mix, ScalarMix)
    with pytest.raises(ValueError, match="layer must be in 0..2"):
        R.FeatureProbe(3, 5, 4, layer=3)


def test_a_probe_learns_a_layer_that_holds_the_label():
    torch.manual_seed(0)
    y = torch.randint(0, 3, (300,))
    x = torch.randn(300, 3, 4)
    x[:, 2, 0] += 6.0 * y  # only layer 2 knows the class
    tr, = R.standardize(x)
    accs = [R.probe_accuracy(R.fit_probe(tr, y, layer, 3, steps=100), tr, y) for layer in (0, 2, None)]
    assert accs[0] < 0.5 and accs[1] > 0.9 and accs[2] > 0.9


def test_the_shipped_checkpoint_is_verified_and_measures_what_it_records():
    """The first 300 held-out sentences (of the last 1,000 unlabelled reviews, never trained on): the recorded
    perplexities are over 2,000 sentences, so a slice may differ by a few per cent; a broken or untrained model is
    off by orders of magnitude (a uniform guess over the vocabulary: 10,000)."""
    bilm, vocab, report = R.load_pretrained()
    assert report["recipe"]["vocab_size"] == len(vocab) == bilm.config.vocab_size
    held_out = R.held_out_sentences(report["recipe"]["valid_reviews"])
    got = R.evaluate_bilm(bilm, held_out[:300], vocab)
    for direction in ("forward", "backward"):
        recorded = report[f"valid_{direction}_ppl"]
        assert abs(math.log(got[f"{direction}_ppl"] / recorded)) < math.log(1.15), (direction, got, recorded)


def test_the_shipped_checkpoint_is_small_fp16():
    from safetensors import safe_open

    path = R.CHECKPOINT_DIR / f"{R.NAME}.safetensors"
    assert path.stat().st_size <= 10 * 2**20
    with safe_open(str(path), framework="pt") as fh:
        assert {fh.get_tensor(k).dtype for k in fh.keys()} == {torch.float16}


def test_a_corrupted_checkpoint_is_refused(tmp_path):
    copy = tmp_path / R.NAME
    shutil.copytree(R.CHECKPOINT_DIR, copy)
    weights = copy / f"{R.NAME}.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256") as info:
        R.load_pretrained(copy)
    assert R.REBUILD in str(info.value)
    shutil.copy(R.CHECKPOINT_DIR / f"{R.NAME}.safetensors", weights)
    (copy / "vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        R.load_pretrained(copy)


def test_bag_with_elmo_concatenates_the_words_own_vectors_and_the_mix():
    torch.manual_seed(0)
    model = R.BagWithELMo(vocab_size=6, embed_size=3, num_layers=2, dim=4, num_classes=2, pad_id=0)
    ids = torch.tensor([[1, 2, 0], [3, 0, 0]])
    feats = torch.randn(2, 2, 4)
    with torch.no_grad():
        model.mix.w.copy_(torch.tensor([0.3, -0.2]))
        model.mix.gamma.fill_(1.5)
        emb = model.embedding.weight
        bag = torch.stack([(emb[1] + emb[2]) / 2, emb[3]])  # padding left out of the mean
        s = torch.softmax(torch.tensor([0.3, -0.2]), 0)
        mixed = 1.5 * (s[0] * feats[:, 0] + s[1] * feats[:, 1])  # eq. 2
        assert torch.allclose(model(ids, feats), model.head(torch.cat([bag, mixed], -1)), atol=1e-6)
    # the tuple input trains through train_head and is scored by probe_accuracy
    y = torch.tensor([0, 1])
    R.train_head(model, (ids, feats), y, steps=30, lr=0.05)
    assert R.probe_accuracy(model, (ids, feats), y) == 1.0


def test_word_type_tensors_give_encode_batchs_inputs():
    from lmlib.models.elmo import encode_words
    from lmlib.recipes.elmo import encode_batch, sentence_type_ids, target_vocab

    sentences = [["The", "film", "was", "great", "."], ["I", "loved", "it", "!"], ["Great", "acting"]]
    vocab = target_vocab(sentences * 3, size=12)
    ids, types = sentence_type_ids(sentences, 8)
    chars = encode_words(types, 20)[ids.long()]
    softmax = torch.tensor(vocab.encode([t if t in SPECIALS else t.lower() for t in types]))
    softmax[0] = vocab.stoi["<pad>"]
    expect_chars, expect_ids = encode_batch(sentences, vocab, 20)
    width = expect_ids.size(1)
    assert torch.equal(chars[:, :width], expect_chars) and not chars[:, width:].any()
    assert torch.equal(softmax[ids.long()][:, :width], expect_ids)


def test_device_batches_give_random_batches_inputs_for_the_sentences_drawn():
    sentences = [["The", "film", "was", "great", "."], ["I", "loved", "it", "!"], ["Great", "acting"]] * 5
    vocab = R.target_vocab(sentences, size=12)
    for chars, ids in R.device_batches(sentences, vocab, 4, 3, seed=0, max_chars=20, device=torch.device("cpu")):
        assert chars.shape[:2] == ids.shape and ids.size(1) == 7  # the longest sentence with <bos> and <eos>
        rows = [sentences[[len(s) + 2 for s in sentences].index(int((row != 0).sum()))] for row in ids]
        expect_chars, expect_ids = R.encode_batch(rows, vocab, 20)
        width = expect_ids.size(1)
        assert torch.equal(ids[:, :width], expect_ids) and torch.equal(chars[:, :width], expect_chars)


def test_random_batches_skip_passes_over_batches_as_drawing_them_would_and_counts_their_words():
    """A resumed run reaches its step through skip (Trainer.fit): the batches after it are the ones drawing would
    give, and the words it reports are the skipped batches' non-padding word ids, so tokens_seen stays exact."""
    sentences = [["The", "film", "was", "great", "."], ["I", "loved", "it", "!"], ["Great", "acting"]] * 5
    vocab = R.target_vocab(sentences, size=12)
    pad = vocab.stoi["<pad>"]
    drawn = list(R.random_batches(sentences, vocab, 4, 6, seed=3, max_chars=20))
    skipping = R.random_batches(sentences, vocab, 4, 6, seed=3, max_chars=20)
    assert skipping.skip(4) == sum(int((ids != pad).sum()) for _, ids in drawn[:4])
    rest = list(skipping)
    assert len(rest) == 2 and all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(rest, drawn[4:]))
    assert skipping.skip(3) == 0  # the stream has ended
    # the run's count: skipped batches through the source's skip, or drawn and dropped by a source without one
    for source in (R.random_batches(sentences, vocab, 4, 6, seed=3, max_chars=20), iter(drawn)):
        counted = R._CountedBatches(source, pad)
        counted.skip(4)
        assert [torch.equal(ids, b[1]) for (_, ids), b in zip(counted, drawn[4:])] == [True, True]
        assert int(counted.tokens) == sum(int((ids != pad).sum()) for _, ids in drawn)
