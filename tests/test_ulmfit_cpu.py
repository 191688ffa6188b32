"""lmlib.course.ulmfit_cpu: the long CPU stage (b) as notebooks 07 and 12 read it, checked against its result files
and against hand-made results whose verdicts are known."""

import copy
import math

import pytest

from lmlib.course import results, ulmfit_cpu
from lmlib.course.ulmfit_cpu import milestone_curve, stage_c, stage_c_checks, tokens_to_reach


def _data(ulmfit, scratch, bow, seeds=3):
    """A stage (c) result at 1,000 labels: (mean, se) per side."""
    rows = [dict(n_labels=1000, condition=c, max_len="whole", seeds=seeds, mean=m, se=se)
            for c, (m, se) in (("ulmfit", ulmfit), ("scratch", scratch), ("bow_whole", bow))]
    return {"settings": {"sizes": [1000]}, "summary": rows}


def _check(checks, against):
    (hit,) = [c for c in checks if c["condition"] == "ulmfit" and c["against"] == against]
    return hit


def test_a_gain_holds_only_at_the_bar_and_beyond_two_standard_errors():
    assert _check(stage_c_checks(_data((0.80, 0.005), (0.74, 0.005), (0.79, 0.004))), "random init")["holds"]
    near_bar = stage_c_checks(_data((0.785, 0.005), (0.74, 0.005), (0.79, 0.004)))  # +0.045: below the bar
    assert not _check(near_bar, "random init")["holds"]
    noisy = stage_c_checks(_data((0.80, 0.03), (0.74, 0.03), (0.79, 0.004)))  # +0.06 ± 0.042: within noise
    assert not _check(noisy, "random init")["holds"]
    one_seed = _check(stage_c_checks(_data((0.90, None), (0.70, None), (0.79, None), seeds=1)), "random init")
    assert one_seed["se"] is None and not one_seed["holds"]


def test_the_bag_of_words_check_asks_for_level_or_ahead():
    checks = stage_c_checks(_data((0.80, 0.005), (0.74, 0.005), (0.79, 0.004)))
    assert _check(checks, "bag of words, same words")["holds"]
    behind = stage_c_checks(_data((0.78, 0.005), (0.74, 0.005), (0.79, 0.004)))
    bow = _check(behind, "bag of words, same words")
    assert bow["difference"] == pytest.approx(-0.01) and not bow["holds"]


def test_the_trend_is_the_least_squares_line_in_log_tokens():
    curve = [dict(tokens=10 ** k, mean=0.5 + 0.1 * k) for k in (1, 2, 3)]
    trend = tokens_to_reach(curve, 0.9)
    assert trend["slope"] == pytest.approx(0.1) and trend["tokens"] == pytest.approx(1e4) and trend["last"] == 1000
    assert tokens_to_reach([dict(tokens=10, mean=0.7), dict(tokens=100, mean=0.6)], 0.9)["tokens"] is None
    with pytest.raises(ValueError, match="two milestones"):
        tokens_to_reach(curve[:1], 0.9)


def test_the_committed_stage_c_is_the_final_milestones_and_another_is_refused(monkeypatch):
    report, _ = results.cpu_milestones()[ulmfit_cpu.FINAL]
    data = stage_c()
    assert data["checkpoint_sha256"] == report["sha256"]["ulmfit_imdb.safetensors"]
    load = results.load

    def fake(name):
        out = copy.deepcopy(load(name))
        if name.startswith("ulmfit_stage_c_"):
            out["checkpoint_sha256"] = "0" * 64
        return out
    monkeypatch.setattr(results, "load", fake)
    with pytest.raises(RuntimeError, match="another checkpoint"):
        stage_c()
    with pytest.raises(ValueError, match="no CPU milestone"):
        stage_c("ulmfit_imdb/tokens_1M")


