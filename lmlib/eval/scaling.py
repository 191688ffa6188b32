"""Scaling laws: how a language model's loss falls with its size (Kaplan et al. 2020, "Scaling Laws for Neural
Language Models"; Brown et al. 2020, "Language Models are Few-Shot Learners", the GPT-3 paper, fig. 3.1).

Kaplan et al. count a model's size as its *non-embedding* parameters N (sec. 1.1: "excluding all vocabulary and
positional embeddings"), because with embeddings left out models of different depth and width fall on one curve.
They estimate the training compute as C ≈ 6·N·B·S = 6·N·D floating-point operations for D = B·S tokens (sec. 2.1).
Trained to convergence, the loss follows a power law in N (eq. 1.1), L(N) = (N_c / N)^α_N; with a finite budget of
data a constant term appears (eq. 1.5), so this module fits

    L(N) = a · N^(−α) + c

where ``c`` stands for what more parameters cannot remove: the entropy of the text and, at a fixed token budget,
the loss of seeing only D tokens. Its α is therefore not Kaplan's α_N = 0.076 (no constant, converged models),
only the same kind of number.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from torch import nn


def non_embedding_parameters(model: nn.Module) -> int:
    """Kaplan's N for lmlib's :class:`~lmlib.models.gpt.GPT`: every parameter except the token embedding
    ``tok_emb``, the position embedding ``pos_emb`` and the output layer ``lm_head`` (which is the token embedding
    when tied, and a vocabulary matrix when not). For a GPT with biases, ``d_ff = 4·d_model`` and ``num_layers``
    blocks of width ``d_model``,

        N = num_layers · (12·d_model² + 13·d_model) + 2·d_model      (pre-norm; post-norm has no final 2·d_model)
          ≈ 12 · num_layers · d_model²                               (Kaplan et al. 2020, table 1)

    the 12·d² being Q, K, V and the output projection (4·d²) and the MLP (2 · 4·d²), the 13·d their biases (3d + d
    + 4d + d) and the two LayerNorms' gains and shifts (4d)."""
    missing = [name for name in ("tok_emb", "pos_emb", "lm_head") if not hasattr(model, name)]
    if missing:
        raise ValueError(f"non_embedding_parameters counts lmlib GPTs (with tok_emb, pos_emb and lm_head); "
                         f"{type(model).__name__} has no {', '.join(missing)}")
    embeddings = {id(p) for m in (model.tok_emb, model.pos_emb, model.lm_head) for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in embeddings)


