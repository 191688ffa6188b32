"""Recurrent networks written from their equations: the Elman RNN and the LSTM.

* Elman (1990), "Finding structure in time": a hidden state carried from step to step,
      H_t = tanh(X_t W_xh + b_xh + H_{t-1} W_hh + b_hh).
* Hochreiter & Schmidhuber (1997), "Long short-term memory", with the forget gate of Gers, Schmidhuber
  & Cummins (2000), "Learning to forget". The names are the lecture's (as in Zhang et al., *Dive into
  Deep Learning*, section 10.1): input gate I_t, forget gate F_t, output gate O_t, input node C̃_t,
  internal (memory cell) state C_t and hidden state H_t.

Everything is batch-first and uses row vectors, so a weight W_xh has shape ``(inputs, hiddens)`` and
multiplies from the right (X_t W_xh is the column-vector W_xh^T x_t). :class:`RNN` and :class:`LSTM`
stack layers and run both directions with the same call signature, state layout and weights as
``torch.nn.RNN`` / ``torch.nn.LSTM`` with ``batch_first=True``; :func:`copy_from_torch` copies a
PyTorch module's weights in, so the two can be checked against each other number for number.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .config_checks import check_positive_ints


def _uniform_(params, hidden_size: int) -> None:
    # PyTorch's default for its recurrent layers: U(-1/sqrt(h), 1/sqrt(h)) for every weight and bias.
    bound = 1.0 / math.sqrt(hidden_size)
    for p in params:
        nn.init.uniform_(p, -bound, bound)


class RNNCell(nn.Module):
    """One step of the Elman RNN: ``(batch, inputs), (batch, hiddens) -> (batch, hiddens)``."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        check_positive_ints(self, ("input_size", "hidden_size"))
        self.W_xh = nn.Parameter(torch.empty(input_size, hidden_size))
        self.W_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.b_xh = nn.Parameter(torch.empty(hidden_size))
        self.b_hh = nn.Parameter(torch.empty(hidden_size))
        _uniform_(self.parameters(), hidden_size)

    def forward(self, X_t: torch.Tensor, H_prev: torch.Tensor) -> torch.Tensor:
        """H_t = tanh(X_t W_xh + b_xh + H_{t-1} W_hh + b_hh)."""
        return torch.tanh(X_t @ self.W_xh + self.b_xh + H_prev @ self.W_hh + self.b_hh)


