"""Finding, verifying and downloading dataset files.

Each load hashes the file again (about 50 ms for the largest), so a copy that was corrupted after it
was first fetched is still caught. Downloads go to a temporary file in the same folder and are renamed
into place only once their checksum is right, so an interrupted transfer leaves nothing behind.

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
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from .registry import DataFile, dataset

CONNECT_TIMEOUT_S = 15.0
_CHUNK = 1 << 20


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


def verify(file: DataFile, root: Path | None = None) -> Path:
    """Return the path of ``file`` after checking its sha256; raise :class:`DataError` if it is wrong."""
    root = data_dir() if root is None else Path(root)
    path = root / file.path
    if not path.is_file():
        raise DataError(
            f"{file.path} is not in {root}. Run `python -m lmlib data fetch` to download it, "
            f"or set LMLIB_DATA_DIR to a folder that holds a verified copy."
        )
    actual = sha256_of(path)
    if actual != file.sha256:
        size = path.stat().st_size
        raise DataError(
            f"{path} failed its checksum: expected sha256 {file.sha256} ({file.bytes:,} bytes), "
            f"got {actual} ({size:,} bytes). The file is corrupt, truncated or not the published one. "
            f"Delete it and run `python -m lmlib data fetch` to download it again, "
            f"or point LMLIB_DATA_DIR at a verified copy."
        )
    return path


def _download(url: str, label: str, root: Path) -> bytes:
    if os.environ.get("LMLIB_OFFLINE") == "1":
        raise DataError(
            f"{label} is not in {root} and downloads are disabled (LMLIB_OFFLINE=1), so {url} was not fetched. "
            f"Set LMLIB_DATA_DIR to a folder that holds a verified copy, or unset LMLIB_OFFLINE to download it."
        )
    request = urllib.request.Request(url, headers={"User-Agent": "lmlib-data/0.1"})
    try:
        with urllib.request.urlopen(request, timeout=CONNECT_TIMEOUT_S) as response:
            expected = response.headers.get("Content-Length")
            body = response.read()
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        raise DataError(
            f"could not download {url}: {getattr(err, 'reason', err)}. If this machine is offline, "
            f"copy the dataset into a folder and set LMLIB_DATA_DIR to it."
        ) from None
    if expected is not None and len(body) != int(expected):
        raise DataError(f"download of {url} was cut short: {len(body):,} of {int(expected):,} bytes arrived")
    return body


def _write_atomically(path: Path, payload: bytes, sha256: str, label: str) -> None:
    actual = hashlib.sha256(payload).hexdigest()
    if actual != sha256:
        raise DataError(
            f"{label}: downloaded bytes hash to {actual}, expected {sha256}. The source has changed or the "
            f"transfer was damaged; nothing was written."
        )
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        raise DataError(
            f"{label}: could not write {path}: {err.strerror or err}. Make the folder writable, or set "
            f"LMLIB_DATA_DIR to a writable folder (or to one that already holds a verified copy)."
        ) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def fetch(files: list[DataFile] | tuple[DataFile, ...], root: Path | None = None) -> list[Path]:
    """Make sure every file in ``files`` is present and verified under ``root``, downloading what is missing.

    A present but corrupt file is refused, not silently replaced: deleting it is the reader's call.
    Files that share one zip archive cost one download.
    """
    root = data_dir() if root is None else Path(root)
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
    from .registry import data_file

    file = data_file(file_path)
    return fetch([file])[0]


def fetch_dataset(name: str, root: Path | None = None) -> list[Path]:
    return fetch(dataset(name).files, root)
