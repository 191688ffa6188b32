"""The dropouts of the AWD-LSTM, each a small module.

Merity, Keskar & Socher (2018), "Regularizing and optimizing LSTM language models" (ICLR), section 4,
regularize an LSTM language model in five places:

* **embedding dropout** (Gal & Ghahramani 2016): drop whole *words*, i.e. rows of the embedding matrix,
  so every occurrence of a dropped word in the batch becomes the zero vector;
* **input dropout** on the word vectors and **hidden dropout** between LSTM layers, both *variational*
  ("locked") dropout: one mask per sequence, reused at every time step;
* **weight dropout** (DropConnect, Wan et al. 2013) on the hidden-to-hidden matrices W_hh: one mask
  for the whole forward pass, so the recurrence itself is regularized while the fast fused LSTM
  kernel still runs;
* **output dropout**: locked dropout on the last LSTM layer's output, before the softmax.

Every mask keeps a unit with probability 1 - p and scales kept units by 1 / (1 - p) ("inverted
dropout"), so expectations match evaluation mode, where all dropouts are the identity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from .config_checks import check_positive_ints, check_probability


def bernoulli_mask(shape, p: float, like: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Entries are 0 with probability p and 1/(1-p) otherwise, so E[mask] = 1."""
    keep = torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(1 - p, generator=generator)
    return keep / (1 - p)


def _check_embedding_dropout(weight: torch.Tensor, p: float) -> None:
    check_probability(p, "embed_p")
    if weight.dim() != 2:
        raise ValueError(f"an embedding matrix is (vocab, emb), got shape {tuple(weight.shape)}")


def embedding_dropout(weight: torch.Tensor, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Drop whole rows (words) of the embedding matrix ``weight`` ``(vocab, emb)``.

    Gal & Ghahramani (2016): with z_w ~ Bernoulli(1 - p) per word type w,

        Ẽ[w] = z_w · E[w] / (1 - p),

    so the same word gets the same mask everywhere in the batch and a dropped word vanishes entirely
    (its vector is 0 at every position). Returns the masked matrix, same shape as ``weight``.
    """
    _check_embedding_dropout(weight, p)
    if p == 0:
        return weight
    return weight * bernoulli_mask((weight.size(0), 1), p, weight, generator)


class EmbeddingDropout(nn.Embedding):
    """An ``nn.Embedding`` whose lookup applies embedding dropout in training: ``(batch, time) -> (batch, time, emb)``.

    It is an ``nn.Embedding`` (same parameter ``weight``, same ``padding_idx``), so it can be tied to a
    decoder and grouped like any embedding; only training-mode lookups differ.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, p: float, padding_idx: int | None = None):
        super().__init__(num_embeddings, embedding_dim, padding_idx=padding_idx)
        self.p = check_probability(p, "embed_p")

    def forward(self, ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        weight = self.weight
        if self.training and self.p > 0:
            weight = embedding_dropout(weight, self.p, generator)
        return F.embedding(ids, weight, self.padding_idx)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", p={self.p}"


class LockedDropout(nn.Module):
    """Variational dropout over time: ``(batch, time, features) -> (batch, time, features)``.

    Gal & Ghahramani (2016), as used by Merity et al. (2018) for input, hidden and output dropout:
    one mask m ~ Bernoulli(1 - p)^(batch × features) / (1 - p) is drawn per forward pass and applied at
    every time step, x̃_t = m ⊙ x_t. Standard dropout would draw a fresh mask at each t.
    """

    def __init__(self, p: float, name: str = "p"):
        super().__init__()
        self.p = check_probability(p, name)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(f"LockedDropout expects (batch, time, features), got shape {tuple(x.shape)}")
        if not self.training or self.p == 0:
            return x
        return x * bernoulli_mask((x.size(0), 1, x.size(2)), self.p, x, generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class WeightDropLSTM(nn.Module):
    """One LSTM layer with DropConnect on its hidden-to-hidden weights: ``(batch, time, in) -> (batch, time, hid)``.

    Wan et al. (2013), applied by Merity et al. (2018) to the recurrent matrix only:

        W̃_hh = M ⊙ W_hh / (1 - p),   M_ij ~ Bernoulli(1 - p),

    with one M per forward pass, so every time step of the batch sees the same dropped matrix (the
    recurrence stays a fixed function within the pass). The raw W_hh stays the trainable parameter;
    the dropped copy is passed to ``nn.LSTM`` through ``torch.func.functional_call``, which runs the
    fused kernel without replacing the module's parameter. Gradients flow through the mask to W_hh: a
    dropped entry gets zero gradient for that pass.

    Parameter names and layout are those of ``nn.LSTM`` (``lstm.weight_ih_l0``, ``lstm.weight_hh_l0``,
    biases), gates ordered (i, f, g, o).
    """

    def __init__(self, input_size: int, hidden_size: int, weight_p: float):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        check_positive_ints(self, ("input_size", "hidden_size"))
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True)
        self.weight_p = check_probability(weight_p, "weight_p")

    def dropped_weight(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """W̃_hh ``(4 * hidden, hidden)`` for this pass (the raw weight in eval mode or with p = 0)."""
        w_hh = self.lstm.weight_hh_l0
        if not self.training or self.weight_p == 0:
            return w_hh
        return w_hh * bernoulli_mask(w_hh.shape, self.weight_p, w_hh, generator)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None,
                generator: torch.Generator | None = None):
        """Returns ``(outputs (batch, time, hidden), (h, c))`` with h, c ``(1, batch, hidden)``."""
        if x.dim() != 3 or x.size(2) != self.input_size:
            raise ValueError(f"expected input (batch, time, {self.input_size}), got shape {tuple(x.shape)}")
        w_hh = self.dropped_weight(generator)
        if w_hh is self.lstm.weight_hh_l0:
            return self.lstm(x, state)
        return functional_call(self.lstm, {"weight_hh_l0": w_hh}, (x, state))

    def extra_repr(self) -> str:
        return f"weight_p={self.weight_p}"
