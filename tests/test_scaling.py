"""Kaplan's N, C = 6ND and the power-law fit, against hand counts and data drawn from a known law."""

import math

import numpy as np
import pytest

from lmlib.eval.scaling import fit_power_law, non_embedding_parameters, training_flops
from lmlib.models.gpt import GPT, GPTConfig

SIZES = [1e4, 3e4, 1e5, 3e5, 1e6, 3e6]
TRUE = dict(a=12.0, alpha=0.3, c=3.0)


def law(n, a=TRUE["a"], alpha=TRUE["alpha"], c=TRUE["c"]):
    return a * np.asarray(n, dtype=float) ** -alpha + c


def tiny(**kw):
    return GPT(GPTConfig(vocab_size=11, block_size=5, num_layers=2, num_heads=2, d_model=8, dropout=0.0, **kw))


@pytest.mark.parametrize("kw, by_hand", [
    # L·(12d² + 13d) + 2d: per block Q, K, V, out (4d² + 4d), MLP (8d² + 5d), two LayerNorms (4d); then ln_f (2d)
    ({}, 2 * (12 * 64 + 13 * 8) + 2 * 8),
    # post-norm: no final LayerNorm
    ({"norm": "post"}, 2 * (12 * 64 + 13 * 8)),
    # no biases anywhere: 12d² per block, LayerNorm gains only (2d per block, d for ln_f)
    ({"bias": False}, 2 * (12 * 64 + 2 * 8) + 8),
    # an untied output layer is a vocabulary matrix too: still excluded
    ({"tie_embeddings": False}, 2 * (12 * 64 + 13 * 8) + 2 * 8),
])
def test_non_embedding_parameters_by_hand(kw, by_hand):
    model = tiny(**kw)
    named = sum(p.numel() for name, p in model.named_parameters()
                if not name.startswith(("tok_emb.", "pos_emb.", "lm_head.")))
    assert non_embedding_parameters(model) == by_hand == named
    embeddings = 11 * 8 + 5 * 8 + (0 if kw.get("tie_embeddings", True) else 11 * 8)
    assert model.num_parameters() == by_hand + embeddings


def test_non_embedding_parameters_close_to_kaplan_formula():
    model = GPT(GPTConfig(vocab_size=50, block_size=8, num_layers=3, num_heads=3, d_model=96, dropout=0.0))
    assert non_embedding_parameters(model) == 3 * (12 * 96**2 + 13 * 96) + 2 * 96
    assert non_embedding_parameters(model) / (12 * 3 * 96**2) == pytest.approx(1, abs=0.02)


def test_non_embedding_parameters_refuses_other_models():
    with pytest.raises(ValueError) as error:
        non_embedding_parameters(__import__("torch").nn.Linear(3, 3))
    assert "Linear" in str(error.value)


def test_training_flops_is_6ND():
    assert training_flops(786_432, 655_360) == 6 * 786_432 * 655_360 == 3_092_376_453_120
    assert training_flops(1e6, 2e7) == 1.2e14


@pytest.mark.parametrize("n, d, bad", [(0, 10, "0"), (10, -1, "-1"), (True, 10, "True"), (10, math.nan, "nan"),
                                       (math.inf, 1, "inf"), ("10", 1, "'10'")])
def test_training_flops_refuses_bad_input(n, d, bad):
    with pytest.raises(ValueError) as error:
        training_flops(n, d)
    assert f"got {bad}" in str(error.value)  # the bad value, named


def test_fit_recovers_the_law_without_noise():
    fit = fit_power_law(SIZES, law(SIZES))
    assert fit.alpha == pytest.approx(TRUE["alpha"], rel=1e-5)
    assert fit.a == pytest.approx(TRUE["a"], rel=1e-4)
    assert fit.c == pytest.approx(TRUE["c"], rel=1e-5)
    assert max(abs(r) for r in fit.residuals) < 1e-7
    assert fit(SIZES) == pytest.approx(law(SIZES))
    assert not fit.c_at_bound


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_with_small_noise_covers_true_alpha(seed):
    rng = np.random.default_rng(seed)
    loss = law(SIZES) + rng.normal(0, 0.005, len(SIZES))
    fit = fit_power_law(SIZES, loss)
    lo, hi = fit.alpha_interval
    assert lo < TRUE["alpha"] < hi
    assert lo < fit.alpha < hi
    assert hi - lo < 0.5  # informative, not merely wide
    assert len(fit.residuals) == len(SIZES)
    assert np.asarray(fit.residuals) == pytest.approx(loss - fit(SIZES))
    assert 0 <= fit.c < loss.min()


@pytest.mark.parametrize("sizes, confidence", [(SIZES, 0.95), (SIZES + [1e7, 3e7, 1e8], 0.90)])
def test_fit_interval_is_student_t_with_n_minus_3_degrees_of_freedom(sizes, confidence):
    # The half-width by hand: the Jacobian of L = a·N^(−α) + c in (a, α, c) at the fit, s² = RSS / (n − 3),
    # Var(α) = [(JᵀJ)⁻¹]_αα · s², times Student's t quantile with n − 3 degrees of freedom (scipy). A normal
    # quantile instead (1.96 for 95%) would make it 38% narrower with 6 points (t_{3, 0.975} = 3.18).
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    n = np.asarray(sizes)
    loss = law(n) + rng.normal(0, 0.005, len(n))
    fit = fit_power_law(n, loss, confidence=confidence)
    assert not fit.c_at_bound
    J = np.stack([n ** -fit.alpha, -fit.a * n ** -fit.alpha * np.log(n), np.ones_like(n)], axis=1)  # ∂L/∂(a, α, c)
    dof = len(n) - 3
    s2 = float(np.sum(np.square(fit.residuals))) / dof
    var_alpha = np.linalg.inv(J.T @ J)[1, 1] * s2
    half = stats.t.ppf((1 + confidence) / 2, dof) * math.sqrt(var_alpha)
    lo, hi = fit.alpha_interval
    assert (hi - lo) / 2 == pytest.approx(half, rel=1e-3)
    assert (lo + hi) / 2 == pytest.approx(fit.alpha, rel=1e-9)


def test_fit_interval_widens_with_noise():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 1, len(SIZES))
    small, large = (fit_power_law(SIZES, law(SIZES) + s * noise) for s in (0.002, 0.02))
    assert np.diff(small.alpha_interval)[0] < np.diff(large.alpha_interval)[0]


def test_fit_with_no_floor_puts_c_on_its_bound():
    fit = fit_power_law(SIZES, law(SIZES, c=0.0))
    assert fit.alpha == pytest.approx(TRUE["alpha"], rel=1e-3)
    assert fit.c_at_bound


@pytest.mark.parametrize("n, loss", [
    (SIZES[:3], law(SIZES[:3])), (SIZES, law(SIZES)[:-1]), ([0, *SIZES[1:]], law(SIZES)),
    ([-1e4, *SIZES[1:]], law(SIZES)), (SIZES, [math.nan, *law(SIZES)[1:]]),
    ([1e4, 1e4, 1e4, 1e5], [4.0, 4.0, 4.0, 3.5]), (SIZES, [0.0, *law(SIZES)[1:]]),
])
def test_fit_refuses_bad_input(n, loss):
    with pytest.raises(ValueError):
        fit_power_law(n, loss)
