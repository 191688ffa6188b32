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
    """What notebook 07 says in words: on the shipped stage (b) ULMFiT is ahead of the random init with 100 to 1,000
    labels (by 5 points at 500 and 1,000) and within noise beyond; on the one it replaced, never ahead and behind
    from 5,000 labels up."""
    for name, verdicts in (("ulmfit_imdb", ["ahead"] * 3 + ["within noise"] * 2),
                           ("ulmfit_imdb_short_pretraining", ["within noise"] * 3 + ["behind"] * 2)):
        data = results.load(name)
        rows = against_scratch(data["summary"], data["settings"]["test_reviews"], data["settings"]["max_len"])
        assert [r["n_labels"] for r in rows] == [100, 500, 1000, 5000, 25000]
        assert [r["verdict"] for r in rows] == verdicts, name
    shipped = {r["n_labels"]: r["difference"] for r in against_scratch(
        results.load("ulmfit_imdb")["summary"], 2500, 128)}
    assert shipped[500] >= 0.05 and shipped[1000] >= 0.05 > shipped[100]


def test_the_dev_chosen_stage_c_result_reads_as_variants_and_says_each_choice(monkeypatch):
    from lmlib.course import ulmfit_results

    checked = []
    fake = {"checkpoint": {"sha256": {"ulmfit_imdb.safetensors": "ab" * 32}},
            "settings": {"base": {"max_len": 128}, "test_reviews": 1000,
                         "sizes": {str(n): {"ulmfit": {"eta": 0.03, "epochs": e, "m": 1},
                                            "ulmfit_flat": {"eta": 0.01, "epochs": 10, "m": 1},
                                            "scratch": {"eta": 0.003, "epochs": [5, 15], "m": 1}}
                                   for n, e in ((1000, 15), (100, 5))}},
            "scratch_epochs": {"1000": 15, "100": 5},
            "summary": [{"condition": c, "n_labels": 1000, "seeds": 3, "mean": m, "se": 0.01}
                        for c, m in (("ulmfit", 0.70), ("ulmfit_flat", 0.74), ("scratch", 0.64))],
            "rows": [{"split": "test", "condition": c, "n_labels": 1000, "seed": seed, "accuracy": a}
                     for c, accs in (("ulmfit", (0.69, 0.71, 0.40)), ("scratch", (0.64, 0.64, 0.40)))
                     for seed, a in enumerate(accs)]}
    five = {"checkpoint": fake["checkpoint"],  # seeds 0 and 1 only: seed 2 of the new run is left out of the line
            "rows": [{"condition": c, "n_labels": 1000, "seed": seed, "accuracy": a}
                     for c, accs in (("ulmfit", (0.62, 0.64)), ("scratch", (0.66, 0.64))) for seed, a in enumerate(accs)]}
    served = {"ulmfit_stage_c_test": fake, "gpu_transfer_ulmfit": five}
    monkeypatch.setattr(results, "load", lambda name: served[name])
    monkeypatch.setattr(results, "measured_checkpoint", lambda sha, name: checked.append(sha))
    got = ulmfit_results.stage_c_on_test()
    assert "(0, 1): ULMFiT 0.630 → 0.700" in got["against_today"] and "from scratch 0.650 → 0.640" in got["against_today"]
    assert checked == [fake["checkpoint"]["sha256"]]  # refused unless a known checkpoint measured it
    (flat,) = against_scratch(got["summary"], got["n_test"], got["max_len"], variant="neither")
    assert flat["difference"] == pytest.approx(0.10) and flat["verdict"] == "ahead"
    lines = got["choices"].splitlines()
    assert lines[0].startswith("- 100 labels: ULMFiT, 5 epochs at η = 0.03") and "from scratch, 5 epochs" in lines[0]
    assert "ULMFiT, one rate, all layers, 10 epochs at η = 0.01" in lines[1] and "from scratch, 15 epochs" in lines[1]
    served["gpu_transfer_ulmfit"] = {**five, "checkpoint": {"sha256": {"ulmfit_imdb.safetensors": "cd" * 32}}}
    with pytest.raises(RuntimeError):  # today's rows from another checkpoint are not set beside these
        ulmfit_results.stage_c_on_test()
