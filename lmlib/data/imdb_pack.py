"""IMDb packing: the 100,000 review files of ``aclImdb_v1.tar.gz`` as three JSON Lines files.

The Large Movie Review Dataset (A. Maas et al., *Learning Word Vectors for Sentiment Analysis*, ACL 2011)
is published as one archive of small files named ``aclImdb/<split>/<label>/<id>_<rating>.txt``. Reading
100,000 files is slow and awkward to verify, so lmlib keeps every review's bytes unchanged but packs them
by this rule (the one the shared mirror documents, so the results hash to the mirror's sha256):

* ``train.jsonl``: ``train/neg`` then ``train/pos``; ``test.jsonl``: ``test/neg`` then ``test/pos``;
  ``unsup.jsonl``: ``train/unsup``. Within a directory, files are ordered by the integer ``<id>``.
* One line per review: ``json.dumps({"id": "<split>/<label>/<file name>", "label": "<label>",
  "rating": <rating as int>, "text": <the file's bytes decoded as UTF-8>}, ensure_ascii=False)``
  followed by ``"\\n"``, keys in that order, default separators; the file is encoded as UTF-8.

Because ``ensure_ascii=False`` leaves characters such as U+0085 unescaped, read the files by splitting on
``"\\n"`` only: ``str.splitlines`` would also break lines inside some reviews.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import BinaryIO

# Output file -> the archive directories it takes, in order.
PARTS: dict[str, tuple[str, ...]] = {
    "train": ("train/neg", "train/pos"),
    "test": ("test/neg", "test/pos"),
    "unsup": ("train/unsup",),
}

_REVIEW = re.compile(r"aclImdb/(?P<dir>(?:train|test)/(?:neg|pos|unsup))/(?P<id>\d+)_(?P<rating>\d+)\.txt")


def review_line(directory: str, name: str, rating: int, raw: bytes) -> bytes:
    """One packed line (UTF-8 bytes, ending in ``\\n``) for the review file ``directory/name``."""
    label = directory.split("/")[1]
    record = {"id": f"{directory}/{name}", "label": label, "rating": rating, "text": raw.decode("utf-8")}
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def _read_reviews(archive: Path, directories: set[str]) -> dict[str, list[tuple[int, str, int, bytes]]]:
    """Every review in ``directories``, as (id, file name, rating, bytes), in one pass over the archive.

    A gzip stream can only be read front to back cheaply, and the rule orders files by id, not by
    their position in the archive, so the reviews are held in memory (about 130 MB for all three parts).
    """
    found: dict[str, list[tuple[int, str, int, bytes]]] = {d: [] for d in directories}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            match = _REVIEW.fullmatch(member.name)
            if not member.isfile() or match is None or match["dir"] not in directories:
                continue
            raw = tar.extractfile(member).read()
            found[match["dir"]].append((int(match["id"]), member.name.rsplit("/", 1)[1], int(match["rating"]), raw))
    return found


def pack(archive: Path, outputs: dict[str, BinaryIO]) -> None:
    """Write each requested part (``train``, ``test``, ``unsup``) of the archive to its open binary file.

    Raises ``ValueError`` when a directory the rule needs is empty (not the IMDb archive) or holds two
    files with the same id (the order would be ambiguous).
    """
    unknown = set(outputs) - set(PARTS)
    if unknown:
        raise ValueError(f"no IMDb part called {sorted(unknown)}; choose from {', '.join(PARTS)}")
    directories = {d for part in outputs for d in PARTS[part]}
    try:
        reviews = _read_reviews(Path(archive), directories)
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ValueError(f"{archive} is not a readable .tar.gz archive: {err}") from None
    for part, sink in outputs.items():
        for directory in PARTS[part]:
            files = sorted(reviews[directory])
            if not files:
                raise ValueError(f"{archive} holds no review files under aclImdb/{directory}/; "
                                 f"it is not the IMDb archive aclImdb_v1.tar.gz")
            ids = [f[0] for f in files]
            if len(set(ids)) != len(ids):
                raise ValueError(f"{archive}: two files in aclImdb/{directory}/ share an id, so their order is undefined")
            for _, name, rating, raw in files:
                sink.write(review_line(directory, name, rating, raw))
