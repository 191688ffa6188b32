"""The weights of the Transformer models: their initialisation, checkpoints, and copies of Hugging Face models.

``nn.Module.load_state_dict`` reports a size mismatch as a wall of tensor shapes. The models that ship or load
checkpoints (GPT, BERT, ELMo's biLM) call :func:`check_state_dict` first, so a student who loads a checkpoint
into a model built with another config is told which config field to change.

Real weights from the Hugging Face Hub (GPT-2, BERT-base) load through :func:`hf_from_pretrained` and
:func:`copy_hf_weights`, and a notebook asks :func:`real_weights` first: nothing is downloaded unless the student
asked for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import torch
from torch import nn


def _first(names: list[str], n: int = 4) -> str:
    return f"{names[:n]}{' ...' if len(names) > n else ''}"


@torch.no_grad()
def normal_init(model: nn.Module, std: float = 0.02) -> None:
    """GPT's and BERT's initialisation: every Linear and Embedding weight from N(0, std), zero biases, LayerNorm 1/0."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            module.reset_parameters()


def check_state_dict(model: nn.Module, state_dict: Mapping[str, torch.Tensor], *, strict: bool,
                     shape_hint: Callable[[str], str], structure_fields: str, companion: str = "") -> None:
    """Raise ``ValueError`` if ``state_dict`` cannot load into ``model``, naming what differs.

    ``shape_hint(key)`` says which fields of ``model.config`` set the shape of parameter ``key``;
    ``structure_fields`` names the fields that add or remove parameters (checked only when ``strict``);
    ``companion`` names what must come with the config, e.g. ``"its tokenizer"``.
    """
    kind, config_name = type(model).__name__, type(model.config).__name__
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


REAL_WEIGHTS_VARIABLE = "LMLIB_REAL_WEIGHTS"
HUB_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def _is_set(variable: str) -> bool:
    return os.environ.get(variable, "") not in ("", "0")


def real_weights(asked: bool = False, timeout: float = 2.0) -> tuple[bool, str]:
    """Whether to download real weights (GPT-2, BERT-base) from the Hugging Face Hub now, and if not, why.

    Real weights are hundreds of MB to download and take a notebook's kernel to about 1.5 GB, so nothing is
    fetched unless the student asks: ``asked=True`` (a notebook's ``LOAD_...`` switch) or ``LMLIB_REAL_WEIGHTS=1``
    in the environment. Even then HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE (``binder/start`` sets the first: Binder
    gives a session 2 GB) refuse without touching the network, and a Hub that does not accept a TCP connection
    within ``timeout`` seconds is reported at once instead of after transformers' retries. Only that last check
    touches the network. Returns ``(True, "")`` or ``(False, reason)``, the reason a short phrase to print.
    """
    import socket

    if not (asked or _is_set(REAL_WEIGHTS_VARIABLE)):
        return False, "not asked for"
    for variable in HUB_OFFLINE_VARIABLES:
        if _is_set(variable):
            return False, f"{variable} is set, so the Hugging Face Hub is not asked"
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
    except OSError:
        return False, f"huggingface.co did not answer within {timeout:g} s"
    return True, ""


def hf_from_pretrained(class_name: str, name: str, what: str, build_instead: str, **hf_kwargs) -> nn.Module:
    """``transformers.<class_name>.from_pretrained(name)``, with errors that say what to do offline.

    ``what`` names the weights (``"GPT-2"``); ``build_instead`` says how to go on without them.
    """
    try:
        import transformers
    except ImportError as err:
        raise ImportError(f"loading {what} weights needs the transformers package: pip install transformers") from err
    try:
        return getattr(transformers, class_name).from_pretrained(name, **hf_kwargs)
    except OSError as err:
        offline = any(_is_set(v) for v in HUB_OFFLINE_VARIABLES)
        why = ("HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set and the weights are not in the local cache"
               if offline else "the Hugging Face Hub could not be reached and the weights are not cached")
        raise OSError(f"could not load {what} weights {name!r}: {why}. Download them once with network access "
                      f"(unset HF_HUB_OFFLINE), or pass the path of a local copy; to run without them, "
                      f"{build_instead}") from err


def check_hf_model(hf_model, classes: tuple[str, ...], model_type: str, caller: str, load: str,
                   allowed: Mapping[str, tuple], recipe: str) -> None:
    """Refuse a ``transformers`` model that is not one of ``classes`` with ``model_type`` (``load`` says how to load
    the right one), or whose config takes values lmlib's model does not implement: ``allowed`` maps each setting to
    the values it may take (a config without the setting reads as the first), ``recipe`` names what can be copied."""
    kind = type(hf_model).__name__
    found = getattr(getattr(hf_model, "config", None), "model_type", None)
    if kind not in classes or found != model_type:
        raise ValueError(f"{caller} copies a transformers {', '.join(classes)} (model_type {model_type!r}), got a "
                         f"{kind} (model_type {found!r}); load a checkpoint with {load}")
    c = hf_model.config
    bad = {name: getattr(c, name, ok[0]) for name, ok in allowed.items() if getattr(c, name, ok[0]) not in ok}
    if bad:
        raise ValueError(f"this {kind} uses settings lmlib does not implement: {bad}; only the original {recipe} can "
                         f"be copied")


def hf_key(names: Mapping[str, str], key: str) -> str:
    """lmlib's parameter name -> transformers' name, through ``names``, whose entries for a layer's parameters
    write the layer index as ``{i}`` (``"blocks.{i}.ln_1.weight"``)."""
    stack, *rest = key.split(".")
    if rest and rest[0].isdigit():
        return names[".".join([stack, "{i}", *rest[1:]])].format(i=rest[0])
    return names[key]


@torch.no_grad()
def copy_hf_weights(model: nn.Module, source: Mapping[str, torch.Tensor], hf_name: Callable[[str], str], what: str,
                    tied: str, transposed: tuple[str, ...] = ()) -> set[str]:
    """Copy every parameter ``key`` of ``model`` but the ``tied`` one (copied with the embedding it shares) from the
    transformers state dict ``source`` entry ``hf_name(key)``, transposed where that name ends with one of
    ``transposed``, checking each name and shape. Returns the names of ``source`` that were used."""
    used = set()
    for key, param in model.state_dict().items():
        if key == tied:
            continue
        name = hf_name(key)
        assert name in source, f"{name} (for lmlib's {key}) is missing from the {what} state dict"
        value = source[name].t() if name.endswith(transposed) else source[name]
        assert value.shape == param.shape, f"{name} {tuple(value.shape)} -> {key} {tuple(param.shape)}"
        param.copy_(value)
        used.add(name)
    return used
