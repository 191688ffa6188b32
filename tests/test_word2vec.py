"""word2vec SGNS and word-vector evaluation, checked against the paper's formulas and against gensim."""

import math
import random

import numpy as np
import pytest
import torch
from gensim.models import Word2Vec as GensimWord2Vec

from lmlib.data.loaders import Analogy, WordPair
from lmlib.eval.word_eval import (
    analogy,
    evaluate_analogies,
    evaluate_word_pairs,
    nearest_neighbours,
    to_keyed_vectors,
)
from lmlib.models.word2vec import (
    SkipGramNS,
    Word2VecConfig,
    keep_probability,
    noise_distribution,
    sgns_loss,
    skipgram_pairs,
)
from lmlib.recipes.word2vec import train_word2vec

# ---------------------------------------------------------------------------------------------------
# the pieces of SGNS


def test_keep_probability_formulas():
    f, t = torch.tensor([0.05, 1e-3, 1e-5]), 1e-3
    paper = keep_probability(f, t, "paper")
    c_code = keep_probability(f, t, "word2vec")
    for i, fi in enumerate(f.tolist()):
        assert paper[i].item() == pytest.approx(min(1.0, math.sqrt(t / fi)))
        assert c_code[i].item() == pytest.approx(min(1.0, (math.sqrt(fi / t) + 1) * t / fi))
    assert keep_probability(f, 0.0).tolist() == [1.0, 1.0, 1.0]


def _gensim_vocab(sentences, sample):
    model = GensimWord2Vec(vector_size=4, min_count=1, sample=sample, sg=1, negative=5, workers=1, seed=0)
    model.build_vocab(sentences)
    return model


def test_keep_probability_and_noise_match_gensim():
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    sentences = [[rng.choice(words[: 1 + rng.randrange(30)]) for _ in range(12)] for _ in range(300)]
    model = _gensim_vocab(sentences, sample=1e-2)
    counts = torch.tensor([model.wv.get_vecattr(w, "count") for w in model.wv.index_to_key], dtype=torch.float64)
    keep = keep_probability(counts / counts.sum(), 1e-2, "word2vec")
    gensim_keep = torch.tensor([model.wv.get_vecattr(w, "sample_int") for w in model.wv.index_to_key]) / 2**32
    torch.testing.assert_close(keep, gensim_keep.double(), atol=1e-6, rtol=0)  # gensim rounds in float32
    # gensim's cum_table is the running sum of count^0.75, scaled to 2**31 - 1
    gensim_noise = np.diff(np.concatenate([[0], model.cum_table])) / (2**31 - 1)
    torch.testing.assert_close(noise_distribution(counts), torch.tensor(gensim_noise), atol=1e-8, rtol=0)


def test_sgns_loss_by_hand():
    torch.manual_seed(0)
    v_c, u_o, u_neg = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 2, 4)

    def sigma(z):
        return 1 / (1 + math.exp(-z))

    for b in range(3):
        expected = -(math.log(sigma(u_o[b] @ v_c[b])) + sum(math.log(sigma(-(u_neg[b, k] @ v_c[b]))) for k in range(2)))
        assert sgns_loss(v_c, u_o, u_neg)[b].item() == pytest.approx(expected, rel=1e-5)


def test_model_forward_equals_sgns_loss():
    torch.manual_seed(0)
    model = SkipGramNS(20, 6)
    torch.nn.init.normal_(model.u.weight)  # u starts at zero, which would make the test trivial
    c, o, neg = torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6]), torch.tensor([[7, 8], [9, 1], [0, 19]])
    torch.testing.assert_close(model(c, o, neg), sgns_loss(model.v(c), model.u(o), model.u(neg)))


def test_one_sgd_step_is_the_word2vec_update():
    """With one pair, d loss / d v_c = (σ(u_o·v_c) − 1) u_o + Σ_k σ(u_k·v_c) u_k, as in the C code."""
    torch.manual_seed(0)
    model = SkipGramNS(10, 5)
    torch.nn.init.normal_(model.u.weight)
    c, o, neg = torch.tensor([1]), torch.tensor([2]), torch.tensor([[3, 4]])
    v, u = model.v.weight.detach().clone(), model.u.weight.detach().clone()
    model(c, o, neg).sum().backward()
    g = (torch.sigmoid(u[2] @ v[1]) - 1) * u[2] + torch.sigmoid(u[3] @ v[1]) * u[3] + torch.sigmoid(u[4] @ v[1]) * u[4]
    torch.testing.assert_close(model.v.weight.grad.to_dense()[1], g)


def test_skipgram_pairs_match_a_plain_loop():
    ids = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12, 13])
    sentence = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 1])
    window = 3
    centres, contexts = skipgram_pairs(ids, sentence, window, torch.Generator().manual_seed(3))
    reach = torch.randint(1, window + 1, ids.shape, generator=torch.Generator().manual_seed(3))
    expected = []
    for i in range(len(ids)):
        for j in range(len(ids)):
            if i != j and abs(i - j) <= reach[i] and sentence[i] == sentence[j]:
                expected.append((ids[i].item(), ids[j].item()))
    assert sorted(zip(centres.tolist(), contexts.tolist())) == sorted(expected)


