"""Variable-length BPTT (length distribution, LR rescale) and NT-ASGD (trigger, averaging) against the paper."""

import math

import pytest
import torch
from torch import nn

from lmlib.text.batching import LMBatch, batchify
from lmlib.training.awd_training import (
    NTASGD,
    SeqLenLRScale,
    bptt_length_sampler,
    length_distribution,
    nt_asgd_should_switch,
    nt_asgd_trigger_check,
    variable_bptt_batches,
)
from lmlib.training.callbacks import LRSchedule
from lmlib.training.trainer import Callback, Trainer


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


# -- variable-length BPTT ------------------------------------------------------------------------------
def test_length_distribution_chi_square_fixed_seed():
    from scipy.stats import chi2

    sampler = bptt_length_sampler(70, p=0.95, sigma=5, min_len=5, generator=torch.Generator().manual_seed(0))
    n = 20_000
    draws = [sampler() for _ in range(n)]
    probs = length_distribution(70, 0.95, 5, 5, max_len=200)
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-9)
    # bins with expected count >= 5, the rest pooled
    counts: dict[int, int] = {}
    for d in draws:
        counts[d] = counts.get(d, 0) + 1
    big = [k for k, pk in probs.items() if n * pk >= 5]
    observed = [counts.get(k, 0) for k in big] + [n - sum(counts.get(k, 0) for k in big)]
    expected = [n * probs[k] for k in big] + [n * (1 - sum(probs[k] for k in big))]
    stat = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    assert stat < chi2.ppf(0.999, len(observed) - 1), stat
    # the half-length mode holds about 1 - p of the mass
    short = sum(d < 52 for d in draws) / n
    assert abs(short - 0.05) < 4 * math.sqrt(0.05 * 0.95 / n)
    assert min(draws) >= 5


def test_length_sampler_floor_and_seed():
    tiny = bptt_length_sampler(6, p=0.5, sigma=5, min_len=5, generator=torch.Generator().manual_seed(1))
    assert min(tiny() for _ in range(500)) == 5
    a = bptt_length_sampler(70, generator=torch.Generator().manual_seed(3))
    b = bptt_length_sampler(70, generator=torch.Generator().manual_seed(3))
    assert [a() for _ in range(20)] == [b() for _ in range(20)]
    assert set(bptt_length_sampler(70, p=1.0, sigma=0)() for _ in range(5)) == {70}
    with pytest.raises(ValueError, match="bptt"):
        bptt_length_sampler(1)
    with pytest.raises(ValueError, match="p "):
        bptt_length_sampler(70, p=0.0)


def test_variable_bptt_batches_cover_the_stream_and_differ_by_epoch():
    streams = batchify(torch.arange(2001), 4)
    data = variable_bptt_batches(streams, bptt=20, seed=0)
    for epoch in (0, 1):
        batches = data(epoch)
        assert torch.equal(torch.cat([b.x for b in batches], 1), streams[:, :-1])
        assert torch.equal(torch.cat([b.y for b in batches], 1), streams[:, 1:])
    assert [b.x.size(1) for b in data(0)] != [b.x.size(1) for b in data(1)]
    assert [b.x.size(1) for b in data(0)] == [b.x.size(1) for b in data(0)]


class _Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3))


def _loss(model, batch):
    return (model.w * batch.x.float().mean()).sum()


def test_lr_is_scaled_by_seq_len_over_bptt_for_that_batch_only():
    model = _Linear()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    steps = []

    class Spy(Callback):
        def on_batch_begin(self, trainer, batch):
            self.before = model.w.detach().clone()

        def on_batch_end(self, trainer, loss):
            # SGD moves each weight by lr * grad, and grad = mean(x) = 1
            steps.append((self.before - model.w.detach())[0].item())

    scale = SeqLenLRScale(bptt=10)
    # order matters: the schedule sets the rate, the rescale multiplies it, the spy reads after restore
    trainer = Trainer(model, opt, _loss, [LRSchedule(lambda step: 0.5), scale, Spy()])
    batches = [LMBatch(torch.ones(2, n, dtype=torch.long), torch.ones(2, n, dtype=torch.long)) for n in (10, 5, 13)]
    trainer.fit(batches, epochs=1)
    assert steps == pytest.approx([0.5 * 10 / 10, 0.5 * 5 / 10, 0.5 * 13 / 10])
    assert scale.scales == pytest.approx([1.0, 0.5, 1.3])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5)  # restored after the batch
    with pytest.raises(ValueError, match="bptt"):
        SeqLenLRScale(0)


