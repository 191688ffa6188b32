"""Command line: ``python -m lmlib data list|fetch|verify [NAME ...]``, ``python -m lmlib pretrain MODEL`` and
``python -m lmlib ship MODEL SOURCE``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path

from . import data

# model name -> ("module:function" that trains it, the checkpoint's name, what it trains)
PRETRAIN_MODELS = {
    "awd-lstm": ("lmlib.recipes.ulmfit:pretrain", "awd_lstm_ptb", "ULMFiT stage (a): the AWD-LSTM language model on PTB"),
    "ulmfit-imdb": ("lmlib.recipes.ulmfit:finetune_imdb", "ulmfit_imdb",
                    "ULMFiT stage (b): the stage (a) LM fine-tuned on IMDb's reviews"),
    "elmo": ("lmlib.recipes.elmo:pretrain", "elmo_imdb", "the ELMo biLM on IMDb's unlabelled reviews"),
    "gpt": ("lmlib.recipes.gpt:pretrain", "gpt_imdb", "the byte-level BPE and the GPT on IMDb's unlabelled reviews"),
    "bert": ("lmlib.recipes.bert:pretrain", "bert_imdb",
             "the WordPiece and the BERT (MLM + NSP) on IMDb's unlabelled reviews"),
}
DEFAULT_OUT = Path("pretrained-runs")
# models whose shipped checkpoint a long run wrote (on its way, or at its end after stops): model -> "module:name" of
# its rebuild command
SHIPPED_FROM_RUNS = {"elmo": "lmlib.recipes.elmo:REBUILD", "ulmfit-imdb": "lmlib.recipes.ulmfit:IMDB_CPU_REBUILD"}
# the line `pretrain --help` shows for several processes; tests/test_pretrain_cli.py launches its torchrun runs with it
TORCHRUN_EXAMPLE = "torchrun --standalone --nproc_per_node=2 -m lmlib pretrain gpt --preset teach"

_ACTIONS = {
    "list": "show each dataset, its size on disk and whether all its files are present (reads no file)",
    "fetch": "download what is missing from its pinned source, verify it and put it in place; "
             "a present but corrupt file is reported, not replaced",
    "verify": "check the sha256 of every file already present; download nothing",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lmlib", description="lmlib's dataset and pretraining tools")
    groups = parser.add_subparsers(dest="group", required=True, metavar="{data,pretrain,ship}")
    data_cmd = groups.add_parser(
        "data", help="list, fetch or verify the datasets",
        description="List, fetch or verify the datasets lmlib uses. Files live in LMLIB_DATA_DIR if set, "
                    "else the checkout's data/ folder, else ~/.cache/lmlib; LMLIB_OFFLINE=1 forbids downloads.",
    )
    actions = data_cmd.add_subparsers(dest="action", required=True, metavar="ACTION", title="actions")
    for action, help_text in _ACTIONS.items():
        cmd = actions.add_parser(action, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
        cmd.add_argument("names", nargs="*", metavar="NAME",
                         help=f"dataset names (default: all): {', '.join(data.DATASETS)}")
    _pretrain_parser(groups)
    ship = groups.add_parser(
        "ship", help="ship a checkpoint a long pretraining run wrote on its way",
        description="Copy a checkpoint that a long `pretrain` run wrote on its way (a milestone folder such as "
                    "<out>/tokens_32M, or the <out>/last_stop/ of a run stopped there) into the model's shipped folder "
                    "lmlib/pretrained/<name>: every file its pretrain.json lists, after checking each one's sha256, "
                    "and that pretrain.json with the rebuild command added. Nothing is written if a check fails.")
    ship.add_argument("model", choices=list(SHIPPED_FROM_RUNS),
                      help="the model (the others ship what a whole run wrote: `pretrain` writes them)")
    ship.add_argument("source", type=Path, help="the folder the run wrote")
    return parser


def ship_main(args: argparse.Namespace) -> int:
    """``python -m lmlib ship``: :func:`~lmlib.recipes.shipping.ship_checkpoint` into the model's shipped folder."""
    from .recipes.shipping import PRETRAINED_DIR, ship_checkpoint

    module_name, attribute = SHIPPED_FROM_RUNS[args.model].split(":")
    name = PRETRAIN_MODELS[args.model][1]
    try:
        report = ship_checkpoint(args.source, PRETRAINED_DIR / name, name,
                                 getattr(importlib.import_module(module_name), attribute))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"shipped {args.source} ({report.get('tokens_seen', 0):,} tokens, step {report.get('steps')}) as "
          f"{PRETRAINED_DIR / name}")
    return 0


