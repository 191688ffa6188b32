"""ULMFiT stage (b) and ELMo pretrained for about 150M tokens each, side by side on one GPU, within nine minutes.

Two processes share the chip, since neither fills it: ``python -m lmlib pretrain ulmfit-imdb --preset gpu`` (IMDb's
unlabelled and training reviews, 256 streams of 70 tokens a step, a 30,001-word vocabulary) and ``python -m lmlib
pretrain elmo --preset gpu`` (1,024 sentences a step). Each recipe's ``milestones`` save a checkpoint at 4M, 16M and
64M tokens into its output folder as the run passes them, and its ``pretrain.json`` ends with the loss curve; a
``--deadline`` fits each schedule into the time left (:class:`lmlib.training.callbacks.TimeBudget`), so a run ends
annealed and in time whatever speed it gets, and its ``pretrain.json`` says how many tokens it read.

Steps:

``prepare`` (here, once): xz-compress the IMDb and PTB files the two runs read, from ``LMLIB_DATA_DIR``, into
``gpu_carry/`` (ignored by git through ``.git/info/exclude``; about 28 MiB), and check that it travels: the working
tree and the carried folder together must stay within the device's 64 MiB. The tracked tree alone is close to that
limit, mostly the shipped checkpoints' weights, which the runs do not read (:data:`SET_ASIDE`): ``set-aside`` moves
them out of the working tree for the device call and ``restore`` puts them back (``git checkout`` of the committed
files, so nothing can be lost); restore before anything else is committed.

``run`` (on the device machine; the exact call, between ``set-aside`` and ``restore`` here)::

    run(command="PYTHONUNBUFFERED=1 python3 tests/benchmarks/gpu_lstm_pretraining.py run --out $OUT",
        carry=["gpu_carry"], kind="nvidia-h200", timeout_s=600)

It unpacks ``gpu_carry/`` into a temporary data folder, starts both runs with their logs and checkpoints under
``$OUT/work`` as they go, and at the end packs ``$OUT/work`` into ``$OUT/gpu_lstm_pretraining.tar.NN`` parts of at
most 15 MiB (what the device hands back: 8 files, 64 MiB in all; the logs, reports, loss curves and final checkpoints
first, then the milestones, while they fit; ``PACKED.txt`` lists what was left out). Join them with ``cat
gpu_lstm_pretraining.tar.* | tar x``.

``run --dry-run --out DIR`` does the same on this machine's CPU with a tiny budget (a few steps, small milestones,
the data read from ``LMLIB_DATA_DIR`` when there is no ``gpu_carry/``): what ``tests/test_pretrain_cli.py`` runs.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CARRY = ROOT / "gpu_carry"
FILES = ("imdb/unsup.jsonl", "imdb/train.jsonl", "ptb/ptb.train.txt", "ptb/ptb.valid.txt", "ptb/ptb.test.txt")
BUDGET_S = 540  # nine minutes for the whole command
SETUP_S, WRAP_UP_S = 170, 60  # reading and encoding the text before training; evaluating and saving after
PART_BYTES = 15 * 2**20
MAX_PARTS = 7  # the device hands back 8 files; one is left for the packing list
TRAVEL_LIMIT = 64 * 2**20  # the working tree and the carried folder together

# Stage (b) starts from the stage (a) LM pretrained longer on a GPU (its pretrain.json: tokens read, PTB perplexity)
# when it is in the tree, else from the shipped one.
STAGE_A = ROOT / "lmlib" / "results" / "gpu_pretraining" / "awd_lstm_ptb"
# the shipped and staged weights the two runs never read: out of the working tree while it travels to the device
SET_ASIDE = tuple(f"lmlib/{path}.safetensors" for path in (
    "pretrained/gpt_imdb/gpt_imdb", "pretrained/bert_imdb/bert_imdb", "pretrained/elmo_imdb/elmo_imdb",
    "pretrained/ulmfit_imdb/ulmfit_imdb", "results/gpu_pretraining/ulmfit_imdb/ulmfit_imdb",
    "results/cpu_pretraining/ulmfit_imdb/tokens_64M/ulmfit_imdb",  # the CPU run's 64M-token milestone
    "results/cpu_pretraining/ulmfit_imdb/tokens_150M/ulmfit_imdb",  # and its end
    "results/cpu_pretraining/elmo_imdb/last_stop/elmo_imdb"))  # where ELMo's CPU run stopped last
# (the shipped stage (a), lmlib/pretrained/awd_lstm_ptb, is the GPU one since 2026-12-01: stage (b) reads it, so it travels)
RUNS = {  # output folder -> the model's command-line arguments (the full-size gpu preset)
    "ulmfit_imdb": ["ulmfit-imdb", "--preset", "gpu"],
    "elmo_imdb": ["elmo", "--preset", "gpu"],
}
DRY = {  # a few steps on the CPU, milestones after the first and second
    "ulmfit_imdb": ["--steps", "3", "--set", "batch_size=4", "--set", "train_reviews=40", "--set", "max_new=300",
                    "--set", "heldout_tokens=400", "--set", "milestones=[280,560]"],
    "elmo_imdb": ["--steps", "3", "--set", "batch_size=4", "--set", "train_reviews=40", "--set", "valid_sentences=8",
                  "--set", "milestones=[50,100]"],
}


def prepare(data_dir: Path) -> None:
    """xz-compress the files the runs read into ``gpu_carry/data`` and make git ignore the folder."""
    exclude = ROOT / ".git" / "info" / "exclude"
    lines = exclude.read_text().splitlines() if exclude.is_file() else []
    if "gpu_carry/" not in lines:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text("\n".join([*lines, "gpu_carry/"]) + "\n")
    for name in FILES:
        target = CARRY / "data" / f"{name}.xz"
        if target.is_file():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_suffix(".part")
        subprocess.run(["xz", "-T0", "-6", "-c", str(data_dir / name)], stdout=part.open("wb"), check=True)
        part.replace(target)
    size = sum(f.stat().st_size for f in CARRY.rglob("*") if f.is_file())
    tree = travelling_tree_bytes()
    print(f"{CARRY}: {size / 2**20:.1f} MiB; the working tree beside it, without the set-aside weights: "
          f"{tree / 2**20:.1f} MiB", flush=True)
    if size + tree > TRAVEL_LIMIT:
        sys.exit(f"error: the working tree ({tree / 2**20:.1f} MiB) and {CARRY.name}/ ({size / 2**20:.1f} MiB) are "
                 f"{(size + tree - TRAVEL_LIMIT) / 2**20:.1f} MiB over what travels to the device (64 MiB)")


def travelling_tree_bytes() -> int:
    """What the device call copies besides the carried folder: tracked and untracked-not-ignored files, without
    :data:`SET_ASIDE`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return sum((ROOT / f).stat().st_size for f in listed if f and f not in SET_ASIDE and (ROOT / f).is_file())


