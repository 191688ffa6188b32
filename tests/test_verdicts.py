"""lmlib.course.verdicts: differences of means read against their standard errors, runs at chance named, seeds shown."""

import math

import pytest

from lmlib.course import verdicts as V


def rows(*specs):
    return [dict(method=m, n_labels=n, mean=mean, se=se) for m, n, mean, se in specs]


def test_reading_needs_more_than_two_standard_errors():
    assert V.reading(0.021, 0.01) == "beyond noise"
    assert V.reading(-0.021, 0.01) == "beyond noise"
    assert V.reading(0.02, 0.01) == "within noise"
    assert V.reading(0.5, None) == "one seed: no verdict"


@pytest.mark.parametrize("d, se, beyond", [
    (0.021, 0.01, True), (-0.021, 0.01, True), (0.02, 0.01, False), (0.0, 0.0, False), (0.001, 0.0, True),
    (0.5, None, False)])
def test_beyond_noise_is_more_than_two_standard_errors_from_zero(d, se, beyond):
    assert V.beyond_noise(d, se) is beyond


def test_beyond_noise_refuses_a_negative_standard_error():
    with pytest.raises(ValueError, match="standard error"):
        V.beyond_noise(0.1, -0.01)


def test_every_verdict_of_the_course_reads_noise_through_beyond_noise():
    """No module of lmlib.course writes its own "2 * se" test: each calls verdicts.beyond_noise."""
    import re
    from pathlib import Path

    import lmlib.course

    own = re.compile(r"[<>]=?\s*2\s*\*\s*\w*se\b|\b2\s*\*\s*\w*se\w*\s*[<>]")
    found = [f"{path.name}:{i}" for path in Path(lmlib.course.__file__).parent.glob("*.py") if path.name != "verdicts.py"
             for i, line in enumerate(path.read_text().splitlines(), 1) if own.search(line)]
    assert not found, found


def test_difference_has_the_standard_error_of_a_difference():
    r = rows(("BERT pretrained", 100, 0.73, 0.003), ("bag of words (TF-IDF)", 100, 0.66, 0.004))
    d, se = V.difference(r, "BERT pretrained", "bag of words", 100)
    assert d == pytest.approx(0.07)
    assert se == pytest.approx(0.005)
    assert V.difference(rows(("a", 1, 0.5, None), ("b", 1, 0.4, 0.01)), "a", "b", 1)[1] is None
    with pytest.raises(ValueError, match="'c'"):
        V.difference(r, "BERT pretrained", "c", 100)


def runs(accuracies, condition="scratch", task="imdb", n=100):
    return [dict(condition=condition, task=task, n_labels=n, seed=s, accuracy=a, lr=1e-3, steps=80)
            for s, a in enumerate(accuracies)]


def test_a_size_failed_only_when_every_seed_is_at_chance():
    at_chance, failed = V.failed_runs(runs([0.5, 0.49]) + runs([0.5, 0.7], n=1000))
    assert failed == {("imdb", 100)}
    assert len(at_chance) == 3


def test_the_table_names_a_failed_random_init_instead_of_reading_it():
    r = {"imdb": rows(("pretrained", 100, 0.73, 0.003), ("scratch", 100, 0.5, 0.001),
                      ("pretrained", 1000, 0.79, 0.003), ("scratch", 1000, 0.74, 0.01))}
    html = V.differences_table(r, [("pretrained − scratch", "pretrained", "scratch")], {("imdb", 100)}, "scratch").data
    assert html.count("ended at chance") == 1
    assert "+0.050 ± 0.010" in html and "+4.8" in html and "beyond noise" in html


def test_chance_notes_say_why_and_what_the_recipe_rate_reached():
    result = {"rows": runs([0.7], n=100) + runs([0.498], n=25000)
              + runs([0.834], condition="scratch_at_recipe_rate", n=25000),
              "scratch_rates": {"imdb:100": 1e-3}}
    notes = V.chance_notes(result, 5e-4)
    assert "5e-04" in notes[0] and "1e-03 for IMDb with 100 labels" in notes[0]
    assert "seed 0 (0.498)" in notes[1]
    assert "the same run reaches 0.834" in notes[2]
    assert len(V.chance_notes({"rows": runs([0.7]), "scratch_rates": {}}, 5e-4)) == 2


def test_per_seed_table_shows_each_seed_and_the_spread():
    html = V.per_seed_table([("BERT", runs([0.724, 0.725, 0.71], condition="bert"))]).data
    assert "0.724 / 0.725 / 0.710" in html
    assert f"{0.725 - 0.71:.3f}" in html
    assert math.isclose(0.015, 0.725 - 0.71, abs_tol=1e-9)