# -- NT-ASGD -------------------------------------------------------------------------------------------
def _paper_trigger(losses, n):
    """Algorithm 1 of Merity et al. (2018), transcribed: t counts logged checks, T the switch."""
    logs, t = [], 0
    for k, v in enumerate(losses):
        if t > n and v > min(logs[i] for i in range(0, t - n)):
            return k
        logs.append(v)
        t += 1
    return None


@pytest.mark.parametrize("losses,n,expected", [
    ([5, 4, 3, 2, 1, 0.5, 0.4, 0.3], 5, None),               # keeps improving: never switches
    ([5, 4, 3, 3.5, 3.6, 3.7, 3.8, 3.9, 3.95], 5, 8),       # 3.95 > 3, the best from more than 5 checks ago
    ([5, 4, 3, 3.5, 3.6, 3.7, 3.8, 3.9, 2.9, 3.1], 5, 9),  # 2.9 delays it: only values > n checks old count
    ([5, 6, 7], 1, 2),                                       # n = 1: worse than the value 2 checks ago
    ([5, 6, 4, 7], 2, 3),
])
def test_trigger_matches_the_algorithm(losses, n, expected):
    assert _paper_trigger(losses, n) == expected
    assert nt_asgd_trigger_check(losses, n) == expected


def test_trigger_matches_the_algorithm_on_random_sequences():
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        losses = (torch.rand(25, generator=g) + torch.linspace(1, 0, 25) * torch.rand((), generator=g)).tolist()
        for n in (1, 3, 5):
            assert nt_asgd_trigger_check(losses, n) == _paper_trigger(losses, n)


def test_should_switch_needs_more_than_n_logs():
    assert not nt_asgd_should_switch([1.0] * 5, 9.0, 5)
    assert nt_asgd_should_switch([1.0] * 6, 9.0, 5)
    with pytest.raises(ValueError, match="non-monotone"):
        nt_asgd_should_switch([], 1.0, 0)


def test_average_equals_the_mean_of_iterates_since_the_switch():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 3), torch.randn(16, 2)
    batches = [(x[i : i + 4], y[i : i + 4]) for i in range(0, 16, 4)]

    def loss_fn(m, b):
        return ((m(b[0]) - b[1]) ** 2).mean()

    scripted = iter([3.0, 2.0, 3.5])  # n = 1: the third check is worse than the first -> switch

    class ScriptedValid(NTASGD):
        def on_epoch_end(self, trainer, logs):
            logs["valid_loss"] = next(scripted, 9.0)
            super().on_epoch_end(trainer, logs)

    nt = ScriptedValid(n=1, load_average_at_end=False)
    iterates = []

    class Record(Callback):  # records the weights after each step
        def on_batch_end(self, trainer, loss):
            iterates.append(torch.cat([p.detach().flatten().clone() for p in trainer.model.parameters()]))

    trainer = Trainer(model, opt, loss_fn, [nt, Record()])
    trainer.fit(batches, epochs=5)
    assert nt.switch_epoch == 3 and nt.switch_step == 12  # the check after epoch 3, i.e. step 12
    since_switch = torch.stack(iterates[nt.switch_step - 1 :])  # w_T is the iterate after step T
    assert nt.count == len(since_switch) == 9
    average = torch.cat([a.flatten() for a in nt.average])
    torch.testing.assert_close(average, since_switch.mean(0))
    current = torch.cat([p.detach().flatten() for p in model.parameters()])
    with nt.averaged_weights(model):
        torch.testing.assert_close(torch.cat([p.detach().flatten() for p in model.parameters()]), average)
    torch.testing.assert_close(torch.cat([p.detach().flatten() for p in model.parameters()]), current)


def test_ntasgd_loads_the_average_at_the_end_and_reports_its_validation():
    torch.manual_seed(1)
    model = nn.Linear(3, 1)
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]

    def loss_fn(m, b):
        return ((m(b[0]) - b[1]) ** 2).mean()

    nt = NTASGD(n=1, valid=data)
    nt.logs = [0.0, 0.0]  # any new validation loss is worse: switch at the first check
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.05), loss_fn, [nt])
    history = trainer.fit(data, epochs=3, valid=data)
    assert nt.averaging and nt.switch_epoch == 1
    assert "avg_valid_loss" in history[1] and "avg_valid_loss" in history[2]
    final = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.testing.assert_close(final, torch.cat([a.flatten() for a in nt.average]))
    with pytest.raises(KeyError, match="valid"):
        Trainer(nn.Linear(3, 1), torch.optim.SGD(model.parameters(), lr=0.1), loss_fn, [NTASGD()]).fit(data, 1)