def set_aside() -> None:
    """Remove :data:`SET_ASIDE` from the working tree (they are committed: ``restore`` brings them back)."""
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *SET_ASIDE], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    if dirty.strip():
        sys.exit(f"error: uncommitted changes to weights that would be set aside:\n{dirty}")
    for name in SET_ASIDE:
        (ROOT / name).unlink(missing_ok=True)
    print(f"set aside {len(SET_ASIDE)} weight files; run `{Path(__file__).name} restore` after the device call")


def restore() -> None:
    """Bring :data:`SET_ASIDE` back from the last commit."""
    subprocess.run(["git", "checkout", "HEAD", "--", *SET_ASIDE], cwd=ROOT, check=True)


def unpack(into: Path) -> Path:
    """The carried files, decompressed into ``into`` (a data folder laid out as LMLIB_DATA_DIR expects)."""
    for name in FILES:
        source, target = CARRY / "data" / f"{name}.xz", into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(source) as fh, target.open("wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
    return into


def pack(work: Path, out: Path) -> None:
    """``work`` as tar parts of at most ``PART_BYTES`` in ``out``: logs and reports first, then the final weights,
    then the milestones, while the parts stay within what the device hands back; the rest is listed in
    ``PACKED.txt``."""
    def rank(p: Path) -> tuple:  # logs and reports, final weights, then the milestones' reports and weights
        return "tokens_" in str(p.relative_to(work)), p.suffix == ".safetensors", str(p)

    files = sorted((p for p in work.rglob("*") if p.is_file() and p.name != "resume.pt"), key=rank)
    room, kept, left = MAX_PARTS * PART_BYTES - 2**20, [], []
    for p in files:
        size = p.stat().st_size + 1024
        (kept if size <= room else left).append(p)
        room -= size if size <= room else 0
    tar_path = out / "gpu_lstm_pretraining.tar"
    with tarfile.open(tar_path, "w") as tar:
        for p in kept:
            tar.add(p, arcname=str(p.relative_to(work.parent)))
    with tar_path.open("rb") as fh:
        for i, chunk in enumerate(iter(lambda: fh.read(PART_BYTES), b"")):
            (out / f"gpu_lstm_pretraining.tar.{i:02d}").write_bytes(chunk)
    tar_path.unlink()
    (out / "PACKED.txt").write_text("packed:\n" + "".join(f"  {p.relative_to(work)}\n" for p in kept)
                                    + "left out (no room in what comes back):\n"
                                    + "".join(f"  {p.relative_to(work)}\n" for p in left))


def loss_curves(work: Path) -> dict:
    """Each run's training-loss curve and tokens read, from its ``pretrain.json`` (final and milestones)."""
    curves = {}
    for report in sorted(work.glob("*/pretrain.json")) + sorted(work.glob("*/tokens_*/pretrain.json")):
        r = json.loads(report.read_text())
        curves[str(report.parent.relative_to(work))] = {"tokens_seen": r.get("tokens_seen"), "steps": r.get("steps"),
                                                        "train_loss_curve": r.get("train_loss_curve")}
    return curves


def run(out: Path, dry_run: bool) -> int:
    start = time.monotonic()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LMLIB_OFFLINE": "1", "OMP_NUM_THREADS": "4"}
    with tempfile.TemporaryDirectory() as tmp:
        if all((CARRY / "data" / f"{name}.xz").is_file() for name in FILES):
            env["LMLIB_DATA_DIR"] = str(unpack(Path(tmp) / "data"))
        elif not dry_run:
            sys.exit(f"error: no {CARRY}: run `{Path(__file__).name} prepare` first, and carry gpu_carry")
        deadline = 20 if dry_run else BUDGET_S - SETUP_S - WRAP_UP_S - (time.monotonic() - start)
        device = "cpu" if dry_run else "cuda"
        jobs = {}
        for name, args in RUNS.items():
            if name == "ulmfit_imdb" and (STAGE_A / "pretrain.json").is_file():
                args = [*args, "--set", f"stage_a={STAGE_A.relative_to(ROOT)}"]
            command = [sys.executable, "-m", "lmlib", "pretrain", *args, "--device", device, "--out", str(work / name),
                       "--deadline", f"{deadline:.0f}", "--checkpoint-every", "100000", *(DRY[name] if dry_run else [])]
            log = (work / f"{name}.log").open("w")
            log.write(" ".join(command) + "\n")
            log.flush()
            jobs[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        wait_until = start + BUDGET_S + 20  # packing takes seconds: the device's 600-s limit is not reached
        codes = {}
        for name, job in jobs.items():
            try:
                codes[name] = job.wait(timeout=max(1.0, wait_until - time.monotonic()))
            except subprocess.TimeoutExpired:
                job.kill()
                codes[name] = "killed at the time limit"
    (work / "loss_curves.json").write_text(json.dumps(loss_curves(work), indent=1) + "\n")
    (work / "status.json").write_text(json.dumps({"exit": codes, "seconds": round(time.monotonic() - start),
                                                  "deadline_s": round(deadline)}, indent=1) + "\n")
    pack(work, out)
    shutil.rmtree(work)
    print(json.dumps(codes), flush=True)
    return 0 if all(code == 0 for code in codes.values()) else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="compress the data the runs read into gpu_carry/")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("LMLIB_DATA_DIR", ROOT / "data")))
    sub.add_parser("set-aside", help="take the weights the runs do not read out of the working tree")
    sub.add_parser("restore", help="put the set-aside weights back from the last commit")
    r = sub.add_parser("run", help="both runs side by side, then the results packed into $OUT")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--dry-run", action="store_true", help="a few steps on the CPU")
    args = parser.parse_args(argv)
    if args.step in ("prepare", "set-aside", "restore"):
        {"prepare": lambda: prepare(args.data_dir), "set-aside": set_aside, "restore": restore}[args.step]()
        return 0
    return run(args.out, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
