"""The hidden references of notebooks 06 and 08's exercises: each computed by hand on a small case, each a real
variation (the function the notebook displays fails it), each passed by its worked solution."""

from __future__ import annotations

import contextlib
import io

import torch

from lmlib.course import answers_0608 as A
from lmlib.course import exercises
from lmlib.models.dropouts import LockedDropout
from lmlib.models.elmo import Highway, reverse_padded
from lmlib.training.awd_training import temporal_activation_penalty


def passes(name: str, answer, *inputs) -> bool:
    with contextlib.redirect_stdout(io.StringIO()):
        return bool(exercises.check(name, answer, *inputs))


def test_time_major_locked_dropout_shares_one_mask_over_time_and_differs_from_the_batch_first_module():
    x = torch.ones(5, 2, 3)  # (time, batch, features)
    out = A.locked_dropout_time_major(x, 0.5, seed=0)
    assert set(out.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(out, out[:1].expand_as(out))  # the same mask at every time step
    assert passes("06 locked dropout, time-major", A.locked_dropout_time_major)
    assert not passes("06 locked dropout, time-major",
                      lambda x, p, seed: LockedDropout(p)(x, generator=torch.Generator().manual_seed(seed)))


def test_tar_over_padded_sequences_by_hand():
    h = torch.tensor([[[0.0], [1.0], [3.0], [100.0]], [[2.0], [2.0], [50.0], [-7.0]]])  # (2, 4, 1)
    # real pairs: row 0 (0->1, 1->3; the step into padding is left out), row 1 (2->2): squares 1, 4, 0
    assert abs(A.tar_over_padded(h, torch.tensor([3, 2])).item() - (1 + 4 + 0) / 3) < 1e-6
    full = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(A.tar_over_padded(full, torch.tensor([5, 5])), temporal_activation_penalty(full))
    assert not passes("06 TAR over padded sequences", lambda h, lengths: temporal_activation_penalty(h))


def test_nt_asgd_switch_and_the_dropped_in_both_values():
    assert A.nt_asgd_switch([300, 210, 180, 170, 175, 172, 169, 171, 174, 176], 3) == 7  # the solution's reasoning
    assert passes("06 NT-ASGD switch", 7, [300, 210, 180, 170, 175, 172, 169, 171, 174, 176], 3)
    assert not passes("06 NT-ASGD switch", 4, [300, 210, 180, 170, 175, 172, 169, 171, 174, 176], 3)
    assert passes("06 embedding dropout: both 'I' dropped", 0.1, 0.1)
    assert passes("06 locked dropout: dim 0 of both 'I' dropped", 0.01, 0.1)
    assert not passes("06 locked dropout: dim 0 of both 'I' dropped", 0.1, 0.1)


def test_scalar_mix_of_stacked_features_by_hand():
    x = torch.tensor([[[1.0, 0.0], [3.0, 2.0]]])  # one word, two layers
    # w = (0, 0): s = (1/2, 1/2); γ = 2: 2 * ((1, 0) + (3, 2)) / 2
    assert torch.allclose(A.scalar_mix_stacked(x, [0.0, 0.0], 2.0), torch.tensor([[4.0, 2.0]]))
    assert passes("08 scalar mix of stacked features",
                  lambda x, w, gamma: gamma * (torch.softmax(torch.tensor(w), 0)[None, :, None] * x).sum(1))
    assert not passes("08 scalar mix of stacked features", lambda x, w, gamma: gamma * x.mean(1))  # ignores w


def test_highway_with_a_carry_gate_is_equation_2_and_not_elmos_coupled_layer():
    x = torch.tensor([[1.0, -1.0]])
    eye, zero = torch.eye(2), torch.zeros(2)
    big = torch.full((2,), 50.0)
    # T = σ(50) ≈ 1, C = σ(-50) ≈ 0: y ≈ ReLU(x)
    y = A.highway_with_carry_gate(x, eye, zero, torch.zeros(2, 2), big, torch.zeros(2, 2), -big)
    assert torch.allclose(y, torch.tensor([[1.0, 0.0]]), atol=1e-6)
    # T ≈ 1 and C ≈ 1 at once, which C = 1 − T cannot give: y ≈ ReLU(x) + x
    y = A.highway_with_carry_gate(x, eye, zero, torch.zeros(2, 2), big, torch.zeros(2, 2), big)
    assert torch.allclose(y, torch.tensor([[2.0, -1.0]]), atol=1e-6)

    def coupled(x, W_H, b_H, W_T, b_T, W_C, b_C):  # the library's layer, C = 1 − T
        layer = Highway(x.size(-1), num_layers=1)
        with torch.no_grad():
            layer.transforms[0].weight.copy_(W_H), layer.transforms[0].bias.copy_(b_H)
            layer.gates[0].weight.copy_(W_T), layer.gates[0].bias.copy_(b_T)
            return layer(x)

    assert not passes("08 highway layer with a carry gate", coupled)
    assert passes("08 highway layer with a carry gate", A.highway_with_carry_gate)


def test_reversing_left_padded_rows_by_hand_and_not_as_right_padded_ones():
    x = torch.tensor([[0, 0, 1, 2, 3], [4, 5, 6, 7, 8]])
    assert A.reverse_left_padded(x, torch.tensor([3, 5])).tolist() == [[0, 0, 3, 2, 1], [8, 7, 6, 5, 4]]
    assert not passes("08 reverse left-padded rows", reverse_padded)

    def solution(x, lengths):
        out = x.clone()
        for b, n in enumerate(lengths.tolist()):
            out[b, x.size(1) - n:] = x[b, x.size(1) - n:].flip(0)
        return out

    assert passes("08 reverse left-padded rows", solution)
