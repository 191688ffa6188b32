"""tests/benchmarks/gpu_lstm_pretraining.py: what comes back from the device fits its limits, most important first.

The whole script (both runs on the CPU with a tiny budget: ``run --dry-run --out DIR``) was tried by hand; it takes
longer than a unit test should, and test_pretrain_cli.py runs each model's gpu preset with milestones."""

import io
import tarfile

from benchmarks import gpu_lstm_pretraining as G


def test_packing_keeps_reports_and_final_checkpoints_before_milestones_and_lists_what_did_not_fit(tmp_path, monkeypatch):
    work, out = tmp_path / "out" / "work", tmp_path / "out"
    files = {"elmo_imdb.log": 100, "elmo_imdb/pretrain.json": 200, "elmo_imdb/elmo_imdb.safetensors": 3000,
             "elmo_imdb/tokens_4M/elmo_imdb.safetensors": 3000, "elmo_imdb/resume.pt": 50}
    for name, size in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(b"x" * size)
    monkeypatch.setattr(G, "MAX_PARTS", 1)
    monkeypatch.setattr(G, "PART_BYTES", 2**20 + 7000)  # room: 7,000 bytes beyond the packer's 1 MiB margin
    G.pack(work, out)
    parts = sorted(out.glob("gpu_lstm_pretraining.tar.*"))
    assert parts and all(p.stat().st_size <= G.PART_BYTES for p in parts)
    with tarfile.open(fileobj=io.BytesIO(b"".join(p.read_bytes() for p in parts))) as tar:
        names = sorted(m.name for m in tar.getmembers())
    assert names == ["work/elmo_imdb.log", "work/elmo_imdb/elmo_imdb.safetensors", "work/elmo_imdb/pretrain.json"]
    packed = (out / "PACKED.txt").read_text()
    assert "tokens_4M/elmo_imdb.safetensors" in packed.split("left out")[1] and "resume.pt" not in packed