def _pretrain_parser(groups) -> None:
    models = "\n".join(f"  {name:11s} {trains}" for name, (_, _, trains) in PRETRAIN_MODELS.items())
    p = groups.add_parser(
        "pretrain", help="reproduce a shipped checkpoint (" + ", ".join(PRETRAIN_MODELS) + ")",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"Train one of the checkpoints shipped in lmlib/pretrained/ with its seeded recipe:\n{models}\n\n"
                    "Each shipped pretrain.json names the command that made it (its \"rebuild\"). With --preset full, "
                    "one thread (the default) and --device cpu this is exactly the recorded one-core run, so it "
                    "reproduces the shipped sha256 of the checkpoints made that way; --preset gpu is the recipe sized "
                    "for one GPU.\n"
                    "Every option, the device and the output folder are checked before any data is read.\n\n"
                    f"Several processes (data-parallel: each global batch is split between them; rank 0 alone prints "
                    f"and writes files):\n  {TORCHRUN_EXAMPLE}",
        epilog="The folder gets <name>.safetensors, its side files and pretrain.json (the recipe, metrics and every "
               "file's sha256), and, while training, resume.pt: model, optimizer, schedules, step and every random "
               "generator, rewritten atomically every --checkpoint-every steps and deleted once pretrain.json is "
               "written. A folder holding another model's or another config's checkpoint is refused. Progress: a bar "
               "on a terminal, else a line every tenth of the run (and at least once a minute), then a summary line.")
    p.add_argument("model", choices=list(PRETRAIN_MODELS), help="which checkpoint to train")
    p.add_argument("--preset", choices=("teach", "full", "gpu", "cpu"), default=None,
                   help="teach: the same recipe on a sliver of the data with a tiny model and a few steps, seconds; "
                        "full: the recorded one-core recipe; gpu: the recipe sized for one GPU (wide batches built on "
                        "the device, bf16 where the model allows, fused AdamW); cpu: the recipe planned for many evenings "
                        "of a CPU (ulmfit-imdb and elmo: a sampled softmax and a schedule over the whole budget, "
                        "stopped and resumed with --resume as often as needed); the shipped folders accept only the "
                        "preset their pretrain.json records. Default: the LMLIB_PRESET environment variable if set, else teach, the same default "
                        "as the notebooks, so a first try takes seconds; pass --preset full to reproduce a shipped "
                        "checkpoint")
    p.add_argument("--out", type=Path, default=None,
                   help=f"output folder, created if missing (default {DEFAULT_OUT}/<name> with the full preset, "
                        f"{DEFAULT_OUT}/<name>-<preset> otherwise). Writing into the shipped lmlib/pretrained folders "
                        f"needs --out to name them, and the preset they were made with")
    p.add_argument("--resume", action="store_true",
                   help="continue the run whose resume.pt is in the output folder (same options): the final weights "
                        "equal an uninterrupted run's bit for bit")
    p.add_argument("--from-milestone", type=Path, default=None, metavar="DIR",
                   help="when the run's resume.pt is lost: go on from a milestone checkpoint it wrote on the way (e.g. "
                        "<out>/tokens_16M, or a copy of it), same options: its weights, and the schedule, data and "
                        "milestones from its step; the optimizer's moments start again from zero, so not bit for bit")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the preset's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the shipped runs)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="write resume.pt every N steps (default: 10 with --preset teach, 100 with full, 500 with gpu)")
    p.add_argument("--checkpoint-minutes", type=float, default=10.0, metavar="M",
                   help="also write resume.pt after M minutes of training since the last one (default 10; one "
                        "process only). SIGTERM or Ctrl-C writes it too, then stops: --resume continues")
    p.add_argument("--stop-after", type=int, default=None, metavar="N",
                   help="stop after step N (counted from the start of the run, also when resuming) as if interrupted, "
                        "leaving the last resume.pt (to try --resume); N must lie between the step resumed from and "
                        "the last step")
    p.add_argument("--bf16", action="store_true",
                   help="run the forward pass and loss under torch.autocast(bfloat16) (CPU or CUDA); changes the "
                        "numbers, so the result no longer matches the shipped sha256")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="fit the run into this many seconds of training: when the steps left would not finish in "
                        "time, the schedule is laid over fewer steps, so the rate still anneals to its end")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="replace one value of the recipe (repeatable; VALUE is read as JSON, e.g. --set max_new=50000 "
                        "--set 'milestones=[4000000,16000000]'); recorded in pretrain.json")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto (default): CUDA when available, else the CPU; cuda is refused at once on a machine "
                        "without a CUDA GPU. The shipped runs of this command used the CPU")


