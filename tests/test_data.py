"""The dataset registry, verification on every load, the download path and the loaders.

The download path is exercised for real: an HTTP server on 127.0.0.1 serves copies of the shared
mirror, one file bare and two inside a zip archive, as the public sources publish them, and IMDb-style
.tar.gz archives that the packing rule turns into JSON Lines.
"""

import builtins
import contextlib
import gzip
import hashlib
import http.server
import inspect
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from lmlib import data
from lmlib.data import DataError, DataFile, Packed

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
        if "derived" in entry:  # packed from the publisher's archive, which is pinned by its own checksum
            assert f.url == entry["official_archive"] and f.member is None
            assert f.packed == Packed("imdb", Path(path).stem, entry["official_archive_sha256"],
                                      entry["official_archive_bytes"])
            continue
        assert f.packed is None
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


def test_imdb_loader_gives_the_published_counts_labels_and_ratings(mirror, monkeypatch):
    monkeypatch.setenv("LMLIB_DATA_DIR", str(mirror))
    for split in ("train", "test"):
        reviews = data.load_imdb(split, with_ratings=True)
        assert len(reviews.texts) == len(reviews.labels) == len(reviews.ratings) == 25_000
        assert reviews.labels == [0] * 12_500 + [1] * 12_500, "negatives first, then positives"
        assert all(r <= 4 for r in reviews.ratings[:12_500]) and all(r >= 7 for r in reviews.ratings[12_500:])
    texts, labels = data.load_imdb("train")  # unpacks like the other labelled loaders
    assert texts[0].startswith("Story of a man who has unnatural feelings for a pig.")
    assert sum(1 for t in texts if "\x85" in t) == 350, "U+0085 inside reviews is not a line break"
    unsup = data.load_imdb("unsup", with_ratings=True)
    assert len(unsup.texts) == 50_000
    assert set(unsup.labels) == {data.UNLABELLED} and set(unsup.ratings) == {0}


def test_imdb_html_line_breaks_become_newlines(mirror, monkeypatch):
    monkeypatch.setenv("LMLIB_DATA_DIR", str(mirror))
    raw, _ = data.load_imdb("train", keep_html=True)
    clean, _ = data.load_imdb("train")
    assert sum(t.count("<br /><br />") for t in raw) == 50_935, "the published texts are unchanged"
    assert not any("<br" in t.lower() for t in clean)
    assert not any("\n" in t for t in raw), "so every newline in the clean text was a <br />"
    assert [t.replace("\n", "<br />") for t in clean] == raw
    unsup = data.load_imdb("unsup")  # also holds three bare <br> / <BR> tags
    assert not any(re.search("<br", t, re.IGNORECASE) for t in unsup.texts)


_TINY_CONLLU = (
    "# sent_id = 1\n"
    "# text = I don't know.\n"
    "1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_\n"
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_\n"
    "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_\n"
    "4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_\n"
    "5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_\n"
    "\n"
    "# sent_id = 2\n"
    "1\tSue\tSue\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n"
    "2\tlikes\tlike\tVERB\tVBZ\t_\t0\troot\t_\t_\n"
    "3\ttea\ttea\tNOUN\tNN\t_\t2\tobj\t_\t_\n"
    "4\tand\tand\tCCONJ\tCC\t_\t6\tcc\t_\t_\n"
    "5\tPaul\tPaul\tPROPN\tNNP\t_\t2\tconj\t_\t_\n"
    "5.1\tlikes\tlike\tVERB\tVBZ\t_\t_\t_\t2:conj\tCopyOf=2\n"
    "6\tcoffee\tcoffee\tNOUN\tNN\t_\t5\torphan\t5.1:obj\t_\n"
)  # the last sentence has no closing blank line: the end of the text closes it


def test_conllu_parsing_skips_multiword_ranges_and_empty_nodes():
    assert data.parse_conllu_pos(_TINY_CONLLU) == [
        [("I", "PRON"), ("do", "AUX"), ("n't", "PART"), ("know", "VERB"), (".", "PUNCT")],
        [("Sue", "PROPN"), ("likes", "VERB"), ("tea", "NOUN"), ("and", "CCONJ"), ("Paul", "PROPN"),
         ("coffee", "NOUN")],
    ]
    assert data.parse_conllu_pos(_TINY_CONLLU.replace("\n", "\r\n")) == data.parse_conllu_pos(_TINY_CONLLU)
    with pytest.raises(ValueError, match="tiny.conllu, line 3: expected 10 tab-separated CoNLL-U columns, got 3"):
        data.parse_conllu_pos("# x\n\n1\tI\tPRON\n", "tiny.conllu")


