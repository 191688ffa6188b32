"""lmlib.course.translation_readings: a verdict only where the standard errors carry one, and the French pronouns
named as they came out."""

import torch

from lmlib.course.translation_readings import (
    length_reading,
    offline_length_reading,
    pronoun_reading,
    uniform_attention_why,
)
from lmlib.eval.metrics import corpus_bleu, corpus_chrf, scores_by_length

REFS = [[["il", "est", "grand", "."]], [["elle", "est", "petite", "."]], [["je", "suis", "très", "fatigué", "ce", "soir", "."]],
        [["nous", "sommes", "prêts", "à", "partir", "."]]] * 12
LENGTHS = [3, 4, 7, 8] * 12


def _results(hyps_by_model):
    return {name: dict(hyps=h, bleu=corpus_bleu(h, REFS), chrf=corpus_chrf(h, REFS),
                       buckets=scores_by_length(h, REFS, LENGTHS, [3, 5, 9])) for name, h in hyps_by_model.items()}


def test_length_reading_calls_a_difference_only_beyond_two_standard_errors():
    same = [r[0] for r in REFS]
    noisy = [h if k % 2 else h[:-2] + ["x"] for k, h in enumerate(same)]
    # the same translations, shifted by one sentence within each bucket: equal on average, noisy per sentence
    shuffled = [noisy[k + 4] if k + 4 < len(noisy) else noisy[k - 4] for k in range(len(noisy))]
    text = length_reading(_results({"fixed context": noisy, "attention": shuffled}), REFS, LENGTHS).data
    assert "within two standard errors" in text and "cannot say" in text and "beyond" not in text
    worse = [h[:1] + ["x"] * (len(h) - 1) for h in same]
    text = length_reading(_results({"fixed context": worse, "attention": same}), REFS, LENGTHS).data
    assert "ahead of it by more than two standard errors" in text


def test_offline_reading_draws_no_verdict_from_one_run_and_says_how_little_it_trained():
    run = dict(steps=500, bleu=9.0, chrf=21.0, buckets=[dict(bleu=12.0, chrf=24.0), dict(bleu=5.0, chrf=17.0)])
    offline = {"fixed": dict(run, model="fixed context", epochs_seen=0.67),
               "additive": dict(run, model="additive attention", epochs_seen=0.54, bleu=11.0,
                                buckets=[dict(bleu=13.0, chrf=25.0), dict(bleu=8.0, chrf=20.0)])}
    text = offline_length_reading(offline, live={"fixed context": {"bleu": 0.17}, "attention": {"bleu": 0.22}}).data
    assert "0.67 of an epoch" in text and "not longer training" in text
    assert "carry no verdict" in text and "score below this notebook's live runs" in text


def _pair(pronouns, weight_tired, weight_wide):
    tokens = "the animal didn't cross the street because it was too tired .".split()
    labels = [t + "*" if t in ("animal", "street", "cross") else t for t in tokens] + ["<eos>"]
    readings = {}
    for adjective, pronoun, (on_animal, on_street) in (("tired", pronouns[0], weight_tired),
                                                       ("wide", pronouns[1], weight_wide)):
        maps = torch.full((1, 4, len(labels), len(labels)), 0.05)
        maps[0, :, 7, 1], maps[0, :, 7, 5] = torch.tensor(on_animal), torch.tensor(on_street)
        readings[adjective] = dict(tokens=tokens[:-2] + [adjective, "."], labels=labels,
                                   output=[pronoun, "est", "<unk>", "."], maps=[maps, maps])
    return readings


def test_pronoun_reading_names_reversed_pronouns_and_gives_no_verdict_on_equal_margins():
    pairs = [(["i", "did", "it", "."], ["je", "l'", "ai", "fait", "."])]
    heads = [0.069, 0.07, 0.068, 0.069], [0.066, 0.065, 0.067, 0.066]
    text = pronoun_reading(_pair(("elle", "il"), heads, heads[::-1]), pairs, 20).data
    assert "reversed: *elle* for the animal that is tired (expected *il*)" in text
    assert "*il* for the street that is wide (expected *elle*)" in text
    assert "carries no verdict" not in text or "within two standard errors" in text
    even = [0.069, 0.066, 0.07, 0.065], [0.066, 0.069, 0.065, 0.07]
    text = pronoun_reading(_pair(("il", "elle"), even, even), pairs, 20).data
    assert "The attention carries no verdict" in text and "at two decimals the two nouns get equal weight" in text
    assert "expected ones" in text and "'animal' and 'street' reach the model as `<unk>`" in text
    clear = [0.6, 0.5, 0.55, 0.65], [0.1, 0.1, 0.12, 0.08]
    text = pronoun_reading(_pair(("il", "elle"), clear, clear[::-1]), pairs, 20).data
    assert "towards the expected noun" in text and "beyond two standard errors." in text


def test_uniform_attention_why_calls_a_drop_only_beyond_two_standard_errors():
    trained = [40.0, 50.0, 60.0, 45.0, 55.0] * 8
    assert "falls" in uniform_attention_why(trained, [t - 10 for t in trained], 45.0)
    wobble = [t + (1 if k % 2 else -1) for k, t in enumerate(trained)]
    text = uniform_attention_why(trained, wobble, 45.0)
    assert "barely moves" in text and "within two standard errors" in text
    assert "do better" in uniform_attention_why(trained, [t + 10 for t in trained], 45.0)
