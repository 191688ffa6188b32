"""STLR, discriminative rates and the LR range test, checked against Howard & Ruder (2018) / Smith (2017)."""

import math
from decimal import Decimal
from fractions import Fraction

import pytest
import torch

from lmlib.course.figures import lr_find_figure, stlr_figure
from lmlib.training.schedules import STLR, discriminative_lrs, lr_find, stlr, stlr_cut, stlr_schedule, suggest_lr
from lmlib.training.trainer import Trainer


def paper_stlr(t, T, cut_frac, ratio, eta_max):
    cut = math.floor(T * cut_frac)
    p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / cut_frac - 1))
    return eta_max * (1 + p * (ratio - 1)) / ratio


@pytest.mark.parametrize("T,cut_frac,ratio,eta_max", [(100, 0.1, 32, 0.01), (1000, 0.1, 32, 0.01),
                                                      (40, 0.3, 10, 0.004), (10, 0.5, 2, 1.0), (1245, 0.2, 32, 0.01)])
def test_stlr_matches_the_paper_formula_when_T_times_cut_frac_is_whole(T, cut_frac, ratio, eta_max):
    assert math.isclose(T * cut_frac, round(T * cut_frac))
    for t in range(T):
        assert stlr(t, T, cut_frac, ratio, eta_max) == pytest.approx(paper_stlr(t, T, cut_frac, ratio, eta_max), rel=1e-12)


def test_paper_formula_overshoots_when_T_times_cut_frac_is_not_whole_and_stlr_does_not():
    # T = 15, cut_frac = 0.1: cut = 1 but the paper's decay length is 1 · 9 = 9 < 14 iterations left
    assert paper_stlr(14, 15, 0.1, 32, 0.01) < 0
    for T in range(1, 400):
        for cut_frac in (0.05, 0.1, 0.15, 0.3, 0.5, 0.9, 0.99):
            etas = stlr_schedule(T, cut_frac, 32, 0.01)
            cut = stlr_cut(T, cut_frac)
            assert min(etas) >= 0.01 / 32 - 1e-15 and max(etas) <= 0.01 + 1e-15
            assert etas.index(max(etas)) == cut  # warm-up to the peak at cut, then a strictly falling decay
            assert all(a > b for a, b in zip(etas[cut:-1], etas[cut + 1:]))
            # the last step sits one decay increment above the floor: p = 1 / (T - cut)
            assert etas[-1] == pytest.approx(0.01 * (1 + (31 / (T - cut))) / 32, rel=1e-12)


def test_stlr_cut_is_the_exact_floor_for_every_two_decimal_cut_frac():
    # cut_frac as typed (0.01 ... 0.99) against exact decimal arithmetic: floor(T * k / 100) = T * k // 100.
    # The float product misses by one when it lands just below a whole number (T = 100, 0.29 gives
    # 28.999999999999996); stlr_cut must get every one of those right.
    float_misses = 0
    for k in range(1, 100):
        cut_frac = float(f"0.{k:02d}")
        assert Decimal(str(cut_frac)) == Decimal(k) / 100
        for T in range(1, 3001):
            exact = T * k // 100
            assert stlr_cut(T, cut_frac) == exact, (T, cut_frac)
            float_misses += math.floor(T * cut_frac) != exact
    assert float_misses == 178  # the cases a plain math.floor(T * cut_frac) gets wrong


def test_stlr_uses_the_exact_cut():
    assert math.floor(100 * 0.29) == 28 and stlr_cut(100, 0.29) == 29
    etas = stlr_schedule(100, 0.29, 32, 0.01)
    assert etas.index(max(etas)) == 29 and etas[29] == pytest.approx(0.01)
    assert stlr_cut(1000, 0.1) == 100 and stlr_cut(15, 0.1) == 1 and stlr_cut(5, 0.1) == 0
    # a value that is not a short decimal keeps its digits; Fraction and Decimal inputs are used as given
    assert stlr_cut(10, 0.1 + 0.2) == 3 and stlr_cut(100, Fraction(29, 100)) == 29 and stlr_cut(100, Decimal("0.29")) == 29
    assert stlr_cut(1000, 0.09999999999999999) == 99  # a slider's float noise is the caller's to round
    assert "cut_frac=0.29," in stlr_figure(100, 0.29).layout.title.text
    assert stlr_figure(100, 0.29).layout.title.text.endswith("cut=29")


def test_stlr_shape_start_peak_and_end():
    T, eta_max, ratio = 200, 0.01, 32
    etas = stlr_schedule(T, 0.1, ratio, eta_max)
    cut = 20
    assert etas[0] == pytest.approx(eta_max / ratio)
    assert etas[cut] == pytest.approx(eta_max)
    assert max(etas) == pytest.approx(eta_max) and etas.index(max(etas)) == cut
    assert all(a < b for a, b in zip(etas[:cut], etas[1:cut + 1]))  # rising
    assert all(a > b for a, b in zip(etas[cut:-1], etas[cut + 1:]))  # falling
    # one step past the end would reach eta_max / ratio exactly
    assert paper_stlr(T, T, 0.1, ratio, eta_max) == pytest.approx(eta_max / ratio)


