"""The benchmarks' shared helpers (tests/benchmarks/common.py): the random initialisations' learning rate, chosen on
a dev split of training examples that no labelled sample contains, by dev accuracy alone; random-init rows copied from
the archive of the checkpoint shipped before only where they are the same runs; and a result written whole, with the
command that wrote it."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))

import common as DR  # noqa: E402

from lmlib.recipes.ulmfit import sample_balanced  # noqa: E402


def dev(n, table):
    """Dev rows at ``n`` labels from ``{rate: [accuracy of seed 0, 1, ...]}``."""
    return [dict(n_labels=n, lr=lr, seed=s, dev_accuracy=a) for lr, accs in table.items() for s, a in enumerate(accs)]


def test_the_rate_with_the_best_mean_dev_accuracy_is_chosen():
    # 2e-3 wins seed 0, 1e-3 wins the mean over seeds 0-2 (0.60 against 0.567)
    rows = dev(100, {5e-4: [0.50, 0.50, 0.50], 1e-3: [0.55, 0.60, 0.65], 2e-3: [0.70, 0.50, 0.50]})
    assert DR.chosen_rate(rows, 100) == 1e-3
    # each rate's mean over the seeds it has (the copied sweeps at 1,000 labels ran some rates with seed 0 only)
    rows_1000 = dev(1000, {2e-4: [0.70], 5e-4: [0.60, 0.80, 0.90]})
    assert DR.chosen_rate(rows_1000, 1000) == 5e-4
    assert DR.chosen_rate(rows_1000, 25_000) == 5e-4   # all labels: the rate chosen with 1,000
    sst2 = [{**r, "task": "sst2", "dev_accuracy": 1 - r["dev_accuracy"]} for r in rows_1000]
    assert DR.chosen_rate(rows_1000 + sst2, 1000, task="sst2") == 2e-4
    with pytest.raises(RuntimeError) as error:
        DR.chosen_rate(dev(100, {5e-4: [0.5], 1e-3: [0.6]}), 100)   # 2e-3 of the grid is missing
    assert "100 labels" in str(error.value)
    with pytest.raises(RuntimeError) as error:
        DR.chosen_rate(dev(1000, {5e-4: [0.5]}), 1000)               # one rate: nothing was compared
    assert "1000 labels" in str(error.value)


def test_one_rule_for_every_sweep_a_tie_goes_to_the_smaller_rate():
    # the GPT/BERT sweeps (chosen_rate), ULMFiT's (eta_top) and ELMo's (one seed per rate) all pick with best_rate
    import bench_elmo_transfer
    import bench_ulmfit_imdb

    tied = dev(1000, {2e-3: [0.70, 0.60], 1e-3: [0.60, 0.70], 5e-4: [0.50, 0.50]})  # listed largest first
    assert DR.best_rate(tied) == 1e-3 and DR.chosen_rate(tied, 1000) == 1e-3
    assert DR.best_rate(list(reversed(tied))) == 1e-3  # the order of the rows does not matter
    copied_twice = tied + [r for r in tied if r["lr"] == 2e-3 and r["seed"] == 0]  # one row from two sources
    assert DR.chosen_rate(copied_twice, 1000) == 1e-3   # counts once: 2e-3 is not lifted by its seed 0
    ulmfit = [{"eta_top": r["lr"], "dev_accuracy": r["dev_accuracy"]} for r in tied]
    assert bench_ulmfit_imdb.best_rate(ulmfit) == 1e-3
    assert bench_elmo_transfer.best_rate is DR.best_rate
    with pytest.raises(ValueError):
        DR.best_rate([])


def test_the_dev_split_shares_nothing_with_any_labelled_sample():
    texts = [f"review {i}" for i in range(8000)]
    labels = [i % 2 for i in range(8000)]
    dev_texts, dev_labels = DR.dev_split(texts, labels)
    assert len(dev_texts) == 1000 and sum(dev_labels) == 500
    for seed in (0, 1, 2):
        for n in (100, 1000):
            assert not set(sample_balanced(texts, labels, n, seed=seed)[0]) & set(dev_texts), (n, seed)


def test_random_init_rows_are_copied_from_an_archive_only_for_the_same_config_tokenizer_and_settings(tmp_path):
    # The rows of the checkpoint shipped before that never read its weights: the same runs for the new checkpoint.
    import json

    report = {"config": {"d_model": 128}, "sha256": {"tokenizer.json": "t" * 64, "model.safetensors": "new"}}
    settings = {"n_test": 1000, "recipe": {"lr": 5e-4}}
    archive = tmp_path / "x_short_pretraining.json"
    old_report = {**report, "sha256": {**report["sha256"], "model.safetensors": "old"}}
    archive.write_text(json.dumps({
        "checkpoint_report": old_report, "checkpoint_sha256": "old", "settings": settings,
        "dev_rows": [dict(lr=1e-3, seed=0, dev_accuracy=0.7), dict(lr=1e-3, seed=1, dev_accuracy=0.6, **{"from": "r.json"})],
        "rows": [dict(condition="scratch", accuracy=0.7), dict(condition="bert", accuracy=0.8),
                 dict(condition="scratch", accuracy=0.6, **{"from": "other.json"})]}))
    pretrained = lambda r: r["condition"] == "bert"  # noqa: E731
    dev_rows, rows = DR.archived_random_init_rows(archive, report, settings, pretrained, moved={"r.json": "r_old.json"})
    assert [r["from"] for r in dev_rows] == [archive.name, "r_old.json"]
    assert [(r["accuracy"], r["from"]) for r in rows] == [(0.7, archive.name), (0.6, "other.json")]
    for changed in ({**report, "config": {"d_model": 64}},
                    {**report, "sha256": {**report["sha256"], "tokenizer.json": "u" * 64}}):
        assert DR.archived_random_init_rows(archive, changed, settings, pretrained) == ([], [])
    assert DR.archived_random_init_rows(archive, report, {**settings, "n_test": 500}, pretrained) == ([], [])
    assert DR.archived_random_init_rows(tmp_path / "missing.json", report, settings, pretrained) == ([], [])
    # the old checkpoint's pretrain.json kept in another archived result; rows measured with another checkpoint refused
    rates = tmp_path / "rates_short_pretraining.json"
    rates.write_text(json.dumps({"checkpoint_sha256": "old", "settings": settings,
                                 "rows": [dict(condition="scratch", accuracy=0.5), dict(condition="bert", accuracy=0.9)]}))
    assert DR.archived_random_init_rows(rates, report, settings, pretrained, report_archive=archive) == (
        [], [dict(condition="scratch", accuracy=0.5, **{"from": rates.name})])
    assert DR.archived_random_init_rows(rates, report, settings, pretrained, report_archive=tmp_path / "none.json") == ([], [])
    rates.write_text(json.dumps({**json.loads(rates.read_text()), "checkpoint_sha256": "other"}))
    assert DR.archived_random_init_rows(rates, report, settings, pretrained, report_archive=archive) == ([], [])


def test_a_result_is_written_whole_with_the_command_that_wrote_it(tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(sys, "argv", [str(Path(DR.__file__).with_name("bench_x.py")), "--seeds", "0 1"])
    DR.write_result(tmp_path / "x.json", {"rows": [1]})
    written = json.loads((tmp_path / "x.json").read_text())
    assert written == {"command": "python tests/benchmarks/bench_x.py --seeds '0 1'", "rows": [1]}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary file left behind
    DR.write_result(tmp_path / "x.json", {"command": "kept", "rows": []})  # a command given is kept
    assert DR.read_result(tmp_path / "x.json")["command"] == "kept"
    assert DR.result_path("ngram") == DR.RESULTS / "ngram.json"
