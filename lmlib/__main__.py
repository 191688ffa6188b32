"""Command line: ``python -m lmlib data list|fetch|verify [NAME ...]`` and ``python -m lmlib pretrain MODEL``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path

from . import data

# model name -> (recipe module, what it trains): each module's pretrain() is the one its own command runs
PRETRAIN_MODELS = {
    "awd-lstm": ("lmlib.recipes.ulmfit", "ULMFiT stage (a): the AWD-LSTM language model on PTB"),
    "elmo": ("lmlib.recipes.elmo", "the ELMo biLM on IMDb's unlabelled reviews"),
    "gpt": ("lmlib.recipes.gpt", "the byte-level BPE and the GPT on IMDb's unlabelled reviews"),
    "bert": ("lmlib.recipes.bert", "the WordPiece and the BERT (MLM + NSP) on IMDb's unlabelled reviews"),
}
DEFAULT_OUT = Path("pretrained-runs")
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
    groups = parser.add_subparsers(dest="group", required=True, metavar="{data,pretrain}")
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
    return parser


def _pretrain_parser(groups) -> None:
    models = "\n".join(f"  {name:9s} {trains}" for name, (_, trains) in PRETRAIN_MODELS.items())
    p = groups.add_parser(
        "pretrain", help="reproduce a shipped checkpoint (awd-lstm, elmo, gpt, bert)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"Train one of the checkpoints shipped in lmlib/pretrained/ with its seeded recipe:\n{models}\n\n"
                    "With --preset full, one thread (the default) and --device cpu this is exactly the recorded run, so "
                    "it reproduces the shipped sha256 (on a CPU-only machine the default --device auto is the CPU) of "
                    "awd-lstm and elmo. The shipped gpt and bert were pretrained on a GPU by `python -m "
                    "lmlib.recipes.accelerated gpt` (and `... bert`; each pretrain.json has the command); here gpt and "
                    "bert --preset full are the one-core recipes shipped before them (4.1M and 7.5M tokens, too few to "
                    "transfer).\n"
                    "Every option, the device and the output folder are checked before any data is read.\n\n"
                    f"Several processes (data-parallel: each global batch is split between them; rank 0 alone prints "
                    f"and writes files):\n  {TORCHRUN_EXAMPLE}",
        epilog="The folder gets <name>.safetensors, its side files and pretrain.json (the recipe, metrics and every "
               "file's sha256), and, while training, resume.pt: model, optimizer, schedules, step and every random "
               "generator, rewritten atomically every --checkpoint-every steps and deleted once pretrain.json is "
               "written. A folder holding another model's or another config's checkpoint is refused. Progress: a bar "
               "on a terminal, else a line every tenth of the run (and at least once a minute), then a summary line.")
    p.add_argument("model", choices=list(PRETRAIN_MODELS), help="which checkpoint to train")
    p.add_argument("--preset", choices=("teach", "full"), default=None,
                   help="teach: the same recipe on a sliver of the data with a tiny model and a few steps, seconds; "
                        "full: the recorded recipe, 20-52 minutes on one core, the only preset the shipped folders "
                        "accept. Default: the LMLIB_PRESET environment variable if set, else teach, the same default "
                        "as the notebooks, so a first try takes seconds; pass --preset full to reproduce a shipped "
                        "checkpoint")
    p.add_argument("--out", type=Path, default=None,
                   help=f"output folder, created if missing (default {DEFAULT_OUT}/<name> with the full preset, "
                        f"{DEFAULT_OUT}/<name>-teach with teach). Writing into the shipped lmlib/pretrained folders "
                        f"needs --out to name them, and --preset full")
    p.add_argument("--resume", action="store_true",
                   help="continue the run whose resume.pt is in the output folder (same options): the final weights "
                        "equal an uninterrupted run's bit for bit")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the preset's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the shipped runs)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="write resume.pt every N steps (default: 100 with --preset full, 10 with teach)")
    p.add_argument("--stop-after", type=int, default=None, metavar="N",
                   help="stop after step N (counted from the start of the run, also when resuming) as if interrupted, "
                        "leaving the last resume.pt (to try --resume); N must lie between the step resumed from and "
                        "the last step")
    p.add_argument("--bf16", action="store_true",
                   help="run the forward pass and loss under torch.autocast(bfloat16) (CPU or CUDA); changes the "
                        "numbers, so the result no longer matches the shipped sha256")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto (default): CUDA when available, else the CPU; cuda is refused at once on a machine "
                        "without a CUDA GPU. The shipped runs of this command used the CPU")


def _shipped_dirs() -> set[Path]:
    from .recipes.shipping import PRETRAINED_DIR

    return {PRETRAINED_DIR.resolve(), *(d.resolve() for d in PRETRAINED_DIR.iterdir() if d.is_dir())}


def _gpu_rebuild(folder: Path) -> str | None:
    """The command that made the checkpoint in ``folder`` when it was pretrained on a GPU, else None."""
    from .recipes.shipping import REPORT, pretrained_on_gpu

    if not (folder / REPORT).is_file():
        return None
    recorded = json.loads((folder / REPORT).read_text())
    return recorded.get("rebuild") if pretrained_on_gpu(recorded) else None


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

    module = importlib.import_module(PRETRAIN_MODELS[args.model][0])
    name = module.NAME
    try:
        preset, chosen_by = _preset(args.preset)
        out = args.out if args.out is not None else DEFAULT_OUT / (name if preset == "full" else f"{name}-teach")
        if out.resolve() in _shipped_dirs():
            if args.out is None:
                raise PretrainError(f"the default folder {out} is a shipped checkpoint folder; name it with --out "
                                    f"to overwrite it")
            made_by = _gpu_rebuild(out)
            if made_by is not None:
                raise PretrainError(f"{out} holds a checkpoint pretrained on a GPU by another recipe; this command "
                                    f"trains the one-core recipe, so rebuild that one with `{made_by}`, or choose "
                                    f"another --out")
            if preset != "full" or args.steps is not None or args.bf16:
                this = f"preset {preset} ({chosen_by})" if preset != "full" else "--steps or --bf16"
                raise PretrainError(f"{out} holds a shipped checkpoint: only the full recorded recipe (--preset full, "
                                    f"no --steps or --bf16) may be written there, this run has {this}; add "
                                    f"--preset full or choose another --out")
        if args.threads < 1:
            raise PretrainError(f"--threads must be at least 1, got {args.threads}")
        every = args.checkpoint_every if args.checkpoint_every is not None else 100 if preset == "full" else 10
        # checks the device (and CUDA's bf16) now; the recipe's PretrainRun checks the folder, before any data is read
        options = RunOptions(device=args.device, bf16=args.bf16, checkpoint_every=every, resume=args.resume,
                             stop_after=args.stop_after)
        torch.set_num_threads(args.threads)
        # joins the process group when torchrun started this process (else does nothing); gloo for CPU tensors
        init_distributed(backend="auto" if pick_device(args.device).type == "cuda" else "gloo")
        if is_main_process() and args.preset is None:
            print(f"preset {preset} ({chosen_by}; --preset full trains the recorded recipe)", flush=True)
        report = module.pretrain(out, args.steps, preset=preset, run=options)
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
