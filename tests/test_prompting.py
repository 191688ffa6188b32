"""lmlib.eval.prompting: the prompt's text, label scores against token-by-token scoring, what fits a short context,
and contextual calibration on a model whose bias is known."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from lmlib.eval import prompting
from lmlib.eval.prompting import build_prompt, few_shot_accuracy, fitting_examples, label_log_probs
from lmlib.models.gpt import GPT, GPTConfig

torch.set_num_threads(1)


class Chars:
    """A tokenizer with one id per character (ASCII)."""

    def encode(self, text):
        return [ord(c) for c in text]


def tiny_gpt(block_size=64):
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=128, block_size=block_size, num_layers=1, num_heads=2, d_model=16, dropout=0.0)).eval()


def test_the_prompt_reads_as_solved_examples_then_the_question():
    prompt = build_prompt([("a fine film", 1), ("dull", 0)], "so-so")
    assert prompt == "Review: a fine film\nSentiment: positive\n\nReview: dull\nSentiment: negative\n\nReview: so-so\nSentiment:"
    assert build_prompt([], "so-so") == "Review: so-so\nSentiment:"


def test_label_log_probs_equal_scoring_the_word_token_by_token():
    model, tok = tiny_gpt(), Chars()
    prompt = "Review: ok\nSentiment:"
    scores = label_log_probs(model, tok, prompt, {0: " no", 1: " yes"})
    for label, word in {0: " no", 1: " yes"}.items():
        ids, total = tok.encode(prompt), 0.0
        for t in tok.encode(word):  # one forward pass per token, on the growing prefix
            with torch.no_grad():
                total += torch.log_softmax(model(torch.tensor([ids]))[0, -1], -1)[t].item()
            ids.append(t)
        assert scores[label] == pytest.approx(total, abs=1e-5)


def test_examples_that_do_not_fit_the_context_are_dropped_oldest_first():
    model, tok = tiny_gpt(block_size=64), Chars()
    examples = [("first", 1), ("second", 0), ("third", 1)]
    kept = fitting_examples(model, tok, examples, "q", {0: " n", 1: " p"}, template="{text}:")
    assert kept == examples  # 'first: p\n\nsecond: n\n\nthird: p\n\nq:' + 2 characters fit in 64
    short = tiny_gpt(block_size=24)
    assert fitting_examples(short, tok, examples, "q", {0: " n", 1: " p"}, template="{text}:") == examples[2:]
    with pytest.raises(ValueError, match="context of 24"):
        label_log_probs(short, tok, "x" * 30, {0: " n"})


class BiasedModel(nn.Module):
    """Scores 'p' above 'n' only when the text so far holds a 'g', and prefers 'n' by a wide margin otherwise."""

    config = SimpleNamespace(block_size=256)

    def forward(self, ids):
        logits = torch.zeros(ids.size(0), ids.size(1), 128)
        seen_g = (ids == ord("g")).cumsum(1) > 0  # (1, L)
        logits[..., ord("n")] = 4.5
        logits[..., ord("p")] = 3.0 + 1.0 * seen_g
        return logits


def test_calibration_removes_a_known_label_bias():
    tests = [("g good", 1), ("bad", 0), ("great g", 1), ("awful", 0)]
    result = few_shot_accuracy(BiasedModel(), Chars(), [], tests, k=0, verbalizer={0: "n", 1: "p"}, template="{text}:")
    assert result.accuracy == 0.5 and result.share_predicted_positive == 0.0  # always 'n'
    assert result.calibrated_accuracy == 1.0  # 'N/A' shows the bias; dividing it out leaves the 'g' signal


def test_k_examples_are_balanced_and_bad_k_is_refused():
    pool = [("g yes", 1), ("g sure", 1), ("no", 0), ("nope", 0)]
    result = few_shot_accuracy(BiasedModel(), Chars(), pool, [("bad", 0)], k=2, verbalizer={0: "n", 1: "p"},
                               template="{text}:")
    assert result.mean_examples_used == 2
    with pytest.raises(ValueError, match="int >= 0"):
        few_shot_accuracy(BiasedModel(), Chars(), pool, [("bad", 0)], k=-1)


def test_one_example_of_each_label_is_enough_since_examples_are_drawn_with_replacement(monkeypatch):
    prompts = []
    real = prompting.label_log_probs
    monkeypatch.setattr(prompting, "label_log_probs", lambda m, t, prompt, v: prompts.append(prompt) or real(m, t, prompt, v))
    pool = [("g yes", 1), ("no", 0)]
    result = few_shot_accuracy(BiasedModel(), Chars(), pool, [("bad", 0)], k=4, verbalizer={0: "n", 1: "p"},
                               template="{text}:")
    assert result.mean_examples_used == 4
    blocks = prompts[0].split("\n\n")  # four solved examples, two of each label, then the query
    assert sorted(blocks[:4]) == ["g yes:p", "g yes:p", "no:n", "no:n"] and blocks[4] == "bad:"
    only_negative = [("no", 0)]
    assert few_shot_accuracy(BiasedModel(), Chars(), only_negative, [("bad", 0)], k=1, verbalizer={0: "n", 1: "p"},
                             template="{text}:").mean_examples_used == 1  # k = 1 asks for label 0 only
    with pytest.raises(ValueError, match=r"no example of label\(s\) \[1\], which k=2 examples include"):
        few_shot_accuracy(BiasedModel(), Chars(), only_negative, [("bad", 0)], k=2, verbalizer={0: "n", 1: "p"})


def test_the_content_free_prompt_is_scored_once_when_it_repeats(monkeypatch):
    prompts = []
    real = prompting.label_log_probs
    monkeypatch.setattr(prompting, "label_log_probs", lambda m, t, prompt, v: prompts.append(prompt) or real(m, t, prompt, v))
    tests = [("g good", 1), ("bad", 0), ("great g", 1), ("awful", 0)]
    result = few_shot_accuracy(BiasedModel(), Chars(), [], tests, k=0, verbalizer={0: "n", 1: "p"}, template="{text}:")
    assert prompts.count("N/A:") == 1 and len(prompts) == len(tests) + 1  # each test once, the prior once
    assert result.calibrated_accuracy == 1.0  # the cached prior still calibrates every sentence
