
import torch

from lmlib.course.translation_readings import (
    attention_reading,
    curves_sentence,
    lead,
    leads_sentence,
    race_reading,
)
from lmlib.course.ulmfit_results import ulmfit_ablation_imdb_reading
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


def test_ulmfit_ablation_reading_subtracts_full_ulmfit_at_each_label_count():
    summary = [_entry("ulmfit", 100, 0.70, 0.01), _entry("no_stlr", 100, 0.60, 0.01), _entry("no_stlr", 1000, 0.8, 0.01)]
    text = ulmfit_ablation_imdb_reading(summary, 2500, 128)
    assert "- without STLR (constant rate): 100 labels -10.0 ± 1.4*" in text
    assert "1,000 labels" not in text  # no full-ULMFiT row at 1,000 to compare with
    assert "without gradual unfreezing" not in text
