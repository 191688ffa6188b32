"""Checks shared by the models' config dataclasses, so each config says in one line which fields must be sizes."""

from __future__ import annotations


def check_positive_ints(config, names: tuple[str, ...]) -> None:
    """Refuse a config whose size fields ``names`` are not positive ints (a bool, a float such as 128.0, 0 or a
    negative number), naming the config class and the field."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{type(config).__name__}.{name} must be a positive int, got {value!r}")
