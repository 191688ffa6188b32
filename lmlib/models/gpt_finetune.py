"""GPT-1 fine-tuning: task inputs as one token sequence, and a linear head on its last state (Radford et al. 2018,
"Improving Language Understanding by Generative Pre-Training", §3.2-3.3).

A pretrained GPT reads one sequence left to right, so every task is written as one sequence (§3.3, Figure 1):

    classification   [start] text [extract]
    entailment       [start] premise [delim] hypothesis [extract]
    similarity       [start] a [delim] b [extract]  and  [start] b [delim] a [extract]  (no natural order: both)
    multiple choice  [start] z q [delim] a_k [extract]  for each answer a_k (one sequence per answer)

The final block's state at the ``[extract]`` token, h_l^m, feeds a linear layer (eq. 3):

    P(y | x^1, ..., x^m) = softmax(h_l^m W_y)

For similarity the two orders' states are added element-wise before W_y. Training maximises L_2 (eq. 4), here
together with the language-modelling loss on the same inputs, L_3 = L_2 + λ·L_1 (eq. 5), which lives with the
other objectives in :func:`lmlib.training.objectives.gpt_finetune_loss`; :meth:`GPTClassifier.lm_logits` gives
it the next-token scores it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from ..text.tokenizers import SPECIAL_TOKENS
from ..text.truncation import head_and_tail
from .gpt import GPT
from .gpt import check_inputs as check_gpt_inputs
from .state_dicts import normal_init


@dataclass(frozen=True)
class FinetuneTokens:
    """Ids of GPT-1's start, delimiter and extract tokens, and of the token that pads a batch on the right."""

    start: int
    delim: int
    extract: int
    pad: int

    @classmethod
    def from_tokenizer(cls, tokenizer) -> FinetuneTokens:
        """The ids of ``<|start|>``, ``<|delim|>``, ``<|extract|>`` in ``tokenizer`` (padding with ``<|endoftext|>``)."""
        names = SPECIAL_TOKENS["gpt_finetune"]
        missing = [t for t in (*names.values(), SPECIAL_TOKENS["bpe"]["eos"]) if t not in tokenizer.stoi]
        if missing:
            raise ValueError(f"the tokenizer has no {missing}: train it with these special tokens "
                             f"(lmlib.recipes.gpt.GPT_SPECIALS), as the shipped IMDb GPT's tokenizer is")
        return cls(*(tokenizer.token_to_id(names[k]) for k in ("start", "delim", "extract")),
                   pad=tokenizer.token_to_id(SPECIAL_TOKENS["bpe"]["eos"]))


def _check_text(ids: Sequence[int], name: str) -> None:
    if len(ids) == 0:
        raise ValueError(f"{name} is empty: every input needs at least one token of text")


def classification_input(ids: Sequence[int], tokens: FinetuneTokens, max_len: int) -> list[int]:
    """``[start] text [extract]``, the text cut by :func:`head_and_tail` so the whole input is ``max_len`` at most."""
    _check_text(ids, "the text")
    return [tokens.start, *head_and_tail(ids, max_len - 2), tokens.extract]


def entailment_input(premise: Sequence[int], hypothesis: Sequence[int], tokens: FinetuneTokens) -> list[int]:
    """``[start] premise [delim] hypothesis [extract]``."""
    _check_text(premise, "the premise")
    _check_text(hypothesis, "the hypothesis")
    return [tokens.start, *premise, tokens.delim, *hypothesis, tokens.extract]


def similarity_inputs(a: Sequence[int], b: Sequence[int], tokens: FinetuneTokens) -> tuple[list[int], list[int]]:
    """Both orders, ``[start] a [delim] b [extract]`` and ``[start] b [delim] a [extract]``."""
    return entailment_input(a, b, tokens), entailment_input(b, a, tokens)


def multiple_choice_inputs(context: Sequence[int], answers: Sequence[Sequence[int]],
                           tokens: FinetuneTokens) -> list[list[int]]:
    """One sequence per answer, ``[start] context [delim] a_k [extract]`` (§3.3, "Question Answering and
    Commonsense Reasoning": the document z and question q are concatenated with each answer, [z; q; $; a_k]).

    ``context`` holds z followed by q. Each sequence is read independently; the K scores h_l^m W_y (one
    output per sequence) then go through one softmax over the answers."""
    if len(answers) < 2:
        raise ValueError(f"a multiple-choice question needs at least 2 answers, got {len(answers)}")
    return [entailment_input(context, answer, tokens) for answer in answers]


class FinetuneBatch(NamedTuple):
    """Right-padded inputs ``ids`` (batch, seq), the index of each row's ``[extract]`` token ``extract_pos``
    (batch,), and ``labels`` (batch,). With ``pairs=True`` rows i and i + batch/2 are the two orders of one pair
    (similarity) and ``labels`` has one entry per pair."""

    ids: torch.Tensor
    extract_pos: torch.Tensor
    labels: torch.Tensor
    pairs: bool = False


