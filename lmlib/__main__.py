"""Command line: ``python -m lmlib data list|fetch|verify [NAME ...]``."""

from __future__ import annotations

import argparse
import sys

from . import data

_ACTIONS = {
    "list": "show each dataset, its size on disk and whether all its files are present (reads no file)",
    "fetch": "download what is missing from its pinned source, verify it and put it in place; "
             "a present but corrupt file is reported, not replaced",
    "verify": "check the sha256 of every file already present; download nothing",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lmlib", description="lmlib's dataset tools")
    groups = parser.add_subparsers(dest="group", required=True, metavar="{data}")
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
    return parser


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
