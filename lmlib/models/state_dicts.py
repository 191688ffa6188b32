"""Loading a checkpoint into a model of the wrong shape, with an error that says which setting differs.

``nn.Module.load_state_dict`` reports a size mismatch as a wall of tensor shapes. The models that ship or load
checkpoints (GPT, BERT, ELMo's biLM) call :func:`check_state_dict` first, so a student who loads a checkpoint
into a model built with another config is told which config field to change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn


def _first(names: list[str], n: int = 4) -> str:
    return f"{names[:n]}{' ...' if len(names) > n else ''}"


def check_state_dict(model: nn.Module, state_dict: Mapping[str, torch.Tensor], *, strict: bool,
                     config_name: str, shape_hint: Callable[[str], str], structure_fields: str,
                     companion: str = "") -> None:
    """Raise ``ValueError`` if ``state_dict`` cannot load into ``model``, naming what differs.

    ``shape_hint(key)`` says which config fields set the shape of parameter ``key``; ``structure_fields``
    names the fields that add or remove parameters (checked only when ``strict``); ``companion`` names what
    must come with the config, e.g. ``"its tokenizer"``.
    """
    kind = type(model).__name__
    own = model.state_dict()
    for key, value in state_dict.items():
        if key in own and tuple(value.shape) != tuple(own[key].shape):
            raise ValueError(f"the state dict is for a different {kind}: {key} has shape {tuple(value.shape)}, "
                             f"this model's has {tuple(own[key].shape)} ({shape_hint(key)}); build the model "
                             f"with the {config_name} the checkpoint was saved with{f' (and {companion})' if companion else ''}")
    if strict:
        missing, unexpected = sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own))
        if missing or unexpected:
            raise ValueError(f"the state dict is for a different {kind}: missing {_first(missing)}, unexpected "
                             f"{_first(unexpected)} ({structure_fields} differ); build the model with the "
                             f"{config_name} the checkpoint was saved with")


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face Hub can be asked for weights now: False at once when HF_HUB_OFFLINE or
    TRANSFORMERS_OFFLINE is set, else whether huggingface.co answers a TCP connection within ``timeout`` seconds
    (so a notebook without network says so in a moment instead of waiting out transformers' retries)."""
    import os
    import socket

    if any(os.environ.get(v, "") not in ("", "0") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hf_from_pretrained(class_name: str, name: str, what: str, build_instead: str, **hf_kwargs) -> nn.Module:
    """``transformers.<class_name>.from_pretrained(name)``, with errors that say what to do offline.

    ``what`` names the weights (``"GPT-2"``); ``build_instead`` says how to go on without them.
    """
    import os

    try:
        import transformers
    except ImportError as err:
        raise ImportError(f"loading {what} weights needs the transformers package: pip install transformers") from err
    try:
        return getattr(transformers, class_name).from_pretrained(name, **hf_kwargs)
    except OSError as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or \
            os.environ.get("TRANSFORMERS_OFFLINE", "") not in ("", "0")
        why = ("HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set and the weights are not in the local cache"
               if offline else "the Hugging Face Hub could not be reached and the weights are not cached")
        raise OSError(f"could not load {what} weights {name!r}: {why}. Download them once with network access "
                      f"(unset HF_HUB_OFFLINE), or pass the path of a local copy; to run without them, "
                      f"{build_instead}") from err
