import pytest
import torch
from torch import nn

from lmlib.runtime import eval_mode
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
