from pathlib import Path

import pytest
import torch
from torch import nn

from lmlib.runtime import atomic_write, eval_mode
from lmlib.training.trainer import Trainer, evaluate


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_it_found(training):
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    with eval_mode(model) as inside:
        assert inside is model and not model.training and not model[1].training
    assert model.training is training and model[1].training is training


def test_eval_mode_restores_after_an_error():
    model = nn.Linear(2, 2).train()
    with pytest.raises(RuntimeError), eval_mode(model):
        raise RuntimeError("boom")
    assert model.training


def test_evaluate_needs_no_optimizer_and_matches_the_trainer():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.3))
    batches = [(torch.randn(5, 3), torch.randint(0, 4, (5,))) for _ in range(3)]

    def loss_fn(m, batch):
        x, y = batch
        return nn.functional.cross_entropy(m(x), y)

    alone = evaluate(model, loss_fn, batches)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loss_fn, device="cpu")
    assert trainer.evaluate(batches) == alone
    assert model.training
    with pytest.raises(ValueError, match="no batches"):
        evaluate(model, loss_fn, [])


def test_atomic_write_leaves_the_old_file_whole_when_the_write_fails(tmp_path):
    target = tmp_path / "deep" / "result.json"
    atomic_write(target, lambda tmp: Path(tmp).write_text("old"))
    assert target.read_text() == "old" and target.stat().st_mode & 0o777 == 0o644

    def half_then_fail(tmp):
        Path(tmp).write_text("ne")
        raise RuntimeError("killed halfway")

    with pytest.raises(RuntimeError):
        atomic_write(target, half_then_fail)
    assert target.read_text() == "old"
    assert [p.name for p in target.parent.iterdir()] == ["result.json"]  # no temporary file left behind