def test_training_groups_words_that_share_contexts():
    rng = random.Random(0)
    animals, fruit = ["cat", "dog", "cow", "pig"], ["apple", "pear", "plum", "fig"]
    sentences = []
    for _ in range(800):
        sentences.append(["the"] + rng.sample(animals, 2) + ["ran", "barked", "slept"][rng.randrange(3):][:1])
        sentences.append(["a"] + rng.sample(fruit, 2) + ["tasted", "ripe", "sweet"][rng.randrange(3):][:1])
    config = Word2VecConfig(vector_size=16, window=2, negative=3, sample=0, min_count=1, epochs=5, batch_size=64, alpha=0.025)
    w2v = train_word2vec(sentences, config)
    assert w2v.epoch_losses[-1] < w2v.epoch_losses[0]
    for word, group in (("cat", animals), ("apple", fruit)):
        top = [w for w, _ in nearest_neighbours(w2v.vectors, w2v.vocab.itos, word, k=3)]
        assert set(top) <= set(group), (word, top)


@pytest.mark.parametrize("kwargs,message", [
    (dict(window=0), "window"), (dict(sample=1.0), "sample.*1.0"), (dict(sample=-0.1), "-0.1"),
    (dict(negative=0), "negative"), (dict(min_alpha=0.1, alpha=0.01), "min_alpha"), (dict(subsampling="other"), "'other'"),
])
def test_bad_config_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Word2VecConfig(**kwargs)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="empty"):
        train_word2vec([])
    with pytest.raises(ValueError, match="min_count"):
        train_word2vec([["a", "b"]], Word2VecConfig(min_count=5))
    with pytest.raises(ValueError, match=r"\[0.0\]"):
        keep_probability(torch.tensor([0.0, 0.5]), 1e-3)
    with pytest.raises(ValueError, match=r"got \[nan\]"):  # NaN fails every comparison; it must not slip through
        keep_probability(torch.tensor([float("nan"), 0.5]), 1e-3)
    with pytest.raises(ValueError, match=r"0\.0"):
        noise_distribution(torch.tensor([3.0, 0.0]))
    with pytest.raises(ValueError, match="shape"):
        sgns_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\(3,\)"):
        skipgram_pairs(torch.arange(4), torch.zeros(3, dtype=torch.long), 2)


# ---------------------------------------------------------------------------------------------------
# evaluation, against gensim's KeyedVectors on the same vectors


def _structured_vectors(seed=0):
    """Random vectors where 'capital' and 'female' are noisy constant offsets, so some analogies work."""
    rng = np.random.default_rng(seed)
    countries = ["france", "germany", "italy", "spain", "japan", "china", "egypt", "peru", "chile", "greece"]
    capitals = ["paris", "berlin", "rome", "madrid", "tokyo", "beijing", "cairo", "lima", "santiago", "athens"]
    male = ["king", "man", "boy", "father", "brother", "son", "uncle", "husband"]
    female = ["queen", "woman", "girl", "mother", "sister", "daughter", "aunt", "wife"]
    dim = 12
    capital_offset, female_offset = rng.normal(size=dim) * 2, rng.normal(size=dim) * 2
    vectors = {}
    for a, b in zip(countries, capitals):
        vectors[a] = rng.normal(size=dim)
        vectors[b] = vectors[a] + capital_offset + rng.normal(size=dim) * 1.5
    for a, b in zip(male, female):
        vectors[a] = rng.normal(size=dim)
        vectors[b] = vectors[a] + female_offset + rng.normal(size=dim) * 1.5
    for w in ["the", "of", "cat", "dog", "car", "money", "bank", "river", "tiger", "journey"]:
        vectors[w] = rng.normal(size=dim)
    questions = []
    for section, pairs in (("capital-common-countries", list(zip(countries, capitals))), ("family", list(zip(male, female)))):
        for a, b in pairs:
            for c, d in pairs:
                if a != c:
                    # mixed case, as in questions-words.txt; some words are missing from the vocabulary
                    questions.append(Analogy(section, a.capitalize(), b.capitalize(), c, d))
    questions += [Analogy("family", "king", "queen", "prince", "princess"), Analogy("family", "he", "she", "his", "her")]
    words = list(vectors)
    return words, torch.tensor(np.stack([vectors[w] for w in words]), dtype=torch.float32), questions


def _write_questions(path, questions):
    lines, section = [], None
    for q in questions:
        if q.section != section:
            section = q.section
            lines.append(f": {section}")
        lines.append(f"{q.a} {q.b} {q.c} {q.d}")
    path.write_text("\n".join(lines) + "\n")


