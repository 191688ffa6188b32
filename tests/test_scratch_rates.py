"""The selection code of the benchmarks' from-scratch rate sweeps (bench_ulmfit_imdb.py, bench_elmo_transfer.py) and of
the bag of words measured on their reviews (bench_bow_baseline.py): the dev split is taken from the training reviews
and shares none with any labelled sample it must avoid, the rate is chosen by dev accuracy alone, and the samples the
bag of words trains on are the ones the neural rows trained on, checked by hand on small label lists."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))

import bench_elmo_transfer as E  # noqa: E402
import bench_ulmfit_imdb as UL  # noqa: E402

from lmlib.recipes.ulmfit import sample_balanced  # noqa: E402

LABELS = [i % 2 for i in range(20_000)]  # 10,000 of each class, enough for every excluded sample and the dev split


def test_ulmfit_dev_split_avoids_every_labelled_sample_and_is_balanced():
    dev = UL.dev_split(LABELS)
    assert len(dev) == len(set(dev)) == 1000 and sum(LABELS[i] for i in dev) == 500
    everything = list(range(len(LABELS)))
    for size in (100, 500, 1000, 5000):
        for seed in (0, 1, 2):
            assert not set(dev) & set(sample_balanced(everything, LABELS, size, seed)[0]), (size, seed)
    assert UL.dev_split(LABELS) == dev  # seeded


def test_the_rate_is_the_best_dev_accuracy_and_a_tie_goes_to_the_smaller_rate():
    rows = [{"eta_top": 0.01, "dev_accuracy": 0.70}, {"eta_top": 0.003, "dev_accuracy": 0.70},
            {"eta_top": 0.001, "dev_accuracy": 0.65}]
    assert UL.best_rate(rows) == 0.003
    rows[0]["dev_accuracy"] = 0.71
    assert UL.best_rate(rows) == 0.01
    with pytest.raises(ValueError):
        UL.best_rate([])


def test_elmo_dev_split_avoids_every_labelled_sample_and_is_balanced():
    labels = torch.tensor(LABELS[:6000])
    dev = E.dev_indices(labels)
    assert len(dev) == len(set(dev.tolist())) == 1000 and int(labels[dev].sum()) == 500
    for n in (100, 1000):
        for seed in (0, 1, 2):
            sample = E.balanced_subset(labels, n, torch.Generator().manual_seed(seed))
            assert not set(dev.tolist()) & set(sample.tolist()), (n, seed)


def test_the_rates_are_tried_on_seed_0s_sample_or_on_every_review_but_the_dev_ones():
    labels = torch.tensor([0, 1] * 5)
    dev = torch.tensor([2, 7])
    assert E.tuning_indices(labels, "all", dev).tolist() == [0, 1, 3, 4, 5, 6, 8, 9]
    assert E.tuning_indices(labels, 4, dev).tolist() == E.balanced_subset(labels, 4, torch.Generator().manual_seed(0)).tolist()


def test_balanced_subset_by_hand():
    # two of each class drawn by randperm of each class's indices with one generator, class 0 first
    labels = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1])
    g = torch.Generator().manual_seed(3)
    zeros, ones = torch.tensor([0, 2, 4, 6]), torch.tensor([1, 3, 5, 7])
    expected = torch.cat([zeros[torch.randperm(4, generator=g)[:2]], ones[torch.randperm(4, generator=g)[:2]]])
    assert E.balanced_subset(labels, 4, torch.Generator().manual_seed(3)).tolist() == expected.tolist()


def test_replace_swaps_one_variants_rows_and_keeps_the_rest(tmp_path, monkeypatch):
    row = dict(max_len=128, n_test=10)
    def made(variant, max_len):  # a part's record: its variant and its settings
        return {"variant": variant, "vocab_words_sha": "w", "settings": {"max_len": max_len}, "what": "the curve",
                "vocab_size": 5}

    committed = {"checkpoint": {"imdb_sha256": "abc"}, "parts": [made("ulmfit", 128), made("ulmfit", 512),
                                                                made("scratch", 128)],
                 "rows": [dict(row, variant="ulmfit", seed=0, n_labels=100, accuracy=0.6),
                          dict(row, variant="scratch", seed=0, n_labels=100, accuracy=0.5),
                          dict(row, variant="scratch", seed=0, n_labels=500, accuracy=0.52)]}
    results = tmp_path / "ulmfit_imdb.json"
    results.write_text(json.dumps(committed))
    part = tmp_path / "part.json"
    part.write_text(json.dumps({**made("scratch", 128), "checkpoint": None,
                                "sweep": {"chosen": 0.003},
                                "rows": [dict(row, variant="scratch", seed=s, n_labels=100, eta_top=0.003,
                                              accuracy=a) for s, a in ((0, 0.7), (1, 0.8))]}))
    monkeypatch.setattr(UL, "RESULTS", results)
    UL.replace([part])
    out = json.loads(results.read_text())
    assert [(r["variant"], r["n_labels"], r["seed"], r["accuracy"]) for r in out["rows"]] == [
        ("ulmfit", 100, 0, 0.6), ("scratch", 100, 0, 0.7), ("scratch", 100, 1, 0.8), ("scratch", 500, 0, 0.52)]
    scratch_100 = next(s for s in out["summary"] if (s["variant"], s["n_labels"]) == ("scratch", 100))
    assert scratch_100["seeds"] == 2 and scratch_100["mean"] == pytest.approx(0.75)
    assert out["checkpoint"]["imdb_sha256"] == "abc" and out["rate_sweeps"] == {"scratch": {"chosen": 0.003}}
    assert [(p["variant"], p["settings"]["max_len"]) for p in out["parts"]] == [("ulmfit", 128), ("ulmfit", 512),
                                                                               ("scratch", 128)]
    longer = tmp_path / "longer.json"   # more seeds of one cut: the variant's parts of other cuts stay
    longer.write_text(json.dumps({**made("ulmfit", 512), "checkpoint": {"imdb_sha256": "abc"}, "note": "new",
                                  "rows": [dict(row, max_len=512, variant="ulmfit", seed=1, n_labels=1000,
                                                accuracy=0.61)]}))
    UL.replace([longer])
    out = json.loads(results.read_text())
    assert [(p["variant"], p["settings"]["max_len"], p.get("note")) for p in out["parts"]] == [
        ("ulmfit", 128, None), ("scratch", 128, None), ("ulmfit", 512, "new")]
    assert ("ulmfit", 100, 0, 0.6) in [(r["variant"], r["n_labels"], r["seed"], r["accuracy"]) for r in out["rows"]]
    merged = tmp_path / "merged.json"  # a whole curve merged from its parts keeps each part's rate sweep too
    monkeypatch.setattr(UL, "RESULTS", merged)
    UL.merge([part, longer])
    out = json.loads(merged.read_text())
    assert out["rate_sweeps"] == {"scratch": {"chosen": 0.003}} and "sweep" not in out["parts"][0]
    assert out["checkpoint"]["imdb_sha256"] == "abc" and len(out["rows"]) == 3
    monkeypatch.setattr(UL, "RESULTS", results)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"variant": "scratch", "vocab_words_sha": "other", "checkpoint": None, "rows": []}))
    before = results.read_text()
    with pytest.raises(ValueError):
        UL.replace([bad])
    assert results.read_text() == before  # a part of another vocabulary changes nothing
