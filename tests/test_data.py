"""The dataset registry, verification on every load, the download path and the loaders.

The download path is exercised for real: an HTTP server on 127.0.0.1 serves copies of the shared
mirror, one file bare and two inside a zip archive, as the public sources publish them.
"""

import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from lmlib import data
from lmlib.data import DataError, DataFile

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def mirror() -> Path:
    root = Path(os.environ.get("LMLIB_DATA_DIR", MIRROR))
    if not (root / "manifest.json").is_file():
        pytest.skip("these tests need the dataset mirror; set LMLIB_DATA_DIR to it")
    return root


@pytest.fixture
def copy_of(mirror, tmp_path, monkeypatch):
    """A writable copy of some mirror files, with LMLIB_DATA_DIR pointing at it."""

    def make(*paths: str) -> Path:
        for p in paths:
            (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(mirror / p, tmp_path / p)
        monkeypatch.setenv("LMLIB_DATA_DIR", str(tmp_path))
        return tmp_path

    return make


def test_registry_matches_the_mirror_manifest(mirror):
    manifest = {e["path"]: e for e in json.loads((mirror / "manifest.json").read_text())}
    registered = {f.path: f for ds in data.DATASETS.values() for f in ds.files}
    assert set(registered) == set(manifest)
    for path, entry in manifest.items():
        f = registered[path]
        assert (f.sha256, f.bytes) == (entry["sha256"], entry["bytes"])
        assert entry["source_commit"] in f.url, "every address is pinned to the manifest's commit"
        archive_member = entry["source_path"].split("::")
        assert f.url.endswith(archive_member[0])
        assert f.member == (archive_member[1] if len(archive_member) == 2 else None)


def test_every_mirror_file_verifies(mirror):
    for ds in data.DATASETS.values():
        for f in ds.files:
            assert data.verify(f, mirror) == mirror / f.path


def test_ptb_loader_gives_the_published_counts(mirror, monkeypatch):
    monkeypatch.setenv("LMLIB_DATA_DIR", str(mirror))
    counts = {s: sum(len(line) for line in data.load_ptb(s)) for s in ("train", "valid", "test")}
    assert counts == {"train": 929_589, "valid": 73_760, "test": 82_430}
    train = data.load_ptb("train")
    assert all(line[-1] == "<eos>" for line in train)
    assert len({w for line in train for w in line}) == 10_000
    assert sum(line.count("<unk>") for line in train) == 45_020


def test_text_loaders_decode_with_the_right_encodings(mirror, monkeypatch):
    monkeypatch.setenv("LMLIB_DATA_DIR", str(mirror))
    rt = data.load_rt_polarity()
    assert len(rt.texts) == 10_662 and sum(rt.labels) == 5_331
    # cp1252: 0x85 is an ellipsis inside a line, never a line break; 0x92-style quotes decode to letters
    assert any("\u2026" in t for t in rt.texts)
    sst_dev = data.load_sst2("dev")
    assert len(sst_dev.texts) == 872 and sum(sst_dev.labels) == 444
    assert not any(t.endswith(" ") for t in sst_dev.texts)
    assert len(data.load_sst2("train").texts) == 67_349
    pairs = data.load_eng_fra()
    assert len(pairs) == 167_130
    assert not any("\u202f" in fr or "\u00a0" in fr for _, fr in pairs)
    assert len(data.load_eng_fra(normalize_spaces=False)) == 167_130
    analogies = data.load_analogies()
    assert len(analogies) == 19_544 and len({a.section for a in analogies}) == 14
    assert len(data.load_wordsim353()) == 353 and ("tiger", "tiger", 10.0) in data.load_wordsim353()
    simlex = data.load_simlex999()
    assert len(simlex) == 999 and simlex[0] == ("old", "new", 1.58)
    shakespeare = data.load_tiny_shakespeare()
    assert len(shakespeare) == 1_115_394 and len(set(shakespeare)) == 65
    assert data.load_time_machine().startswith("The Time Machine, by H. G. Wells [1898]")


def test_unknown_names_and_splits_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="train, valid, test"):
        data.load_ptb("dev")
    with pytest.raises(ValueError, match="train, dev"):
        data.load_sst2("test")
    with pytest.raises(KeyError, match="ptb"):
        data.load("penn")
    with pytest.raises(KeyError, match="tinyshakespeare"):
        data.dataset("shakespeare")


