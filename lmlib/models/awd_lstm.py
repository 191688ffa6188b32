"""AWD-LSTM: the ASGD Weight-Dropped LSTM language model.

Merity, Keskar & Socher (2018), "Regularizing and optimizing LSTM language models" (ICLR): a plain
3-layer LSTM language model made strong by regularization alone:

    e_t = Ẽ[x_t]                                   embedding dropout (p_e)
    h_t^(0) = m_in ⊙ e_t                           input (locked) dropout
    h_t^(l) = LSTM_l(m_l ⊙ h_t^(l-1), h_{t-1}^(l); W̃_hh^(l))   hidden dropout, DropConnect on W_hh
    P(x_{t+1} | x_≤t) = softmax(E (m_out ⊙ h_t^(L)) + b)        output dropout, tied weights

The decoder shares the embedding matrix E (Inan et al. 2017; Press & Wolf 2017), so the last LSTM
layer has ``emb_size`` units while the others have ``hidden_size``: the embedding size is independent
of the hidden size. The paper's PTB model: emb 400, hidden 1150, 3 layers, dropouts (input, hidden,
output, embedding) = (0.4, 0.3, 0.4, 0.1), weight dropout 0.5, AR α = 2, TAR β = 1.

Activation regularization (AR) and temporal activation regularization (TAR) are penalties on the
stored last-layer outputs; :func:`ar_regularizer` and :func:`tar_regularizer` make them Trainer
callbacks (Merity, McCann & Socher 2017, "Revisiting activation regularization for language RNNs").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..training.callbacks import Regularizer
from .dropouts import EmbeddingDropout, LockedDropout, WeightDropLSTM, check_probability

State = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class AWDLSTMConfig:
    """Sizes and dropout probabilities (defaults: the paper's PTB model).

    ``embed_p`` embedding dropout (whole words), ``input_p`` locked dropout on the word vectors,
    ``hidden_p`` locked dropout between LSTM layers, ``weight_p`` DropConnect on each W_hh,
    ``output_p`` locked dropout on the last layer's output. With ``tie_weights`` the decoder reuses the
    embedding matrix and the last LSTM layer has ``emb_size`` units. ``pad_id`` marks a padding token
    whose vector stays zero (for classifiers built on the encoder).
    """

    vocab_size: int
    emb_size: int = 400
    hidden_size: int = 1150
    n_layers: int = 3
    embed_p: float = 0.1
    input_p: float = 0.4
    hidden_p: float = 0.3
    weight_p: float = 0.5
    output_p: float = 0.4
    tie_weights: bool = True
    pad_id: int | None = None

    def __post_init__(self):
        for name in ("vocab_size", "emb_size", "hidden_size", "n_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("embed_p", "input_p", "hidden_p", "weight_p", "output_p"):
            check_probability(getattr(self, name), name)
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id must be a token id in [0, {self.vocab_size}) or None, got {self.pad_id}")

    def layer_sizes(self) -> list[tuple[int, int]]:
        """(input, hidden) of each LSTM layer; the last one outputs ``emb_size`` when weights are tied."""
        sizes = []
        for layer in range(self.n_layers):
            n_in = self.emb_size if layer == 0 else self.hidden_size
            last = layer == self.n_layers - 1
            n_out = (self.emb_size if self.tie_weights else self.hidden_size) if last else self.hidden_size
            sizes.append((n_in, n_out))
        return sizes

    def without_dropout(self) -> AWDLSTMConfig:
        """The same architecture with every dropout switched off (for ablations)."""
        from dataclasses import replace

        return replace(self, embed_p=0.0, input_p=0.0, hidden_p=0.0, weight_p=0.0, output_p=0.0)


class AWDLSTMEncoder(nn.Module):
    """Embedding + stack of weight-dropped LSTMs: ``ids (batch, time) -> (outputs, raw_outputs, state)``.

    ``embedding`` is an :class:`~lmlib.models.dropouts.EmbeddingDropout` (an ``nn.Embedding`` that drops words in
    training). ``outputs[l]`` is layer l's output after its dropout (hidden dropout for inner layers, output dropout
    for the last) and ``raw_outputs[l]`` the same before it, each ``(batch, time, size_l)``; ``state`` is a
    list of per-layer ``(h, c)`` pairs ``(1, batch, size_l)``. ``layers`` is the ``nn.ModuleList`` of LSTM
    layers, so fine-tuning can form layer groups [embedding, layer 0, ..., layer L-1, head].
    """

    def __init__(self, cfg: AWDLSTMConfig):
        super().__init__()
        self.cfg = cfg
        self.embedding = EmbeddingDropout(cfg.vocab_size, cfg.emb_size, cfg.embed_p, padding_idx=cfg.pad_id)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)  # the paper's code: U(-0.1, 0.1)
        if cfg.pad_id is not None:
            with torch.no_grad():
                self.embedding.weight[cfg.pad_id].zero_()
        self.input_dropout = LockedDropout(cfg.input_p, "input_p")
        self.layers = nn.ModuleList(WeightDropLSTM(n_in, n_out, cfg.weight_p) for n_in, n_out in cfg.layer_sizes())
        self.hidden_dropouts = nn.ModuleList(LockedDropout(cfg.hidden_p, "hidden_p") for _ in range(cfg.n_layers - 1))
        self.output_dropout = LockedDropout(cfg.output_p, "output_p")

    def _check_state(self, state: State, batch: int) -> None:
        if len(state) != len(self.layers):
            raise ValueError(f"state has {len(state)} layers, the encoder has {len(self.layers)}")
        for layer, ((h, c), (_, n_out)) in enumerate(zip(state, self.cfg.layer_sizes())):
            if h.shape != (1, batch, n_out) or c.shape != (1, batch, n_out):
                raise ValueError(f"state of layer {layer} must be two (1, {batch}, {n_out}) tensors, got "
                                 f"{tuple(h.shape)} and {tuple(c.shape)}; pass state=None to start from zeros")

    def forward(self, ids: torch.Tensor, state: State | None = None):
        if ids.dim() != 2:
            raise ValueError(f"ids must be (batch, time) token ids, got shape {tuple(ids.shape)}")
        if state is not None:
            self._check_state(state, ids.size(0))
        x = self.input_dropout(self.embedding(ids))
        outputs, raw_outputs, new_state = [], [], []
        for layer, lstm in enumerate(self.layers):
            raw, layer_state = lstm(x, None if state is None else state[layer])
            last = layer == len(self.layers) - 1
            x = self.output_dropout(raw) if last else self.hidden_dropouts[layer](raw)
            raw_outputs.append(raw)
            outputs.append(x)
            new_state.append(layer_state)
        return outputs, raw_outputs, new_state


class AWDLSTMLanguageModel(nn.Module):
    """``model(ids (batch, time), state=None) -> (logits (batch, time, vocab), state)``.

    Works with :class:`lmlib.training.objectives.StatefulLMLoss`. After each forward pass ``last_outputs`` and
    ``last_raw_outputs`` hold the encoder's per-layer outputs after / before dropout, for AR and TAR.
    """

    def __init__(self, cfg: AWDLSTMConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = AWDLSTMEncoder(cfg)
        n_last = cfg.layer_sizes()[-1][1]
        self.decoder = nn.Linear(n_last, cfg.vocab_size)
        if cfg.tie_weights:
            self.decoder.weight = self.encoder.embedding.weight
        nn.init.zeros_(self.decoder.bias)
        self.last_outputs: list[torch.Tensor] = []
        self.last_raw_outputs: list[torch.Tensor] = []

    def forward(self, ids: torch.Tensor, state: State | None = None):
        outputs, raw_outputs, state = self.encoder(ids, state)
        self.last_outputs, self.last_raw_outputs = outputs, raw_outputs
        return self.decoder(outputs[-1]), state


def activation_penalty(dropped_last: torch.Tensor) -> torch.Tensor:
    """AR: L2(m ⊙ h_t), the mean square of the last layer's *dropped* outputs ``(batch, time, units)``.

    The paper writes α L2(m ⊙ h_t); its code (and ours) uses the mean of squares over batch, time and
    units, so α does not depend on the sizes. Multiply by α (2 on PTB) via :func:`ar_regularizer`.
    """
    if dropped_last.dim() != 3:
        raise ValueError(f"AR expects (batch, time, units), got shape {tuple(dropped_last.shape)}")
    return dropped_last.pow(2).mean()


def temporal_activation_penalty(raw_last: torch.Tensor) -> torch.Tensor:
    """TAR: L2(h_t - h_{t+1}), the mean square of consecutive differences of the *raw* last-layer outputs.

    ``raw_last`` is ``(batch, time, units)``; differences are taken along time. Slowly changing hidden
    states are encouraged; multiply by β (1 on PTB) via :func:`tar_regularizer`.
    """
    if raw_last.dim() != 3:
        raise ValueError(f"TAR expects (batch, time, units), got shape {tuple(raw_last.shape)}")
    if raw_last.size(1) < 2:
        return raw_last.new_zeros(())
    return (raw_last[:, 1:] - raw_last[:, :-1]).pow(2).mean()


def ar_regularizer(alpha: float = 2.0) -> Regularizer:
    """A Trainer callback adding α · AR of ``trainer.model.last_outputs[-1]`` to each training loss."""
    return Regularizer(lambda trainer: activation_penalty(trainer.model.last_outputs[-1]), alpha, "AR")


def tar_regularizer(beta: float = 1.0) -> Regularizer:
    """A Trainer callback adding β · TAR of ``trainer.model.last_raw_outputs[-1]`` to each training loss."""
    return Regularizer(lambda trainer: temporal_activation_penalty(trainer.model.last_raw_outputs[-1]), beta, "TAR")
