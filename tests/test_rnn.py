"""lmlib.models.rnn against torch.nn.RNN / torch.nn.LSTM on copied weights: outputs, final states and gradients."""

import pytest
import torch
from host_reads import no_host_reads
from torch import nn

from lmlib.models.rnn import (
    LSTM,
    RNN,
    LSTMCell,
    RNNCell,
    check_inputs,
    copy_from_torch,
    hidden_gradient_norms,
    trace_gates,
)


@pytest.fixture(autouse=True)
def float64():
    """Compare in float64 so the tolerance is tight; restored after each test."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _pair(kind, layers, bidirectional, input_size=3, hidden=4, seed=0):
    torch.manual_seed(seed)
    theirs = (nn.LSTM if kind == "lstm" else nn.RNN)(input_size, hidden, num_layers=layers,
                                                      bidirectional=bidirectional, batch_first=True)
    ours = (LSTM if kind == "lstm" else RNN)(input_size, hidden, num_layers=layers, bidirectional=bidirectional)
    return copy_from_torch(ours, theirs), theirs


def _their_grads(theirs, ours):
    """PyTorch's gradients laid out as ours: transposed, split by gate, the two biases' (equal) grads."""
    grads = {}
    for k, cell in enumerate(ours.cells):
        layer, direction = divmod(k, ours.directions)
        suffix = f"l{layer}" + ("_reverse" if direction else "")
        g_ih, g_hh = getattr(theirs, f"weight_ih_{suffix}").grad, getattr(theirs, f"weight_hh_{suffix}").grad
        gb_ih, gb_hh = getattr(theirs, f"bias_ih_{suffix}").grad, getattr(theirs, f"bias_hh_{suffix}").grad
        torch.testing.assert_close(gb_ih, gb_hh)  # the two biases enter as a sum
        if isinstance(cell, RNNCell):
            grads[f"cells.{k}.W_xh"], grads[f"cells.{k}.W_hh"] = g_ih.T, g_hh.T
            grads[f"cells.{k}.b_xh"], grads[f"cells.{k}.b_hh"] = gb_ih, gb_hh
            continue
        for g, a, b, c in zip("ifco", g_ih.chunk(4), g_hh.chunk(4), gb_ih.chunk(4)):
            grads[f"cells.{k}.W_x{g}"], grads[f"cells.{k}.W_h{g}"], grads[f"cells.{k}.b_{g}"] = a.T, b.T, c
    return grads


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, False), (1, True), (3, True)])
def test_outputs_states_and_gradients_equal_pytorch(kind, layers, bidirectional):
    ours, theirs = _pair(kind, layers, bidirectional)
    torch.manual_seed(1)
    X = torch.randn(2, 5, 3)
    n_states = layers * (2 if bidirectional else 1)
    H0 = torch.randn(n_states, 2, 4)
    state0 = (H0, torch.randn(n_states, 2, 4)) if kind == "lstm" else H0
    X_ours, X_theirs = X.clone().requires_grad_(), X.clone().requires_grad_()
    out_ours, s_ours = ours(X_ours, state0)
    out_theirs, s_theirs = theirs(X_theirs, state0)
    torch.testing.assert_close(out_ours, out_theirs)
    for a, b in zip(s_ours if kind == "lstm" else [s_ours], s_theirs if kind == "lstm" else [s_theirs]):
        torch.testing.assert_close(a, b)

    # A loss that touches every output and the final states, with distinct weights so no symmetry hides a bug.
    torch.manual_seed(2)
    w_out = torch.randn_like(out_ours)
    w_states = [torch.randn_like(s) for s in (s_ours if kind == "lstm" else [s_ours])]

    def loss(out, states):
        states = states if kind == "lstm" else [states]
        return (out * w_out).sum() + sum((s * w).sum() for s, w in zip(states, w_states))

    loss(out_ours, s_ours).backward()
    loss(out_theirs, s_theirs).backward()
    torch.testing.assert_close(X_ours.grad, X_theirs.grad)
    expected = _their_grads(theirs, ours)
    got = dict(ours.named_parameters())
    assert set(got) == set(expected)
    for name, param in got.items():
        torch.testing.assert_close(param.grad, expected[name], msg=f"gradient of {name}")


def test_default_state_is_zeros_like_pytorch():
    ours, theirs = _pair("lstm", 2, False)
    X = torch.randn(3, 4, 3)
    torch.testing.assert_close(ours(X)[0], theirs(X)[0])


def test_lstm_cell_is_the_lecture_equations():
    torch.manual_seed(0)
    cell = LSTMCell(3, 2)
    X, H, C = torch.randn(4, 3), torch.randn(4, 2), torch.randn(4, 2)
    sig = torch.sigmoid
    I = sig(X @ cell.W_xi + H @ cell.W_hi + cell.b_i)  # noqa: E741
    F = sig(X @ cell.W_xf + H @ cell.W_hf + cell.b_f)
    O = sig(X @ cell.W_xo + H @ cell.W_ho + cell.b_o)  # noqa: E741
    C_tilde = torch.tanh(X @ cell.W_xc + H @ cell.W_hc + cell.b_c)
    C_next = F * C + I * C_tilde
    H_next, C_got = cell(X, (H, C))
    torch.testing.assert_close(C_got, C_next)
    torch.testing.assert_close(H_next, O * torch.tanh(C_next))


def test_cells_equal_pytorch_cells():
    torch.manual_seed(0)
    theirs = nn.LSTMCell(3, 4)
    ours = LSTM(3, 4)
    copy_from_torch(ours, nn.LSTM(3, 4))  # shape check only; now copy the cell's weights by hand
    cell = ours.cells[0]
    with torch.no_grad():
        for g, W_x, W_h, b_x, b_h in zip("ifco", theirs.weight_ih.chunk(4), theirs.weight_hh.chunk(4),
                                         theirs.bias_ih.chunk(4), theirs.bias_hh.chunk(4)):
            getattr(cell, f"W_x{g}").copy_(W_x.T)
            getattr(cell, f"W_h{g}").copy_(W_h.T)
            getattr(cell, f"b_{g}").copy_(b_x + b_h)
    X, H, C = torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)
    for a, b in zip(cell(X, (H, C)), theirs(X, (H, C))):
        torch.testing.assert_close(a, b)
    rnn_theirs, rnn_ours = nn.RNNCell(3, 4), RNNCell(3, 4)
    with torch.no_grad():
        rnn_ours.W_xh.copy_(rnn_theirs.weight_ih.T)
        rnn_ours.W_hh.copy_(rnn_theirs.weight_hh.T)
        rnn_ours.b_xh.copy_(rnn_theirs.bias_ih)
        rnn_ours.b_hh.copy_(rnn_theirs.bias_hh)
    torch.testing.assert_close(rnn_ours(X, H), rnn_theirs(X, H))


def test_parameter_count_equals_pytorch():
    ours, theirs = _pair("lstm", 2, True)
    # ours keeps one bias per gate where PyTorch keeps two.
    n_bias_pairs = sum(p.numel() for n, p in theirs.named_parameters() if n.startswith("bias_hh"))
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters()) - n_bias_pairs


def test_bad_shapes_raise_clear_errors():
    lstm = LSTM(3, 4, num_layers=2)
    check_inputs(lstm, torch.randn(2, 5, 3), (torch.zeros(2, 2, 4), torch.zeros(2, 2, 4)))
    for args, named in [((torch.randn(5, 3),), "(5, 3)"), ((torch.randn(2, 5, 7),), "(2, 5, 7)"),
                        ((torch.randn(2, 0, 3),), "(2, 0)"), ((torch.randn(0, 5, 3),), "(0, 5)"),
                        ((torch.randn(2, 5, 3), torch.zeros(2, 2, 4)), "Tensor"),
                        ((torch.randn(2, 5, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))), "(1, 2, 4)")]:
        with pytest.raises(ValueError) as err:
            check_inputs(lstm, *args)
        assert named in str(err.value), (named, str(err.value))
    with pytest.raises(ValueError, match="input_size"):
        RNN(0, 4)
    with pytest.raises(ValueError, match="num_layers"):
        RNN(3, 4, num_layers=0)
    with pytest.raises(ValueError, match=r"\(3, 5, 1, False\)"):
        copy_from_torch(LSTM(3, 4), nn.LSTM(3, 5))
    with pytest.raises(ValueError, match="RNN"):
        copy_from_torch(LSTM(3, 4), nn.RNN(3, 4))
    with pytest.raises(ValueError, match="tanh"):
        copy_from_torch(RNN(3, 4), nn.RNN(3, 4, nonlinearity="relu"))


def test_hidden_gradient_norms_match_autograd_and_the_jacobian_product():
    torch.manual_seed(0)
    cell = RNNCell(2, 3)
    X = torch.randn(1, 4, 2)
    norms = hidden_gradient_norms(cell, X)
    # By hand: dL/dH_t = dL/dH_T * prod of Jacobians dH_s/dH_{s-1} = diag(1 - H_s^2) W_hh^T (row-vector form).
    H = [torch.zeros(1, 3)]
    for t in range(4):
        H.append(cell(X[:, t], H[-1]))
    grad = torch.ones(1, 3)
    expected = [grad.norm()]
    for s in range(4, 1, -1):
        grad = (grad * (1 - H[s] ** 2)) @ cell.W_hh.T
        expected.append(grad.norm())
    torch.testing.assert_close(norms, torch.stack(expected[::-1]).detach())
    with pytest.raises(ValueError, match=r"\(4, 2\)"):
        hidden_gradient_norms(cell, torch.randn(4, 2))


def test_trace_gates_reproduces_the_layer():
    ours, theirs = _pair("lstm", 1, False)
    X = torch.randn(2, 6, 3)
    trace = trace_gates(ours.cells[0], X)
    out, (H, C) = theirs(X)
    torch.testing.assert_close(trace["H"], out.detach())
    torch.testing.assert_close(trace["C"][:, -1], C[0].detach())
    assert set(trace) == {"I", "F", "O", "C_tilde", "C", "H"}
    assert all(v.shape == (2, 6, 4) for v in trace.values())
    assert ((trace["F"] > 0) & (trace["F"] < 1)).all()
    with pytest.raises(ValueError, match=r"\(6, 3\)"):
        trace_gates(ours.cells[0], torch.randn(6, 3))


def test_layers_read_nothing_back_from_the_device():
    with no_host_reads():
        LSTM(3, 4, num_layers=2, bidirectional=True)(torch.randn(2, 5, 3))
        RNN(3, 4)(torch.randn(2, 5, 3))
