import math

import pytest
import torch

from lmlib.course.readings import (
    attention_reading,
    curves_sentence,
    lead,
    leads_sentence,
    race_reading,
    ulmfit_ablation_imdb_reading,
    ulmfit_imdb_reading,
)
from lmlib.models.transformer import AttentionMaps


def test_leads_name_the_leader_and_the_margin_or_the_split():
    assert lead({"A": (20.0, 40.0), "B": (18.5, 45.0)}, 0) == ("A", 1.5)
    assert leads_sentence({"A": (20.0, 46.0), "B": (18.5, 45.0)}) == "the A is ahead on both, by 1.5 BLEU and 1.0 chrF points"
    assert leads_sentence({"A": (20.0, 40.0), "B": (18.5, 45.0)}).startswith("the metrics split: the A is ahead on BLEU")


def test_curves_that_cross_once_and_curves_that_never_do():
    falling, flat = [5.0 - 0.1 * i for i in range(40)], [3.0] * 40  # falling passes 3.0 after 20 of 40 steps
    crossing = curves_sentence({"A": (40.0, falling), "B": (40.0, flat)})
    assert crossing.startswith("the training-loss curves cross 1 time(s), last at about 2") and crossing.endswith("the A has the lower loss")
    assert curves_sentence({"A": (40.0, flat), "B": (40.0, [4.0] * 40)}) == (
        "the training-loss curves do not cross: the A has the lower loss throughout")


def test_race_reading_states_steps_and_whether_the_committed_run_agrees():
    steps = {"Transformer": 300, "RNN + attention": 100}
    curves = {"Transformer": (30.0, [3.0] * 300), "RNN + attention": (30.0, [4.0] * 100)}
    scores = {"Transformer": (20.0, 45.0), "RNN + attention": (15.0, 40.0)}
    committed = {"seconds_per_model": 150.0, "models": {"Transformer": {"bleu": 10.0, "chrf": 30.0, "steps": 900},
                                                        "RNN + attention": {"bleu": 12.0, "chrf": 31.0, "steps": 400}}}
    text = race_reading(30, 1, steps, curves, scores, 50, (0.5, -0.25), committed)
    assert "the Transformer took 3.00× as many steps (300 for the Transformer, 100 for the RNN)" in text
    assert "by +0.5 BLEU and -0.2 chrF points" in text and text.endswith("disagree on the leader.")


def test_attention_reading_finds_the_argmax_and_the_heads():
    one_hot = torch.eye(3)[None, None]  # (1, 1 head, 3, 3): query i reads source i
    spread = torch.full((1, 1, 3, 3), 1 / 3)
    maps = AttentionMaps(encoder_self=[torch.cat([one_hot, spread], 1)], decoder_self=[one_hot], cross=[one_hot])
    text = attention_reading(maps, ["a", "b", "<eos>"], ["x", "y", "<eos>"])
    assert "`x` ← `a` (1.00), `y` ← `b` (1.00), `<eos>` ← `<eos>` (1.00)" in text
    assert "1.00 for layer 1, head 1 (the sharpest) and 0.33 for layer 1, head 2" in text
    assert "uniform over the 3 source tokens would be 33%" in text


def _entry(variant, n, mean, se, seeds=3, max_len=128):
    return {"variant": variant, "n_labels": n, "max_len": max_len, "seeds": seeds, "mean": mean, "se": se}


def test_ulmfit_imdb_reading_finds_the_matching_label_count_and_marks_gaps_beyond_two_standard_errors():
    summary = [_entry("ulmfit", 100, 0.70, 0.01), _entry("scratch", 100, 0.55, 0.01),
               _entry("ulmfit", 1000, 0.80, 0.01), _entry("scratch", 1000, 0.68, 0.01),
               _entry("ulmfit", 25000, 0.85, None, seeds=1), _entry("scratch", 25000, 0.86, None, seeds=1),
               _entry("ulmfit", 1000, 0.9, None, seeds=1, max_len=512)]  # another cut: not part of this reading
    text = ulmfit_imdb_reading(summary, n_test=2500, max_len=128)
    assert "**Reading the curve: ULMFiT.** With 100 labelled reviews it scores 70.0%; from scratch first reaches it with 25,000 labels (250x" in text
    assert "100: +15.0 ± 1.4*" in text and "1,000: +12.0 ± 1.4*" in text
    se_25k = 100 * math.hypot(math.sqrt(0.85 * 0.15 / 2500), math.sqrt(0.86 * 0.14 / 2500))
    assert f"25,000: -1.0 ± {se_25k:.1f} (one seed)" in text  # binomial standard errors for a single seed
    assert text.endswith("at 3 of 3 label counts.")
    never = ulmfit_imdb_reading([_entry("ulmfit", 100, 0.9, 0.01), _entry("scratch", 100, 0.5, 0.01),
                                 _entry("scratch", 1000, 0.6, 0.01), _entry("ulmfit", 1000, 0.91, 0.01)], 2500, 128)
    assert "from scratch never reaches it, not even with all 1,000 labels" in never
    other = ulmfit_imdb_reading(summary + [_entry("neither", 100, 0.5, 0.01)], 2500, 128, variant="neither", name="X")
    assert other.startswith("**Reading the curve: X.** With 100 labelled reviews it scores 50.0%; from scratch matches")
    assert "100: -5.0 ± 1.4*" in other and other.endswith("at 0 of 1 label counts.")
    with pytest.raises(ValueError) as error:
        ulmfit_imdb_reading(summary, 2500, 128, variant="no_stlr")
    assert "'no_stlr'" in str(error.value)


def test_ulmfit_ablation_reading_subtracts_full_ulmfit_at_each_label_count():
    summary = [_entry("ulmfit", 100, 0.70, 0.01), _entry("no_stlr", 100, 0.60, 0.01), _entry("no_stlr", 1000, 0.8, 0.01)]
    text = ulmfit_ablation_imdb_reading(summary, 2500, 128)
    assert "- without STLR (constant rate): 100 labels -10.0 ± 1.4*" in text
    assert "1,000 labels" not in text  # no full-ULMFiT row at 1,000 to compare with
    assert "without gradual unfreezing" not in text
