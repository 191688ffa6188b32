"""nbclient's NotebookClient for the tests, with its waits for kernel messages taken in slices of a second.

pyzmq's asyncio poll can miss the wake-up for a message that is already queued on its socket; only the poll's own
timeout then runs a real zero-wait poll that finds it. nbclient waits for a cell's reply with the cell's whole
timeout (600 s in test_binder.py) and for its outputs with none. Seen here twice: a Binder session of notebook 11
and an nbclient run of notebook 03 sat beside an idle kernel for about 600 s, then found the reply and passed. Waiting
in slices bounds what a missed wake-up costs to one slice; the deadline, and so a real timeout, stay the same.
"""

from __future__ import annotations

from queue import Empty
from time import monotonic

from nbclient import NotebookClient

SLICE_S = 1.0


def sliced(get_msg, slice_s: float = SLICE_S):
    """An async `get_msg(timeout=None)` that asks `get_msg` for at most `slice_s` at a time until its deadline."""

    async def get_msg_in_slices(timeout: float | None = None):
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            left = slice_s if deadline is None else max(0.0, deadline - monotonic())
            try:
                return await get_msg(timeout=min(slice_s, left))
            except Empty:
                if deadline is not None and monotonic() >= deadline:
                    raise

    return get_msg_in_slices


def notebook_client(nb, **kwargs) -> NotebookClient:
    """A NotebookClient (same arguments) whose shell and IOPub waits are `sliced` once its kernel has started."""
    client = NotebookClient(nb, **kwargs)
    then = client.on_notebook_start

    async def slice_the_waits(**hook_kwargs):
        for channel in (client.kc.shell_channel, client.kc.iopub_channel):
            channel.get_msg = sliced(channel.get_msg)
        if then is not None:
            result = then(**hook_kwargs)
            if hasattr(result, "__await__"):
                await result

    client.on_notebook_start = slice_the_waits
    return client
