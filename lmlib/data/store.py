"""Finding, verifying and downloading dataset files.

Each load hashes the file again, so a copy that was corrupted after it was first fetched is still caught. A loader reads the file once and both
hashes and decodes those same bytes (:func:`read_verified`): a file replaced between a check and a second
read could otherwise be decoded unverified. Downloads go to a temporary file in the same folder and are
renamed into place only once their checksum is right, so an interrupted transfer leaves nothing behind.
Files packed from a whole archive (IMDb) are built in a hidden folder beside their targets from an archive
that was checked first, and moved into place only once every one of them hashes right.

Where the files live, in order:

1. ``LMLIB_DATA_DIR``, a folder laid out like the shared mirror (``ptb/ptb.train.txt``, ...);
2. otherwise the repository's own ``data/`` folder when lmlib runs from a checkout;
3. otherwise ``~/.cache/lmlib``.

``LMLIB_OFFLINE=1`` forbids downloads: a missing file is then an immediate error.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

from ..runtime import atomic_write
from . import imdb_pack
from .registry import DataFile, data_file, dataset

CONNECT_TIMEOUT_S = 15.0
_CHUNK = 1 << 20
# Packing rules for files built from a whole archive (DataFile.packed.rule -> function(archive, outputs)).
PACKERS = {"imdb": imdb_pack.pack}


class DataError(RuntimeError):
    """A dataset file is missing, corrupt or cannot be fetched; the message says what to do."""


def data_dir() -> Path:
    """The folder datasets are read from and downloaded into."""
    env = os.environ.get("LMLIB_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve()
    repo_data = Path(__file__).resolve().parents[2] / "data"
    if (repo_data / "README.md").is_file():
        return repo_data
    return Path.home() / ".cache" / "lmlib"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _unwritable(label: str, where: Path, err: OSError) -> DataError:
    return DataError(
        f"{label}: could not write {where}: {err.strerror or err}. Make the folder writable, or set "
        f"LMLIB_DATA_DIR to a writable folder (or to one that already holds a verified copy)."
    )


def _mismatch(file: DataFile, path: Path, actual: str, size: int) -> DataError:
    return DataError(
        f"{path} failed its checksum: expected sha256 {file.sha256} ({file.bytes:,} bytes), "
        f"got {actual} ({size:,} bytes). The file is corrupt, truncated or not the published one. "
        f"Delete it and run `python -m lmlib data fetch` to download it again, "
        f"or point LMLIB_DATA_DIR at a verified copy."
    )


def verify(file: DataFile, root: Path | None = None) -> Path:
    """Return the path of ``file`` after checking its sha256; raise :class:`DataError` if it is wrong."""
    root = data_dir() if root is None else Path(root)
    path = root / file.path
    if not path.is_file():
        raise DataError(f"{file.path} is not in {root}. Run `python -m lmlib data fetch` to download it, "
                        f"or set LMLIB_DATA_DIR to a folder that holds a verified copy.")
    actual = sha256_of(path)
    if actual != file.sha256:
        raise _mismatch(file, path, actual, path.stat().st_size)
    return path


def read_verified(file_path: str, root: Path | None = None) -> bytes:
    """The bytes of one registered file, fetched first if missing, hashed and returned from ONE read.

    Loaders decode what this returns, so the bytes they decode are exactly the bytes that were checked.
    """
    file = data_file(file_path)
    root = data_dir() if root is None else Path(root)
    target = root / file.path
    if not target.is_file():
        fetch([file], root)
    with open(target, "rb") as fh:
        payload = fh.read()
    actual = hashlib.sha256(payload).hexdigest()
    if actual != file.sha256:
        raise _mismatch(file, target, actual, len(payload))
    return payload


def _refuse_if_offline(url: str, label: str, root: Path) -> None:
    if os.environ.get("LMLIB_OFFLINE") == "1":
        is_ = "are" if ", " in label else "is"
        raise DataError(
            f"{label} {is_} not in {root} and downloads are disabled (LMLIB_OFFLINE=1), so {url} was not fetched. "
            f"Set LMLIB_DATA_DIR to a folder that holds a verified copy, or unset LMLIB_OFFLINE to download it."
        )


def _stream(url: str, label: str, root: Path, sink: BinaryIO) -> int:
    """Copy the body at ``url`` into ``sink`` chunk by chunk; return its size.

    The size is checked against the server's Content-Length: a connection that closes early ends the
    chunked read quietly, and only that comparison tells a cut-short transfer from a complete one.
    """
    _refuse_if_offline(url, label, root)
    request = urllib.request.Request(url, headers={"User-Agent": "lmlib-data/0.1"})
    received = 0
    expected = None
    try:
        with urllib.request.urlopen(request, timeout=CONNECT_TIMEOUT_S) as response:
            expected = response.headers.get("Content-Length")
            while chunk := response.read(_CHUNK):
                sink.write(chunk)
                received += len(chunk)
    except http.client.IncompleteRead as err:
        received += len(err.partial)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        raise DataError(
            f"could not download {url}: {getattr(err, 'reason', err)}. If this machine is offline, "
            f"copy the dataset into a folder and set LMLIB_DATA_DIR to it."
        ) from None
    if expected is not None and received != int(expected):
        raise DataError(
            f"download of {url} was cut short: {received:,} of {int(expected):,} bytes arrived. "
            f"Nothing was written; run `python -m lmlib data fetch` again."
        )
    return received


def _download(url: str, label: str, root: Path) -> bytes:
    """The whole body at ``url`` in memory (for single files and small zip archives)."""
    buffer = io.BytesIO()
    _stream(url, label, root, buffer)
    return buffer.getvalue()


def _write_atomically(path: Path, payload: bytes, sha256: str, label: str) -> None:
    actual = hashlib.sha256(payload).hexdigest()
    if actual != sha256:
        raise DataError(
            f"{label}: downloaded bytes hash to {actual}, expected {sha256}. The source has changed or the "
            f"transfer was damaged; nothing was written."
        )
    def write(tmp: str) -> None:  # flushed to the disk before the rename, so a crash leaves no empty file in place
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())

    try:
        atomic_write(path, write)
    except OSError as err:
        raise _unwritable(label, path, err) from None


def _build_packed(files: list[DataFile], root: Path) -> None:
    """Build ``files`` (all packed from one archive by one rule) and move them into place together.

    The archive is streamed to disk and checked against its own size and sha256 before anything is built;
    each built file is checked against its sha256 before any is renamed into place. Everything happens in
    a hidden build folder beside the targets, removed whatever happens, so a failure leaves nothing behind.
    """
    url, packed = files[0].url, files[0].packed
    labels = ", ".join(f.path for f in files)
    target_dir = (root / files[0].path).parent
    _refuse_if_offline(url, labels, root)
    build = None
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(dir=target_dir, prefix=".build-", suffix=".part"))
        archive = build / url.rsplit("/", 1)[-1]
        with open(archive, "wb") as fh:
            size = _stream(url, labels, root, fh)
        actual = sha256_of(archive)
        if (actual, size) != (packed.archive_sha256, packed.archive_bytes):
            raise DataError(
                f"{labels}: the archive {url} hashes to {actual} ({size:,} bytes), expected "
                f"{packed.archive_sha256} ({packed.archive_bytes:,} bytes). The source has changed or the "
                f"transfer was damaged; nothing was written. Try again later, or set LMLIB_DATA_DIR to a "
                f"folder that holds a verified copy."
            )
        built = {f.packed.part: build / Path(f.path).name for f in files}
        with ExitStack() as stack:
            outputs = {part: stack.enter_context(open(p, "wb")) for part, p in built.items()}
            try:
                PACKERS[packed.rule](archive, outputs)
            except ValueError as err:
                raise DataError(f"{labels}: could not be built from {url}: {err}. Nothing was written.") from None
        for f in files:
            made = built[f.packed.part]
            actual = sha256_of(made)
            if actual != f.sha256:
                raise DataError(
                    f"{f.path}: built from {url} by the {packed.rule!r} packing rule, it hashes to {actual} "
                    f"({made.stat().st_size:,} bytes), expected {f.sha256} ({f.bytes:,} bytes); nothing was "
                    f"written. The archive verified, so the packing differs: point LMLIB_DATA_DIR at a "
                    f"verified copy and report the difference."
                )
        for f in files:
            os.replace(built[f.packed.part], root / f.path)
    except OSError as err:
        raise _unwritable(labels, target_dir, err) from None
    finally:
        if build is not None:
            shutil.rmtree(build, ignore_errors=True)


def fetch(files: list[DataFile] | tuple[DataFile, ...], root: Path | None = None) -> list[Path]:
    """Make sure every file in ``files`` is present and verified under ``root``, downloading what is missing.

    A present but corrupt file is refused, not silently replaced: deleting it is the reader's call.
    Files that share one zip archive cost one download; so do files packed from one archive.
    """
    root = data_dir() if root is None else Path(root)
    packed_groups: dict[tuple[str, str], list[DataFile]] = {}
    for file in files:
        if file.packed is not None and not (root / file.path).is_file():
            packed_groups.setdefault((file.url, file.packed.rule), []).append(file)
    for group in packed_groups.values():
        _build_packed(group, root)

    archives: dict[str, zipfile.ZipFile] = {}
    paths = []
    for file in files:
        target = root / file.path
        if not target.is_file():
            if file.member is None:
                payload = _download(file.url, file.path, root)
            else:
                if file.url not in archives:
                    body = _download(file.url, file.path, root)
                    try:
                        archives[file.url] = zipfile.ZipFile(io.BytesIO(body))
                    except zipfile.BadZipFile:
                        raise DataError(
                            f"{file.path}: {file.url} did not return a zip archive ({len(body):,} bytes starting "
                            f"{body[:40]!r}); the address may be down or behind a proxy. Try again later, or set "
                            f"LMLIB_DATA_DIR to a folder that holds a verified copy."
                        ) from None
                try:
                    payload = archives[file.url].read(file.member)
                except KeyError:
                    raise DataError(f"{file.url} has no member {file.member!r}") from None
            _write_atomically(target, payload, file.sha256, file.path)
        paths.append(verify(file, root))
    return paths


def path(file_path: str) -> Path:
    """Verified local path of one registered file, fetched first if missing, e.g. ``path("ptb/ptb.test.txt")``."""
    return fetch([data_file(file_path)])[0]


def fetch_dataset(name: str, root: Path | None = None) -> list[Path]:
    """Fetch (if missing) and verify every file of the registered dataset ``name``; return their paths."""
    return fetch(dataset(name).files, root)
