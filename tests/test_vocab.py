from collections import Counter

import pytest

from lmlib.text.vocab import Vocab


def test_ids_are_specials_then_frequency_then_alphabetical():
    v = Vocab("b a c a b a d".split(), specials=("<pad>",), unk="<unk>")
    assert v.itos == ["<pad>", "<unk>", "a", "b", "c", "d"]
    assert v.encode(["a", "d", "zzz"]) == [2, 5, 1]
    assert v.decode([2, 3], sep=" ") == "a b"


def test_min_freq_and_max_size():
    tokens = "a a a b b c".split()
    assert Vocab(tokens, min_freq=2).itos == ["<unk>", "a", "b"]
    assert Vocab(tokens, max_size=2).itos == ["<unk>", "a"]
    with pytest.raises(ValueError, match="min_freq"):
        Vocab(tokens, min_freq=0)
    with pytest.raises(ValueError, match="no room"):
        Vocab(tokens, max_size=1, specials=("<pad>", "<bos>"))


def test_closed_vocabulary_refuses_unknown_tokens_with_advice():
    v = Vocab("x y".split(), unk=None)
    with pytest.raises(KeyError, match="unk='<unk>'"):
        v.encode(["x", "q"])


def test_decode_out_of_range_is_a_clear_error():
    with pytest.raises(IndexError, match=r"\[7\]"):
        Vocab("a b".split()).decode([0, 7])
    with pytest.raises(IndexError, match=r"\[-1\]"):  # would otherwise decode as the last type
        Vocab("a b".split()).decode([-1])


def test_empty_corpus_is_refused():
    with pytest.raises(ValueError, match="empty"):
        Vocab([], unk=None)


def test_characters_and_counter_input():
    v = Vocab("hello", unk=None)
    assert v.itos == ["l", "e", "h", "o"]
    assert v.decode(v.encode("hello"), sep="") == "hello"
    assert Vocab(Counter({"x": 3, "y": 5}), unk=None).itos == ["y", "x"]


def test_save_load_round_trip(tmp_path):
    v = Vocab("the cat sat on the mat".split(), specials=("<pad>", "<eos>"))
    v.save(tmp_path / "v.json")
    w = Vocab.load(tmp_path / "v.json")
    assert w == v and w.counts == v.counts and w["nope"] == v.unk_id


def test_ptb_vocabulary_has_exactly_ten_thousand_types(ptb_train):
    v = Vocab((t for line in ptb_train for t in line), unk="<unk>")
    assert len(v) == 10_000 and v.itos[0] == "<unk>"
    assert v.counts["<unk>"] == 45_020 and v.counts["N"] == 32_481


def test_from_itos_keeps_the_ids_given_and_refuses_what_cannot_be_a_vocabulary():
    from lmlib.text.vocab import PAD, UNK

    vocab = Vocab.from_itos([PAD, UNK, "b", "a"], counts={"a": 3, "b": 1})
    assert vocab.encode(["a", "b", "zzz"]) == [3, 2, 1] and vocab.counts["a"] == 3
    assert Vocab.from_itos(vocab.itos, vocab.unk, vocab.counts) == vocab
    with pytest.raises(ValueError, match="twice"):
        Vocab.from_itos(["a", "a"], unk=None)
    with pytest.raises(ValueError, match="unknown-token"):
        Vocab.from_itos(["a", "b"])
    with pytest.raises(ValueError, match="empty"):
        Vocab.from_itos([], unk=None)
