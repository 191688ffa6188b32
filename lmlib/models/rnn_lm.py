"""Recurrent language models trained with truncated backpropagation through time.

The model follows Zaremba, Sutskever & Vinyals (2014), "Recurrent neural network regularization":
an embedding, a stack of LSTM layers, and a softmax over the vocabulary,

    P(w_{t+1} | w_1..w_t) = softmax(H_t^{(L)} W_hq + b_q),

read in windows of ``bptt`` steps whose final state starts the next window (truncated BPTT;
Williams & Peng 1990). Their "small" configuration (2 × 200 units, no dropout) reaches 114.5 test
perplexity on the Penn Treebank; :func:`zaremba_small` holds those settings.

The recurrent core can be ``torch.nn.LSTM`` (fast, fused kernels) or lmlib's own :class:`lmlib.models.rnn.LSTM`
(slow, readable); the tests show the two compute the same function, so training uses the fast one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime import eval_mode
from . import rnn as lmlib_rnn
from .config_checks import check_positive_ints, check_probability, check_token_ids

CORES = {
    ("lstm", "torch"): nn.LSTM,
    ("rnn", "torch"): nn.RNN,
    ("lstm", "lmlib"): lmlib_rnn.LSTM,
    ("rnn", "lmlib"): lmlib_rnn.RNN,
}


@dataclass
class RNNLMConfig:
    """Sizes and training settings. ``init_range`` r draws every parameter from U(-r, r) (Zaremba et al.)."""

    vocab_size: int
    embed_size: int = 200
    hidden_size: int = 200
    num_layers: int = 2
    cell: str = "lstm"  # "lstm" or "rnn"
    backend: str = "torch"  # "torch" (nn.LSTM) or "lmlib" (lmlib.models.rnn.LSTM)
    dropout: float = 0.0
    init_range: float = 0.1

    def __post_init__(self):
        check_positive_ints(self, ("vocab_size", "embed_size", "hidden_size", "num_layers"))
        if (self.cell, self.backend) not in CORES:
            raise ValueError(f"cell must be 'lstm' or 'rnn' and backend 'torch' or 'lmlib', got {self.cell!r}, {self.backend!r}")
        check_probability(self.dropout, "dropout")
        if self.init_range <= 0:
            raise ValueError(f"init_range must be positive, got {self.init_range}")


class RNNLM(nn.Module):
    """``model(x, state=None) -> (logits, state)``: x ``(batch, time)`` ids, logits ``(batch, time, vocab)``.

    ``state`` is the recurrent core's state ``(layers, batch, hidden)`` (a pair (H, C) for the LSTM);
    pass the returned one back in to continue the text (see :class:`lmlib.training.objectives.StatefulLMLoss`).
    """

    def __init__(self, config: RNNLMConfig):
        super().__init__()
        self.config = c = config
        self.embedding = nn.Embedding(c.vocab_size, c.embed_size)
        core = CORES[(c.cell, c.backend)]
        extra = {"batch_first": True} if c.backend == "torch" else {}
        self.rnn = core(c.embed_size, c.hidden_size, num_layers=c.num_layers, **extra)
        self.drop = nn.Dropout(c.dropout)
        self.decoder = nn.Linear(c.hidden_size, c.vocab_size)
        for p in self.parameters():
            nn.init.uniform_(p, -c.init_range, c.init_range)

    def forward(self, x: torch.Tensor, state=None):
        H, state = self.rnn(self.drop(self.embedding(x)), state)  # (batch, time, hidden)
        return self.decoder(self.drop(H)), state  # logits (batch, time, vocab)


def check_inputs(model: RNNLM, x: torch.Tensor) -> None:
    """Refuse token ids :meth:`RNNLM.forward` would misread: ``(batch, time)`` long ids inside the vocabulary."""
    check_token_ids(x, model.config.vocab_size, "x")


def zaremba_lr_factor(epoch: int, max_epoch: int = 4, decay: float = 0.5) -> float:
    """Learning-rate multiplier for 1-based ``epoch``: decay^max(epoch - max_epoch, 0) (Zaremba et al. 2014)."""
    if epoch < 1:
        raise ValueError(f"epochs count from 1, got {epoch}")
    return decay ** max(epoch - max_epoch, 0)


@dataclass
class TrainSettings:
    """Truncated-BPTT training with plain SGD, as in Zaremba et al. (2014).

    Their loss is summed over the ``bptt`` steps of a window (and averaged over the batch), with
    learning rate ``lr`` and gradient-norm clip ``clip``. lmlib's losses are means over all tokens,
    i.e. 1/bptt of theirs, so the identical update is SGD with ``lr * bptt`` and clip ``clip / bptt``:
    ``mean_lr`` and ``mean_clip`` below.
    """

    batch_size: int = 20
    bptt: int = 20
    lr: float = 1.0
    clip: float = 5.0
    epochs: int = 13
    max_epoch: int = 4
    decay: float = 0.5

    @property
    def mean_lr(self) -> float:
        return self.lr * self.bptt

    @property
    def mean_clip(self) -> float:
        return self.clip / self.bptt


def zaremba_small(vocab_size: int = 10_000) -> tuple[RNNLMConfig, TrainSettings]:
    """The "small" PTB model of Zaremba et al. (2014): 2 × 200 LSTM, no dropout, 13 epochs; test ppl 114.5."""
    return RNNLMConfig(vocab_size, 200, 200, 2), TrainSettings()


@torch.no_grad()
def sample(model: RNNLM, prompt_ids: list[int], length: int, temperature: float = 1.0,
           generator: torch.Generator | None = None) -> list[int]:
    """Continue ``prompt_ids`` by ``length`` tokens drawn from softmax(logits / temperature).

    Temperature below 1 sharpens the distribution (safer, more repetitive text), above 1 flattens it.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if not prompt_ids:
        raise ValueError("the prompt must hold at least one token")
    check_inputs(model, torch.tensor([prompt_ids]))
    with eval_mode(model):
        device = next(model.parameters()).device
        logits, state = model(torch.tensor([prompt_ids], device=device))
        out = []
        for _ in range(length):
            probs = F.softmax(logits[0, -1] / temperature, dim=-1)
            nxt = int(torch.multinomial(probs, 1, generator=generator))
            out.append(nxt)
            logits, state = model(torch.tensor([[nxt]], device=device), state)
    return out
