"""lmlib.course.answers and lmlib.course.session: the references exercises are checked against, and the first call of
a notebook."""

import math

import pytest
import torch

from lmlib.course import answers, session


def test_answers_match_their_definitions():
    assert answers.perplexity([0.5, 0.5]) == pytest.approx(2.0)
    assert answers.perplexity([0.02, 0.9, 0.3, 0.1]) == pytest.approx(math.prod([0.02, 0.9, 0.3, 0.1]) ** -0.25)
    counts = torch.tensor([[3.0, 1.0, 0.0], [0.0, 0.0, 2.0], [1.0, 1.0, 1.0]])
    assert answers.add_one_bigram(counts, 0, 1) == pytest.approx((1 + 1) / (4 + 3))
    assert answers.lstm_parameter_count(200, 200) == 4 * (200 * 200 + 200 * 200 + 2 * 200)
    assert answers.dropped_in_both(0.1, one_mask_for_both=True) == pytest.approx(0.1)
    assert answers.dropped_in_both(0.1, one_mask_for_both=False) == pytest.approx(0.01)
    with pytest.raises(ValueError):
        answers.perplexity([0.5, 0.0])


def test_start_seeds_sets_the_threads_and_names_the_preset(monkeypatch):
    threads = torch.get_num_threads()
    monkeypatch.setenv("LMLIB_PRESET", "full")
    try:
        assert session.start(seed=3, threads=1) == "full"
        assert torch.get_num_threads() == 1
        first = torch.rand(2)
        session.start(seed=3)
        assert torch.equal(torch.rand(2), first)
        with pytest.raises(ValueError):
            session.start(threads=0)
    finally:
        torch.set_num_threads(threads)


def test_the_notebook_exercises_match_hand_computed_answers():
    ex = answers.exercise
    tiny = [["a", "b", "a", "<eos>"], ["b", "a", "<eos>"]]
    assert ex("01 add-k bigram").reference(tiny) == pytest.approx((2 + 0.5) / (3 + 0.5 * 4))
    assert ex("01 continuation count of a").reference(tiny) == 2  # a follows <s> and b, b twice
    assert ex("01 unigram perplexity").reference(tiny) == pytest.approx((3 / 7 * 2 / 7 * 2 / 7) ** (-1 / 3))
    assert ex("04 BLEU-2 of 'il est grand'").reference() == pytest.approx(math.exp(1 - 4 / 3) * math.sqrt(1 * 1 / 2))
    assert ex("05 PE(3, 5) for d_model = 8").reference() == pytest.approx(math.cos(3 / 10000 ** 0.5))
    mask = ex("05 causal mask with a window").reference(4, 2)
    assert mask.tolist() == [[False, True, True, True], [False, False, True, True],
                             [True, False, False, True], [True, True, False, False]]
    w, s = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0])  # all on +2
    assert ex("04 circular shift by up to two").reference(w, s).tolist() == [0.0, 0.0, 0.0, 1.0, 0.0]
    assert ex("02 expected kept occurrences").reference(500, 10_000, 1e-3) == pytest.approx(500 * math.sqrt(1e-3 / 0.05))
    assert ex("02 expected kept occurrences").reference(3, 10_000, 1e-3) == pytest.approx(3.0)  # never above 1
    v, u, n = torch.randn(4), torch.randn(4), torch.randn(3, 4)
    closed_form = -(1 - torch.sigmoid(u @ v)) * u + (torch.sigmoid(n @ v)[:, None] * n).sum(0)
    assert torch.allclose(ex("02 gradient of the SGNS loss").reference(v, u, n), closed_form, atol=1e-6)
    Q, K, V = torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 2)
    by_hand = torch.softmax(Q[0] @ K[0, :2].T / 2, -1) @ V[0, :2]
    assert torch.allclose(ex("05 attention that skips padded keys").reference(Q, K, V, torch.tensor([2]))[0], by_hand,
                          atol=1e-6)


def test_every_function_exercise_has_cases_its_reference_answers():
    for name, spec in answers.EXERCISES.items():
        if spec.kind == "function":
            cases = spec.cases()
            assert cases, name
            for case in cases:
                spec.reference(*case)
