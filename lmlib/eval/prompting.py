"""Zero- and few-shot classification by prompting a language model (Radford et al. 2019, §3; Brown et al. 2020,
"Language Models are Few-Shot Learners", §2).

No weight changes: the task is written as text the model continues. For sentiment,

    Review: a gripping , funny film .
    Sentiment: positive

    Review: <the sentence to classify>
    Sentiment:

with k solved examples in front (k = 0: zero-shot). The prediction is the label whose word the model finds most
probable next: argmax_y log P(verbalizer(y) | prompt), summed over the word's tokens. Small models have a strong
prior for one label word whatever the review; *contextual calibration* (Zhao et al. 2021, "Calibrate Before Use")
measures that prior on a content-free input ("N/A") and divides it out: score_y = log P(y | prompt) − log P(y | prompt
with "N/A" as the review).

The functions take any lmlib ``GPT`` (a shipped one, or real GPT-2 from ``GPT.from_pretrained``) and any tokenizer
with ``encode(text) -> list[int]`` (lmlib's byte-level BPE or transformers' GPT-2 tokenizer): one code path for both.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..runtime import eval_mode

TEMPLATE = "Review: {text}\nSentiment:"
VERBALIZER = {0: " negative", 1: " positive"}
SEPARATOR = "\n\n"


def build_prompt(examples: Sequence[tuple[str, int]], query: str, verbalizer: Mapping[int, str] = VERBALIZER,
                 template: str = TEMPLATE) -> str:
    """k solved ``examples`` (text, label), each followed by a blank line, then the unsolved ``query``."""
    blocks = [template.format(text=t) + verbalizer[y] for t, y in examples]
    return SEPARATOR.join([*blocks, template.format(text=query)])


@torch.no_grad()
def label_log_probs(model, tokenizer, prompt: str, verbalizer: Mapping[int, str] = VERBALIZER) -> dict[int, float]:
    """log P(verbalizer[y] | prompt) for every label y: the sum of the log-probabilities of the word's tokens.

    One forward pass scores every label: the rows ``prompt + word_y`` go in as one batch, right-padded to the
    longest word (a left-to-right model's predictions never see the padding after them)."""
    context = tokenizer.encode(prompt)
    answers = {label: tokenizer.encode(word) for label, word in verbalizer.items()}
    width = max(len(a) for a in answers.values())
    if len(context) + width > model.config.block_size:
        raise ValueError(f"the prompt and the label word take {len(context) + width} tokens, more than this model's "
                         f"context of {model.config.block_size}; use fewer examples (k) or shorter texts")
    rows = torch.tensor([context + a + [0] * (width - len(a)) for a in answers.values()])  # (labels, T)
    with eval_mode(model):
        logits = model(rows)[:, len(context) - 1: len(context) - 1 + width]  # (labels, width, V): the words' predictions
    logp = torch.log_softmax(logits.float(), dim=-1)
    return {label: logp[i, :len(a)].gather(1, torch.tensor(a)[:, None]).sum().item()
            for i, (label, a) in enumerate(answers.items())}


def fitting_examples(model, tokenizer, examples: Sequence[tuple[str, int]], query: str,
                     verbalizer: Mapping[int, str] = VERBALIZER, template: str = TEMPLATE) -> list[tuple[str, int]]:
    """The last examples of ``examples`` that fit in the model's context with the query and the longest label word
    (earlier ones are dropped first): a 128-token model holds only two or three short reviews."""
    longest = max(len(tokenizer.encode(w)) for w in verbalizer.values())
    kept = list(examples)
    while kept and len(tokenizer.encode(build_prompt(kept, query, verbalizer, template))) + longest > model.config.block_size:
        kept.pop(0)
    return kept


@dataclass
class FewShotResult:
    k: int  # examples asked for
    accuracy: float
    calibrated_accuracy: float
    mean_examples_used: float  # after dropping those that did not fit the context
    share_predicted_positive: float  # a model that always answers one label has accuracy ≈ that label's share
    n: int


def few_shot_accuracy(model, tokenizer, pool: Sequence[tuple[str, int]], tests: Sequence[tuple[str, int]], k: int,
                      seed: int = 0, verbalizer: Mapping[int, str] = VERBALIZER, template: str = TEMPLATE,
                      content_free: str = "N/A") -> FewShotResult:
    """Accuracy on ``tests`` (text, label) with ``k`` examples drawn from ``pool`` per test sentence (seeded; half of
    each label when k is even, so the prompt itself is balanced), raw and contextually calibrated. Examples are
    drawn with replacement, so the pool needs only one example of each label the prompt holds."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k (examples in the prompt) must be an int >= 0, got {k!r}")
    if not tests:
        raise ValueError("no test sentences given")
    by_label = {y: [ex for ex in pool if ex[1] == y] for y in verbalizer}
    asked = sorted(verbalizer)[:k]  # the labels of k examples taken in turn: all of them once k >= len(verbalizer)
    missing = [y for y in asked if not by_label[y]]
    if missing:  # examples are drawn with replacement, so one of each label asked for is enough
        raise ValueError(f"the pool has no example of label(s) {missing}, which k={k} examples include; add at least "
                         f"one example of each of {asked} to the pool")
    rng = random.Random(seed)
    priors: dict[str, dict[int, float]] = {}  # content-free prompts repeat (always, with k = 0): score each once
    correct = calibrated = positive = used = 0
    for text, label in tests:
        labels = [i % len(verbalizer) for i in range(k)]
        rng.shuffle(labels)
        examples = [rng.choice(by_label[sorted(verbalizer)[y]]) for y in labels]
        examples = fitting_examples(model, tokenizer, examples, text, verbalizer, template)
        used += len(examples)
        scores = label_log_probs(model, tokenizer, build_prompt(examples, text, verbalizer, template), verbalizer)
        free = build_prompt(examples, content_free, verbalizer, template)
        if free not in priors:
            priors[free] = label_log_probs(model, tokenizer, free, verbalizer)
        prior = priors[free]
        raw_choice = max(scores, key=scores.get)
        cal_choice = max(scores, key=lambda y: scores[y] - prior[y])
        correct += raw_choice == label
        calibrated += cal_choice == label
        positive += raw_choice == max(verbalizer)
    n = len(tests)
    return FewShotResult(k, correct / n, calibrated / n, used / n, positive / n, n)