def training_flops(n_params: float, tokens: float) -> float:
    """The training compute of ``n_params`` parameters on ``tokens`` tokens (Kaplan et al. 2020, sec. 2.1):

        C ≈ 6 · N · D

    a forward pass costs about 2·N operations per token (one multiply and one add per weight) and the backward pass
    twice that. With N the non-embedding count, the embeddings and the output softmax are left out."""
    for name, value in (("n_params", n_params), ("tokens", tokens)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return 6.0 * n_params * tokens  # C = 6·N·D


@dataclass(frozen=True)
class PowerLawFit:
    """L(N) = a · N^(−alpha) + c fitted to ``len(residuals)`` points; ``alpha_interval`` is a 95% interval for
    alpha (see :func:`fit_power_law`), ``residuals`` are loss − fit at each point, in the order given, and
    ``c_at_bound`` says that c ended on a bound (0 or min(loss)), where the interval is not to be trusted."""

    a: float
    alpha: float
    c: float
    alpha_interval: tuple[float, float]
    residuals: tuple[float, ...]
    c_at_bound: bool

    def __call__(self, n) -> np.ndarray:
        """The fitted loss at sizes ``n``."""
        return self.a * np.asarray(n, dtype=float) ** -self.alpha + self.c


def _check_points(n: Sequence[float], loss: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    n, loss = np.asarray(n, dtype=float), np.asarray(loss, dtype=float)
    if n.ndim != 1 or loss.ndim != 1 or len(n) != len(loss):
        raise ValueError(f"n and loss must be two flat sequences of the same length, got shapes {n.shape} and "
                         f"{loss.shape}")
    if len(n) < 4:
        raise ValueError(f"fitting a, alpha and c needs at least 4 points (3 parameters and one degree of freedom "
                         f"left for the interval), got {len(n)}")
    if not (np.isfinite(n).all() and np.isfinite(loss).all()):
        raise ValueError("n and loss must be finite numbers: drop the runs whose loss is NaN or infinite")
    if (n <= 0).any():
        raise ValueError(f"every model size N must be positive, got {n[n <= 0].tolist()}")
    if (loss <= 0).any():
        raise ValueError(f"every loss must be positive (a cross-entropy in nats), got {loss[loss <= 0].tolist()}")
    if len(np.unique(n)) < 3:
        raise ValueError("n needs at least 3 different sizes to separate a, alpha and c")
    return n, loss


def fit_power_law(n: Sequence[float], loss: Sequence[float], confidence: float = 0.95) -> PowerLawFit:
    """Fit L(N) = a · N^(−α) + c by nonlinear least squares (``scipy.optimize.curve_fit``, trust-region reflective).

    For conditioning the fit works in x = log(N / N_0), N_0 the geometric mean of ``n``, with parameters
    (log b, α, c):

        L = exp(log b − α·x) + c,        a = b · N_0^α

    (a itself is the loss above c at N = 1, far outside the data, so it is a poorly scaled parameter). Bounds:
    α ≥ 0, 0 ≤ c < min(loss) (b > 0 by construction); the fit starts from several values of c and keeps the one
    with the smallest squared error, since the surface can have more than one minimum.

    The interval for α is the linearised one: the covariance of the estimates, (JᵀJ)⁻¹ · s² with the residual
    variance s² = Σ r_i² / (n − 3), and a Student-t quantile with n − 3 degrees of freedom,

        α ± t_{n−3, (1+confidence)/2} · √Var(α)

    which widens honestly with few points (t = 3.18 for 6 points), but is only as good as the linearisation and
    assumes independent errors of equal size; when c ends on a bound (``c_at_bound``) it is not valid.
    """
    from scipy import optimize, stats

    n, loss = _check_points(n, loss)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n0 = float(np.exp(np.log(n).mean()))
    x = np.log(n / n0)

    def model(x, log_b, alpha, c):
        return np.exp(log_b - alpha * x) + c  # L = b·(N/N_0)^(−α) + c

    c_max = float(np.nextafter(loss.min(), 0.0))
    best = None
    for frac in (0.0, 0.5, 0.9, 0.99):
        c0 = frac * loss.min()
        slope, intercept = np.polyfit(x, np.log(loss - c0), 1)  # a straight line in log-log space, given c0
        start = (intercept, min(max(-slope, 1e-3), 10.0), min(c0, c_max))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optimize.OptimizeWarning)
                params, cov = optimize.curve_fit(model, x, loss, p0=start, bounds=([-np.inf, 0.0, 0.0], [np.inf, np.inf, c_max]),
                                                 method="trf", maxfev=20000)
        except RuntimeError:  # this start did not converge; another may
            continue
        rss = float(((loss - model(x, *params)) ** 2).sum())
        if best is None or rss < best[0]:
            best = (rss, params, cov)
    if best is None:
        raise RuntimeError("the power-law fit did not converge from any starting point")
    rss, (log_b, alpha, c), cov = best
    dof = len(n) - 3
    var_alpha = float(cov[1, 1]) if np.isfinite(cov[1, 1]) else math.inf  # (JᵀJ)⁻¹·s², s² = RSS / (n − 3)
    half = float(stats.t.ppf((1 + confidence) / 2, dof)) * math.sqrt(max(var_alpha, 0.0))  # t_{n−3} · √Var(α)
    residuals = loss - model(x, log_b, alpha, c)
    return PowerLawFit(a=float(math.exp(log_b) * n0 ** alpha), alpha=float(alpha), c=float(c),
                       alpha_interval=(float(alpha - half), float(alpha + half)),
                       residuals=tuple(float(r) for r in residuals),
                       c_at_bound=bool(c <= 1e-9 * loss.min() or c >= c_max * (1 - 1e-6)))


__all__ = ["PowerLawFit", "fit_power_law", "non_embedding_parameters", "training_flops"]