def test_ud_ewt_loader_gives_the_release_sentence_counts(mirror, monkeypatch):
    monkeypatch.setenv("LMLIB_DATA_DIR", str(mirror))
    counts = {}
    for split in ("train", "dev", "test"):
        sentences = data.load_ud_pos(split)
        counts[split] = (len(sentences), sum(len(s) for s in sentences))
    assert counts == {"train": (12_544, 204_577), "dev": (2_001, 25_147), "test": (2_077, 25_094)}
    dev = data.load_ud_pos("dev")
    assert dev[0] == [("From", "ADP"), ("the", "DET"), ("AP", "PROPN"), ("comes", "VERB"), ("this", "DET"),
                      ("story", "NOUN"), (":", "PUNCT")]
    assert {tag for s in dev for _, tag in s} == {
        "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X"}, "the 17 universal tags"


def test_unknown_names_and_splits_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="train, valid, test"):
        data.load_ptb("dev")
    with pytest.raises(ValueError, match="train, dev"):
        data.load_sst2("test")
    with pytest.raises(ValueError, match="train, test, unsup"):
        data.load_imdb("valid")
    with pytest.raises(ValueError, match="train, dev, test"):
        data.load_ud_pos("valid")
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


def test_bad_copies_of_imdb_and_ud_are_refused_naming_file_checksums_and_fix(copy_of):
    root = copy_of("imdb/test.jsonl", "ud-ewt/en_ewt-ud-dev.conllu")
    imdb = root / "imdb/test.jsonl"
    raw = imdb.read_bytes()
    imdb.write_bytes(raw[: raw.rindex(b"\n", 0, len(raw) - 1) + 1])  # the last review is gone
    with pytest.raises(DataError) as truncated:
        data.load_imdb("test")
    ud = root / "ud-ewt/en_ewt-ud-dev.conllu"
    ud.write_bytes(ud.read_bytes().replace(b"\tNOUN\t", b"\tVERB\t", 1))  # one tag changed, same size
    with pytest.raises(DataError) as corrupt:
        data.load_ud_pos("dev")
    for err, file, payload in ((truncated, imdb, imdb.read_bytes()), (corrupt, ud, ud.read_bytes())):
        message = str(err.value)
        registered = data.data_file(f"{file.parent.name}/{file.name}")
        assert str(file) in message and registered.sha256 in message
        assert hashlib.sha256(payload).hexdigest() in message and f"{len(payload):,} bytes" in message
        assert "python -m lmlib data fetch" in message and "LMLIB_DATA_DIR" in message


def test_a_loader_hashes_and_decodes_one_single_read(copy_of, monkeypatch):
    """A file replaced between a checksum read and a decoding read would be decoded unverified."""
    root = copy_of("timemachine/timemachine.txt")
    target = root / "timemachine/timemachine.txt"
    swapped = target.read_bytes().replace(b"Time Machine", b"Time Mashine")  # same size, wrong bytes
    real_open, opened = builtins.open, []

    def open_and_swap_after_first_read(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file) == target and "w" not in mode:
            opened.append(mode)
            if len(opened) > 1:  # another process replaces the file after the first read
                with real_open(target, "wb") as fh:
                    fh.write(swapped)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_and_swap_after_first_read)
    monkeypatch.setattr(io, "open", open_and_swap_after_first_read)  # what Path.read_bytes calls
    text = data.load_time_machine()
    assert opened == ["rb"], "the loader read the file once"
    assert text.startswith("The Time Machine, by H. G. Wells") and "Mashine" not in text


def test_missing_while_offline_is_an_immediate_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LMLIB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LMLIB_OFFLINE", "1")
    with pytest.raises(DataError, match="LMLIB_OFFLINE=1") as refused:
        data.load_ptb("test")
    message = str(refused.value)
    assert "ptb/ptb.test.txt" in message and "LMLIB_DATA_DIR" in message, "names the file and the way out"
    for load, name in ((lambda: data.load_imdb("unsup"), "imdb/unsup.jsonl"),
                       (lambda: data.load_ud_pos("test"), "ud-ewt/en_ewt-ud-test.conllu")):
        with pytest.raises(DataError, match=f"{name} .*LMLIB_OFFLINE=1"):
            load()
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


