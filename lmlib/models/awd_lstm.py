"""AWD-LSTM: the ASGD Weight-Dropped LSTM language model.

Merity, Keskar & Socher (2018), "Regularizing and optimizing LSTM language models" (ICLR): a plain
3-layer LSTM language model made strong by regularization alone:

    e_t = Ẽ[x_t]                                   embedding dropout (p_e)
    h_t^(0) = m_in ⊙ e_t                           input (locked) dropout
    h_t^(l) = LSTM_l(m_l ⊙ h_t^(l-1), h_{t-1}^(l); W̃_hh^(l))   hidden dropout, DropConnect on W_hh
    P(x_{t+1} | x_≤t) = softmax(E (m_out ⊙ h_t^(L)) + b)        output dropout, tied weights

The decoder shares the embedding matrix E (Inan et al. 2017; Press & Wolf 2017), so the last LSTM
layer has ``embed_size`` units while the others have ``hidden_size``: the embedding size is independent
of the hidden size. The paper's PTB model: emb 400, hidden 1150, 3 layers, dropouts (input, hidden,
output, embedding) = (0.4, 0.3, 0.4, 0.1), weight dropout 0.5, AR α = 2, TAR β = 1.

The activation regularizers AR and TAR (:mod:`lmlib.training.awd_training`) read the last layer's outputs, which
the language model keeps after each forward pass (``last_outputs``, ``last_raw_outputs``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .config_checks import check_positive_ints, check_probability, check_token_ids
from .dropouts import EmbeddingDropout, LockedDropout, WeightDropLSTM

State = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class AWDLSTMConfig:
    """Sizes and dropout probabilities (defaults: the paper's PTB model).

    ``embed_p`` embedding dropout (whole words), ``input_p`` locked dropout on the word vectors,
    ``hidden_p`` locked dropout between LSTM layers, ``weight_p`` DropConnect on each W_hh,
    ``output_p`` locked dropout on the last layer's output. With ``tie_weights`` the decoder reuses the
    embedding matrix and the last LSTM layer has ``embed_size`` units. ``pad_id`` marks a padding token
    whose vector stays zero (for classifiers built on the encoder).
    """

    vocab_size: int
    embed_size: int = 400
    hidden_size: int = 1150
    num_layers: int = 3
    embed_p: float = 0.1
    input_p: float = 0.4
    hidden_p: float = 0.3
    weight_p: float = 0.5
    output_p: float = 0.4
    tie_weights: bool = True
    pad_id: int | None = None

    def __post_init__(self):
        check_positive_ints(self, ("vocab_size", "embed_size", "hidden_size", "num_layers"))
        for name in ("embed_p", "input_p", "hidden_p", "weight_p", "output_p"):
            check_probability(getattr(self, name), name)
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id must be a token id in [0, {self.vocab_size}) or None, got {self.pad_id}")

    def layer_sizes(self) -> list[tuple[int, int]]:
        """(input, hidden) of each LSTM layer; the last one outputs ``embed_size`` when weights are tied."""
        inner = [self.hidden_size] * (self.num_layers - 1)
        return list(zip([self.embed_size, *inner], [*inner, self.embed_size if self.tie_weights else self.hidden_size]))


class AWDLSTMEncoder(nn.Module):
    """Embedding + stack of weight-dropped LSTMs: ``ids (batch, time) -> (outputs, raw_outputs, state)``.

    ``embedding`` is an :class:`~lmlib.models.dropouts.EmbeddingDropout` (an ``nn.Embedding`` that drops words in
    training). ``outputs[l]`` is layer l's output after its dropout (hidden dropout for inner layers, output dropout
    for the last) and ``raw_outputs[l]`` the same before it, each ``(batch, time, size_l)``; ``state`` is a
    list of per-layer ``(h, c)`` pairs ``(1, batch, size_l)``. ``layers`` is the ``nn.ModuleList`` of LSTM
    layers; :meth:`layer_groups` splits the encoder for discriminative fine-tuning.
    """

    def __init__(self, config: AWDLSTMConfig):
        super().__init__()
        self.config = c = config
        self.embedding = EmbeddingDropout(c.vocab_size, c.embed_size, c.embed_p, padding_idx=c.pad_id)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)  # the paper's code: U(-0.1, 0.1)
        if c.pad_id is not None:
            with torch.no_grad():
                self.embedding.weight[c.pad_id].zero_()
        self.input_dropout = LockedDropout(c.input_p, "input_p")
        self.layers = nn.ModuleList(WeightDropLSTM(n_in, n_out, c.weight_p) for n_in, n_out in c.layer_sizes())
        self.hidden_dropouts = nn.ModuleList(LockedDropout(c.hidden_p, "hidden_p") for _ in range(c.num_layers - 1))
        self.output_dropout = LockedDropout(c.output_p, "output_p")

    def forward(self, ids: torch.Tensor, state: State | None = None):
        x = self.input_dropout(self.embedding(ids))  # m_in ⊙ Ẽ[x_t]: (B, T, embed_size)
        outputs, raw_outputs, new_state = [], [], []
        for layer, lstm in enumerate(self.layers):
            raw, layer_state = lstm(x, None if state is None else state[layer])  # h^(l): (B, T, size_l)
            last = layer == len(self.layers) - 1
            x = self.output_dropout(raw) if last else self.hidden_dropouts[layer](raw)  # m_l ⊙ h^(l)
            raw_outputs.append(raw)
            outputs.append(x)
            new_state.append(layer_state)
        return outputs, raw_outputs, new_state

    def layer_groups(self) -> list[nn.Module]:
        """The units of discriminative rates and gradual unfreezing, lowest first: the embedding, then
        each LSTM layer (Howard & Ruder 2018, sec. 3.2)."""
        return [self.embedding, *self.layers]


class AWDLSTMLanguageModel(nn.Module):
    """``model(ids (batch, time), state=None) -> (logits (batch, time, vocab), state)``.

    Works with :class:`lmlib.training.objectives.StatefulLMLoss`. After each forward pass ``last_outputs`` and
    ``last_raw_outputs`` hold the encoder's per-layer outputs after / before dropout, for AR and TAR.
    """

    def __init__(self, config: AWDLSTMConfig):
        super().__init__()
        self.config = config
        self.encoder = AWDLSTMEncoder(config)
        n_last = config.layer_sizes()[-1][1]
        self.decoder = nn.Linear(n_last, config.vocab_size)
        if config.tie_weights:
            self.decoder.weight = self.encoder.embedding.weight
        nn.init.zeros_(self.decoder.bias)
        self.last_outputs: list[torch.Tensor] = []
        self.last_raw_outputs: list[torch.Tensor] = []

    def features(self, ids: torch.Tensor, state: State | None = None):
        """``(h, state)``: the last layer's output m_out ⊙ h_t^(L) ``(batch, time, size_L)``, the input of the output
        layer ``decoder`` (a sampled softmax reads it with the decoder's weight and bias instead of all the logits)."""
        outputs, raw_outputs, state = self.encoder(ids, state)
        self.last_outputs, self.last_raw_outputs = outputs, raw_outputs
        return outputs[-1], state

    def forward(self, ids: torch.Tensor, state: State | None = None):
        h, state = self.features(ids, state)  # (B, T, size_L)
        return self.decoder(h), state  # E h + b: (B, T, vocab)

    def layer_groups(self) -> list[nn.Module]:
        """The encoder's groups, with the decoder joining the top LSTM layer: its bias trains at that
        layer's rate, and its weight is the embedding's when the weights are tied (so it stays in the
        lowest group, where it first appears)."""
        *lower, top = self.encoder.layer_groups()
        return [*lower, nn.ModuleList([top, self.decoder])]


def check_inputs(model: AWDLSTMEncoder | AWDLSTMLanguageModel, ids: torch.Tensor, state: State | None = None) -> None:
    """Refuse input the encoder would misread, saying what to do: ``ids`` (batch, time) inside the vocabulary and
    a ``state`` of one (h, c) pair per layer shaped for this batch."""
    encoder = model.encoder if isinstance(model, AWDLSTMLanguageModel) else model
    c = encoder.config
    check_token_ids(ids, c.vocab_size, "ids")
    if state is None:
        return
    batch = ids.size(0)
    if len(state) != c.num_layers:
        raise ValueError(f"state has {len(state)} layers, the encoder has {c.num_layers}")
    for layer, ((h, cell), (_, n_out)) in enumerate(zip(state, c.layer_sizes())):
        if h.shape != (1, batch, n_out) or cell.shape != (1, batch, n_out):
            raise ValueError(f"state of layer {layer} must be two (1, {batch}, {n_out}) tensors, got "
                             f"{tuple(h.shape)} and {tuple(cell.shape)}; pass state=None to start from zeros")
