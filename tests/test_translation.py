"""Translation data: tokenizer rules, filtering, a leak-free split, vocabularies and batch layout."""

import pytest
import torch

from lmlib.text.translation import (
    BOS,
    EOS,
    PAD,
    detokenize,
    encode_source,
    example_pairs,
    make_batch,
    prepare_translation,
    tokenize,
    translation_batches,
)

PAIRS = [
    ("I am cold.", "J'ai froid."),
    ("I am cold.", "J\u2019ai froid !"),
    ("He is tall.", "Il est grand."),
    ("She is here.", "Elle est ici."),
    ("We are late.", "Nous sommes en retard."),
    ("You are right.", "Vous avez raison."),
    ("They are here.", "Ils sont ici."),
    ("I don't know what he wants from me today.", "Je ne sais pas ce qu'il me veut aujourd'hui."),
    ("Go!", "Va !"),
    ("I am happy.", "Je suis heureux."),
] + [(f"I am number {i}.", f"Je suis le numéro {i}.") for i in range(30)]


def test_tokenize_rules():
    assert tokenize("I don't know!", "en") == ["i", "don't", "know", "!"]
    assert tokenize("Je ne l\u2019ai pas vu.", "fr") == ["je", "ne", "l'", "ai", "pas", "vu", "."]
    assert tokenize("Qu'est-ce que c'est aujourd'hui ?", "fr") == ["qu'", "est-ce", "que", "c'", "est", "aujourd'hui", "?"]
    assert detokenize(["je", "ne", "l'", "ai", "pas", "vu", "."]) == "je ne l'ai pas vu ."
    with pytest.raises(ValueError, match="lang"):
        tokenize("x", "de")


def test_french_no_break_spaces():
    # French typography puts a narrow no-break space (U+202F) or a no-break space (U+00A0) before
    # ! ? : ; and inside « »: they separate tokens like a space and never end up inside one
    assert tokenize("Cours\u202f!", "fr") == ["cours", "!"]
    assert tokenize("Tu viens\u202f? Oui\u00a0!", "fr") == ["tu", "viens", "?", "oui", "!"]
    quote = tokenize("Il a dit\u00a0: «\u00a0J\u2019arrive\u00a0»", "fr")
    assert quote == ["il", "a", "dit", ":", "«", "j'", "arrive", "»"]
    # the same on the English side, where a no-break space must not hide a prefix from the filter
    data = prepare_translation(max_len=6, valid_frac=0.0, test_frac=0.0, prefixes=("i am ",),
                               pairs=[("I\u00a0am cold.", "J\u2019ai froid\u202f!")])
    assert data.train == [(["i", "am", "cold", "."], ["j'", "ai", "froid", "!"])]


def test_filter_split_and_vocab():
    data = prepare_translation(max_len=6, pairs=PAIRS, valid_frac=0.1, test_frac=0.2, seed=1)
    every = [(s, t) for s, t in data.train] + example_pairs(data.valid) + example_pairs(data.test)
    # the long sentence is filtered out, all short ones kept (a pair counted once per reference)
    assert all(len(s) <= 6 and len(t) <= 6 for s, t in every)
    assert len(every) == len(PAIRS) - 1
    # no source sentence in two splits; both references of "i am cold ." travel together
    train_src = {tuple(s) for s, _ in data.train}
    held = [tuple(e.src) for e in data.valid + data.test]
    assert not train_src & set(held) and len(held) == len(set(held))
    cold = [e for e in data.valid + data.test if e.src == ["i", "am", "cold", "."]]
    if cold:
        assert len(cold[0].refs) == 2
    else:
        assert sum(s == ["i", "am", "cold", "."] for s, _ in data.train) == 2
    # vocabularies from training only, specials first
    assert data.src_vocab.itos[:4] == [PAD, "<unk>", BOS, EOS]
    assert set(data.tgt_vocab.itos[4:]) == {tok for _, t in data.train for tok in t}
    # the same seed gives the same split
    again = prepare_translation(max_len=6, pairs=PAIRS, valid_frac=0.1, test_frac=0.2, seed=1)
    assert again.train == data.train and again.test == data.test


def test_prefix_filter_and_errors():
    data = prepare_translation(max_len=6, pairs=PAIRS, valid_frac=0.0, test_frac=0.0, prefixes=("he is ", "she is "))
    assert sorted(" ".join(s) for s, _ in data.train) == ["he is tall .", "she is here ."]
    with pytest.raises(ValueError, match="max_len"):
        prepare_translation(max_len=1, pairs=PAIRS)
    with pytest.raises(ValueError, match="valid_frac"):
        prepare_translation(pairs=PAIRS, valid_frac=0.6, test_frac=0.5)


def test_batch_layout():
    data = prepare_translation(max_len=6, pairs=PAIRS, valid_frac=0.0, test_frac=0.0)
    pairs = [(["i", "am", "cold", "."], ["j'", "ai", "froid", "."]), (["go", "!"], ["va", "!"])]
    batch = make_batch(pairs, data.src_vocab, data.tgt_vocab)
    sv, tv = data.src_vocab, data.tgt_vocab
    assert batch.src.shape == (2, 5) and batch.tgt_in.shape == (2, 5)
    assert batch.src[1].tolist() == sv.encode(["go", "!", EOS]) + [sv[PAD]] * 2
    assert batch.src_mask[1].tolist() == [True, True, True, False, False]
    assert batch.tgt_in[0].tolist() == tv.encode([BOS, "j'", "ai", "froid", "."])
    assert batch.tgt_out[0].tolist() == tv.encode(["j'", "ai", "froid", ".", EOS])
    assert batch.tgt_out[1].tolist() == tv.encode(["va", "!", EOS]) + [tv[PAD]] * 2
    assert torch.equal(batch.tgt_mask, batch.tgt_out != tv[PAD])
    ids, mask = encode_source([["go", "!"]], sv)
    assert ids.tolist() == [sv.encode(["go", "!", EOS])] and mask.all()


def test_batches_cover_every_pair_once():
    data = prepare_translation(max_len=6, pairs=PAIRS, valid_frac=0.0, test_frac=0.0)
    batches = translation_batches(data.train, data.src_vocab, data.tgt_vocab, batch_size=8, seed=3)
    assert sum(b.src.shape[0] for b in batches) == len(data.train)
    assert sum(int(b.tgt_mask.sum()) for b in batches) == sum(len(t) + 1 for _, t in data.train)
    with pytest.raises(ValueError, match="batch_size"):
        translation_batches(data.train, data.src_vocab, data.tgt_vocab, batch_size=0)