@contextlib.contextmanager
def _serving(root: Path):
    """An HTTP server on 127.0.0.1 for the files in ``root``; yields its base address."""
    handler = lambda *a, **kw: _Handler(*a, directory=str(root), **kw)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server(mirror, tmp_path_factory, downloads_allowed):
    """Serve shakespeare bare, a zip holding the SimLex files, and a tiny IMDb-style archive."""
    root = tmp_path_factory.mktemp("served")
    shutil.copyfile(mirror / "tinyshakespeare/input.txt", root / "input.txt")
    with zipfile.ZipFile(root / "SimLex-999.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("SimLex-999.txt", "README.txt"):
            zf.write(mirror / "word-eval/SimLex-999" / name, f"SimLex-999/{name}")
    (root / "aclImdb_tiny.tar.gz").write_bytes(_tar_gz(_TINY_IMDB))
    with _serving(root) as address:
        yield address


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
    with pytest.raises(DataError, match=r"download of .*/cut-short\.txt was cut short: 11 of 5,000 bytes arrived"):
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


# -- IMDb: building the JSON Lines from the publisher's archive ------------------------------------

# A tiny archive laid out like aclImdb_v1.tar.gz, its members deliberately out of order, with files the
# rule must ignore and texts that exercise JSON escaping (quote, tab, backslash, newline) and the
# characters ensure_ascii=False leaves raw (e with acute, U+0085, U+2028).
_TINY_IMDB = {
    "aclImdb/train/pos/10_9.txt": b"Great <br /><br />film.",
    "aclImdb/README": b"not a review",
    "aclImdb/train/neg/1_1.txt": b"Bad\xc2\x85 really.",
    "aclImdb/test/pos/0_10.txt": b"Loved it.\n",
    "aclImdb/train/unsup/11_0.txt": b"Later one.",
    "aclImdb/train/pos/2_7.txt": b'Caf\xc3\xa9 "noir"\tok \xe2\x80\xa8 x',
    "aclImdb/train/labeledBow.feat": b"0 0:1",
    "aclImdb/test/neg/3_2.txt": b"Dull\\ plot.",
    "aclImdb/train/neg/0_4.txt": b"Meh.",
    "aclImdb/train/unsup/9_0.txt": b"Earlier one.",
    "aclImdb/imdb.vocab": b"the\nand\n",
    "aclImdb/test/urls_neg.txt": b"http://www.imdb.com/title/tt0000000/usercomments\n",
}

# What the packing rule gives for it, written out by hand: neg before pos, ids in numeric order (2 before 10,
# 9 before 11), keys id/label/rating/text, ", " and ": " separators, UTF-8 left unescaped.
_TINY_IMDB_PACKED = {
    "train": b'{"id": "train/neg/0_4.txt", "label": "neg", "rating": 4, "text": "Meh."}\n'
             b'{"id": "train/neg/1_1.txt", "label": "neg", "rating": 1, "text": "Bad\xc2\x85 really."}\n'
             b'{"id": "train/pos/2_7.txt", "label": "pos", "rating": 7, "text": "Caf\xc3\xa9 \\"noir\\"\\tok \xe2\x80\xa8 x"}\n'
             b'{"id": "train/pos/10_9.txt", "label": "pos", "rating": 9, "text": "Great <br /><br />film."}\n',
    "test": b'{"id": "test/neg/3_2.txt", "label": "neg", "rating": 2, "text": "Dull\\\\ plot."}\n'
            b'{"id": "test/pos/0_10.txt", "label": "pos", "rating": 10, "text": "Loved it.\\n"}\n',
    "unsup": b'{"id": "train/unsup/9_0.txt", "label": "unsup", "rating": 0, "text": "Earlier one."}\n'
             b'{"id": "train/unsup/11_0.txt", "label": "unsup", "rating": 0, "text": "Later one."}\n',
}


def _tar_gz(members: dict[str, bytes]) -> bytes:
    """The same bytes on every call: member times are 0, and so is the gzip header's (not the clock's)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return gzip.compress(buffer.getvalue(), compresslevel=1, mtime=0)


def _packed_files(url: str, archive: bytes, expected: dict[str, bytes]) -> list[DataFile]:
    """DataFiles like the registry's IMDb entries, pinned to a test archive and its expected outputs."""
    pin = hashlib.sha256(archive).hexdigest(), len(archive)
    return [DataFile(f"imdb/{part}.jsonl", hashlib.sha256(out).hexdigest(), len(out), url, packed=Packed("imdb", part, *pin))
            for part, out in expected.items()]


@pytest.mark.network
def test_fetch_builds_imdb_jsonl_by_the_packing_rule_from_one_download(server, tmp_path, monkeypatch):
    archive = _tar_gz(_TINY_IMDB)
    files = _packed_files(f"{server}/aclImdb_tiny.tar.gz", archive, _TINY_IMDB_PACKED)
    downloads = []
    real = data.store._stream
    monkeypatch.setattr(data.store, "_stream", lambda url, *rest: downloads.append(url) or real(url, *rest))
    paths = data.fetch(files, tmp_path)
    assert len(downloads) == 1, "three files, one download"
    assert {p.name: p.read_bytes() for p in paths} == {f"{k}.jsonl": v for k, v in _TINY_IMDB_PACKED.items()}
    assert sorted(p.name for p in (tmp_path / "imdb").iterdir()) == ["test.jsonl", "train.jsonl", "unsup.jsonl"], \
        "no archive, build folder or temporary file is left"


@pytest.mark.network
def test_imdb_packing_reproduces_the_mirror_bit_for_bit(mirror, tmp_path, downloads_allowed):
    """Rebuild test.jsonl from an archive of the mirror's own reviews, shuffled: it must hash as registered."""
    records = [json.loads(line) for line in (mirror / "imdb/test.jsonl").read_text("utf-8").split("\n") if line]
    members = {f"aclImdb/{r['id']}": r["text"].encode("utf-8") for r in records}
    order = list(members)
    random.Random(0).shuffle(order)
    archive = _tar_gz({name: members[name] for name in order})
    served = tmp_path / "served"
    served.mkdir()
    (served / "aclImdb_v1.tar.gz").write_bytes(archive)
    registered = data.data_file("imdb/test.jsonl")
    with _serving(served) as address:
        f = DataFile(registered.path, registered.sha256, registered.bytes, f"{address}/aclImdb_v1.tar.gz",
                     packed=Packed("imdb", "test", hashlib.sha256(archive).hexdigest(), len(archive)))
        [built] = data.fetch([f], tmp_path / "data")
    assert data.sha256_of(built) == registered.sha256 == data.sha256_of(mirror / "imdb/test.jsonl")


@pytest.mark.network
def test_an_archive_with_the_wrong_checksum_builds_nothing(server, tmp_path):
    archive = _tar_gz(_TINY_IMDB)
    [f] = _packed_files(f"{server}/aclImdb_tiny.tar.gz", archive, {"train": _TINY_IMDB_PACKED["train"]})
    pinned = DataFile(f.path, f.sha256, f.bytes, f.url, packed=Packed("imdb", "train", "ab" * 32, 84_125_825))
    with pytest.raises(DataError) as err:
        data.fetch([pinned], tmp_path)
    message = str(err.value)
    assert "imdb/train.jsonl" in message and "aclImdb_tiny.tar.gz" in message
    assert hashlib.sha256(archive).hexdigest() in message and "ab" * 32 in message
    assert f"{len(archive):,} bytes" in message and "84,125,825 bytes" in message and "LMLIB_DATA_DIR" in message
    assert not any(tmp_path.rglob("*.*")), "no archive, build folder or partial file is left"


@pytest.mark.network
def test_one_wrong_built_file_puts_none_of_them_in_place(server, tmp_path):
    archive = _tar_gz(_TINY_IMDB)
    expected = dict(_TINY_IMDB_PACKED, test=_TINY_IMDB_PACKED["test"].replace(b"Dull", b"Dusk"))
    files = _packed_files(f"{server}/aclImdb_tiny.tar.gz", archive, expected)
    with pytest.raises(DataError, match=r"imdb/test\.jsonl: built from .* hashes to "
                                        + hashlib.sha256(_TINY_IMDB_PACKED["test"]).hexdigest()):
        data.fetch(files, tmp_path)
    assert not any(tmp_path.rglob("*.*")), "train and unsup built right, yet nothing is put in place"


@pytest.mark.network
def test_a_cut_short_or_foreign_archive_builds_nothing(server, tmp_path):
    [cut] = _packed_files(f"{server}/cut-short.txt", b"x", {"train": b""})
    with pytest.raises(DataError, match="was cut short: 11 of 5,000 bytes"):
        data.fetch([cut], tmp_path)
    shakespeare = data.data_file("tinyshakespeare/input.txt")
    foreign = DataFile("imdb/train.jsonl", "0" * 64, 1, f"{server}/input.txt",
                       packed=Packed("imdb", "train", shakespeare.sha256, shakespeare.bytes))
    with pytest.raises(DataError, match="could not be built from .*input.txt: .* not a readable .tar.gz"):
        data.fetch([foreign], tmp_path)
    assert not any(tmp_path.rglob("*.*"))


def test_packing_refuses_an_archive_without_reviews_or_with_duplicate_ids(tmp_path):
    empty = tmp_path / "empty.tar.gz"
    empty.write_bytes(_tar_gz({"aclImdb/README": b"x"}))
    with pytest.raises(ValueError, match="no review files under aclImdb/train/unsup/"):
        data.imdb_pack.pack(empty, {"unsup": io.BytesIO()})
    twice = tmp_path / "twice.tar.gz"
    twice.write_bytes(_tar_gz({"aclImdb/test/neg/1_2.txt": b"a", "aclImdb/test/neg/1_3.txt": b"b",
                               "aclImdb/test/pos/0_8.txt": b"c"}))
    with pytest.raises(ValueError, match="share an id"):
        data.imdb_pack.pack(twice, {"test": io.BytesIO()})


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


@pytest.mark.network
def test_cli_fetch_builds_packed_files_from_one_download_and_reports_each_file(server, tmp_path, monkeypatch, capsys):
    from lmlib.__main__ import main

    archive = _tar_gz(_TINY_IMDB)
    packed = _packed_files(f"{server}/aclImdb_tiny.tar.gz", archive, _TINY_IMDB_PACKED)
    bare = _local("tinyshakespeare/input.txt", f"{server}/input.txt")
    with socket_on_free_port() as port:
        pass
    gone = DataFile("tiny/gone.txt", "0" * 64, 1, f"http://127.0.0.1:{port}/gone.txt")
    tiny = data.Dataset("tiny", "a tiny test set", (*packed, bare, gone), "127.0.0.1", "none", "none")
    for module in (data, data.registry):
        monkeypatch.setattr(module, "DATASETS", {"tiny": tiny})
    monkeypatch.setenv("LMLIB_DATA_DIR", str(tmp_path))
    downloads = []
    real = data.store._stream
    monkeypatch.setattr(data.store, "_stream", lambda url, *rest: downloads.append(url) or real(url, *rest))
    assert main(["data", "fetch", "tiny"]) == 1
    out = capsys.readouterr().out
    assert downloads.count(packed[0].url) == 1, "the three packed files share one download"
    for f in (*packed, bare):
        assert f"OK      {f.path}\n" in out
    assert re.search(r"FAILED  tiny/gone\.txt: could not download http://127\.0\.0\.1:\d+/gone\.txt", out), \
        "a file that fails is reported with its own reason"
    assert out.endswith("not all files fetched in " + str(tmp_path) + " (1 failed)\n")


def test_cli_help_says_what_each_data_action_does():
    run = subprocess.run([sys.executable, "-m", "lmlib", "data", "--help"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())  # argparse wraps lines to the terminal width
    for action, words in (("list", "show each dataset, its size on disk and whether all its files are present"),
                          ("fetch", "download what is missing"),
                          ("verify", "check the sha256 of every file already present; download nothing")):
        assert re.search(rf"\b{action} {words}", text), f"`data --help` explains {action!r}: {text}"
    fetch_help = subprocess.run([sys.executable, "-m", "lmlib", "data", "fetch", "--help"], capture_output=True, text=True)
    assert "imdb" in fetch_help.stdout and "ud-ewt" in fetch_help.stdout, "names the datasets it can take"


def test_fetch_with_a_present_valid_copy_does_not_download(copy_of, monkeypatch):
    root = copy_of("timemachine/timemachine.txt")
    target = root / "timemachine/timemachine.txt"
    published, calls = target.read_bytes(), []

    def fake_download(url: str, label: str, root: Path) -> bytes:
        calls.append((url, label, root))
        return published

    assert inspect.signature(fake_download).parameters.keys() == inspect.signature(data.store._download).parameters.keys()
    monkeypatch.setattr(data.store, "_download", fake_download)
    assert data.fetch_dataset("timemachine", root) == [target]
    assert calls == [], "a present, valid copy is not downloaded again"
    # the fake is the function fetch really calls: with the file gone it is called once, as the real one would be
    target.unlink()
    assert data.fetch_dataset("timemachine", root) == [target]
    assert calls == [(data.data_file("timemachine/timemachine.txt").url, "timemachine/timemachine.txt", root)]
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
