"""The Trainer and its callbacks: learning, reproducibility, resuming, and each callback against its definition."""

import io
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lmlib
from lmlib.text.batching import batchify, bptt_batches, classification_batches, random_blocks
from lmlib.training.callbacks import (
    Checkpoint,
    EarlyStopping,
    GradientClipping,
    LivePlot,
    LRSchedule,
    MaxSteps,
    ProgressBar,
    Regularizer,
    StepProgress,
    TimeBudget,
    freeze,
    unfreeze,
)
from lmlib.training.objectives import StatefulLMLoss, classification_loss, next_token_loss
from lmlib.training.schedules import discriminative_param_groups
from lmlib.training.trainer import BatchResult, Callback, Trainer


class TinyLM(nn.Module):
    def __init__(self, vocab=12, dim=16, dropout=0.2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x):
        return self.out(self.drop(torch.tanh(self.emb(x))))


class TinyRNNLM(nn.Module):
    def __init__(self, vocab=12, dim=16):
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, dim), nn.GRU(dim, dim, batch_first=True), nn.Linear(dim, vocab)

    def forward(self, x, state=None):
        h, state = self.rnn(self.emb(x), state)
        return self.out(h), state


IDS = torch.tensor([(3 * i) % 12 for i in range(400)])


def blocks(epoch):
    g = torch.Generator().manual_seed(1000 + epoch)
    return [random_blocks(IDS, 8, 4, g) for _ in range(10)]


def make_trainer(callbacks=(), lr=1e-2, seed=0):
    lmlib.seed_everything(seed)
    model = TinyLM()
    return Trainer(model, torch.optim.Adam(model.parameters(), lr), next_token_loss, callbacks=list(callbacks), device="cpu")


def test_a_tiny_model_overfits_one_batch():
    batch = random_blocks(IDS, 8, 4, torch.Generator().manual_seed(0))
    trainer = make_trainer(lr=5e-2)
    trainer.model.drop.p = 0.0
    trainer.fit([batch], epochs=150)
    assert trainer.history[0]["train_loss"] > 2.0
    assert trainer.evaluate([batch]).loss < 0.01


def test_the_same_seed_gives_identical_losses_and_another_seed_does_not():
    losses = []
    for seed in (7, 7, 8):  # each trainer seeds, builds and trains before the next one starts
        trainer = make_trainer(seed=seed)
        trainer.fit(blocks, epochs=2)
        losses.append(trainer.batch_losses)
    assert losses[0] == losses[1]
    assert losses[0] != losses[2]


def test_resuming_from_a_checkpoint_matches_an_uninterrupted_run(tmp_path):
    schedule = lambda: LRSchedule(lambda t: 1.0 / (1 + 0.1 * t))  # noqa: E731
    straight = make_trainer([schedule(), GradientClipping(1.0)], seed=3)
    straight.fit(blocks, epochs=3)

    first = make_trainer([schedule(), GradientClipping(1.0), Checkpoint(tmp_path / "ck.pt")], seed=3)
    first.fit(blocks, epochs=1)
    torch.manual_seed(12345)  # whatever happens between the runs must not matter
    second = make_trainer([schedule(), GradientClipping(1.0), Checkpoint(tmp_path / "ck.pt")], seed=99)
    second.load_checkpoint(tmp_path / "ck.pt")
    second.fit(blocks, epochs=2)

    assert second.batch_losses == straight.batch_losses  # dropout masks, Adam moments, lr all continue exactly
    assert [h["train_loss"] for h in second.history] == [h["train_loss"] for h in straight.history]
    for p, q in zip(second.model.parameters(), straight.model.parameters()):
        assert torch.equal(p, q)


