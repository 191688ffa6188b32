"""lmlib.recipes.finetuning: how long a fine-tuning run is, and refusal of settings a recipe does not have."""

import pytest

from lmlib.recipes.finetuning import finetune_plan

RECIPE = dict(batch_size=16, epochs=3, min_steps=80, lr=5e-4)


def test_small_sets_repeat_epochs_until_min_steps_and_large_sets_take_the_epochs():
    r, epochs, total = finetune_plan(RECIPE, {}, 100)  # 7 steps per epoch: 3 epochs give 21 < 80
    assert (epochs, total) == (12, 84) and r == RECIPE
    assert finetune_plan(RECIPE, {}, 1000)[1:] == (3, 189)  # 63 steps per epoch, 3 epochs already pass 80
    assert finetune_plan(RECIPE, {}, 25_000)[1:] == (3, 4689)
    r, epochs, total = finetune_plan(RECIPE, {"batch_size": 50, "min_steps": 10}, 100)
    assert r["batch_size"] == 50 and (epochs, total) == (5, 10)


def test_an_unknown_setting_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown fine-tuning settings \['lr_max'\]; the settings are"):
        finetune_plan(RECIPE, {"lr_max": 1e-3}, 100)
