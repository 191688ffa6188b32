"""tests/benchmarks/bench_ulmfit_stage_c_dev.py and bench_ulmfit_stage_c_test.py: stage (c)'s settings chosen by dev
accuracy alone, rows of an earlier sweep copied only when a row measured again reproduces them, and the random init
tested only at the length its own dev runs chose; bench_ulmfit_stage_c.py (the paper's stage (c) on any checkpoint):
each condition's length chosen on dev by seed 0, and its rows read at that length alone."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))

import bench_ulmfit_stage_c_dev as D  # noqa: E402


def row(eta, epochs, m, seed, acc, condition="ulmfit", n=1000, steps=160):
    return dict(condition=condition, n_labels=n, seed=seed, eta=eta, epochs=epochs, m=m, steps=steps,
                dev_accuracy=acc)


def test_the_setting_with_the_best_mean_over_its_seeds_is_chosen_among_those_run_with_every_seed():
    rows = [row(0.01, 5, 1, 0, 0.60), row(0.01, 5, 1, 1, 0.70),   # mean .65
            row(0.03, 10, 1, 0, 0.66, steps=320), row(0.03, 10, 1, 1, 0.62, steps=320),  # mean .64
            row(0.03, 5, 2, 0, 0.90, steps=320)]  # seed 0 only: not compared
    (choice,) = D.choose(rows)
    assert (choice["chosen"]["eta"], choice["chosen"]["epochs"], choice["chosen"]["m"]) == (0.01, 5, 1)
    assert choice["settings_compared"] == 2 and choice["today_schedule_best"]["eta"] == 0.01
    # a tie goes to fewer steps
    (tie,) = D.choose([row(0.03, 10, 1, 0, 0.7, steps=320), row(0.01, 5, 1, 0, 0.7)])
    assert tie["chosen"]["steps"] == 160


def test_stage_steps_scale_todays_unfreezing_stage():
    assert D.stage_steps(1000, 1) == (32, 160) and D.stage_steps(1000, 2) == (64, 320)
    assert D.stage_steps(100, 1) == (10, 160) and D.stage_steps(100, 2) == (20, 320)  # at least 10 steps a stage


def test_an_earlier_sweep_is_copied_only_when_a_row_run_again_gives_its_number(tmp_path, monkeypatch):
    sha = "ab" * 32
    theirs = {"checkpoint": {"sha256": {"ulmfit_imdb.safetensors": sha}},
              "settings": {"ulmfit": dict(epochs=5, max_len=128, batch_size=32, min_steps_per_epoch=10,
                                          max_steps_per_epoch=160)},
              "dev_rows": [dict(condition="ulmfit", lr=lr, n_labels=1000, seed=0, dev_accuracy=acc, steps=160)
                           for lr, acc in ((0.003, 0.631), (0.01, 0.644), (0.03, 0.664))]
              + [dict(condition="scratch", lr=0.003, n_labels=1000, seed=0, dev_accuracy=0.7, steps=160)]}
    (tmp_path / D.COPIED).write_text(json.dumps(theirs))
    monkeypatch.setattr(D, "results_dir", lambda: tmp_path)
    copied = D.copied_rows([row(0.01, 5, 1, 0, 0.644)], sha)
    assert sorted(r["eta"] for r in copied) == [0.003, 0.03] and all(r["from"] == D.COPIED for r in copied)
    assert D.copied_rows([row(0.01, 5, 1, 0, 0.650)], sha) == []  # not reproduced
    assert D.copied_rows([row(0.03, 10, 1, 0, 0.7)], sha) == []  # nothing run again
    assert D.copied_rows([row(0.01, 5, 1, 0, 0.644)], "cd" * 32) == []  # another checkpoint


def test_the_random_init_is_tested_only_at_the_length_its_dev_runs_chose():
    import bench_ulmfit_stage_c_test as T

    def dev(n, epochs, seed, acc):
        return dict(split="dev", condition="scratch", n_labels=n, seed=seed, eta=0.003, epochs=epochs, m=1, accuracy=acc)

    rows = [dev(1000, 5, 0, 0.74), dev(1000, 5, 1, 0.55), dev(1000, 15, 0, 0.62)]
    assert T.scratch_epochs(rows, 1000) is None  # a length with one seed so far: no choice yet
    rows.append(dev(1000, 15, 1, 0.75))
    assert T.scratch_epochs(rows, 1000) == 15 and T.scratch_epochs(rows, 100) is None
    assert T.scratch_epochs([dev(100, 5, 0, 0.6), dev(100, 5, 1, 0.6), dev(100, 15, 0, 0.7), dev(100, 15, 1, 0.5)],
                            100) == 5  # a tie goes to the shorter run
    size = {"ulmfit": dict(eta=0.03, epochs=15, m=1), "ulmfit_flat": dict(eta=0.01, epochs=10, m=1),
            "scratch": dict(eta=0.003, epochs=[5, 15], m=1)}
    todo = T.jobs({"sizes": {"1000": size, "100": size}}, rows)
    tested = {(j["condition"], j["n_labels"], j["epochs"]) for j in todo if j["split"] == "test"}
    assert ("scratch", 1000, 15) in tested and ("scratch", 1000, 5) not in tested
    assert not any(j["condition"] == "scratch" and j["n_labels"] == 100 and j["split"] == "test" for j in todo)
    assert not any(j["split"] == "dev" and j["n_labels"] == 1000 for j in todo)  # what ran is not run again


def test_a_rerun_with_more_seeds_keeps_what_the_shared_seeds_measured(tmp_path):
    from common import kept_rows

    settings = {"seeds": [0, 1, 2], "sizes": {"1000": {}}, "test_reviews": 1000}
    rows = [dict(split="test", seed=s, accuracy=0.7) for s in (0, 1, 2)]
    out = tmp_path / "run.json"
    out.write_text(json.dumps({"settings": settings, "checkpoint_sha256": "ab" * 32, "rows": rows}))
    more = {**settings, "seeds": [0, 1, 2, 3, 4]}
    assert kept_rows(out, more, "ab" * 32, more_seeds=True) == rows
    assert [r["seed"] for r in kept_rows(out, {**settings, "seeds": [0, 1]}, "ab" * 32, more_seeds=True)] == [0, 1]
    assert kept_rows(out, more, "cd" * 32, more_seeds=True) == []  # another checkpoint
    assert kept_rows(out, {**more, "test_reviews": 500}, "ab" * 32, more_seeds=True) == []  # other settings
    assert kept_rows(out, settings, "ab" * 32) == rows and kept_rows(out, more, "ab" * 32) == []  # the default


# -- bench_ulmfit_stage_c.py: the paper's stage (c) on any checkpoint ----------------------------------------------

def c_row(condition, n, seed, max_len, dev, test):
    return dict(condition=condition, n_labels=n, seed=seed, max_len=max_len, dev_accuracy=dev, test_accuracy=test)


def test_the_length_is_chosen_on_dev_by_seed_0_once_every_length_ran_and_ties_go_to_the_shorter():
    import bench_ulmfit_stage_c as C

    settings = {**C.SETTINGS, "lengths": [128, C.WHOLE]}
    rows = [c_row("ulmfit", 1000, 0, 128, 0.70, 0.99)]
    assert C.chosen_length(rows, "ulmfit", 1000, settings) is None
    rows.append(c_row("ulmfit", 1000, 0, C.WHOLE, 0.72, 0.10))  # the test accuracy plays no part
    assert C.chosen_length(rows, "ulmfit", 1000, settings) == C.WHOLE
    rows += [c_row("scratch", 1000, 0, 128, 0.6, 0.5), c_row("scratch", 1000, 0, C.WHOLE, 0.6, 0.9)]
    assert C.chosen_length(rows, "scratch", 1000, settings) == 128
    assert C.chosen_length(rows + [c_row("ulmfit", 1000, 1, 128, 0.99, 0.99)], "ulmfit", 1000, settings) == C.WHOLE


def test_the_ablation_and_other_seeds_run_only_at_the_chosen_length_and_nothing_runs_twice():
    import bench_ulmfit_stage_c as C

    settings = {**C.SETTINGS, "sizes": [1000], "seeds": [0, 1], "lengths": [128, C.WHOLE]}
    todo = C.jobs(settings, [])
    assert [(j["condition"], j["max_len"]) for j in todo[:4]] == [("ulmfit", 128), ("ulmfit", C.WHOLE),
                                                                  ("scratch", 128), ("scratch", C.WHOLE)]
    assert not any(j["condition"] == "ulmfit_flat" or j["seed"] == 1 and j["condition"] != "bow" for j in todo)
    rows = [c_row("ulmfit", 1000, 0, 128, 0.70, 0.7), c_row("ulmfit", 1000, 0, C.WHOLE, 0.75, 0.7)]
    todo = C.jobs(settings, rows)
    runs = [(j["condition"], j["seed"], j["max_len"]) for j in todo if j["condition"] != "bow"]
    assert ("ulmfit_flat", 0, C.WHOLE) in runs and ("ulmfit", 1, C.WHOLE) in runs and ("ulmfit", 1, 128) not in runs
    assert ("ulmfit", 0, 128) not in runs and not any(c == "scratch" and s == 1 for c, s, _ in runs)
    assert runs.index(("ulmfit_flat", 0, C.WHOLE)) < runs.index(("ulmfit", 1, C.WHOLE))  # seed 0 first


def test_the_summary_reads_each_condition_at_its_chosen_length_with_standard_errors():
    import bench_ulmfit_stage_c as C

    settings = {**C.SETTINGS, "sizes": [1000], "seeds": [0, 1], "lengths": [128, C.WHOLE]}
    rows = [c_row("ulmfit", 1000, 0, 128, 0.70, 0.80), c_row("ulmfit", 1000, 0, C.WHOLE, 0.75, 0.84),
            c_row("ulmfit", 1000, 1, C.WHOLE, 0.74, 0.86), c_row("scratch", 1000, 0, 128, 0.6, 0.70),
            c_row("scratch", 1000, 0, C.WHOLE, 0.5, 0.99), c_row("scratch", 1000, 1, 128, 0.6, 0.72)]
    rows += [dict(condition="bow", view=C.WHOLE, n_labels=1000, seed=s, test_accuracy=a) for s, a in ((0, .8), (1, .82))]
    out = {s["condition"]: s for s in C.summarise(rows, settings)}
    assert out["ulmfit"]["max_len"] == C.WHOLE and out["ulmfit"]["mean"] == pytest.approx(0.85)
    assert out["ulmfit"]["se"] == pytest.approx(0.01) and out["ulmfit"]["seeds"] == 2
    assert out["scratch"]["max_len"] == 128 and out["scratch"]["mean"] == pytest.approx(0.71)  # not the 0.99
    diff = out["ulmfit - scratch"]
    assert diff["difference"] == pytest.approx(0.14) and diff["se"] == pytest.approx((0.01 ** 2 + 0.01 ** 2) ** 0.5)
    assert diff["beyond_two_se"] and out["ulmfit - bow_whole"]["difference"] == pytest.approx(0.04)


def _double(job):
    return {"job": job, "value": 2 * job}


def test_the_job_pool_runs_every_job_not_yet_in_the_rows_and_saves_after_each_and_starts_none_after_the_deadline():
    from common import run_pool

    rows, saves = [{"job": 1, "value": 2}], []

    def todo():
        return [j for j in (1, 2, 3, 4) if j not in {r["job"] for r in rows}]

    assert run_pool(todo, _double, rows, lambda: saves.append(len(rows)), workers=2)
    assert sorted(r["job"] for r in rows) == [1, 2, 3, 4] and all(r["value"] == 2 * r["job"] for r in rows)
    assert saves[-1] == 4 and len(saves) == 4   # after each of the three jobs, and once at the end
    late = []
    assert not run_pool(lambda: [5], _double, late, lambda: None, workers=2, deadline=0)
    assert late == []
