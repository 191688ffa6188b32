import math

import pytest

from lmlib.course import results
from lmlib.course.ulmfit_results import against_scratch, curve_reading, variant_name


def _summary(rows):
    return [dict(variant=v, n_labels=n, max_len=128, seeds=s, mean=m, se=se) for v, n, s, m, se in rows]


def test_every_variant_of_the_committed_results_has_a_name():
    for name in ("ulmfit_ablation", "ulmfit_imdb"):
        data = results.load(name)
        for row in data["rows"]:
            assert variant_name(row["variant"]) != row["variant"]
    assert variant_name("no_discriminative_10_epochs") == "without discriminative rates, 10 epochs"
    with pytest.raises(KeyError):
        variant_name("something_new")


def test_verdicts_follow_from_the_difference_and_its_error():
    summary = _summary([("ulmfit", 100, 3, 0.60, 0.01), ("scratch", 100, 3, 0.55, 0.01),
                        ("ulmfit", 1000, 3, 0.70, 0.02), ("scratch", 1000, 3, 0.71, 0.02),
                        ("ulmfit", 5000, 3, 0.70, 0.003), ("scratch", 5000, 3, 0.80, 0.004),
                        ("ulmfit", 25000, 1, 0.70, None), ("scratch", 25000, 1, 0.72, None)])
    rows = against_scratch(summary, 2500, 128)
    assert [r["verdict"] for r in rows] == ["ahead", "within noise", "behind", "within noise"]
    assert rows[0]["se"] == pytest.approx(math.hypot(0.01, 0.01))
    assert rows[3]["se"] == pytest.approx(math.hypot(math.sqrt(0.7 * 0.3 / 2500), math.sqrt(0.72 * 0.28 / 2500)))
    text = curve_reading(summary, 2500, 128)
    assert "ahead at 100 labels" in text and "behind at 5,000 labels" in text and "100×" in text
    with pytest.raises(ValueError):
        against_scratch(summary, 2500, 64)


def test_reading_of_the_committed_curve():
    data = results.load("ulmfit_imdb")
    rows = against_scratch(data["summary"], data["settings"]["test_reviews"], data["settings"]["max_len"])
    assert all(r["difference"] < 0 for r in rows if r["n_labels"] >= 1000)  # what notebook 07 says in words