class SkippableBlocks:
    """``blocks(0)`` built one at a time, with a ``skip(n)`` that passes over batches without building them; it
    records how many it built and skipped."""

    def __init__(self):
        self.g, self.left, self.built, self.skipped = torch.Generator().manual_seed(1000), 10, 0, 0

    def __iter__(self):
        return self

    def __next__(self):
        if not self.left:
            raise StopIteration
        self.left, self.built = self.left - 1, self.built + 1
        return random_blocks(IDS, 8, 4, self.g)

    def skip(self, n):
        for _ in range(n):
            random_blocks(IDS, 8, 4, self.g)  # the same draws: cheap here, an encoding saved in ELMo's batches
            self.left, self.skipped = self.left - 1, self.skipped + 1


def test_a_resumed_epoch_passes_over_the_batches_taken_with_the_sources_skip_and_trains_on_the_same_ones(tmp_path):
    """A run resumed 4 batches into its epoch reaches its step through the source's skip when it has one, not by
    building the 4 batches, and goes on exactly as the run that built and dropped them (a plain list)."""
    class SaveAtStep4(Callback):
        def on_batch_end(self, trainer, loss):
            if trainer.step == 4:
                trainer.save_checkpoint(tmp_path / "ck.pt")

    straight = make_trainer([SaveAtStep4()], seed=3)
    straight.fit(blocks, epochs=1)
    runs = {}
    for kind in ("list", "skip"):
        trainer = make_trainer([SaveAtStep4()], seed=99)
        trainer.load_checkpoint(tmp_path / "ck.pt")
        source = SkippableBlocks()
        trainer.fit(lambda epoch, kind=kind, source=source: blocks(0) if kind == "list" else source, epochs=1)
        runs[kind] = (trainer, source)
    (by_list, _), (by_skip, source) = runs["list"], runs["skip"]
    assert (source.skipped, source.built) == (4, 6) and by_skip.step == by_list.step == 10
    assert by_skip.batch_losses == by_list.batch_losses == straight.batch_losses
    for p, q in zip(by_skip.model.parameters(), straight.model.parameters()):
        assert torch.equal(p, q)


def test_checkpoints_are_loaded_weights_only_and_written_atomically(tmp_path):
    trainer = make_trainer()
    trainer.fit(blocks, epochs=1)
    trainer.save_checkpoint(tmp_path / "ck.pt")
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]
    torch.load(tmp_path / "ck.pt", weights_only=True)
    with pytest.raises(FileNotFoundError):
        trainer.load_checkpoint(tmp_path / "missing.pt")


def test_evaluate_weights_batches_by_their_token_counts():
    model = TinyLM(dropout=0.0)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), 0.1), next_token_loss, device="cpu")
    small, large = random_blocks(IDS, 2, 1), random_blocks(IDS, 8, 5)
    res = trainer.evaluate([small, large])
    with torch.no_grad():
        nll = sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item() for x, y in [small, large])
    assert res.n == 42
    assert res.loss == pytest.approx(nll / 42, rel=1e-6)
    assert res.perplexity == pytest.approx(math.exp(nll / 42), rel=1e-6)


def test_stateful_loss_carries_state_across_windows_and_is_reset_each_pass():
    lmlib.seed_everything(0)
    model = TinyRNNLM()
    loss = StatefulLMLoss()
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), 0.5), loss, device="cpu")
    windows = list(bptt_batches(batchify(IDS, 4), 10))
    trainer.fit(windows, epochs=2)
    assert loss.state is not None and not loss.state.requires_grad
    # evaluating window by window with the carried state equals one pass over the whole stream
    res = trainer.evaluate(windows)
    with torch.no_grad():
        logits, _ = model(batchify(IDS, 4)[:, :-1])
        whole = F.cross_entropy(logits.flatten(0, 1), batchify(IDS, 4)[:, 1:].flatten()).item()
    assert res.loss == pytest.approx(whole, rel=1e-5)


def test_lr_schedule_sets_each_groups_rate_from_its_own_base():
    model = TinyLM()
    groups = discriminative_param_groups([model.emb, model.out], 0.4, factor=4.0)  # rates 0.1 and 0.4
    sched = LRSchedule(lambda t: 0.5 ** t)
    trainer = Trainer(model, torch.optim.SGD(groups), next_token_loss, callbacks=[sched], device="cpu")
    trainer.fit(blocks, epochs=1)
    assert sched.lrs == pytest.approx([0.4 * 0.5 ** t for t in range(10)])
    assert [g["lr"] for g in trainer.optimizer.param_groups] == pytest.approx([0.1 * 0.5 ** 9, 0.4 * 0.5 ** 9])


