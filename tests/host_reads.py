"""``no_host_reads()``: a context in which reading a tensor's value back to Python raises.

On a GPU each such read (``.item()``, ``bool(t)`` in an ``if``, ``int(t)``, ``.tolist()``) waits for the device to
finish; a forward run inside this context shows it keeps its numbers on the device. Checks of input values belong
at the boundary (each model's ``check_inputs``), not in the forward. Only reads made by lmlib's own code count:
PyTorch's packed RNNs read their ``batch_sizes``, which live on the CPU by design."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import torch

LMLIB = str(Path(__file__).resolve().parents[1] / "lmlib")

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")


@contextmanager
def no_host_reads():
    def refuse(name, method):
        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(LMLIB):
                raise AssertionError(f"Tensor.{name}() read a value back to the host in {caller}")
            return method(self, *args, **kwargs)
        return read

    saved = {name: torch.Tensor.__dict__.get(name) for name in READS}
    for name in READS:
        setattr(torch.Tensor, name, refuse(name, getattr(torch.Tensor, name)))
    try:
        yield
    finally:
        for name, method in saved.items():
            if method is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, method)
