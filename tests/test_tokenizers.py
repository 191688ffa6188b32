"""lmlib.text.tokenizers against its peers: transformers' BasicTokenizer and Hugging Face tokenizers' BPE and
WordPiece models, loaded with lmlib's own merges and vocabularies, on held-out IMDb and PTB text and on seeded
random Unicode strings; the merge trainer against a from-scratch recount at every step."""

import doctest
import random
from collections import Counter

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer as HFBasicTokenizer

from lmlib.data import load_imdb, load_ptb
from lmlib.text import tokenizers as tokenizers_module
from lmlib.text.tokenizers import (
    BYTE_TO_CHAR,
    SPECIAL_TOKENS,
    BasicTokenizer,
    ByteLevelBPE,
    WordPiece,
    gpt2_pretokenize,
    learn_merges,
    likelihood_score,
    merge_word,
    word_to_byte_symbols,
)

# Characters from every corner that matters: ASCII, C0 controls, odd whitespace, accents and combining marks,
# Greek, CJK, Hangul, emoji, typographic punctuation. All assigned since Unicode 6, so every peer knows them.
POOL = ("".join(map(chr, range(0, 128))) + " \t\n\r\x0b\x0c\x85\xa0\u2028\u3000\u200b\ufeff" + "éèàüñçøåÅÉßÆ"
        + "".join(map(chr, range(0x300, 0x370))) + "αβγΣσς" + "東京大学中文" + "한국어" + "😀🎉👍🏽❤️"
        + "“”‘’—–…。、«»¿¡")


