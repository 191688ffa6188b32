"""``no_host_reads()``: a context in which reading a tensor's value back to Python raises.

On a GPU each such read (``.item()``, ``bool(t)`` in an ``if``, ``int(t)``, ``.tolist()``) waits for the device to
finish; a forward run inside this context shows it keeps its numbers on the device. Checks of input values belong
at the boundary (each model's ``check_inputs``), not in the forward."""

from __future__ import annotations

from contextlib import contextmanager

import torch

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")


@contextmanager
def no_host_reads():
    def refuse(name):
        def read(self, *args, **kwargs):
            raise AssertionError(f"Tensor.{name}() read a value back to the host inside a forward")
        return read

    saved = {name: torch.Tensor.__dict__.get(name) for name in READS}
    for name in READS:
        setattr(torch.Tensor, name, refuse(name))
    try:
        yield
    finally:
        for name, method in saved.items():
            if method is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, method)
