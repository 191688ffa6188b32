"""The checks the models share: in their configs and constructors (which fields are sizes, which are probabilities,
how the heads split ``d_model``) and in their ``check_inputs`` (a batch of token ids)."""

from __future__ import annotations

import operator

import torch

from ..text.vocab import check_ids_in_range


def check_positive_ints(config, names: tuple[str, ...], minimum: int = 1) -> None:
    """Refuse a config whose size fields ``names`` are not ints of at least ``minimum`` (a bool, a float such as
    128.0, or a smaller number), naming the config class, the field and its value. ``config`` may be any object
    holding the fields as attributes."""
    for name in names:
        value = getattr(config, name)
        try:
            size = operator.index(value)  # ints of any kind (numpy, torch), but not 2.0
        except TypeError:
            size = None
        if isinstance(value, bool) or size is None or size < minimum:
            raise ValueError(f"{type(config).__name__}.{name} must be an int of at least {minimum}, got {value!r}")


def check_choice(config, name: str, choices) -> None:
    """Refuse a config whose field ``name`` is not one of ``choices``, naming the config class, the field and its
    value."""
    value = getattr(config, name)
    if value not in choices:
        raise ValueError(f"{type(config).__name__}.{name} must be one of {tuple(choices)}, got {value!r}")


def check_probability(p: float, name: str = "p") -> float:
    """A dropout probability must lie in [0, 1): p = 1 would drop everything and divide by zero."""
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise ValueError(f"{name} must be a number in [0, 1), got {p!r}")
    if not 0 <= p < 1:
        raise ValueError(f"{name} must be in [0, 1) (the probability of dropping a unit), got {p}")
    return float(p)


def check_heads(d_model: int, num_heads: int, head_multiple: int = 1) -> None:
    """``d_model`` must split into ``num_heads`` heads of a whole number of dimensions (a multiple of
    ``head_multiple``: 2 where sinusoids pair sin and cos); the message lists the head counts that fit."""
    if d_model % (num_heads * head_multiple) != 0:
        fits = [h for h in range(1, 17) if d_model % (h * head_multiple) == 0]
        size = "equal size" if head_multiple == 1 else f"equal size, a multiple of {head_multiple}"
        raise ValueError(f"d_model={d_model} does not split into num_heads={num_heads} heads of {size}; pick "
                         f"num_heads from {fits}")


def check_token_ids(ids, vocab_size: int, name: str, max_len: int | None = None, cut: str = "") -> None:
    """Refuse anything but a non-empty ``(batch, seq)`` integer tensor of ids in [0, vocab_size) with at most
    ``max_len`` positions, naming ``name``, the shape or the ids that are wrong; ``cut`` says how to shorten."""
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.is_floating_point() or ids.dtype == torch.bool:
        got = f"{ids.dtype} tensor of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else type(ids)
        raise ValueError(f"{name} must be a (batch, seq) tensor of integer token ids, got {got}; for a single "
                         f"sequence add the batch dimension: {name}[None]")
    if ids.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(ids.shape)}): give at least one token")
    if max_len is not None and ids.size(1) > max_len:
        raise ValueError(f"{name} has {ids.size(1)} positions, but the model has {max_len}{cut}")
    check_ids_in_range(ids, vocab_size, name, "the model's vocabulary (vocab_size)")