def random_texts(n: int, seed: int, any_code_point: bool = False) -> list[str]:
    """Seeded strings of 0-80 characters: pool characters, whitespace runs, and (optionally) any code point."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randrange(0, 81)):
            r = rng.random()
            if r < 0.1:
                chars.append(" " * rng.randrange(1, 5))
            elif any_code_point and r < 0.3:
                cp = rng.randrange(0, 0x110000)
                chars.append(chr(cp if not 0xD800 <= cp < 0xE000 else cp - 0xD800))  # no lone surrogates
            else:
                chars.append(rng.choice(POOL))
        texts.append("".join(chars))
    return texts


@pytest.fixture(scope="module")
def corpus():
    """Training text (PTB train head, first IMDb test reviews: negative) and held-out text (PTB valid, last IMDb test
    reviews: positive)."""
    imdb = load_imdb("test").texts
    ptb_train = [" ".join(s[:-1]) for s in load_ptb("train")[:3000]]
    ptb_valid = [" ".join(s[:-1]) for s in load_ptb("valid")[:800]]
    return {"train": ptb_train + imdb[:300], "held_out": ptb_valid + imdb[-200:]}


@pytest.fixture(scope="module")
def bpe(corpus):
    return ByteLevelBPE.train(corpus["train"][-900:], vocab_size=500)


@pytest.fixture(scope="module")
def wordpieces(corpus):
    return {score: WordPiece.train(corpus["train"][-900:], vocab_size=600, score=score) for score in ("frequency", "likelihood")}


def hf_bpe(bpe: ByteLevelBPE) -> Tokenizer:
    tok = Tokenizer(models.BPE(vocab=bpe.stoi, merges=bpe.merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def hf_wordpiece(wp: WordPiece) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(vocab=wp.stoi, unk_token=wp.unk_token,
                                     max_input_chars_per_word=wp.max_input_chars_per_word))
    # transformers' BasicTokenizer composes (NFC) before lower-casing; BertNormalizer alone does not.
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


# --- byte-level BPE -------------------------------------------------------------------------------------------------
def test_byte_alphabet_is_gpt2s():
    assert len(set(BYTE_TO_CHAR.values())) == 256
    assert BYTE_TO_CHAR[ord(" ")] == "Ġ" and BYTE_TO_CHAR[ord("\n")] == "Ċ" and BYTE_TO_CHAR[ord("A")] == "A"
    assert set(BYTE_TO_CHAR.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert word_to_byte_symbols("é") == ["Ã", "©"]


def test_pretokens_cover_the_text_and_match_gpt2s_pre_tokenizer(corpus):
    hf = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    for text in random_texts(300, seed=1, any_code_point=True):
        assert "".join(gpt2_pretokenize(text)) == text
    # Code points unassigned in Python 3.11's Unicode 14 tables (newer letters) can be cut differently by the
    # two regex engines, so the comparison uses assigned characters.
    for text in corpus["held_out"][:200] + random_texts(300, seed=1):
        words = gpt2_pretokenize(text)
        assert ["".join(word_to_byte_symbols(w)) for w in words] == [w for w, _ in hf.pre_tokenize_str(text)]
    assert gpt2_pretokenize("Hello  world's 42!") == ["Hello", " ", " world", "'s", " 42", "!"]


def test_sennrich_example_merges_in_documented_tie_order():
    words = {("l", "o", "w", "</w>"): 5, ("l", "o", "w", "e", "r", "</w>"): 2,
             ("n", "e", "w", "e", "s", "t", "</w>"): 6, ("w", "i", "d", "e", "s", "t", "</w>"): 3}
    alphabet = {s for w in words for s in w}
    merges = learn_merges(words, len(alphabet) + 5, known=alphabet, join=str.__add__)
    # (e, s), (s, t) and (t, </w>) are all seen 9 times: the pair that sorts first wins, then its result.
    assert merges == [("e", "s"), ("es", "t"), ("est", "</w>"), ("l", "o"), ("lo", "w")]
    assert merge_word(list("aaa"), "a", "a", "aa") == ["aa", "a"]


def order(p, pairs, symbols, score):
    """The documented order: highest score, then highest count, then the pair that sorts first."""
    s = pairs[p] if score == "frequency" else likelihood_score(pairs[p], symbols[p[0]], symbols[p[1]])
    return -s, -pairs[p], p


def naive_merges(word_counts, n_tokens, known, join, score, min_frequency=2):
    """Recount every pair and symbol from scratch before each merge, and take the best by the documented order."""
    words, freqs = [list(w) for w in word_counts], list(word_counts.values())
    tokens, merges = set(known), []
    while len(tokens) < n_tokens:
        pairs, symbols = Counter(), Counter()
        for w, f in zip(words, freqs, strict=True):
            for s in w:
                symbols[s] += f
            for p in zip(w, w[1:], strict=False):
                pairs[p] += f
        candidates = [(order(p, pairs, symbols, score), p) for p, c in pairs.items() if c >= min_frequency]
        if not candidates:
            break
        best = min(candidates)[1]
        merged = join(*best)
        words = [merge_word(w, *best, merged) for w in words]
        merges.append(best)
        tokens.add(merged)
    return merges


@pytest.mark.parametrize("score", ["frequency", "likelihood"])
def test_incremental_trainer_equals_recounting_every_step(corpus, score):
    basic = BasicTokenizer()
    counts = Counter(w for text in corpus["train"][:250] for w in basic(text))
    words = {(w[0], *("##" + c for c in w[1:])): n for w, n in counts.items()}
    known = {s for w in words for s in w}

    def join(a, b):
        return a + b[2:]

    fast = learn_merges(words, len(known) + 60, known=known, join=join, score=score)
    assert fast == naive_merges(words, len(known) + 60, known, join, score)
    assert len(fast) >= 60


def test_bpe_byte_counts_trainer_equals_recounting(corpus):
    counts = Counter(w for text in corpus["train"][-15:] for w in gpt2_pretokenize(text))
    words = {tuple(word_to_byte_symbols(w)): n for w, n in counts.items()}
    known = set(BYTE_TO_CHAR.values())
    assert learn_merges(words, 256 + 60, known=known, join=str.__add__) == \
        naive_merges(words, 256 + 60, known, str.__add__, "frequency")


def test_bpe_vocabulary_layout(bpe):
    assert len(bpe) == 500
    assert bpe.itos[0] == SPECIAL_TOKENS["bpe"]["eos"] == "<|endoftext|>"
    assert bpe.itos[1:257] == [BYTE_TO_CHAR[b] for b in range(256)]
    assert all(a + b in bpe.stoi for a, b in bpe.merges)


def test_bpe_equals_hf_tokenizers_bpe_on_held_out_text(bpe, corpus):
    hf = hf_bpe(bpe)
    texts = corpus["held_out"] + random_texts(500, seed=2, any_code_point=True)
    for text in texts:
        ours, theirs = bpe.encode(text), hf.encode(text)
        assert ours == theirs.ids, text
        assert bpe.tokenize(text) == theirs.tokens
    assert sum(len(bpe.encode(t)) for t in corpus["held_out"]) < 0.5 * sum(len(t.encode()) for t in corpus["held_out"])


def test_bpe_round_trip_on_random_unicode(bpe):
    for text in random_texts(2000, seed=3, any_code_point=True) + ["", " ", "\n\n\t", "👩‍👩‍👧 e\u0301"]:
        assert bpe.decode(bpe.encode(text)) == text


def test_bpe_edge_cases(bpe):
    assert bpe.encode("") == [] and bpe.decode([]) == ""
    eos = bpe.token_to_id("<|endoftext|>")
    assert eos not in bpe.encode("<|endoftext|>")  # text is text: the special token is spelled in bytes
    assert bpe.decode(bpe.encode("a") + [eos] + bpe.encode("b")) == "a<|endoftext|>b"
    emoji = bpe.encode("😀")  # four bytes, probably four tokens: a slice decodes to U+FFFD, never raises
    assert bpe.decode(emoji[:1]) == "\ufffd"


def test_bpe_bad_input_says_what_to_do(bpe):
    with pytest.raises(ValueError, match="vocab_size >= 257"):
        ByteLevelBPE.train(["some text"], vocab_size=100)
    with pytest.raises(TypeError, match="wrap it in a list"):
        ByteLevelBPE.train("some text", vocab_size=300)
    with pytest.raises(TypeError, match="expected a str"):
        bpe.encode(b"bytes")
    with pytest.raises(ValueError, match="lone surrogate"):
        bpe.encode("a\ud800b")
    with pytest.raises(IndexError, match="outside"):
        bpe.decode([len(bpe)])
    with pytest.raises(ValueError, match="pair of non-empty strings"):
        ByteLevelBPE([("a",)])
    with pytest.raises(ValueError, match="learned order"):
        ByteLevelBPE([("ab", "c"), ("a", "b")])


def test_module_examples_run():
    assert doctest.testmod(tokenizers_module).failed == 0


def test_bpe_save_load_and_determinism(bpe, corpus, tmp_path):
    bpe.save(tmp_path / "bpe.json")
    loaded = ByteLevelBPE.load(tmp_path / "bpe.json")
    assert loaded.merges == bpe.merges and loaded.itos == bpe.itos
    assert ByteLevelBPE.train(corpus["train"][:200], vocab_size=400).merges == \
        ByteLevelBPE.train(corpus["train"][:200], vocab_size=400).merges
    WordPiece(["[UNK]", "a"]).save(tmp_path / "wp.json")
    with pytest.raises(ValueError, match="'wordpiece' tokenizer, not a 'byte_level_bpe'"):
        ByteLevelBPE.load(tmp_path / "wp.json")


# --- BERT's basic tokenizer -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lowercase, strip, cjk", [(True, None, True), (False, None, True), (True, False, True),
                                                   (False, True, True), (True, None, False)])
def test_basic_tokenizer_equals_transformers(corpus, lowercase, strip, cjk):
    ours = BasicTokenizer(lowercase=lowercase, strip_accents=strip, split_cjk=cjk)
    theirs = HFBasicTokenizer(do_lower_case=lowercase, strip_accents=strip, tokenize_chinese_chars=cjk)
    texts = corpus["held_out"][-100:] + corpus["held_out"][:200] + random_texts(300, seed=4, any_code_point=True)
    for text in texts:
        assert ours(text) == theirs.tokenize(text), ascii(text)


def test_basic_tokenizer_documented_cases():
    basic = BasicTokenizer()
    assert basic("Héllo, WORLD!") == ["hello", ",", "world", "!"]
    assert basic("東京 is big") == ["東", "京", "is", "big"]
    assert basic("") == [] and basic(" \t\n") == []
    assert basic("a\x00b\ufffdc\u200bd") == ["abcd"]  # NUL, U+FFFD and format characters are dropped
    assert basic("a\u0378b") == ["ab"]  # unassigned code points too (Hugging Face tokenizers keeps them)


# --- WordPiece ------------------------------------------------------------------------------------------------------
def test_greedy_longest_match_first():
    wp = WordPiece(["[UNK]", "un", "##aff", "##able", "aff", "##a", "u", "##n", "!"])
    assert wp.tokenize("Unaffable!") == ["un", "##aff", "##able", "!"]
    assert wp.decode(wp.encode("Unaffable!")) == "unaffable !"
    assert wp.tokenize("unaffablez") == ["[UNK]"]  # a position nothing matches: the whole word is unknown
    assert wp.tokenize("") == []


def test_over_long_words_are_unknown_as_in_bert():
    wp = WordPiece(["[UNK]", "a", "##a"], max_input_chars_per_word=5)
    assert wp.tokenize("aaaaa aaaaaa") == ["a", "##a", "##a", "##a", "##a", "[UNK]"]
    assert hf_wordpiece(wp).encode("aaaaa aaaaaa").tokens == wp.tokenize("aaaaa aaaaaa")


@pytest.mark.parametrize("score", ["frequency", "likelihood"])
def test_wordpiece_equals_hf_tokenizers_wordpiece(wordpieces, corpus, score):
    wp = wordpieces[score]
    hf = hf_wordpiece(wp)
    for text in corpus["held_out"]:
        theirs = hf.encode(text)
        assert wp.tokenize(text) == theirs.tokens, text
        assert wp.encode(text) == theirs.ids
    # with every pool character (both forms) in the vocabulary, random strings exercise the splitting rules
    extra = [t for c in set(POOL) if c.strip() for t in (c, "##" + c) if t not in wp.stoi]
    wide = WordPiece(wp.vocab + extra)
    hf = hf_wordpiece(wide)
    for text in random_texts(500, seed=5):
        text = text.replace("Σ", "S")  # tokenizers lower-cases Σ to σ everywhere; Python (and transformers) to ς at a word's end
        assert wide.tokenize(text) == hf.encode(text).tokens, ascii(text)


def test_trained_vocabulary_layout(wordpieces):
    for wp in wordpieces.values():
        assert len(wp) == 600
        assert wp.vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] == list(SPECIAL_TOKENS["wordpiece"].values())
        assert {"t", "##t", "e", "##e"} <= set(wp.vocab)
        assert not any(t.startswith("####") for t in wp.vocab)


def test_scores_give_different_vocabularies(wordpieces):
    freq, like = wordpieces["frequency"].vocab, wordpieces["likelihood"].vocab
    only_freq, only_like = [t for t in freq if t not in like], [t for t in like if t not in freq]
    assert len(only_freq) == len(only_like) > 100
    assert "the" in only_freq  # frequent pieces first
    assert sum(any(ch.isdigit() for ch in t) for t in only_like) > sum(any(ch.isdigit() for ch in t) for t in only_freq)
    assert likelihood_score(6, 2, 3) == 1.0 and likelihood_score(6, 6, 6) == pytest.approx(1 / 6)


def test_wordpiece_bad_input_says_what_to_do(wordpieces, tmp_path):
    with pytest.raises(ValueError, match=r"no unknown token '\[UNK\]'.*add"):
        WordPiece(["a", "##b"])
    with pytest.raises(ValueError, match="repeats"):
        WordPiece(["[UNK]", "a", "a"])
    with pytest.raises(ValueError, match="vocab_size >= "):
        WordPiece.train(["abc def"], vocab_size=6)
    with pytest.raises(ValueError, match="score must be one of"):
        WordPiece.train(["abc def"], vocab_size=60, score="bigram")
    with pytest.raises(ValueError, match="lack the unknown token"):
        WordPiece.train(["abc def"], vocab_size=60, special_tokens=["[PAD]"])
    with pytest.raises(TypeError, match="expected a str"):
        wordpieces["frequency"].tokenize(None)
    with pytest.raises(ValueError, match="max_input_chars_per_word"):
        WordPiece(["[UNK]"], max_input_chars_per_word=0)
    wp = wordpieces["likelihood"]
    wp.save(tmp_path / "wp.json")
    assert WordPiece.load(tmp_path / "wp.json").vocab == wp.vocab


def test_encoding_is_unaffected_by_the_word_cache(bpe, wordpieces):
    text = "The cat sat on the mat; the cat sat again. " * 3
    wp = wordpieces["frequency"]
    assert bpe.encode(text) == bpe.encode(text) == [i for w in gpt2_pretokenize(text) for i in bpe.encode(w)]
    words = BasicTokenizer()(text)
    assert wp.tokenize(text) == [p for w in words for p in wp.word_pieces(w)]


def test_a_piece_of_a_character_shows_its_bytes_and_whole_tokens_their_text(bpe):
    # "½" is two UTF-8 bytes that a small BPE keeps as two tokens: alone, each decodes to U+FFFD; piece() shows
    # the byte instead, and a token whose bytes are whole characters is exactly its decoded text.
    text = "3½ hours, Zoë 🎬 and plain words"
    ids = bpe.encode(text)
    pieces = [bpe.piece(i) for i in ids]
    assert "\ufffd" not in "".join(pieces)
    assert "<C2>" in pieces and "<BD>" in pieces
    for i, piece in zip(ids, pieces):
        if "\ufffd" not in bpe.decode([i]):
            assert piece == bpe.decode([i])
    # reading the <XX> bytes back gives the text: nothing is lost or invented
    raw = b"".join(bytes.fromhex(p[1:3]) if len(p) == 4 and p[0] == "<" and p[-1] == ">" else p.encode() for p in pieces)
    assert raw.decode("utf-8") == text
    special = ByteLevelBPE.train(["a b c"] * 5, vocab_size=260, special_tokens=["<|endoftext|>"])
    assert special.piece(special.token_to_id("<|endoftext|>")) == "<|endoftext|>"