def test_a_corrupt_copy_is_refused_on_load_naming_file_and_checksums(copy_of):
    root = copy_of("ptb/ptb.valid.txt")
    target = root / "ptb/ptb.valid.txt"
    assert len(data.load_ptb("valid")) == 3_370
    raw = bytearray(target.read_bytes())
    raw[1000] ^= 0x01  # one flipped bit after a successful load: verification runs again
    target.write_bytes(bytes(raw))
    with pytest.raises(DataError) as err:
        data.load_ptb("valid")
    message = str(err.value)
    assert "ptb.valid.txt" in message
    assert data.data_file("ptb/ptb.valid.txt").sha256 in message
    assert hashlib.sha256(raw).hexdigest() in message
    assert "python -m lmlib data fetch" in message


def test_a_truncated_copy_is_refused(copy_of):
    root = copy_of("tinyshakespeare/input.txt")
    target = root / "tinyshakespeare/input.txt"
    target.write_bytes(target.read_bytes()[:-10])
    with pytest.raises(DataError, match="1,115,384 bytes"):
        data.load_tiny_shakespeare()


def test_missing_while_offline_is_an_immediate_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LMLIB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LMLIB_OFFLINE", "1")
    with pytest.raises(DataError, match="LMLIB_OFFLINE=1") as refused:
        data.load_ptb("test")
    message = str(refused.value)
    assert "ptb/ptb.test.txt" in message and "LMLIB_DATA_DIR" in message, "names the file and the way out"
    assert not any(tmp_path.rglob("*")), "a refused download leaves nothing behind"


@pytest.fixture
def downloads_allowed(monkeypatch):
    """CI forbids downloads with LMLIB_OFFLINE=1; these tests only talk to 127.0.0.1."""
    monkeypatch.delenv("LMLIB_OFFLINE", raising=False)


def test_unreachable_source_fails_with_a_clear_error_not_a_hang(tmp_path, downloads_allowed):
    with socket_on_free_port() as port:
        pass  # the port is closed again: connections to it are refused, as with no network
    f = DataFile("x/file.txt", "0" * 64, 1, f"http://127.0.0.1:{port}/file.txt")
    start = time.monotonic()
    with pytest.raises(DataError, match="could not download .*LMLIB_DATA_DIR"):
        data.fetch([f], tmp_path)
    assert time.monotonic() - start < 20, "guards against a hang, not a speed measurement"
    assert not (tmp_path / "x").exists()


# -- the real download path against a local server ------------------------------------------------


class socket_on_free_port:
    def __enter__(self):
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/cut-short.txt":  # promises more bytes than it sends, then hangs up
            self.send_response(200)
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(b"only a part")
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def server(mirror, tmp_path_factory, downloads_allowed):
    """Serve shakespeare bare and a zip holding the SimLex files, like their public sources."""
    root = tmp_path_factory.mktemp("served")
    shutil.copyfile(mirror / "tinyshakespeare/input.txt", root / "input.txt")
    with zipfile.ZipFile(root / "SimLex-999.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("SimLex-999.txt", "README.txt"):
            zf.write(mirror / "word-eval/SimLex-999" / name, f"SimLex-999/{name}")
    handler = lambda *a, **kw: _Handler(*a, directory=str(root), **kw)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _local(file_path: str, url: str, member: str | None = None) -> DataFile:
    f = data.data_file(file_path)
    return DataFile(f.path, f.sha256, f.bytes, url, member)


@pytest.mark.network
def test_fetch_downloads_verifies_and_places_a_file(server, tmp_path):
    f = _local("tinyshakespeare/input.txt", f"{server}/input.txt")
    [path] = data.fetch([f], tmp_path)
    assert path == tmp_path / "tinyshakespeare/input.txt"
    assert data.sha256_of(path) == f.sha256
    assert sorted(p.name for p in path.parent.iterdir()) == ["input.txt"], "no temporary file is left"


@pytest.mark.network
def test_fetch_extracts_zip_members_with_one_download(server, tmp_path, monkeypatch):
    files = [_local(p, f"{server}/SimLex-999.zip", f"SimLex-999/{Path(p).name}")
             for p in ("word-eval/SimLex-999/SimLex-999.txt", "word-eval/SimLex-999/README.txt")]
    downloads = []
    real = data.store._download
    monkeypatch.setattr(data.store, "_download", lambda url, *rest: downloads.append(url) or real(url, *rest))
    paths = data.fetch(files, tmp_path)
    assert [p.name for p in paths] == ["SimLex-999.txt", "README.txt"]
    assert len(downloads) == 1
    monkeypatch.setenv("LMLIB_DATA_DIR", str(tmp_path))
    assert len(data.load_simlex999()) == 999


@pytest.mark.network
def test_an_interrupted_transfer_leaves_nothing_behind(server, tmp_path):
    f = _local("tinyshakespeare/input.txt", f"{server}/cut-short.txt")
    with pytest.raises(DataError, match="cut-short.txt"):
        data.fetch([f], tmp_path)
    assert not any(tmp_path.rglob("*.*")), "neither a partial file nor a temporary file remains"


@pytest.mark.network
def test_a_download_with_the_wrong_bytes_is_not_written(server, tmp_path):
    f = DataFile("ptb/ptb.test.txt", data.data_file("ptb/ptb.test.txt").sha256, 1, f"{server}/input.txt")
    with pytest.raises(DataError, match="expected dd65dff3"):
        data.fetch([f], tmp_path)
    assert not any(tmp_path.rglob("*.*"))


@pytest.mark.network
def test_a_corrupt_local_copy_is_not_silently_replaced(server, tmp_path):
    f = _local("tinyshakespeare/input.txt", f"{server}/input.txt")
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / f.path).write_text("not shakespeare")
    with pytest.raises(DataError, match="failed its checksum"):
        data.fetch([f], tmp_path)


