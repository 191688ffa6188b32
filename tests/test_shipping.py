"""lmlib.recipes.shipping: what a shipped checkpoint folder holds, that every file is verified before loading, and
the command line the recipe modules share."""

import json
import stat

import pytest
import torch

from lmlib.recipes import shipping


def _save(tmp_path):
    state = {"embed.weight": torch.randn(5, 3), "head.weight": torch.randn(5, 3), "bias": torch.tensor([0.1, 1 / 3])}
    report = shipping.save_shipped(tmp_path, "toy", state, {"size": 3}, {"steps": 7},
                                   side_files={"vocab.json": lambda p: open(p, "w").write('["a", "b"]')},
                                   skip=("head.weight",))
    return state, report


def test_a_saved_folder_round_trips_in_fp16_with_config_report_and_hashes(tmp_path):
    state, report = _save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pretrain.json", "toy.safetensors", "vocab.json"]
    assert report["steps"] == 7 and set(report["sha256"]) == {"toy.safetensors", "vocab.json"}
    assert json.loads((tmp_path / "pretrain.json").read_text()) == report
    for f in tmp_path.iterdir():  # readable by everyone, not mkstemp's private mode
        assert stat.S_IMODE(f.stat().st_mode) == 0o644
    config, tensors, loaded_report = shipping.load_shipped(tmp_path, "toy", rebuild="make toy")
    assert config == {"size": 3} and loaded_report == report
    assert set(tensors) == {"embed.weight", "bias"}  # the skipped (tied) weight is not stored
    for k, v in tensors.items():
        assert v.dtype == torch.float32
        assert torch.equal(v, state[k].half().float())  # exactly the fp16 rounding


def test_a_changed_or_missing_file_is_refused_with_the_rebuild_command(tmp_path):
    _save(tmp_path)
    (tmp_path / "vocab.json").write_text('["a", "c"]')
    with pytest.raises(ValueError, match="sha256.*make toy"):
        shipping.load_shipped(tmp_path, "toy", rebuild="make toy")
    (tmp_path / "vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.json is missing.*make toy"):
        shipping.verify_shipped(tmp_path, rebuild="make toy")
    (tmp_path / "pretrain.json").unlink()
    with pytest.raises(FileNotFoundError, match="not a shipped checkpoint folder"):
        shipping.verify_shipped(tmp_path, rebuild="make toy")


def test_verifying_some_files_checks_those_and_refuses_one_the_report_does_not_list(tmp_path):
    _save(tmp_path)
    (tmp_path / "toy.safetensors").write_bytes(b"not weights")   # the file left out of the check
    assert shipping.verify_shipped(tmp_path, rebuild="make toy", files=("vocab.json",))["sha256"]
    with pytest.raises(ValueError, match="sha256.*make toy"):
        shipping.verify_shipped(tmp_path, rebuild="make toy", files=("toy.safetensors",))
    with pytest.raises(ValueError, match="records no sha256 for merges.txt"):
        shipping.verify_shipped(tmp_path, rebuild="make toy", files=("merges.txt",))
