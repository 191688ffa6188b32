"""What the benchmark scripts share: one way to write a result, the machine it ran on, means over seeds, the dev
split and rate rule of the fine-tuning benchmarks, the long training runs' epoch report, and local torchrun launches.

Every script runs as ``python tests/benchmarks/bench_<name>.py`` and writes ``lmlib/results/<name>.json`` through
:func:`write_result`, which records the command that wrote it; notebooks read the file by name
(:func:`lmlib.course.results.load`). Tests import this module as ``benchmarks.common``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import torch

from lmlib.course import results
from lmlib.data import load_imdb
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.training.distributed import TORCHRUN_VARIABLES
from lmlib.training.trainer import Callback, Trainer

REPO = Path(__file__).resolve().parents[2]
RESULTS = results.RESULTS_DIR


# -- writing a result: whole or not at all, with the command that wrote it --------------------------------------

def result_path(name: str | Path) -> Path:
    """``lmlib/results/<name>.json`` for a bare name; a path (a ``--out`` option) as given."""
    return name if isinstance(name, Path) else RESULTS / f"{name}.json"


def write_result(name: str | Path, data: dict, **dump) -> None:
    """Write ``data`` as indented JSON to :func:`result_path` atomically (a temporary file, then ``os.replace``), so
    a run killed halfway never leaves a truncated file; a result without a ``command`` gets this run's."""
    path = result_path(name)
    if "command" not in data:
        script = os.path.relpath(Path(sys.argv[0]).resolve(), REPO)
        data = {"command": shlex.join(["python", script, *sys.argv[1:]]), **data}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, **dump) + "\n")
    os.replace(tmp, path)


def read_result(name: str | Path, default: dict | None = None) -> dict | None:
    """The result at :func:`result_path`, or ``default`` when there is none yet."""
    path = result_path(name)
    return json.loads(path.read_text()) if path.is_file() else default


def kept_rows(name: str | Path, settings: dict, checkpoint_sha256: str, more_seeds: bool = False) -> list[dict]:
    """The rows of the result when it was made with the same ``settings`` (compared as JSON stores them) from the
    same checkpoint, so that a long run that stopped goes on where it was; otherwise none. With ``more_seeds`` the
    settings may also differ in their ``seeds`` list, and the rows of this run's seeds are kept, so a run with more
    seeds keeps what the shared seeds measured."""
    previous = read_result(name)
    if not previous or previous["checkpoint_sha256"] != checkpoint_sha256:
        return []
    now = json.loads(json.dumps(settings))
    if not more_seeds:
        return previous["rows"] if previous["settings"] == now else []

    def but_seeds(s: dict) -> dict:
        return {k: v for k, v in s.items() if k != "seeds"}

    same = but_seeds(previous["settings"]) == but_seeds(now)
    return [r for r in previous["rows"] if r["seed"] in now["seeds"]] if same else []


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


# -- the machine: a speed means little without the CPU and the load beside it ------------------------------------

