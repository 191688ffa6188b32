"""The one check of size fields, shared by the models' configs, so each config says in one line which fields must be
sizes."""

from __future__ import annotations

import operator


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