def test_analogies_agree_with_gensim(tmp_path):
    words, vectors, questions = _structured_vectors()
    ours = evaluate_analogies(vectors, words, questions)
    _write_questions(tmp_path / "q.txt", questions)
    score, sections = to_keyed_vectors(vectors, words).evaluate_word_analogies(str(tmp_path / "q.txt"))
    total = sections[-1]
    assert total["section"] == "Total accuracy"
    assert ours.correct == len(total["correct"])
    assert ours.answered == len(total["correct"]) + len(total["incorrect"])
    assert ours.accuracy == pytest.approx(score)
    assert 0.2 < ours.accuracy < 0.95  # a test with errors and successes both, so agreement means something
    assert ours.coverage == pytest.approx(ours.answered / len(questions)) and ours.coverage < 1
    for section in sections[:-1]:
        assert ours.sections[section["section"].lower()] == (len(section["correct"]),
                                                             len(section["correct"]) + len(section["incorrect"]))


def test_single_analogy_and_neighbours_agree_with_gensim():
    words, vectors, _ = _structured_vectors()
    kv = to_keyed_vectors(vectors, words)
    ours = analogy(vectors, words, "france", "paris", "japan", k=5)
    theirs = kv.most_similar(positive=["paris", "japan"], negative=["france"], topn=5)
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], rtol=1e-4, atol=1e-5)
    ours = nearest_neighbours(vectors, words, "king", k=6)
    theirs = kv.most_similar("king", topn=6)
    assert [w for w, _ in ours] == [w for w, _ in theirs]


def test_word_pairs_agree_with_gensim(tmp_path):
    words, vectors, _ = _structured_vectors(seed=1)
    rng = random.Random(0)
    pairs = [WordPair(a.upper() if rng.random() < 0.3 else a, b, round(rng.uniform(0, 10), 2))
             for a in words[:14] for b in words[20:30]]
    pairs += [WordPair("king", "emperor", 8.0), WordPair("absent", "queen", 2.0)]
    ours = evaluate_word_pairs(vectors, words, pairs)
    (tmp_path / "pairs.tsv").write_text("".join(f"{p.word1}\t{p.word2}\t{p.score}\n" for p in pairs))
    pearson, spearman, oov_percent = to_keyed_vectors(vectors, words).evaluate_word_pairs(str(tmp_path / "pairs.tsv"))
    assert ours.spearman == pytest.approx(spearman.statistic, abs=1e-9)
    assert 1 - ours.coverage == pytest.approx(oov_percent / 100)
    assert ours.pairs_used == len(pairs) - 2


def test_evaluation_bad_inputs_raise():
    words, vectors, _ = _structured_vectors()
    with pytest.raises(ValueError, match="zebra"):
        nearest_neighbours(vectors, words, "zebra")
    with pytest.raises(ValueError, match="no analogy questions"):
        evaluate_analogies(vectors, words, [])
    with pytest.raises(ValueError, match="at least 3"):
        evaluate_word_pairs(vectors, words, [WordPair("king", "queen", 1.0)])
    with pytest.raises(ValueError, match="matrix"):
        nearest_neighbours(vectors[0], words, "king")


def test_vectors_and_vocabulary_of_different_sizes_raise():
    # a bare IndexError (or, with extra rows, answers that are not words) would hide the mistake
    words, vectors, questions = _structured_vectors()
    pairs = [WordPair("king", "queen", 9.0), WordPair("king", "paris", 1.0), WordPair("france", "paris", 5.0)]
    for bad_vectors, bad_words in [(vectors[:-1], words), (vectors, words[:-1])]:
        sizes = f"vectors has {bad_vectors.size(0)} rows but itos has {len(bad_words)} words"
        for call, *args in ((nearest_neighbours, "king"), (analogy, "france", "paris", "japan"),
                            (evaluate_analogies, questions), (evaluate_word_pairs, pairs), (to_keyed_vectors,)):
            with pytest.raises(ValueError, match=sizes):
                call(bad_vectors, bad_words, *args)


def test_training_draws_noise_from_the_unigram_distribution_to_the_three_quarters_by_default(monkeypatch):
    """Mikolov et al. (2013b), sec. 2.2: the noise distribution is U(w)^{3/4} / Z. train_word2vec with the default
    config must build its loss from exactly that (gensim's default ns_exponent is 0.75 too)."""
    import lmlib.recipes.word2vec as recipe

    built = []
    real = recipe.NegativeSamplingLoss
    monkeypatch.setattr(recipe, "NegativeSamplingLoss", lambda noise, *a, **kw: built.append(noise) or real(noise, *a, **kw))
    sentences = [["a", "b", "a", "c"], ["a", "b", "d", "a"]] * 3
    result = train_word2vec(sentences, Word2VecConfig(vector_size=4, min_count=1, epochs=1, sample=0.0))
    counts = torch.tensor([float(sum(s.count(w) for s in sentences)) for w in result.vocab.itos])
    expected = counts ** 0.75 / (counts ** 0.75).sum()
    assert Word2VecConfig().ns_exponent == GensimWord2Vec().ns_exponent == 0.75
    [noise] = built
    torch.testing.assert_close(noise.to(expected.dtype), expected, atol=1e-6, rtol=0)
