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