def make_batch(inputs: Sequence[Sequence[int]], labels: Sequence[int], pad: int, pairs: bool = False) -> FinetuneBatch:
    """Pad ``inputs`` (each ending with its ``[extract]`` token) on the right into one :class:`FinetuneBatch`.

    Right padding is invisible to a causal model: a position attends only to itself and the positions before it,
    so every real token, ``[extract]`` included, has the state it would have alone."""
    if len(inputs) == 0:
        raise ValueError("a batch needs at least one input")
    expected = len(inputs) // 2 if pairs else len(inputs)
    if pairs and len(inputs) % 2:
        raise ValueError(f"pairs=True needs both orders of every pair (an even number of rows), got {len(inputs)}")
    if len(labels) != expected:
        raise ValueError(f"{len(labels)} labels for {expected} {'pairs' if pairs else 'inputs'}")
    ids = pad_sequence([torch.as_tensor(list(x), dtype=torch.long) for x in inputs], batch_first=True, padding_value=pad)
    extract_pos = torch.tensor([len(x) - 1 for x in inputs])
    return FinetuneBatch(ids, extract_pos, torch.as_tensor(list(labels), dtype=torch.long), pairs)


def finetune_batches(inputs: Sequence[Sequence[int]], labels: Sequence[int], batch_size: int, pad: int,
                     shuffle: bool = False, seed: int = 0) -> list[FinetuneBatch]:
    """Classification or entailment inputs in batches of ``batch_size`` (a seeded shuffle when ``shuffle``)."""
    if len(inputs) != len(labels):
        raise ValueError(f"{len(inputs)} inputs but {len(labels)} labels")
    order = list(range(len(inputs)))
    if shuffle:
        order = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(seed)).tolist()
    return [make_batch([inputs[i] for i in order[s: s + batch_size]], [labels[i] for i in order[s: s + batch_size]], pad)
            for s in range(0, len(order), batch_size)]


class ClassifierOutput(NamedTuple):
    """``logits`` (rows, classes) from the task head and the top block's states ``hidden`` (batch, seq, d_model),
    which :meth:`GPTClassifier.lm_logits` turns into next-token scores for the auxiliary loss."""

    logits: torch.Tensor
    hidden: torch.Tensor


class GPTClassifier(nn.Module):
    """A GPT with GPT-1's task head: ``softmax(h_l^m W_y)`` on the state of each input's ``[extract]`` token.

    ``pooling="mean"`` reads instead the mean of the top states from the first token to ``[extract]`` (each row's
    real tokens): the ``[start]``/``[extract]`` embeddings are never inputs in pretraining, so their states start
    untrained, while a mean over the review's own tokens starts from what pretraining learned."""

    POOLINGS = ("extract", "mean")

    def __init__(self, gpt: GPT, num_classes: int, dropout: float = 0.1, pooling: str = "extract"):
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        if pooling not in self.POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(self.POOLINGS)}, got {pooling!r}")
        self.pooling = pooling
        self.gpt = gpt
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(gpt.config.d_model, num_classes)  # W_y
        normal_init(self.head)

    def forward(self, ids: torch.Tensor, extract_pos: torch.Tensor, pairs: bool = False) -> ClassifierOutput:
        """P(y | x^1, ..., x^m) = softmax(h_l^m W_y) (eq. 3), h_l^m the top state at each row's [extract]."""
        hidden, _ = self.gpt.hidden_states(ids)  # (B, T, C)
        if self.pooling == "extract":
            h = hidden[torch.arange(ids.size(0)), extract_pos]  # (B, C): h_l^m at each [extract]
        else:
            real = (torch.arange(ids.size(1), device=ids.device) <= extract_pos[:, None]).unsqueeze(-1)  # (B, T, 1)
            h = (hidden * real).sum(1) / real.sum(1)  # (B, C): mean of h_l over [start] .. [extract]
        if pairs:
            half = ids.size(0) // 2
            h = h[:half] + h[half:]  # (B/2, C): both orders of a pair, added element-wise
        return ClassifierOutput(self.head(self.dropout(h)), hidden)  # (rows, classes)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``(batch, seq, vocab)`` from the states of :meth:`forward` (the pretrained output layer)."""
        return self.gpt.lm_head(hidden)


def check_inputs(model: GPTClassifier, ids: torch.Tensor, extract_pos: torch.Tensor, pairs: bool = False) -> None:
    """Refuse a batch that :meth:`GPTClassifier.forward` would misread: the GPT's checks on ``ids``, one
    ``[extract]`` position per row inside the row, and (with ``pairs``) an even number of rows, as
    :func:`make_batch` builds them."""
    check_gpt_inputs(model.gpt, ids)
    if extract_pos.shape != (ids.size(0),) or not 0 <= int(extract_pos.min()) <= int(extract_pos.max()) < ids.size(1):
        raise ValueError(f"extract_pos must hold one position per row of ids {tuple(ids.shape)} inside the row, "
                         f"got {tuple(extract_pos.shape)} from {int(extract_pos.min())} to {int(extract_pos.max())}; "
                         f"build batches with make_batch")
    if pairs and ids.size(0) % 2:
        raise ValueError(f"pairs=True needs both orders of every pair (an even number of rows), got {ids.size(0)}")