# -- the command line ----------------------------------------------------------------------------


def _cli(*args, env_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LMLIB_DATA_DIR": str(env_dir), "LMLIB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "lmlib", "data", *args], capture_output=True, text=True, env=env)


def test_cli_verify_reports_every_dataset_ok(mirror):
    run = _cli("verify", env_dir=mirror)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("OK ") == sum(len(ds.files) for ds in data.DATASETS.values())
    assert "all files verified" in run.stdout


def test_cli_verify_refuses_one_corrupt_byte(copy_of):
    root = copy_of("ptb/ptb.train.txt", "ptb/ptb.valid.txt", "ptb/ptb.test.txt")
    target = root / "ptb/ptb.test.txt"
    raw = bytearray(target.read_bytes())
    raw[-2] = ord("#")
    target.write_bytes(bytes(raw))
    run = _cli("verify", "ptb", env_dir=root)
    assert run.returncode == 1
    assert "OK      ptb/ptb.train.txt" in run.stdout
    assert "FAILED  ptb/ptb.test.txt" in run.stdout and "expected sha256 dd65dff3" in run.stdout


def test_cli_list_and_unknown_names(mirror):
    listed = _cli("list", env_dir=mirror)
    assert listed.returncode == 0 and all(name in listed.stdout for name in data.DATASETS)
    bad = _cli("verify", "nope", env_dir=mirror)
    assert bad.returncode == 2 and "lmlib knows" in bad.stderr


def test_fetch_with_a_present_valid_copy_does_not_download(copy_of, monkeypatch):
    root = copy_of("timemachine/timemachine.txt")
    monkeypatch.setattr(data.store, "_download", lambda url: pytest.fail("nothing should be downloaded"))
    assert data.fetch_dataset("timemachine", root) == [root / "timemachine/timemachine.txt"]
    assert io.StringIO(data.load_time_machine()).readline().startswith("The Time Machine")


@pytest.mark.network
def test_a_page_that_is_not_a_zip_is_a_clear_error(server, tmp_path):
    f = _local("word-eval/SimLex-999/SimLex-999.txt", f"{server}/input.txt", "SimLex-999/SimLex-999.txt")
    with pytest.raises(DataError, match="did not return a zip archive"):
        data.fetch([f], tmp_path)
    assert not any(tmp_path.rglob("*.*"))


@pytest.mark.network
def test_a_failed_write_leaves_no_partial_file(server, tmp_path, monkeypatch):
    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(data.store.os, "replace", disk_full)
    f = _local("tinyshakespeare/input.txt", f"{server}/input.txt")
    with pytest.raises(DataError, match="could not write .*No space left on device"):
        data.fetch([f], tmp_path)
    assert not any(tmp_path.rglob("*.*")), "the temporary file is removed when the rename fails"
