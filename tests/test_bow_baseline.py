"""lmlib.eval.bow_baseline against a hand computation on four documents (TF-IDF weights, the fitted model's
probabilities and the optimality condition of its objective), the text a GPT reads, and clear errors for bad input.
The committed bow_baseline.json and the course's rows read from it are tested in test_results.py."""

import math
from collections import Counter

import numpy as np
import pytest

from lmlib.eval.bow_baseline import BowConfig, bow_accuracy, fit_bow, model_view, words_view
from lmlib.models.gpt_finetune import head_and_tail
from lmlib.recipes import gpt as G
from lmlib.text.tokenizers import ByteLevelBPE
from lmlib.text.vocab import Vocab

DOCS = ["good good film", "bad film", "good plot", "bad bad plot"]
LABELS = [1, 0, 1, 0]
TINY = BowConfig(Cs=(1.0,), folds=2)  # one C, so the fitted model is the one the hand computation checks


def hand_tfidf(docs, train=DOCS):
    """Unigrams and bigrams of ``docs``, weight (1 + ln tf) · (ln((1 + n) / (1 + df)) + 1) with the vocabulary, n and
    df of the ``train`` documents, each row scaled to unit length."""
    def grams(d):
        words = d.split()
        return Counter(words + [f"{a} {b}" for a, b in zip(words, words[1:])])

    seen = [grams(d) for d in train]
    vocab = sorted(set().union(*seen))
    n = len(train)
    df = {t: sum(t in g for g in seen) for t in vocab}
    x = np.array([[(1 + math.log(g[t])) * (math.log((1 + n) / (1 + df[t])) + 1) if t in g else 0.0 for t in vocab]
                  for g in map(grams, docs)])
    return vocab, x / np.linalg.norm(x, axis=1, keepdims=True)


def test_tfidf_weights_match_the_hand_computation():
    pipeline = fit_bow(DOCS, LABELS, TINY)
    vocab, expected = hand_tfidf(DOCS)
    assert list(pipeline[0].get_feature_names_out()) == vocab
    # "good good film": tf(good) = 2, so its weight is (1 + ln 2) · idf, not 2 · idf
    np.testing.assert_allclose(pipeline[0].transform(DOCS).toarray(), expected, atol=1e-12)


def test_predictions_are_the_sigmoid_of_the_linear_score_at_the_objectives_minimum():
    pipeline = fit_bow(DOCS, LABELS, TINY)
    model = pipeline[-1].best_estimator_
    assert pipeline[-1].best_params_["C"] == 1.0
    _, x = hand_tfidf(DOCS)
    w, b = model.coef_[0], model.intercept_[0]
    new = ["good film", "bad plot bad"]
    _, x_new = hand_tfidf(new)  # weighted with the training documents' vocabulary and idf
    np.testing.assert_allclose(pipeline[0].transform(new).toarray(), x_new, atol=1e-12)
    p = 1 / (1 + np.exp(-(x_new @ w + b)))
    np.testing.assert_allclose(pipeline.predict_proba(new)[:, 1], p, atol=1e-12)
    assert list(pipeline.predict(new)) == [1, 0] == list((p > 0.5).astype(int))
    # ½‖w‖² + C Σ log-loss is smallest where its gradient vanishes: w = C Σ (y_i − p_i) x_i, and Σ (y_i − p_i) = 0
    # for the unpenalised bias
    y = np.array(LABELS)
    p_train = 1 / (1 + np.exp(-(x @ w + b)))
    np.testing.assert_allclose(w, 1.0 * (y - p_train) @ x, atol=1e-3)
    assert abs((y - p_train).sum()) < 1e-3
    assert bow_accuracy(pipeline, DOCS, LABELS) == 1.0


def test_the_chosen_c_is_the_best_cross_validated_one_and_the_seed_shuffles_the_folds():
    docs = DOCS * 3 + ["good film good plot", "bad plot bad film"]
    labels = LABELS * 3 + [1, 0]
    pipeline = fit_bow(docs, labels, BowConfig(Cs=(0.01, 1.0, 100.0), folds=3), seed=1)
    search = pipeline[-1]
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["C"] == (0.01, 1.0, 100.0)[int(np.argmax(scores))]
    assert search.cv.shuffle and search.cv.random_state == 1 and search.cv.n_splits == 3