def machine(*libraries: str) -> dict:
    """CPU model, cores, torch and Python versions, and the versions of ``libraries`` (module names)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version()}
    for name in libraries:
        info[name] = __import__(name).__version__
    return info


def load() -> dict:
    """The 1-, 5- and 15-minute load averages and the `uptime` line, now."""
    one, five, fifteen = os.getloadavg()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2), "uptime": uptime}


# -- over seeds: the fine-tuning benchmarks' means, and their shared IMDb test reviews ---------------------------

def mean_se(values: Sequence[float]) -> tuple[float, float | None]:
    """The mean of ``values`` and its standard error, s / sqrt(n) with the n − 1 sample deviation s; None for one
    value."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def summarise(rows: Sequence[dict], keys: Sequence[str]) -> list[dict]:
    """Mean accuracy and its standard error over seeds: one row per value of ``keys``, in sorted order."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r["accuracy"])
    out = []
    for group, accs in sorted(groups.items()):
        mean, se = mean_se(accs)
        out.append(dict(zip(keys, group), seeds=len(accs), mean=mean, se=se))
    return out


def imdb_test_subset(n: int, seed: int) -> tuple[list[str], list[int]]:
    """``n`` of IMDb's 25,000 test reviews and their labels, drawn by a seeded permutation, so that every fine-tuning
    benchmark scores on the same reviews."""
    test = load_imdb("test")
    picked = torch.randperm(len(test.texts), generator=torch.Generator().manual_seed(seed))[:n].tolist()
    return [test.texts[i] for i in picked], [test.labels[i] for i in picked]


# -- a learning rate for each from-scratch condition, chosen on a dev split of the training labels ---------------
# A randomly initialised model wants another rate than the fine-tuning recipe's (set for the pretrained model), and
# with 100 labels another than with 1,000, so each label count gets its own: each rate is trained on the seed's
# labelled sample and scored on 1,000 other training examples; the best mean dev accuracy wins. On IMDb the split is
# the one of bert_finetune_rates.json and gpu_transfer_<model>.json, whose scratch sweeps at 1,000 labels (same
# architecture, tokenizer, recipe and code) are reused rather than run again.

RATES = (5e-4, 1e-3, 2e-3)
DEV = dict(reviews=1000, seed=99, excludes="the labelled samples of seeds 0-2 at 1,000 labels (those at 100 are inside "
           "them)", swept_here={"n_labels": 100, "rates": list(RATES), "seeds": [0, 1, 2]},
           copied={"n_labels": 1000, "from": "the committed sweeps on the same split with the same recipe and code: "
                   "gpu_transfer_<model>.json's scratch dev rows (seed 0) and, for BERT, bert_finetune_rates.json's "
                   "(seeds 0-2)"},
           choice="per task and label count, the rate with the best mean dev accuracy over the seeds it was run with; "
                  "the 25,000-label run (every training review, the dev split included) takes the rate chosen at 1,000")


def dev_split(texts: Sequence[str], labels: Sequence[int]) -> tuple[list[str], list[int]]:
    """``DEV["reviews"]`` balanced training examples that none of the 1,000-label samples of seeds 0-2 contains."""
    used = set()
    for seed in (0, 1, 2):
        used.update(sample_balanced(texts, labels, 1000, seed=seed)[0])
    rest = [(t, y) for t, y in zip(texts, labels) if t not in used]
    return sample_balanced([t for t, _ in rest], [y for _, y in rest], DEV["reviews"], seed=DEV["seed"])


def best_rate(rows: Sequence[dict], rate: str = "lr", score: str = "dev_accuracy") -> float:
    """The rate (``row[rate]``) whose rows have the best mean ``score`` over the seeds it was run with; a tie goes
    to the smaller rate (the cautious choice). The one rule of every benchmark's learning-rate sweep."""
    by_rate: dict[float, list[float]] = {}
    for r in rows:
        by_rate.setdefault(r[rate], []).append(r[score])
    if not by_rate:
        raise ValueError("no sweep rows: give at least one rate to sweep")
    return min(by_rate, key=lambda lr: (-sum(by_rate[lr]) / len(by_rate[lr]), lr))


def chosen_rate(dev_rows: Sequence[dict], n_labels: int, **match) -> float:
    """The rate with the best mean ``dev_accuracy`` (:func:`best_rate`) among ``dev_rows`` at ``n_labels`` whose
    other fields equal ``match``; 25,000 labels take the rate chosen at 1,000."""
    n = 1000 if n_labels > 1000 else n_labels
    rows = [r for r in dev_rows if r["n_labels"] == n and all(r.get(k) == v for k, v in match.items())]
    by_rate: dict[float, dict[int, float]] = {}
    for r in rows:
        by_rate.setdefault(r["lr"], {})[r["seed"]] = r["dev_accuracy"]
    swept = DEV["swept_here"]
    if n == swept["n_labels"] and any(set(by_rate.get(rate, {})) != set(swept["seeds"]) for rate in swept["rates"]):
        raise RuntimeError(f"the dev sweep at {n} labels for {match or 'scratch'} is not complete; run with --dev first")
    if len(by_rate) < 2:
        raise RuntimeError(f"no dev rows at {n} labels for {match or 'scratch'} that compare two rates")
    one_per_seed = {(r["lr"], r["seed"]): r for r in rows}  # a row copied twice counts once
    return best_rate(list(one_per_seed.values()))


def committed_scratch(model: str, n_test: int, test_seed: int) -> tuple[list[dict], list[dict]]:
    """gpu_transfer_<model>.json's scratch dev rows at 1,000 labels and its scratch test rows, each marked with
    ``"from"``: the same split, samples, test reviews, recipe and code as this course's scripts, so training them
    again gives the same numbers. Refused unless its random-init model is the shipped one's (the same config and
    tokenizer file; the pretrained weights, the only difference, are not read by a scratch run)."""
    name = f"gpu_transfer_{model}"
    data = results.load(name)
    _, measured, _ = results.measured_checkpoint(data["checkpoint"]["sha256"], name)
    shipped = results.shipped_report(f"{model}_imdb")
    if measured["config"] != shipped["config"] or measured["sha256"]["tokenizer.json"] != shipped["sha256"]["tokenizer.json"]:
        raise RuntimeError(f"{name}.json's scratch model differs from the shipped {model}'s; run it here")
    if (data["settings"]["test_reviews"], data["settings"]["test_seed"]) != (n_test, test_seed) or data["device"] != ["cpu"]:
        raise RuntimeError(f"{name}.json was measured on other test reviews or another device")
    dev = [{**r, "n_dev": 1000, "from": f"{name}.json"}  # its dev split is dev_split's 1,000 reviews
           for r in data["dev_rows"] if r["condition"] == "scratch" and r["n_labels"] == 1000]
    tests = [{**r, "from": f"{name}.json"} for r in data["rows"] if r["condition"] == "scratch"]
    return dev, tests