def test_gradient_clipping_bounds_the_global_norm_and_logs_the_raw_one():
    seen = []

    class Probe(lmlib.Callback):
        def after_backward(self, trainer):
            seen.append(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in trainer.model.parameters()])).item())

    clip = GradientClipping(1e-3)
    trainer = make_trainer([clip, Probe()])
    trainer.fit(blocks, epochs=1)
    assert all(n <= 1e-3 * (1 + 1e-4) for n in seen)
    assert all(raw > 1e-3 for raw in clip.norms)
    with pytest.raises(ValueError, match="positive"):
        GradientClipping(0)


def test_regularizer_adds_its_weighted_penalty_to_the_optimized_loss():
    penalty = lambda trainer: sum((p ** 2).sum() for p in trainer.model.parameters())  # noqa: E731
    reg = Regularizer(penalty, weight=1e-3)
    plain = make_trainer(seed=4)
    plain.fit(blocks, epochs=1)
    regular = make_trainer([reg], seed=4)
    regular.fit(blocks, epochs=1)
    assert len(reg.values) == 10 and reg.values[0] > 0
    assert regular.batch_losses[0] == plain.batch_losses[0]  # reported loss is the data loss
    assert regular.batch_losses[1] != plain.batch_losses[1]  # but the update differed
    with pytest.raises(ValueError, match="non-negative"):
        Regularizer(penalty, weight=-1)


def test_frozen_parameters_do_not_change():
    trainer = make_trainer()
    freeze(trainer.model.emb)
    before = trainer.model.emb.weight.clone()
    trainer.fit(blocks, epochs=1)
    assert torch.equal(before, trainer.model.emb.weight)
    unfreeze(trainer.model.emb)
    trainer.fit(blocks, epochs=1)
    assert not torch.equal(before, trainer.model.emb.weight)


def test_early_stopping_stops_after_patience_and_restores_the_best_weights():
    stopper = EarlyStopping(patience=2)
    trainer = make_trainer([stopper], lr=5.0)  # a rate this high makes validation loss wander upward
    trainer.fit(blocks, epochs=30, valid=blocks)
    losses = [h["valid_loss"] for h in trainer.history]
    best = losses.index(min(losses))
    assert len(losses) == best + 3  # stopped two epochs after the best
    assert trainer.evaluate(blocks).loss == pytest.approx(min(losses), rel=1e-6)
    with pytest.raises(KeyError, match="validation data"):
        make_trainer([EarlyStopping()]).fit(blocks, epochs=1)


def test_early_stopping_resumes_with_its_best_value_patience_and_weights(tmp_path):
    straight = make_trainer([EarlyStopping(patience=2)], lr=5.0)
    straight.fit(blocks, epochs=30, valid=blocks)
    assert len(straight.history) < 30, "the run must stop early for this test to mean anything"

    first = make_trainer([EarlyStopping(patience=2), Checkpoint(tmp_path / "ck.pt")], lr=5.0)
    first.fit(blocks, epochs=2, valid=blocks)
    second = make_trainer([EarlyStopping(patience=2), Checkpoint(tmp_path / "ck.pt")], lr=5.0, seed=99)
    second.load_checkpoint(tmp_path / "ck.pt")
    second.fit(blocks, epochs=28, valid=blocks)
    assert [h["valid_loss"] for h in second.history] == [h["valid_loss"] for h in straight.history]
    for p, q in zip(second.model.parameters(), straight.model.parameters()):
        assert torch.equal(p, q), "the same best weights are restored"