class LSTMCell(nn.Module):
    """One LSTM step: ``X_t (batch, inputs), (H_{t-1}, C_{t-1}) each (batch, hiddens) -> (H_t, C_t)``.

    Each gate has its own input weights W_x*, recurrent weights W_h* and one bias b_*.
    """

    GATES = ("i", "f", "c", "o")  # input gate, forget gate, input node, output gate

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        check_positive_ints(self, ("input_size", "hidden_size"))
        for g in self.GATES:
            setattr(self, f"W_x{g}", nn.Parameter(torch.empty(input_size, hidden_size)))
            setattr(self, f"W_h{g}", nn.Parameter(torch.empty(hidden_size, hidden_size)))
            setattr(self, f"b_{g}", nn.Parameter(torch.empty(hidden_size)))
        _uniform_(self.parameters(), hidden_size)

    def gates(self, X_t: torch.Tensor, H_prev: torch.Tensor) -> dict[str, torch.Tensor]:
        """The three gates and the input node, each ``(batch, hiddens)``:

            I_t = σ(X_t W_xi + H_{t-1} W_hi + b_i)        input gate
            F_t = σ(X_t W_xf + H_{t-1} W_hf + b_f)        forget gate
            O_t = σ(X_t W_xo + H_{t-1} W_ho + b_o)        output gate
            C̃_t = tanh(X_t W_xc + H_{t-1} W_hc + b_c)     input node
        """
        I_t = torch.sigmoid(X_t @ self.W_xi + H_prev @ self.W_hi + self.b_i)
        F_t = torch.sigmoid(X_t @ self.W_xf + H_prev @ self.W_hf + self.b_f)
        O_t = torch.sigmoid(X_t @ self.W_xo + H_prev @ self.W_ho + self.b_o)
        C_tilde = torch.tanh(X_t @ self.W_xc + H_prev @ self.W_hc + self.b_c)
        return {"I": I_t, "F": F_t, "O": O_t, "C_tilde": C_tilde}

    def forward(self, X_t: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """C_t = F_t ⊙ C_{t-1} + I_t ⊙ C̃_t  (memory: kept part + written part);  H_t = O_t ⊙ tanh(C_t)."""
        H_prev, C_prev = state
        g = self.gates(X_t, H_prev)
        C_t = g["F"] * C_prev + g["I"] * g["C_tilde"]
        H_t = g["O"] * torch.tanh(C_t)
        return H_t, C_t


class _Recurrent(nn.Module):
    """Layers × directions of cells run over a batch-first sequence, with ``nn.RNN``/``nn.LSTM``'s interface.

    ``forward(X, state=None) -> (outputs, state)``: X ``(batch, time, input_size)``; outputs
    ``(batch, time, directions * hidden_size)`` from the top layer; state ``(layers * directions, batch,
    hidden_size)`` (a pair (H, C) for the LSTM), ordered layer by layer, forward direction first.
    """

    cell_class: type[nn.Module]
    has_memory: bool

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bidirectional: bool = False):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        check_positive_ints(self, ("input_size", "hidden_size", "num_layers"))
        self.bidirectional = bidirectional
        self.directions = 2 if bidirectional else 1
        # cells[layer * directions + direction], the same order as PyTorch's state tensors.
        self.cells = nn.ModuleList(
            self.cell_class(input_size if layer == 0 else hidden_size * self.directions, hidden_size)
            for layer in range(num_layers) for _ in range(self.directions)
        )

    def _zero_state(self, X: torch.Tensor):
        zeros = X.new_zeros(self.num_layers * self.directions, X.size(0), self.hidden_size)
        return (zeros, zeros.clone()) if self.has_memory else zeros

    def forward(self, X: torch.Tensor, state=None):
        """Each layer's cells run over time (the reverse direction from the end), the layer's outputs being the
        next layer's input (inputs as :func:`check_inputs` accepts them)."""
        state = self._zero_state(X) if state is None else state
        final_H, final_C = [], []
        layer_input = X
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.directions):
                k = layer * self.directions + direction
                cell = self.cells[k]
                s = (state[0][k], state[1][k]) if self.has_memory else state[k]
                steps = range(X.size(1)) if direction == 0 else reversed(range(X.size(1)))
                out = [None] * X.size(1)
                for t in steps:
                    s = cell(layer_input[:, t], s)
                    out[t] = s[0] if self.has_memory else s
                outputs.append(torch.stack(out, dim=1))
                final_H.append(s[0] if self.has_memory else s)
                if self.has_memory:
                    final_C.append(s[1])
            layer_input = torch.cat(outputs, dim=-1)
        H = torch.stack(final_H)
        return layer_input, ((H, torch.stack(final_C)) if self.has_memory else H)


class RNN(_Recurrent):
    """Stacked, optionally bidirectional Elman RNN (tanh), interchangeable with ``nn.RNN(batch_first=True)``."""

    cell_class = RNNCell
    has_memory = False


class LSTM(_Recurrent):
    """Stacked, optionally bidirectional LSTM, interchangeable with ``nn.LSTM(batch_first=True)``."""

    cell_class = LSTMCell
    has_memory = True


def check_inputs(model: RNN | LSTM, X: torch.Tensor, state=None) -> None:
    """Refuse inputs :meth:`RNN.forward`/:meth:`LSTM.forward` would misread, naming the shapes: X ``(batch, time,
    input_size)``, batch-first and not empty, and a state ``(layers * directions, batch, hidden)`` (a pair (H, C)
    for the LSTM)."""
    if X.dim() != 3 or X.size(-1) != model.input_size:
        raise ValueError(f"expected input (batch, time, {model.input_size}), got shape {tuple(X.shape)}; "
                         f"the layers are batch-first")
    if X.size(0) == 0 or X.size(1) == 0:
        raise ValueError(f"the input is empty (batch, time) = {tuple(X.shape[:2])}")
    if state is None:
        return
    want = (model.num_layers * model.directions, X.size(0), model.hidden_size)
    if model.has_memory and (not isinstance(state, (tuple, list)) or len(state) != 2):
        raise ValueError(f"an LSTM state is a pair (H, C), got {type(state).__name__}")
    for name, s in zip("HC", state if model.has_memory else (state,)):
        if tuple(s.shape) != want:
            raise ValueError(f"state {name} must be (layers * directions, batch, hidden) = {want}, "
                             f"got {tuple(s.shape)}")


