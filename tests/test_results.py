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


def _write(tmp_path, monkeypatch, name, content):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    (tmp_path / f"{name}.json").write_text(json.dumps(content))


def test_load_checked_returns_a_result_measured_on_the_loaded_checkpoint(tmp_path, monkeypatch):
    _write(tmp_path, monkeypatch, "run", {"checkpoint_sha256": "ab" * 32, "settings": {"recipe": {"lr": 5e-4}}})
    assert results.load_checked("run", "ab" * 32, recipe={"lr": 5e-4})["settings"]["recipe"] == {"lr": 5e-4}


def test_load_checked_refuses_another_checkpoint_and_names_the_script(tmp_path, monkeypatch):
    _write(tmp_path, monkeypatch, "run", {"checkpoint_sha256": "ab" * 32, "command": "python bench_run.py"})
    with pytest.raises(RuntimeError, match=r"another checkpoint .*rerun python bench_run\.py"):
        results.load_checked("run", "cd" * 32)


def test_load_checked_reads_a_nested_field_and_refuses_a_missing_one(tmp_path, monkeypatch):
    _write(tmp_path, monkeypatch, "run", {"pretrained": {"sha256": "ab" * 32}})
    assert results.load_checked("run", "ab" * 32, sha_field="pretrained.sha256")
    with pytest.raises(RuntimeError, match="another checkpoint"):
        results.load_checked("run", "cd" * 32, sha_field="pretrained.sha256")
    with pytest.raises(KeyError, match="no checkpoint sha256 at 'checkpoint_sha256'"):
        results.load_checked("run", "ab" * 32)


def test_load_checked_refuses_another_recipe(tmp_path, monkeypatch):
    _write(tmp_path, monkeypatch, "run", {"checkpoint_sha256": "ab" * 32, "settings": {"recipe": {"lr": 5e-4}}})
    with pytest.raises(RuntimeError, match="other fine-tuning settings.*rerun the script"):
        results.load_checked("run", "ab" * 32, recipe={"lr": 1e-3})


def test_every_notebook_checkpoint_guard_holds_for_the_committed_results():
    """The committed results the notebooks guard describe the checkpoints shipped in lmlib/pretrained."""
    from lmlib.recipes import bert, gpt

    gpt_sha = json.loads((gpt.CHECKPOINT_DIR / "pretrain.json").read_text())["sha256"]["gpt_imdb.safetensors"]
    results.load_checked("gpt_finetune", gpt_sha, recipe=gpt.FINETUNE_RECIPE)
    bert_sha = bert.pretrain_report()["sha256"][f"{bert.NAME}.safetensors"]
    for name in ("bert_finetune", "bert_finetune_rates"):
        results.load_checked(name, bert_sha, recipe=bert.FINETUNE_RECIPE)
    results.load_checked("bert_features", bert_sha)