def test_perplexity_of_a_huge_loss_is_infinite_not_clipped():
    from lmlib.training.trainer import EvalResult

    assert EvalResult(2.0, 10).perplexity == pytest.approx(math.exp(2.0))
    assert EvalResult(800.0, 10).perplexity == math.inf


def test_max_steps_and_time_budget_stop_training():
    trainer = make_trainer([MaxSteps(13)])
    trainer.fit(blocks, epochs=5)
    assert trainer.step == 13 and trainer.epoch == 2
    budget = make_trainer([TimeBudget(1e-9)])
    budget.fit(blocks, epochs=5)
    assert budget.step == 1


def test_classification_loss_reports_accuracy():
    class BagOfWords(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.out = nn.Embedding(10, 8), nn.Linear(8, 2)

        def forward(self, ids, mask):
            summed = (self.emb(ids) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            return self.out(summed)

    lmlib.seed_everything(0)
    seqs = [[1 + i % 4, 5 + i % 4] if i % 2 else [2, 3, 4] for i in range(40)]
    labels = [i % 2 for i in range(40)]
    model = BagOfWords()
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), 0.05), classification_loss, device="cpu")
    data = lambda epoch: classification_batches(seqs, labels, 8, pad_id=0, seed=epoch)  # noqa: E731
    trainer.fit(data, epochs=20, valid=data)
    assert trainer.history[-1]["valid_acc"] == 1.0


def test_bad_data_and_bad_losses_are_clear_errors():
    trainer = make_trainer()
    with pytest.raises(TypeError, match="one-shot iterator"):
        trainer.fit(iter(blocks(0)), epochs=1)
    with pytest.raises(ValueError, match="no batches"):
        trainer.fit([], epochs=1)
    with pytest.raises(ValueError, match="epochs"):
        trainer.fit(blocks, epochs=0)
    bad = Trainer(TinyLM(), torch.optim.SGD(TinyLM().parameters(), 0.1), lambda m, b: 3.0, device="cpu")
    with pytest.raises(TypeError, match="BatchResult"):
        bad.fit(blocks, epochs=1)
    nan = make_trainer()
    nan.loss_fn = lambda m, b: BatchResult(next_token_loss(m, b).loss * float("nan"))
    with pytest.raises(FloatingPointError, match="learning rate"):
        nan.fit(blocks, epochs=1)


def test_live_plot_records_outside_a_notebook():
    plot = LivePlot()
    trainer = make_trainer([plot])
    trainer.fit(blocks, epochs=2, valid=blocks)
    assert plot.steps == list(range(1, 21)) and len(plot.valid) == 2
    fig = plot.figure()
    assert [t.name for t in fig.data] == ["train (smoothed)", "validation"]


def test_live_plot_redraws_one_output_in_place_in_a_real_kernel():
    import nbformat
    from notebook_client import notebook_client  # nbclient, its waits in slices (see there why)

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import torch\n"
        "from torch import nn\n"
        "from lmlib import Trainer\n"
        "from lmlib.text.batching import random_blocks\n"
        "from lmlib.training.callbacks import LivePlot\n"
        "from lmlib.training.objectives import next_token_loss\n"
        "model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 10))\n"
        "ids = torch.arange(100) % 10\n"
        "trainer = Trainer(model, torch.optim.SGD(model.parameters(), 0.1), next_token_loss,\n"
        "                  callbacks=[LivePlot(every_s=0.0)], device='cpu')\n"
        "_ = trainer.fit([random_blocks(ids, 4, 2) for _ in range(30)], epochs=3, valid=[random_blocks(ids, 4, 2)])\n"
    )]
    notebook_client(nb, kernel_name="python3", timeout=120).execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["display_data"], "every redraw replaced the same output"
    figure = outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert len(figure["data"][0]["x"]) == 90 and len(figure["data"][1]["x"]) == 3


