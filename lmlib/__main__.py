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
                    "it reproduces the shipped sha256 (on a CPU-only machine the default --device auto is the CPU).\n"
                    "Under `torchrun --nproc_per_node=N python -m lmlib pretrain MODEL ...` each global batch is split "
                    "between the N processes (data-parallel); rank 0 alone writes files.",
        epilog="The folder gets <name>.safetensors, its side files and pretrain.json (the recipe, metrics and every "
               "file's sha256), and, while training, resume.pt: model, optimizer, schedules, step and every random "
               "generator, rewritten atomically every --checkpoint-every steps and deleted once pretrain.json is "
               "written. A folder holding another model's or another config's checkpoint is refused.")
    p.add_argument("model", choices=list(PRETRAIN_MODELS), help="which checkpoint to train")
    p.add_argument("--preset", choices=("teach", "full"), default="full",
                   help="full (default): the recorded recipe, minutes to an hour on one core; teach: the same recipe "
                        "on a sliver of the data with a tiny model and a few steps, seconds")
    p.add_argument("--out", type=Path, default=None,
                   help=f"output folder (default {DEFAULT_OUT}/<name>). Writing into the shipped lmlib/pretrained "
                        f"folders needs --out to name them, and the full preset")
    p.add_argument("--resume", action="store_true",
                   help="continue the run whose resume.pt is in the output folder (same options): the final weights "
                        "equal an uninterrupted run's bit for bit")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the preset's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the shipped runs)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="write resume.pt every N steps (default: 100 with --preset full, 10 with teach)")
    p.add_argument("--stop-after", type=int, default=None, metavar="N",
                   help="stop after step N as if interrupted, leaving the last resume.pt (to try --resume)")
    p.add_argument("--bf16", action="store_true",
                   help="run the forward pass and loss under torch.autocast(bfloat16) (CPU or CUDA); changes the "
                        "numbers, so the result no longer matches the shipped sha256")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto (default): CUDA when available, else the CPU. The shipped runs used the CPU")


def _shipped_dirs() -> set[Path]:
    from .recipes.shipping import PRETRAINED_DIR

    return {PRETRAINED_DIR.resolve(), *(d.resolve() for d in PRETRAINED_DIR.iterdir() if d.is_dir())}


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
    from .training.distributed import init_distributed, is_main_process

    module = importlib.import_module(PRETRAIN_MODELS[args.model][0])
    name = module.NAME
    out = args.out if args.out is not None else DEFAULT_OUT / name
    try:
        if out.resolve() in _shipped_dirs():
            if args.out is None:
                raise PretrainError(f"the default folder {out} is a shipped checkpoint folder; name it with --out "
                                    f"to overwrite it")
            if args.preset != "full" or args.steps is not None or args.bf16:
                raise PretrainError(f"{out} holds a shipped checkpoint: only the full recorded recipe (no --steps, "
                                    f"--preset teach or --bf16) may be written there; choose another --out")
        if args.threads < 1:
            raise PretrainError(f"--threads must be at least 1, got {args.threads}")
        every = args.checkpoint_every if args.checkpoint_every is not None else 100 if args.preset == "full" else 10
        options = RunOptions(device=args.device, bf16=args.bf16, checkpoint_every=every, resume=args.resume,
                             stop_after=args.stop_after)
        torch.set_num_threads(args.threads)
        init_distributed()  # joins the process group when torchrun started this process; else does nothing
        report = module.pretrain(out, args.steps, preset=args.preset, run=options)
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
