import json

import pytest

from lmlib.course import results


def test_load_reads_the_committed_file_by_name():
    for name in results.available():
        assert results.load(name) == json.loads((results.RESULTS_DIR / f"{name}.json").read_text())
    assert "attention" in results.available()


@pytest.mark.parametrize("name", ["attention.json", "../results/attention", "", "results/attention"])
def test_load_refuses_paths_and_file_names(name):
    with pytest.raises(ValueError, match="bare name"):
        results.load(name)


def test_a_missing_result_lists_what_exists():
    with pytest.raises(FileNotFoundError, match="no benchmark result named 'nope'.*attention"):
        results.load("nope")


def test_an_install_without_the_repository_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="installed without its repository"):
        results.load("attention")