def test_stlr_edge_cases_cut_zero_and_single_step():
    assert stlr(0, 1) == pytest.approx(0.01)  # T = 1: the single step uses eta_max
    T = 5  # T * cut_frac = 0.5 < 1, so cut = 0: pure linear decay p = 1 - t/T
    for t in range(T):
        assert stlr(t, T, 0.1, 32, 0.01) == pytest.approx(0.01 * (1 + (1 - t / T) * 31) / 32)


@pytest.mark.parametrize("kwargs,message", [
    (dict(t=0, T=10, cut_frac=0.0), "cut_frac"), (dict(t=0, T=10, cut_frac=1.0), "cut_frac"),
    (dict(t=0, T=10, cut_frac=-0.2), "cut_frac"), (dict(t=10, T=10), r"\[0, T\)"), (dict(t=-1, T=10), r"\[0, T\)"),
    (dict(t=0, T=0), "positive integer"), (dict(t=0, T=10, ratio=0.5), "ratio"), (dict(t=0, T=10, eta_max=0), "eta_max"),
])
def test_stlr_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stlr(**kwargs)


def test_discriminative_lrs_divide_by_2_6_per_layer():
    lrs = discriminative_lrs(0.01, 4)
    assert lrs == pytest.approx([0.01 / 2.6**3, 0.01 / 2.6**2, 0.01 / 2.6, 0.01])
    for lower, upper in zip(lrs, lrs[1:]):
        assert lower == pytest.approx(upper / 2.6)
    with pytest.raises(ValueError):
        discriminative_lrs(0.01, 0)


def test_stlr_callback_keeps_group_ratios_and_follows_the_formula():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
    base = discriminative_lrs(0.01, 2)
    opt = torch.optim.SGD([{"params": model[0].parameters(), "lr": base[0]},
                           {"params": model[1].parameters(), "lr": base[1]}])
    seen = []

    def loss_fn(m, batch):
        seen.append([g["lr"] for g in opt.param_groups])
        return m(batch).pow(2).mean()

    T = 30
    Trainer(model, opt, loss_fn, [STLR(T)], device="cpu").fit([torch.randn(4, 3) for _ in range(T)], epochs=1)
    for t, (lo, hi) in enumerate(seen):
        assert hi == pytest.approx(stlr(t, T, eta_max=0.01))
        assert lo == pytest.approx(hi / 2.6)


def test_lr_finder_on_a_quadratic_with_known_good_range():
    # Minimising 0.5 * h * ||w||^2 with plain SGD converges for lr < 2/h and diverges above it;
    # the finder must stop after divergence and suggest a rate inside the stable range.
    h = 4.0
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.ones(10))
    model = torch.nn.Module()
    model.w = w
    opt = torch.optim.SGD([w], lr=1.0)

    def loss_fn(m, batch):
        return 0.5 * h * (m.w ** 2).sum() + 0.0 * batch.sum()

    res = lr_find(model, opt, loss_fn, [torch.zeros(1)], start_lr=1e-4, end_lr=10.0, num_iter=100, beta=0.9)
    assert res.diverged and res.lrs[-1] < 10.0
    assert 1e-3 < res.suggestion < 2 / h
    assert torch.equal(w.detach(), torch.ones(10))  # model restored
    assert all(math.isfinite(s) for s in res.smoothed[:-1])
    # bias-corrected EMA: the first smoothed value equals the first loss
    assert res.smoothed[0] == pytest.approx(res.losses[0])
    fig = lr_find_figure(res)
    assert len(fig.data) == 2


def test_suggest_lr_picks_the_steepest_descent():
    lrs = [10 ** (-i / 2) for i in range(10, 0, -1)]
    smoothed = [5, 5, 5, 4.9, 4.0, 2.0, 1.8, 1.7, 1.7, 3.0]
    assert suggest_lr(lrs, smoothed) == lrs[4]


def test_weight_decay_groups_decay_matrices_and_spare_vectors():
    from torch import nn

    from lmlib.training.schedules import weight_decay_groups

    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 4), nn.LayerNorm(4))
    decayed, spared = weight_decay_groups(model, 0.1)
    assert decayed["weight_decay"] == 0.1 and spared["weight_decay"] == 0.0
    assert [p.shape for p in decayed["params"]] == [(5, 3), (4, 3)]  # embedding and Linear weight, in model order
    assert [p.shape for p in spared["params"]] == [(4,), (4,), (4,)]  # Linear bias, LayerNorm weight and bias
    assert len(decayed["params"]) + len(spared["params"]) == len(list(model.parameters()))


def test_scaled_rate_follows_the_square_root_rule():
    from lmlib.training.schedules import scaled_lr

    assert scaled_lr(1e-3, 32, 128) == pytest.approx(2e-3)
    assert scaled_lr(2e-3, 256, 64) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="positive"):
        scaled_lr(1e-3, 0, 16)


def test_a_retargeted_schedule_ends_at_its_new_total():
    from lmlib.training.schedules import STLR, WarmupCosine, warmup_cosine
    from lmlib.training.schedules import stlr as stlr_fn

    cosine = WarmupCosine(100, 10, 0.1)
    cosine.retarget(40)
    assert cosine.factor(39) == pytest.approx(warmup_cosine(39, 40, 10, 0.1)) == pytest.approx(0.1)
    stlr = STLR(100)
    stlr.start_step = 0
    stlr.retarget(40)
    assert [stlr.factor(t) for t in (0, 3, 39)] == pytest.approx([stlr_fn(t, 40, eta_max=1.0) for t in (0, 3, 39)])