def test_the_committed_checks_are_the_files_differences():
    data = stage_c()
    by = {(s["n_labels"], s["condition"]): s for s in data["summary"]}
    for c in stage_c_checks(data):
        n, ours = c["n_labels"], by[c["n_labels"], c["condition"]]
        other = by[n, "scratch"] if c["against"] == "random init" else by[n, f"bow_{ours['max_len']}"]
        assert c["difference"] == pytest.approx(ours["mean"] - other["mean"])
        if c["se"] is not None:
            assert c["se"] == pytest.approx(math.hypot(ours["se"], other["se"]))


def test_the_milestone_curve_counts_the_start_checkpoints_tokens():
    data = results.load(ulmfit_cpu.MILESTONES)
    curve = milestone_curve(1000)
    assert len(curve) == len(data["checkpoints"])
    start = results.cpu_milestones()[ulmfit_cpu.FINAL][0]["start"]["tokens_seen"]
    assert [r["tokens"] for r in curve] == [c["tokens_seen"] + start for c in data["checkpoints"]]
    assert curve[-1]["mean"] == next(r["mean"] for r in data["checkpoints"][-1]["summary"] if (
        r["init"], r["feature"], r["n_labels"]) == ("pretrained", "concat", 1000))


def test_the_movement_table_averages_each_groups_change_over_the_seeds_read():
    data = {"summary": [dict(n_labels=1000, condition="ulmfit", max_len="whole"),
                        dict(n_labels=1000, condition="ulmfit - scratch", difference=0.03, se=0.02)],
            "rows": [dict(condition="ulmfit", n_labels=1000, max_len="whole", relative_change=[0.01, 0, 0, 0, 0.5]),
                     dict(condition="ulmfit", n_labels=1000, max_len="whole", relative_change=[0.03, 0, 0, 0, 0.7]),
                     dict(condition="ulmfit", n_labels=1000, max_len=128, relative_change=[0.9, 0, 0, 0, 0.9])]}
    html = ulmfit_cpu.movement_table(data).data
    assert ">2.0%<" in html and ">60.0%<" in html and ">90.0%<" not in html  # the 128-token run is not the chosen one


def test_the_reading_names_a_random_init_run_at_chance_at_its_chosen_length_only():
    data = _data((0.80, 0.005), (0.70, 0.05), (0.79, 0.004))
    data["rows"] = [dict(condition="scratch", n_labels=1000, seed=1, max_len="whole", test_accuracy=0.505,
                         dev_accuracy=0.502),
                    dict(condition="scratch", n_labels=1000, seed=2, max_len=128, test_accuracy=0.51, dev_accuracy=0.5)]
    text = ulmfit_cpu.reading(data)
    assert "seed 1 (test 0.505, dev 0.502)" in text and "seed 2" not in text
    assert "random init: +0.100 ± 0.050 (bar +0.05): **does not hold**" in text  # 0.100 < 2 × 0.0502
    assert "same words: +0.010 ± 0.006 (bar +0.00): **holds**" in text and "bag of words' 0.781" in text


def test_the_milestone_figure_draws_perplexity_and_each_label_counts_probe_with_its_baselines():
    fig = ulmfit_cpu.milestone_figure()
    curve = milestone_curve(1000)
    (ppl,) = [t for t in fig.data if t.name == "perplexity"]
    assert list(ppl.y) == [r["held_out_ppl"] for r in curve] and all(y is not None for y in ppl.y)
    (probe,) = [t for t in fig.data if t.name == "1,000 labels: pretrained"]
    assert list(probe.y) == [r["mean"] for r in curve] and list(probe.error_y.array) == [r["se"] for r in curve]
    bow = [t for t in fig.data if t.name == "1,000 labels: bag of words, same words"]
    assert bow and set(bow[0].y) == {ulmfit_cpu.milestone_bow(1000)["mean"]}
    assert len({t.line.dash for t in fig.data if t.name.endswith("pretrained")}) == 2  # told apart without colour
