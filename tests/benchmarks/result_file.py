"""Writing a benchmark's result file: whole or not at all.

A run killed halfway (a long run on a shared machine, Ctrl-C) must not leave a truncated JSON that a notebook then
fails to read, so the file is written beside its final name and moved into place in one step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
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


def archived_random_init_rows(archive: Path, report: dict, settings: dict, pretrained: Callable[[dict], bool],
                              moved: dict[str, str] | None = None,
                              report_archive: Path | None = None) -> tuple[list[dict], list[dict]]:
    """``(dev rows, rows)`` of ``archive``, the results of the checkpoint shipped before: its dev sweep (none if it
    has none) and its rows that ``pretrained`` says did not read the pretrained weights, each marked ``"from"`` (a row
    copied there keeps its own, renamed by ``moved`` where that file was archived too), when that checkpoint had
    ``report``'s config and tokenizer file and the archive was measured with ``settings`` and that checkpoint;
    otherwise none. The checkpoint's ``pretrain.json`` is the ``checkpoint_report`` of ``archive``, or of
    ``report_archive`` where another archived result keeps it. A random-init run never reads the weights, so it is
    the same run for both checkpoints."""
    if not archive.is_file() or (report_archive is not None and not report_archive.is_file()):
        return [], []
    earlier = json.loads(archive.read_text())
    theirs = json.loads((report_archive or archive).read_text())["checkpoint_report"]
    if (earlier["checkpoint_sha256"] not in theirs["sha256"].values() or theirs["config"] != report["config"]
            or theirs["sha256"]["tokenizer.json"] != report["sha256"]["tokenizer.json"]
            or earlier["settings"] != json.loads(json.dumps(settings))):
        return [], []
    moved = moved or {}

    def marked(r: dict) -> dict:
        return {**r, "from": moved.get(r.get("from"), r.get("from", archive.name))}

    return ([marked(r) for r in earlier.get("dev_rows", [])],
            [marked(r) for r in earlier["rows"] if not pretrained(r)])