def _shipped_dirs() -> set[Path]:
    from .recipes.shipping import PRETRAINED_DIR

    return {PRETRAINED_DIR.resolve(), *(d.resolve() for d in PRETRAINED_DIR.iterdir() if d.is_dir())}


def _overrides(pairs: list[str]) -> dict:
    """``--set KEY=VALUE`` options as a dict, each VALUE read as JSON (else kept as text)."""
    from .recipes.pretraining import PretrainError

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PretrainError(f"--set {pair}: write KEY=VALUE, e.g. --set max_new=50000")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def pretrain_main(args: argparse.Namespace) -> int:
    """``python -m lmlib pretrain``: the chosen recipe module's ``pretrain`` with the options given. Under torchrun
    the process ends here, through :func:`~lmlib.training.distributed.exit_distributed` (its docstring says why),
    with the status it would have returned, or 1 after printing the traceback of an unexpected error."""
    from .training.distributed import exit_distributed, in_process_group

    try:
        code = _pretrain(args)
    except BaseException:
        if in_process_group():
            traceback.print_exc()
            exit_distributed(1)
        raise
    exit_distributed(code)
    return code


def _pretrain(args: argparse.Namespace) -> int:
    import torch

    from .recipes.pretraining import PretrainError, RunOptions, StopRequested
    from .runtime import pick_device
    from .training.distributed import init_distributed, is_main_process

    target, name, _ = PRETRAIN_MODELS[args.model]
    module_name, function = target.split(":")
    train = getattr(importlib.import_module(module_name), function)
    try:
        preset, chosen_by = _preset(args.preset)
        overrides = _overrides(args.overrides)
        out = args.out if args.out is not None else DEFAULT_OUT / (name if preset == "full" else f"{name}-{preset}")
        if out.resolve() in _shipped_dirs():
            if args.out is None:
                raise PretrainError(f"the default folder {out} is a shipped checkpoint folder; name it with --out "
                                    f"to overwrite it")
            shipped = _recorded_report(out)
            if "shipped_from" in shipped:  # put there by `ship` (lmlib.recipes.shipping.ship_checkpoint)
                raise PretrainError(f"{out} holds a checkpoint `lmlib ship` copied from a long run's folder, which no "
                                    f"single run writes there; rebuild it with `{shipped.get('rebuild', '')}`")
            recorded = _recorded_preset(shipped)
            if preset != recorded or args.steps is not None or args.bf16 or overrides:
                this = f"preset {preset} ({chosen_by})" if preset != recorded else "--steps, --set or --bf16"
                raise PretrainError(f"{out} holds a shipped checkpoint: only its recorded recipe (--preset "
                                    f"{recorded}, no --steps, --set or --bf16) may be written there, this run has "
                                    f"{this}; add --preset {recorded} or choose another --out")
        if args.threads < 1:
            raise PretrainError(f"--threads must be at least 1, got {args.threads}")
        every = args.checkpoint_every if args.checkpoint_every is not None else {"teach": 10, "full": 100, "cpu": 2000}.get(preset, 500)
        # checks the device (and CUDA's bf16) now; the recipe's PretrainRun checks the folder, before any data is read
        options = RunOptions(device=args.device, bf16=args.bf16, checkpoint_every=every, resume=args.resume,
                             stop_after=args.stop_after, deadline=args.deadline,
                             checkpoint_seconds=args.checkpoint_minutes * 60, from_milestone=args.from_milestone)
        torch.set_num_threads(args.threads)
        # joins the process group when torchrun started this process (else does nothing); gloo for CPU tensors
        init_distributed(backend="auto" if pick_device(args.device).type == "cuda" else "gloo")
        if is_main_process() and args.preset is None:
            print(f"preset {preset} ({chosen_by}; --preset full trains the recorded recipe)", flush=True)
        report = train(out, args.steps, preset=preset, run=options, overrides=overrides)
    except PretrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except StopRequested as err:
        if is_main_process():
            print(f"{err}; continue with the same command and --resume", file=sys.stderr)
        return 0
    if report is not None:
        print(json.dumps({k: v for k, v in report.items() if k != "config"}, indent=2))
        print(f"wrote {out}")
    return 0


