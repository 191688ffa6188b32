"""Shipped checkpoints: small fp16 safetensors files beside a ``pretrain.json`` that records how they were made.

A model too slow to pretrain live ships in ``lmlib/pretrained/<name>/`` as

* ``<name>.safetensors`` — the weights in fp16 (a tied weight stored once), the model's config as JSON in the
  file's metadata;
* any side files the model needs (a vocabulary, a tokenizer);
* ``pretrain.json`` — the recipe, tokens seen, validation metrics and the sha256 of every file above.

:func:`save_shipped` writes all of it (each file atomically); :func:`load_shipped` checks every sha256 before it
reads a byte of weights, so a corrupt or replaced file is refused with a message that says how to rebuild it.
A checkpoint that a long run wrote on its way (a milestone, or the ``last_stop/`` of a run stopped there) is shipped
by :func:`ship_checkpoint` (``python -m lmlib ship``), which copies it after the same checks.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch

from ..data import sha256_of
from ..runtime import atomic_write

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"
REPORT = "pretrain.json"


def round_to_fp16(model: torch.nn.Module) -> None:
    """Round every parameter to float16 and back in place, so metrics measured next describe the weights as shipped
    (:func:`save_shipped` stores float16)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())


def save_shipped(out_dir: str | Path, name: str, state_dict: Mapping[str, torch.Tensor], config: Mapping,
                 report: Mapping, side_files: Mapping[str, Callable[[str], None]] = (),
                 skip: tuple[str, ...] = ()) -> dict:
    """Write ``<name>.safetensors`` (fp16, ``config`` in its metadata, keys in ``skip`` left out, e.g. a tied
    output layer), each side file (``{file name: writer(path)}``) and ``pretrain.json`` = ``report`` plus
    ``"sha256"`` of every file. Returns the report as written."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    weights = f"{name}.safetensors"
    tensors = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in state_dict.items() if k not in skip}
    atomic_write(out_dir / weights, lambda tmp: save_file(tensors, tmp, metadata={"config": json.dumps(dict(config))}))
    for file_name, writer in dict(side_files).items():
        atomic_write(out_dir / file_name, writer)
    files = [weights, *dict(side_files)]
    report = {**report, "sha256": {f: sha256_of(out_dir / f) for f in files}}
    atomic_write(out_dir / REPORT, lambda tmp: Path(tmp).write_text(json.dumps(report, indent=2) + "\n"))
    return report


def verify_shipped(directory: str | Path, rebuild: str, files: Sequence[str] | None = None) -> dict:
    """The ``pretrain.json`` of ``directory`` after checking that every file it lists (or only ``files``, each of
    which it must list) has the recorded sha256.

    ``rebuild`` is the command that reproduces the checkpoint; it goes into every error message."""
    directory = Path(directory)
    report_path = directory / REPORT
    if not report_path.is_file():
        raise FileNotFoundError(f"no {REPORT} in {directory}: this is not a shipped checkpoint folder. "
                                f"Restore it from git or rebuild it with `{rebuild}`")
    report = json.loads(report_path.read_text())
    recorded = report.get("sha256", {})
    unlisted = [f for f in files or () if f not in recorded]
    if unlisted:
        raise ValueError(f"{REPORT} in {directory} records no sha256 for {unlisted[0]}, so it cannot be verified; "
                         f"rebuild the checkpoint with `{rebuild}`")
    for file_name in recorded if files is None else files:
        path = directory / file_name
        if not path.is_file():
            raise FileNotFoundError(f"{file_name} is missing from {directory}; restore it from git or rebuild it with `{rebuild}`")
        actual = sha256_of(path)
        if actual != recorded[file_name]:
            raise ValueError(f"{path} has sha256 {actual}, but {REPORT} records {recorded[file_name]}: the file is "
                             f"corrupt or was replaced. Restore it from git or rebuild the checkpoint with `{rebuild}`")
    return report


def ship_checkpoint(source: str | Path, out_dir: str | Path, name: str, rebuild: str) -> dict:
    """Copy ``name``'s checkpoint in ``source`` (a folder written by :func:`save_shipped` on a run's way: a milestone or
    ``last_stop/``) into the shipped folder ``out_dir``: every file its ``pretrain.json`` lists, each checked against
    its sha256 first, then that report with ``rebuild`` (the commands that remake it) and ``shipped_from`` (the
    source folder as given) added. Every check comes before the first byte is written. Returns the report written."""
    source, out_dir = Path(source), Path(out_dir)
    if not source.is_dir():
        raise FileNotFoundError(f"{source} is not a folder: name the milestone or last_stop/ folder of the run")
    report = verify_shipped(source, rebuild)
    weights = f"{name}.safetensors"
    if weights not in report.get("sha256", {}):
        listed = ", ".join(report.get("sha256", {})) or "no files"
        raise ValueError(f"{source} holds no {weights} ({REPORT} lists {listed}): not a checkpoint of {name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for file_name in report["sha256"]:
        atomic_write(out_dir / file_name, lambda tmp, f=file_name: shutil.copyfile(source / f, tmp))
    report = {"rebuild": rebuild, **{k: v for k, v in report.items() if k not in ("rebuild", "shipped_from")},
              "shipped_from": str(source)}
    atomic_write(out_dir / REPORT, lambda tmp: Path(tmp).write_text(json.dumps(report, indent=2) + "\n"))
    verify_shipped(out_dir, rebuild)  # the copies have the recorded sha256
    return report


def load_shipped(directory: str | Path, name: str, rebuild: str) -> tuple[dict, dict[str, torch.Tensor], dict]:
    """``(config, float32 tensors, report)`` of the verified checkpoint ``<directory>/<name>.safetensors``."""
    from safetensors import safe_open

    report = verify_shipped(directory, rebuild)
    weights = Path(directory) / f"{name}.safetensors"
    if weights.name not in report.get("sha256", {}):
        raise ValueError(f"{REPORT} in {directory} records no sha256 for {name}.safetensors, so it cannot be verified; "
                         f"rebuild the checkpoint with `{rebuild}`")
    with safe_open(str(weights), framework="pt") as fh:
        config = json.loads(fh.metadata()["config"])
        tensors = {k: fh.get_tensor(k).float() for k in fh.keys()}
    return config, tensors, report
