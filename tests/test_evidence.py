import math

import pytest

from lmlib.course.evidence import best_method, perplexity, z_of_difference


def test_perplexity_is_exp_of_the_mean_loss():
    assert perplexity(400_000, 82_430) == pytest.approx(math.exp(400_000 / 82_430))
    assert perplexity(0.0, 10) == 1.0
    with pytest.raises(ValueError):
        perplexity(1.0, 0)


def test_z_adds_errors_in_quadrature():
    assert z_of_difference(0.8, 0.03, 0.7, 0.04) == pytest.approx(0.1 / 0.05)
    assert z_of_difference(0.7, 0.03, 0.8, 0.04) == pytest.approx(-2.0)
    with pytest.raises(ValueError):
        z_of_difference(0.5, 0.0, 0.4, 0.0)


def test_best_method_reads_one_dataset_and_size():
    rows = [dict(dataset="IMDb", n_labels=1000, method="a", mean=0.7), dict(dataset="IMDb", n_labels=1000, method="b",
            mean=0.8), dict(dataset="IMDb", n_labels=100, method="c", mean=0.9), dict(dataset="SST-2", n_labels=1000,
            method="d", mean=0.95)]
    assert best_method(rows, "IMDb", 1000) == "b"
    with pytest.raises(ValueError):
        best_method(rows, "IMDb", 5)