def _recorded_report(folder: Path) -> dict:
    """The ``pretrain.json`` in ``folder`` ({} if none)."""
    from .recipes.shipping import REPORT

    report = folder / REPORT
    return json.loads(report.read_text()) if report.is_file() else {}


def _recorded_preset(report: dict) -> str:
    """The preset a shipped checkpoint was made with, read from the rebuild command its ``report`` records (``full``
    when it names none)."""
    words = report.get("rebuild", "").split()
    return words[words.index("--preset") + 1] if "--preset" in words[:-1] else "full"


def _preset(given: str | None) -> tuple[str, str]:
    """``(preset, where it came from)``: ``--preset`` if given, else the notebooks' preset
    (:func:`lmlib.course.presets.current`: ``LMLIB_PRESET``, else teach)."""
    import os

    from .course import presets
    from .recipes.pretraining import PretrainError

    if given is not None:
        return given, "--preset"
    try:
        preset = presets.current()
    except ValueError as err:
        raise PretrainError(f"{err}, or pass --preset") from None
    return preset, "from LMLIB_PRESET" if "LMLIB_PRESET" in os.environ else "the default, as in the notebooks"


def _list(names: list[str], root) -> int:
    print(f"data directory: {root}")
    for name in names:
        ds = data.DATASETS[name]
        size = sum(f.bytes for f in ds.files)
        present = all((root / f.path).is_file() for f in ds.files)
        print(f"{name:16s} {size / 1e6:7.2f} MB  {'present' if present else 'missing'}  {ds.title}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.group == "pretrain":
        return pretrain_main(args)
    if args.group == "ship":
        return ship_main(args)
    try:
        for name in args.names:
            data.dataset(name)
    except KeyError as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    names = args.names or list(data.DATASETS)
    root = data.data_dir()
    if args.action == "list":
        return _list(names, root)
    failed = 0
    for name in names:
        files = data.DATASETS[name].files
        stopped = None  # why a fetch stopped, for the files it left missing
        missing = [f for f in files if not (root / f.path).is_file()]
        if args.action == "fetch" and missing:
            try:  # one call per dataset, so files that share an archive share one download
                data.fetch(missing, root)
            except data.DataError as err:
                stopped = err
        for file in files:
            try:
                if stopped is not None and not (root / file.path).is_file():
                    if file.packed is not None:
                        raise stopped  # the archive it is built from could not be used
                    data.fetch([file], root)  # on its own, so the report gives this file's own reason
                data.verify(file, root)
                print(f"OK      {file.path}")
            except data.DataError as err:
                failed += 1
                print(f"FAILED  {file.path}: {err}")
    print(f"{'all' if not failed else 'not all'} files {'verified' if args.action == 'verify' else 'fetched'} in {root}"
          + (f" ({failed} failed)" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