def test_progress_bar_counts_every_batch_of_every_epoch(capsys, monkeypatch):
    import functools

    import tqdm.auto
    import tqdm.std

    # The test settings silence bars (TQDM_DISABLE, read by tqdm at import); this test reads one.
    monkeypatch.setattr(tqdm.auto, "tqdm", functools.partial(tqdm.std.tqdm, disable=False))
    make_trainer([ProgressBar(total=10, leave=True)]).fit(blocks, epochs=2)
    shown = capsys.readouterr().err
    assert "epoch 1" in shown and "epoch 2" in shown
    assert shown.count("10/10") >= 2, "each epoch's bar reaches its total"
    assert "loss=" in shown


def test_step_progress_off_a_terminal_writes_a_line_every_tenth_then_sums_up():
    log = io.StringIO()  # not a terminal, as a CI log or a notebook's output
    progress = StepProgress(20, tokens=lambda batch: batch.x.numel(), desc="tiny", file=log)
    make_trainer([progress]).fit(lambda epoch: blocks(epoch) + blocks(epoch + 1))  # 20 batches of 4 x 8 tokens
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert [line.split()[2] for line in lines] == [f"{step}/20" for step in range(2, 21, 2)]
    assert re.fullmatch(r"tiny: step 20/20 \(100%\)  loss \d\.\d{3}  [\d,]+ tokens/s  0:\d\d elapsed, ETA 0:00", lines[-1])
    assert re.fullmatch(r"tiny: 20 steps \(1-20 of 20\), 640 tokens in \d+\.\d s, [\d,]+ tokens/s; "
                        r"loss at the last step \d\.\d{3}", progress.summary())
    # at least every every_s seconds as well: here every step
    log = io.StringIO()
    make_trainer([StepProgress(20, desc="tiny", file=log, every_s=1e-9)]).fit(lambda epoch: blocks(0) + blocks(1))
    assert len(log.getvalue().splitlines()) == 20 and "20 steps  0:" in log.getvalue()  # no tokens: steps counted


def test_step_progress_on_a_terminal_is_a_tqdm_bar_with_tokens_per_second_and_eta(monkeypatch):
    import functools

    import tqdm
    import tqdm.std

    from lmlib.training import callbacks

    monkeypatch.setattr(tqdm, "tqdm", functools.partial(tqdm.std.tqdm, disable=False))  # the tests silence bars
    monkeypatch.setattr(callbacks, "_terminal_columns", lambda stream: 100)  # as if the stream were a terminal
    screen = io.StringIO()
    progress = StepProgress(10, tokens=lambda batch: batch.x.numel(), desc="tiny", file=screen)
    trainer = make_trainer([progress])
    trainer.fit(blocks)
    drawn = screen.getvalue().split("\r")
    assert len(drawn) > 2 and progress.bar is None  # redrawn in place, closed at the end
    last = drawn[-1].strip()
    assert re.fullmatch(r"tiny: 100%\|[█#]+\| 10/10 \[\d\d:\d\d<00:00, +[\d.]+(step/s|s/step), loss \d\.\d{3}, "
                        r"[\d,]+ tokens/s\]", last), last
    # a resumed run starts the bar at its step and counts its rate and time left from there
    screen.truncate(0)
    trainer.fit(blocks)  # 10 more steps: steps 11-20 of a 20-step run
    progress.total = 20
    assert progress.first_step == 10 and progress.summary().startswith("tiny: 10 steps (11-20 of 20), 320 tokens")


