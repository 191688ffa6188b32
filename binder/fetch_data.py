"""Fetch every dataset into data/ for the Binder image, trying each source again after a pause if it fails.

binder/postBuild runs this once while the image is built. A public server that drops one request should not fail
the whole build, so each dataset gets ``ATTEMPTS`` tries, with waits of 10, 30 and 90 s between them; a dataset
that still fails stops the build with one line naming the dataset, its source and the last error. Every file is
checked against its sha256 (``lmlib.data``), so a session starts with verified data and nothing to download.
"""

from __future__ import annotations

import sys
import time

from lmlib import data

ATTEMPTS = 4
FIRST_WAIT_S = 10.0
BACKOFF = 3.0


def fetch_all(names: list[str] | None = None, *, attempts: int = ATTEMPTS, first_wait_s: float = FIRST_WAIT_S,
              sleep=time.sleep) -> int:
    """Fetch and verify the named datasets (default: all); 0 when every file is in place, else 1."""
    root = data.data_dir()
    for name in names or list(data.DATASETS):
        dataset, wait = data.dataset(name), first_wait_s
        for attempt in range(1, attempts + 1):
            try:
                missing = [f for f in dataset.files if not (root / f.path).is_file()]
                if missing:
                    data.fetch(missing, root)
                for file in dataset.files:
                    data.verify(file, root)
                print(f"{name}: every file in place and verified in {root}", flush=True)
                break
            except data.DataError as err:
                if attempt == attempts:
                    print(f"error: dataset {name!r} could not be fetched from {dataset.source} after {attempts} "
                          f"tries: {err}", file=sys.stderr, flush=True)
                    return 1
                print(f"{name}: try {attempt} of {attempts} failed ({err}); trying again in {wait:g} s", flush=True)
                sleep(wait)
                wait *= BACKOFF
    return 0


if __name__ == "__main__":
    sys.exit(fetch_all(sys.argv[1:]))