@torch.no_grad()
def copy_from_torch(ours: RNN | LSTM, theirs: nn.RNN | nn.LSTM) -> RNN | LSTM:
    """Copy ``theirs``'s weights into ``ours`` (returned), transposing to the row-vector convention.

    PyTorch stacks the LSTM gates in ``weight_ih_l{k}`` in the order i, f, g, o (g is the input node C̃)
    and keeps two biases per gate (``bias_ih`` and ``bias_hh``); they only ever appear as a sum, so
    b_* = bias_ih + bias_hh.
    """
    lstm = isinstance(ours, LSTM)
    if lstm != isinstance(theirs, nn.LSTM) or not isinstance(theirs, (nn.RNN, nn.LSTM)):
        raise ValueError(f"cannot copy a {type(theirs).__name__} into a {type(ours).__name__}")
    if isinstance(theirs, nn.RNN) and theirs.nonlinearity != "tanh":
        raise ValueError("only the tanh RNN is implemented here; build nn.RNN with nonlinearity='tanh'")
    mine = (ours.input_size, ours.hidden_size, ours.num_layers, ours.bidirectional)
    other = (theirs.input_size, theirs.hidden_size, theirs.num_layers, theirs.bidirectional)
    if mine != other:
        raise ValueError(f"sizes differ: (input, hidden, layers, bidirectional) {mine} vs {other}")
    if not theirs.bias or getattr(theirs, "proj_size", 0):
        raise ValueError("the source module must have biases and no projection (proj_size=0)")
    for k, cell in enumerate(ours.cells):
        layer, direction = divmod(k, ours.directions)
        suffix = f"l{layer}" + ("_reverse" if direction else "")
        W_ih, W_hh = getattr(theirs, f"weight_ih_{suffix}"), getattr(theirs, f"weight_hh_{suffix}")
        b_ih, b_hh = getattr(theirs, f"bias_ih_{suffix}"), getattr(theirs, f"bias_hh_{suffix}")
        if not lstm:
            cell.W_xh.copy_(W_ih.T)
            cell.W_hh.copy_(W_hh.T)
            cell.b_xh.copy_(b_ih)
            cell.b_hh.copy_(b_hh)
            continue
        for g, W_x, W_h, b_x, b_h in zip(("i", "f", "c", "o"), W_ih.chunk(4), W_hh.chunk(4), b_ih.chunk(4), b_hh.chunk(4)):
            getattr(cell, f"W_x{g}").copy_(W_x.T)
            getattr(cell, f"W_h{g}").copy_(W_h.T)
            getattr(cell, f"b_{g}").copy_(b_x + b_h)
    return ours


def _check_sequence(cell: RNNCell | LSTMCell, X: torch.Tensor) -> None:
    if X.dim() != 3 or X.size(-1) != cell.input_size:
        raise ValueError(f"expected X (batch, time, {cell.input_size}), got shape {tuple(X.shape)}")


def hidden_gradient_norms(cell: RNNCell | LSTMCell, X: torch.Tensor, readout: torch.Tensor | None = None) -> torch.Tensor:
    """‖∂L/∂H_t‖ for t = 1..T, where the loss L = ⟨H_T, readout⟩ sees only the last hidden state.

    X is ``(batch, time, inputs)``; the result is ``(time,)`` (norms over batch and units). By the chain
    rule ∂L/∂H_t = ∂L/∂H_T · Π_{s=t+1..T} ∂H_s/∂H_{s-1}: a product of T - t Jacobians, which is what
    shrinks (vanishes) or grows (explodes) with the distance T - t. ``readout`` defaults to all ones.
    """
    _check_sequence(cell, X)
    zeros = X.new_zeros(X.size(0), cell.hidden_size)
    state = (zeros, zeros) if isinstance(cell, LSTMCell) else zeros
    hiddens = []
    for t in range(X.size(1)):
        state = cell(X[:, t], state)
        hiddens.append(state[0] if isinstance(cell, LSTMCell) else state)
    readout = torch.ones_like(hiddens[-1]) if readout is None else readout
    loss = (hiddens[-1] * readout).sum()
    grads = torch.autograd.grad(loss, hiddens)
    return torch.stack([g.norm() for g in grads]).detach()


@torch.no_grad()
def trace_gates(cell: LSTMCell, X: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run ``cell`` over X ``(batch, time, inputs)`` from a zero state and keep every step's internals.

    Returns tensors ``(batch, time, hiddens)`` named I, F, O, C_tilde (gates and input node), C and H
    (states) — what a heatmap of "what the LSTM is doing" reads.
    """
    _check_sequence(cell, X)
    H = C = X.new_zeros(X.size(0), cell.hidden_size)
    trace: dict[str, list[torch.Tensor]] = {k: [] for k in ("I", "F", "O", "C_tilde", "C", "H")}
    for t in range(X.size(1)):
        g = cell.gates(X[:, t], H)
        H, C = cell(X[:, t], (H, C))
        for k, v in (*g.items(), ("C", C), ("H", H)):
            trace[k].append(v)
    return {k: torch.stack(v, dim=1) for k, v in trace.items()}
