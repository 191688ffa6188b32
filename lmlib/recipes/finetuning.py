"""The length of a fine-tuning run, shared by GPT's and BERT's classifiers (``lmlib.recipes.gpt``, ``.bert``)."""

from __future__ import annotations

import math
from collections.abc import Mapping


def finetune_plan(recipe: Mapping, overrides: Mapping, n_examples: int) -> tuple[dict, int, int]:
    """``(settings, epochs, total_steps)``: ``recipe`` with ``overrides`` applied (an unknown key is an error), and
    ``epochs`` shuffled passes over ``n_examples`` in batches of ``batch_size``, repeated until at least
    ``min_steps`` steps, so that 100 labels still get a useful number of updates."""
    unknown = set(overrides) - set(recipe)
    if unknown:
        raise ValueError(f"unknown fine-tuning settings {sorted(unknown)}; the settings are {sorted(recipe)}")
    r = {**recipe, **overrides}
    per_epoch = math.ceil(n_examples / r["batch_size"])
    epochs = max(r["epochs"], math.ceil(r["min_steps"] / per_epoch))
    return r, epochs, epochs * per_epoch