def test_model_view_is_the_text_between_start_and_extract():
    tokenizer = ByteLevelBPE.load(G.CHECKPOINT_DIR / "tokenizer.json")
    short = "A fine film."
    assert model_view(tokenizer, short, 126) == short
    long = " ".join(f"word{i} is fine, then bad." for i in range(60))
    ids = tokenizer.encode(long)
    assert len(ids) > 126
    fed = G.review_inputs(tokenizer, [long])[0][1:-1]  # what the fine-tuned GPT reads, without [start] and [extract]
    assert fed == head_and_tail(ids, 126)
    assert model_view(tokenizer, long, 126) == tokenizer.decode(fed[:63]) + "\n" + tokenizer.decode(fed[63:])
    assert model_view(tokenizer, long, 126).startswith("word0 is fine") and long.endswith(
        model_view(tokenizer, long, 126).split("\n")[1])


def test_words_view_keeps_the_head_or_the_head_and_tail_by_hand():
    words = "w0 w1 w2 w3 w4 w5 w6".split()
    assert words_view(words, 3, "head") == "w0 w1 w2"
    assert words_view(words, 5, "head_and_tail") == "w0 w1 w4 w5 w6"  # ⌊5/2⌋ = 2 first, ⌈5/2⌉ = 3 last
    assert words_view(words, 4, "head_and_tail") == "w0 w1 w5 w6"
    assert words_view(words, 7, "head_and_tail") == words_view(words, 9, "head") == " ".join(words)
    vocab = Vocab.from_itos(["<unk>", "a", "film", "bad"])
    assert words_view(["a", "zyx", "film", "bad"], 3, "head", vocab) == "a <unk> film"
    assert words_view(["a", "zyx", "film", "bad", "a"], 4, "head_and_tail", vocab) == "a <unk> bad a"


def test_ulmfit_view_is_what_the_ulmfit_classifier_reads():
    from lmlib.recipes import ulmfit as U
    _, vocab = U.load_pretrained(U.IMDB_DIR)
    review = " ".join(f"Scene {i} is fine, but qwxzy's acting isn't." for i in range(30))
    tokens = U.review_tokens(review)
    fed = U.head_and_tail(U.encode_texts(vocab, [tokens])[0], 128)  # bench_ulmfit_imdb.encode
    assert len(tokens) > 128 and len(fed) == 128
    view = words_view(tokens, 128, "head_and_tail", vocab)
    assert view.split() == [vocab.itos[i] for i in fed]
    assert view.startswith("scene N is fine , but <unk> 's acting is n't .") and view.endswith("acting is n't .")


def test_elmo_view_is_the_first_48_words_the_bag_of_embeddings_reads():
    from lmlib.recipes import elmo as R
    review = "A long film. " * 10 + "It was bad, really bad. " * 10
    words = [w.lower() for s in R.review_sentences(review, 48) for w in s]
    assert len(words) == 48 and words[:4] == ["a", "long", "film", "."]
    assert words_view(words, 48, "head").split() == words
    # by hand: 10 × "a long film ." is 40 words, "it was bad , really bad ." 7 more, and the next sentence's "it"
    assert words_view(words, 48, "head").endswith("a long film . it was bad , really bad . it")


@pytest.mark.parametrize("texts, labels, config, named", [
    (DOCS, LABELS[:3], TINY, "3 labels"), (DOCS, [1, 0, 2, 0], TINY, "[2]"), ("good film", [1], TINY, "string"),
    ([], [], TINY, "texts"), ([[1, 2], [3]], [1, 0], TINY, "texts[0]"),
    (DOCS, LABELS, BowConfig(Cs=(1.0,), folds=3), "3-fold"),
])
def test_bad_input_raises_one_line_errors(texts, labels, config, named):
    with pytest.raises(ValueError) as error:
        fit_bow(texts, labels, config)
    assert named in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("fields", [dict(ngram_range=(2, 1)), dict(Cs=()), dict(Cs=(1.0, 0.0)), dict(folds=1),
                                    dict(max_iter=0)])
def test_bad_settings_are_refused(fields):
    with pytest.raises(ValueError) as error:
        BowConfig(**fields)
    assert next(iter(fields)) in str(error.value)  # the setting, named


def test_model_view_and_accuracy_refuse_bad_input():
    tokenizer = ByteLevelBPE.load(G.CHECKPOINT_DIR / "tokenizer.json")
    for call, named in ((lambda: model_view(tokenizer, [1, 2], 126), "list"),
                        (lambda: model_view(tokenizer, "a film", 1), "1"),
                        (lambda: bow_accuracy(fit_bow(DOCS, LABELS, TINY), DOCS[:2], [1]), "1 labels"),
                        (lambda: words_view("a film", 5), "string"),
                        (lambda: words_view(["a"], 5, "tail"), "'tail'"),
                        (lambda: words_view(["a"], 0), "0")):
        with pytest.raises(ValueError) as error:
            call()
        assert named in str(error.value)
