"""Loss functions in the shape the Trainer wants: ``loss_fn(model, batch) -> BatchResult``.

Language-model losses are the mean negative log-likelihood per target token, so
``exp(loss)`` is the perplexity:  PPL = exp(-(1/N) Σ_i log p(w_i | w_<i)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .trainer import BatchResult


def _detach(state):
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    return type(state)(_detach(s) for s in state)


def next_token_loss(model, batch) -> BatchResult:
    """For stateless LMs: ``model(x)`` returns logits ``(batch, time, vocab)`` for targets ``y``."""
    x, y = batch
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    return BatchResult(loss, y.numel())


class StatefulLMLoss:
    """For RNN LMs trained with truncated BPTT: ``model(x, state) -> (logits, state)``.

    The hidden state flows from one window to the next (the streams are contiguous text) but is
    detached, so gradients stop at the window boundary. ``reset()`` (called by the Trainer before each
    pass) starts again from a zero state.
    """

    def __init__(self):
        self.state = None

    def reset(self) -> None:
        self.state = None

    def __call__(self, model, batch) -> BatchResult:
        x, y = batch
        logits, state = model(x, _detach(self.state))
        self.state = _detach(state)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        return BatchResult(loss, y.numel())


def classification_loss(model, batch) -> BatchResult:
    """For classifiers: ``model(ids, mask)`` returns logits ``(batch, classes)`` for ``labels``."""
    logits = model(batch.ids, batch.mask)
    loss = F.cross_entropy(logits, batch.labels)
    correct = int((logits.argmax(-1) == batch.labels).sum())
    return BatchResult(loss, batch.labels.numel(), correct)