def test_the_trainer_reads_nothing_back_from_the_device_between_logging_steps(monkeypatch):
    """A read of a tensor's value (``.item()``, ``.tolist()``, ``float()``, ``bool()``, ``.cpu()``...) waits for a
    GPU to finish all queued work. Every read that lmlib's code makes during training is recorded with whether the
    trainer was inside its logging read (``_log``): with ``log_every=5`` all of them must be there."""
    import sys

    reads, inside_log = [], [False]
    for name in ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__", "__format__"):
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _original=original, _name=name, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if "/lmlib/" in caller.replace("\\", "/"):
                reads.append((_name, inside_log[0]))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    lmlib.seed_everything(0)
    model = TinyLM()
    callbacks = [LRSchedule(lambda t: 1.0 / (1 + t)), GradientClipping(1.0),
                 Regularizer(lambda trainer: sum((p ** 2).sum() for p in trainer.model.parameters()), 1e-4),
                 TimeBudget(3600, steps=12), MaxSteps(100),
                 StepProgress(12, tokens=lambda batch: (batch.x >= 0).sum(), file=io.StringIO())]
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), 1e-2), next_token_loss, callbacks, device="cpu",
                      log_every=5)
    log = trainer._log

    def logging_read():
        inside_log[0] = True
        try:
            log()
        finally:
            inside_log[0] = False

    trainer._log = logging_read
    logged_at = []
    trainer.callbacks.append(type("Steps", (lmlib.Callback,), {"on_log": lambda self, t, losses: logged_at.append(
        (t.step, len(losses)))})())
    trainer.fit(lambda epoch: blocks(0) + blocks(1), epochs=1)
    assert logged_at == [(5, 5), (10, 5), (12, 2)]  # every 5 steps, then the rest when TimeBudget ends the run
    assert reads and all(inside for _, inside in reads), [name for name, inside in reads if not inside]
    assert len(trainer.batch_losses) == 12 and all(math.isfinite(v) for v in trainer.batch_losses)


def test_a_non_finite_loss_is_caught_at_the_next_read_and_names_its_step():
    trainer = make_trainer()
    trainer.log_every = 4
    losses = iter([1.0, 2.0, float("inf"), 3.0, 4.0])
    trainer.loss_fn = lambda m, b: BatchResult(next_token_loss(m, b).loss * 0 + next(losses))
    with pytest.raises(FloatingPointError, match="at step 3"):
        trainer.fit(blocks, epochs=1)
    assert trainer.step == 4  # read at the logging step after it


def test_a_time_budget_cuts_the_planned_steps_and_the_schedule_still_anneals_to_its_end(monkeypatch):
    from types import SimpleNamespace

    from lmlib.training import callbacks
    from lmlib.training.schedules import WarmupCosine

    trainer = make_trainer()
    monkeypatch.setattr(callbacks, "time", SimpleNamespace(perf_counter=lambda: 10.0 * trainer.step))  # 10 s a step
    budget, schedule = TimeBudget(100, steps=50), WarmupCosine(50, 5, 0.1)
    trainer.callbacks += [schedule, budget]
    lrs = []
    trainer.callbacks.append(type("Rates", (lmlib.Callback,), {"on_batch_end": lambda self, t, loss: lrs.append(t.lr)})())
    trainer.fit(lambda epoch: blocks(0) * 5, epochs=1)
    assert budget.steps == trainer.step == 10  # 100 s at 10 s a step, not the 50 planned
    assert lrs[-1] == pytest.approx(1e-2 * 0.1)  # the last step ran at the schedule's final rate
    assert TimeBudget(100).steps is None  # without planned steps it only stops


def test_early_stopping_restores_the_weights_of_the_best_epoch_not_the_last():
    """A validation loss that varies, scripted by hand: 3, 1, 2, 2.5 with patience 2. The best epoch is the second,
    so the fit stops after the fourth and the model ends with the weights it had after epoch 2 (here its weight is
    set to the epoch's number, so the restored weight must read 2, not 4)."""
    from types import SimpleNamespace

    model = nn.Linear(1, 1, bias=False)
    trainer = SimpleNamespace(model=model, epoch=0, stop_training=False)
    stopper = EarlyStopping(patience=2)
    stopper.on_fit_begin(trainer)
    for epoch, valid_loss in enumerate([3.0, 1.0, 2.0, 2.5, 0.5], start=1):
        with torch.no_grad():
            model.weight.fill_(float(epoch))  # what this epoch's training left
        trainer.epoch = epoch
        stopper.on_epoch_end(trainer, {"valid_loss": valid_loss})
        if trainer.stop_training:
            break
    assert trainer.epoch == 4 and stopper.best_epoch == 2
    stopper.on_fit_end(trainer)
    assert model.weight.item() == 2.0
