"""Neural Turing Machine addressing (Graves, Wayne & Danihelka 2014, section 3), one step at a time.

A read or write head produces a weighting w_t over the N rows of a memory M_t (N × M) in four steps:

1. content focus     w^c_t(i) = exp(β_t K[k_t, M_t(i)]) / Σ_j exp(β_t K[k_t, M_t(j)])       (eq. 5)
2. interpolation     w^g_t = g_t w^c_t + (1 - g_t) w_{t-1}                                     (eq. 7)
3. circular shift    w̃_t(i) = Σ_j w^g_t(j) s_t(i - j)   (indices modulo N)                    (eq. 8)
4. sharpening        w_t(i) = w̃_t(i)^γ_t / Σ_j w̃_t(j)^γ_t                                     (eq. 9)

and then reads r_t = Σ_i w_t(i) M_t(i) (eq. 2) or writes, erasing and then adding (eqs. 3, 4):
M̃_t(i) = M_{t-1}(i) [1 - w_t(i) e_t],   M_t(i) = M̃_t(i) + w_t(i) a_t.

The functions are pure and work on one memory (N, M) or a batch (B, N, M); a batch of weightings is
(B, N), keys (B, M), scalars (B,) or plain floats. :func:`address` runs the four steps and returns
every intermediate weighting, which is what the notebook's stepper shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from .attention import masked_softmax


def _as_param(value, like: torch.Tensor) -> torch.Tensor:
    """A float or (B,) tensor as (B, 1) or scalar, broadcastable against a (..., N) weighting."""
    t = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    return t.unsqueeze(-1) if t.dim() > 0 else t


def _check_memory(memory: torch.Tensor, w: torch.Tensor | None = None) -> None:
    """A memory (N, M) or (B, N, M) of at least one row, and a weighting ``w`` (when given) over its N rows."""
    if memory.dim() < 2:
        raise ValueError(f"memory must be (N, M) or (B, N, M), got shape {tuple(memory.shape)}")
    if memory.numel() == 0:
        # a weighting over zero rows is not a distribution, and reads would silently return zeros
        raise ValueError(f"memory is empty (shape {tuple(memory.shape)}): it needs at least one row (N >= 1) "
                         "of at least one component (M >= 1), and a non-empty batch")
    if w is not None and w.shape[-1] != memory.shape[-2]:
        raise ValueError(f"the weighting covers {w.shape[-1]} rows but the memory has {memory.shape[-2]}")


def _check_weighting(w: torch.Tensor, name: str) -> None:
    if (w < 0).any():
        raise ValueError(f"{name} has negative entries; a weighting is a distribution over memory rows")
    if not torch.allclose(w.sum(-1), torch.ones((), dtype=w.dtype), atol=1e-4):
        raise ValueError(f"{name} must sum to 1 over the memory rows, sums are {w.sum(-1).tolist()}")


def cosine_similarity(key: torch.Tensor, memory: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """K[u, v] = u·v / (‖u‖ ‖v‖) (eq. 6) between ``key`` (..., M) and each row of ``memory`` (..., N, M) -> (..., N)."""
    _check_memory(memory)
    if key.shape[-1] != memory.shape[-1]:
        raise ValueError(f"the key has {key.shape[-1]} components but memory rows have {memory.shape[-1]}")
    dots = (memory * key.unsqueeze(-2)).sum(-1)
    return dots / (memory.norm(dim=-1) * key.norm(dim=-1, keepdim=True)).clamp_min(eps)


def content_weighting(memory: torch.Tensor, key: torch.Tensor, beta) -> torch.Tensor:
    """w^c(i) = exp(β K[k, M(i)]) / Σ_j exp(β K[k, M(j)]) (eq. 5); β ≥ 0 is the key strength."""
    beta = _as_param(beta, key)
    if (beta < 0).any():
        raise ValueError(f"key strength beta must be non-negative, got {beta.flatten().tolist()}")
    return masked_softmax(beta * cosine_similarity(key, memory), None)


def interpolate(w_content: torch.Tensor, w_prev: torch.Tensor, g) -> torch.Tensor:
    """w^g = g w^c + (1 - g) w_{t-1} (eq. 7); the gate g ∈ [0, 1] chooses content (1) or the old focus (0)."""
    if w_content.shape != w_prev.shape:
        raise ValueError(f"w_content {tuple(w_content.shape)} and w_prev {tuple(w_prev.shape)} must have the same shape")
    g = _as_param(g, w_content)
    if ((g < 0) | (g > 1)).any():
        raise ValueError(f"interpolation gate g must be in [0, 1], got {g.flatten().tolist()}")
    return g * w_content + (1 - g) * w_prev


def shift(w: torch.Tensor, s: torch.Tensor, offsets: Sequence[int] = (-1, 0, 1)) -> torch.Tensor:
    """Circular convolution w̃(i) = Σ_j w(j) s(i - j), indices modulo N (eq. 8).

    ``s`` (..., len(offsets)) is a distribution over the allowed integer shifts ``offsets``: s placed
    entirely on +1 moves every weight one row down (w̃(i) = w(i - 1)), on -1 one row up.
    """
    if s.shape[-1] != len(offsets):
        raise ValueError(f"s has {s.shape[-1]} entries for {len(offsets)} offsets {tuple(offsets)}")
    _check_weighting(s, "the shift weighting s")
    # w̃(i) = Σ_k s_k w(i - offset_k): rolling w by +offset puts w(i - offset) at position i
    return sum(s[..., k:k + 1] * torch.roll(w, shifts=off, dims=-1) for k, off in enumerate(offsets))


def sharpen(w: torch.Tensor, gamma) -> torch.Tensor:
    """w(i) = w̃(i)^γ / Σ_j w̃(j)^γ (eq. 9); γ ≥ 1 undoes the blur that a fractional shift causes."""
    gamma = _as_param(gamma, w)
    if (gamma < 1).any():
        raise ValueError(f"sharpening exponent gamma must be at least 1, got {gamma.flatten().tolist()}")
    powered = w.pow(gamma)
    return powered / powered.sum(-1, keepdim=True)


def read(memory: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """r = Σ_i w(i) M(i) (eq. 2): memory (..., N, M), w (..., N) -> (..., M)."""
    _check_memory(memory, w)
    return (w.unsqueeze(-1) * memory).sum(-2)


def write(memory: torch.Tensor, w: torch.Tensor, erase: torch.Tensor, add: torch.Tensor) -> torch.Tensor:
    """Erase then add (eqs. 3, 4): M̃(i) = M(i) [1 - w(i) e],  M'(i) = M̃(i) + w(i) a.

    ``erase`` e ∈ [0, 1]^M and ``add`` a ∈ R^M, shape (..., M). Returns the new memory; the old is kept.
    """
    _check_memory(memory, w)
    if ((erase < 0) | (erase > 1)).any():
        raise ValueError("erase vector entries must lie in [0, 1] (a sigmoid output in the NTM)")
    erased = memory * (1 - w.unsqueeze(-1) * erase.unsqueeze(-2))
    return erased + w.unsqueeze(-1) * add.unsqueeze(-2)


class Addressing(NamedTuple):
    """The weighting after each step: content focus, interpolation, shift, sharpening (= the result)."""

    content: torch.Tensor
    gated: torch.Tensor
    shifted: torch.Tensor
    sharpened: torch.Tensor


def address(memory, w_prev, key, beta, g, s, gamma, offsets: Sequence[int] = (-1, 0, 1)) -> Addressing:
    """The whole addressing pipeline of figure 2: content -> interpolation -> shift -> sharpening."""
    _check_memory(memory)
    if w_prev.shape[-1] != memory.shape[-2]:
        raise ValueError(f"w_prev covers {w_prev.shape[-1]} rows but the memory has {memory.shape[-2]}")
    _check_weighting(w_prev, "w_prev")
    w_c = content_weighting(memory, key, beta)
    w_g = interpolate(w_c, w_prev, g)
    w_s = shift(w_g, s, offsets)
    return Addressing(w_c, w_g, w_s, sharpen(w_s, gamma))
