"""Writing a benchmark's result file: whole or not at all.

A run killed halfway (a long run on a shared machine, Ctrl-C) must not leave a truncated JSON that a notebook then
fails to read, so the file is written beside its final name and moved into place in one step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_result(path: Path, data: dict) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically (a temporary file, then ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def kept_rows(path: Path, settings: dict, checkpoint_sha256: str) -> list[dict]:
    """The rows of the result at ``path`` when it was made with the same ``settings`` (compared as JSON stores them)
    from the same checkpoint, so that a long run that stopped goes on where it was; otherwise none."""
    previous = json.loads(path.read_text()) if path.is_file() else None
    if previous and previous["settings"] == json.loads(json.dumps(settings)) \
            and previous["checkpoint_sha256"] == checkpoint_sha256:
        return previous["rows"]
    return []