# -- long training runs (bench_nnlm.py, bench_zaremba_small.py): one command line, a report after every epoch -----

def command_line(description: str, name: str, epochs: int | None, epochs_help: str) -> argparse.Namespace:
    """The options every long run takes; results go to lmlib/results/<name>.json, checkpoints to data/<name>.ckpt."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=epochs, help=epochs_help)
    ap.add_argument("--max-batches", type=int, default=None, help="stop after this many training batches (timing probe)")
    ap.add_argument("--out", type=Path, default=result_path(name))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", type=Path, default=Path("data") / f"{name}.ckpt",
                    help="resumable checkpoint written after every epoch (data/ is git-ignored)")
    ap.add_argument("--resume", action="store_true", help="continue from --checkpoint and the JSON at --out")
    return ap.parse_args()


class EpochReport(Callback):
    """Appends ``row(trainer, logs)`` to ``result["epochs"]`` after every epoch and rewrites ``out``, so an
    interrupted run leaves its numbers behind and resumes from the last finished epoch with the same next step."""

    def __init__(self, result: dict, out: Path, row: Callable[[Trainer, dict], dict]):
        self.result, self.out, self.row = result, out, row

    def write(self) -> None:
        write_result(self.out, self.result)

    def on_epoch_end(self, trainer: Trainer, logs: dict) -> None:
        self.result["epochs"].append(self.row(trainer, logs))
        print(json.dumps(self.result["epochs"][-1]), flush=True)
        self.write()

    def resume(self, trainer: Trainer, checkpoint: Path) -> None:
        """Load the checkpoint and keep the JSON's rows of the epochs it contains."""
        trainer.load_checkpoint(checkpoint)
        self.result["epochs"] = json.loads(self.out.read_text())["epochs"][: trainer.epoch]
        print(f"resumed after epoch {trainer.epoch} (step {trainer.step})", flush=True)

    def finish(self, test_ppl: float, test_seconds: float, epochs: int, probe: bool, **extra) -> None:
        # Training time is the sum of the epochs (each includes its validation pass), so a resumed run counts the same.
        seconds = sum(e["seconds"] for e in self.result["epochs"]) + test_seconds
        self.result.update(test_ppl=test_ppl, valid_ppl=self.result["epochs"][-1]["valid_ppl"], seconds=seconds,
                           **extra, finished=not probe and len(self.result["epochs"]) == epochs)
        self.write()


def run_pool(todo: Callable[[], list], run: Callable, rows: list, save: Callable[[], None], workers: int,
             deadline: float | None = None) -> bool:
    """Run the jobs ``todo()`` names (asked again after each finishes, so a resumed study skips what ``rows`` holds)
    in ``workers`` forked processes, each ``run(job)`` appended to ``rows`` as it finishes, printed and ``save()``d;
    no new job starts once ``deadline`` seconds have passed. True when every job is done."""
    start, running = time.perf_counter(), {}
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        while True:
            late = deadline is not None and time.perf_counter() - start > deadline
            busy = list(running.values())
            for job in [] if late else [j for j in todo() if j not in busy][: workers - len(running)]:
                running[pool.submit(run, job)] = job
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                del running[future]
                rows.append(future.result())
                print(json.dumps(rows[-1]), flush=True)
                save()
    save()
    return not todo()


# -- several local processes under torchrun (bench_ddp.py, bench_torchrun_exit.py and the DDP tests) -------------

def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the rendezvous of one launch)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(threads: int = 1, **extra: str) -> dict[str, str]:
    """This process's environment less torchrun's variables (a launch inside a torchrun job must not inherit its
    rank), with lmlib importable from the checkout, ``threads`` threads per process, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES}
    return {**env, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(threads), **extra}


def torchrun_command(processes: int, *args: str) -> list[str]:
    """``python -m torch.distributed.run`` starting ``args`` (a script and its arguments, or ``-m module ...``) in
    ``processes`` local processes, on a fresh port."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}", "--master_addr=127.0.0.1",
            f"--master_port={free_port()}", *args]
