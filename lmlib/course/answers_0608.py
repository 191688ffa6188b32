"""Hidden references for the exercises of notebooks 06 (AWD-LSTM) and 08 (ELMo), registered in
:data:`lmlib.course.answers.EXERCISES` so that a check cell names its exercise,
``exercises.check("06 TAR over padded sequences", my_tar)``, and shows no expression to run for the answer.

Each implementation exercise asks for a variation of what the notebook displayed with ``show_source`` (locked dropout
for time-major input, TAR that skips padding, the scalar mix over stacked features, a highway layer with its own
carry gate, reversing left-padded rows), so it tests understanding rather than copying. The worked answers are in the
notebooks' solutions, which the reader opens on purpose.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .answers import EXERCISES, Exercise


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- notebook 06 ----------------------------------------------------------------------------------------------------

def locked_dropout_time_major(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """Locked dropout for ``x`` of shape ``(time, batch, features)``: one mask per sequence and feature, shape
    ``(1, batch, features)``, reused at every time step (Gal & Ghahramani 2016), drawn with the library's
    ``bernoulli_mask`` from a generator seeded ``seed``."""
    from ..models.dropouts import bernoulli_mask

    return x * bernoulli_mask((1, x.size(1), x.size(2)), p, x, _generator(seed))


def _locked_cases() -> list[tuple]:
    g = _generator(3)
    return [(torch.randn(4, 2, 3, generator=g), 0.5, 0), (torch.randn(2, 3, 5, generator=g), 0.3, 1),
            (torch.randn(6, 1, 2, generator=g), 0.6, 2)]


def tar_over_padded(h: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """TAR (Merity et al. 2017) without β on a right-padded batch: the mean over units and over the pairs of
    consecutive *real* positions (t, t + 1 < lengths[b]) of (h_{b,t+1} − h_{b,t})²; pairs touching padding count
    for nothing."""
    T = h.size(1)
    real = torch.arange(T)[None, :] < lengths[:, None]  # (B, T)
    pairs = (real[:, 1:] & real[:, :-1]).to(h.dtype)  # (B, T − 1)
    squares = (h[:, 1:] - h[:, :-1]).pow(2).sum(-1)  # (B, T − 1), summed over units
    return (squares * pairs).sum() / (pairs.sum() * h.size(2))


def _tar_cases() -> list[tuple]:
    g = _generator(4)
    return [(torch.randn(2, 5, 3, generator=g), torch.tensor([5, 3])),
            (torch.randn(3, 6, 4, generator=g), torch.tensor([2, 6, 4])),
            (torch.randn(1, 4, 2, generator=g), torch.tensor([4]))]


def nt_asgd_switch(val_ppls, n: int):
    """The 0-based index of the check at which NT-ASGD switches (Algorithm 1), None if it never does."""
    from ..training.awd_training import nt_asgd_trigger_check

    return nt_asgd_trigger_check(val_ppls, n)


def _both_dropped(one_mask_for_both: bool):
    from .answers import dropped_in_both

    return lambda p: dropped_in_both(p, one_mask_for_both)


# -- notebook 08 ----------------------------------------------------------------------------------------------------

def scalar_mix_stacked(x: torch.Tensor, w, gamma: float) -> torch.Tensor:
    """Equation 1 of Peters et al. (2018) on features stacked as ``(n, L + 1, dim)`` (the layout the probes read):
    ``(n, dim)`` = γ Σ_j softmax(w)_j x[:, j], computed with the library's :class:`ScalarMix`."""
    from ..models.elmo import ScalarMix

    mix = ScalarMix(x.size(1), initial_weights=list(w), gamma=gamma)
    with torch.no_grad():
        return mix([h.unsqueeze(1) for h in x.unbind(1)]).squeeze(1)


def _mix_cases() -> list[tuple]:
    g = _generator(0)
    return [(torch.randn(4, 3, 5, generator=g), [0.0, 0.0, 0.0], 1.0),
            (torch.randn(2, 3, 4, generator=g), [1.0, -2.0, 0.5], 0.7),
            (torch.randn(3, 2, 2, generator=g), [0.3, 0.1], 2.0)]


def highway_with_carry_gate(x, W_H, b_H, W_T, b_T, W_C, b_C) -> torch.Tensor:
    """Srivastava et al. (2015), Equation 2: y = H(x) · T(x) + x · C(x) with H = ReLU(x W_Hᵀ + b_H), the transform
    gate T = σ(x W_Tᵀ + b_T) and a carry gate of its own, C = σ(x W_Cᵀ + b_C) (ELMo's highway layers set C = 1 − T)."""
    t = torch.sigmoid(F.linear(x, W_T, b_T))
    c = torch.sigmoid(F.linear(x, W_C, b_C))
    return t * torch.relu(F.linear(x, W_H, b_H)) + c * x


def _highway_cases() -> list[tuple]:
    g = _generator(5)
    weights = [torch.randn(5, 5, generator=g) * 0.5 if k % 2 == 0 else torch.randn(5, generator=g) for k in range(6)]
    return [(torch.randn(4, 5, generator=g), *weights), (torch.randn(2, 3, 5, generator=g), *weights)]


def reverse_left_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """For each row b of ``x`` ``(batch, time)`` whose real entries are its *last* ``lengths[b]`` (padding at the
    start), those entries reversed and the padding left where it is: flipping each row turns the left padding into
    right padding, :func:`lmlib.models.elmo.reverse_padded` reverses the real entries, and flipping back restores the
    padding's place."""
    from ..models.elmo import reverse_padded

    return reverse_padded(x.flip(1), lengths).flip(1)


def _reverse_cases() -> list[tuple]:
    x = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 0, 5, 6], [7, 8, 9, 10, 11], [0, 0, 0, 0, 12]])
    return [(x, torch.tensor([4, 2, 5, 1])), (x[:2, 1:], torch.tensor([4, 2]))]


EXERCISES.update({
    "06 locked dropout, time-major": Exercise("function", locked_dropout_time_major, lambda: _locked_cases()),
    "06 TAR over padded sequences": Exercise("function", tar_over_padded, lambda: _tar_cases()),
    "06 NT-ASGD switch": Exercise("value", nt_asgd_switch),
    "06 embedding dropout: both 'I' dropped": Exercise("value", _both_dropped(True)),
    "06 locked dropout: dim 0 of both 'I' dropped": Exercise("value", _both_dropped(False)),
    "08 scalar mix of stacked features": Exercise("function", scalar_mix_stacked, lambda: _mix_cases()),
    "08 highway layer with a carry gate": Exercise("function", highway_with_carry_gate, lambda: _highway_cases()),
    "08 reverse left-padded rows": Exercise("function", reverse_left_padded, lambda: _reverse_cases()),
})
