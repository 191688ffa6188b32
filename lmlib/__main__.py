"""Command line: ``python -m lmlib data list|fetch|verify [NAME ...]``."""

from __future__ import annotations

import argparse
import sys

from . import data


def _names(args) -> list[str]:
    for name in args.names:
        data.dataset(name)
    return args.names or list(data.DATASETS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmlib", description="lmlib's dataset tools")
    sub = parser.add_subparsers(dest="group", required=True)
    data_cmd = sub.add_parser("data", help="list, fetch or verify the datasets")
    data_cmd.add_argument("action", choices=["list", "fetch", "verify"])
    data_cmd.add_argument("names", nargs="*", help="dataset names (default: all)")
    args = parser.parse_args(argv)

    try:
        names = _names(args)
    except KeyError as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    root = data.data_dir()
    if args.action == "list":
        print(f"data directory: {root}")
        for name in names:
            ds = data.DATASETS[name]
            size = sum(f.bytes for f in ds.files)
            present = all((root / f.path).is_file() for f in ds.files)
            print(f"{name:16s} {size / 1e6:6.2f} MB  {'present' if present else 'missing'}  {ds.title}")
        return 0
    failed = 0
    for name in names:
        ds = data.DATASETS[name]
        for file in ds.files:
            try:
                if args.action == "fetch":
                    data.fetch([file], root)
                else:
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
