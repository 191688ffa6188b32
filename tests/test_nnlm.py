"""Bengio et al. (2003) NNLM: the forward pass against the paper's formula written out by hand."""

import math

import pytest
import torch
import torch.nn.functional as F

from lmlib import Trainer
from lmlib.models.nnlm import (
    NNLM,
    NNLMConfig,
    check_inputs,
    ngram_windows,
    perplexity,
    window_batches,
)
from lmlib.training.objectives import next_token_loss


def _model(direct: bool, seed: int = 0) -> NNLM:
    torch.manual_seed(seed)
    model = NNLM(NNLMConfig(vocab_size=11, order=4, embed_size=3, hidden_size=5, direct=direct))
    if direct:  # W starts at zero; give it values so the test sees it
        with torch.no_grad():
            model.W.normal_()
    return model


@pytest.mark.parametrize("direct", [False, True])
def test_forward_equals_the_formula_by_hand(direct):
    model = _model(direct)
    context = torch.tensor([[1, 2, 3], [4, 4, 0], [10, 9, 8]])
    C, H, d, U, b = model.C.weight, model.H, model.d, model.U, model.b
    for row, words in enumerate(context):
        x = torch.cat([C[w] for w in words])  # (C(w_{t-3}), C(w_{t-2}), C(w_{t-1}))
        y = b + U @ torch.tanh(d + H @ x)
        if direct:
            y = y + model.W @ x
        torch.testing.assert_close(model(context)[row], y)


def test_lecture_form_is_the_same_network():
    """z = tanh(W x + p), y = U z + q with (W, p, U, q) = (H, d, U, b)."""
    model = _model(False)
    context = torch.tensor([[5, 6, 7]])
    x = model.features(context)
    W, p, U, q = model.H, model.d, model.U, model.b
    y = torch.tanh(x @ W.T + p) @ U.T + q
    torch.testing.assert_close(model(context), y)


def test_ngram_windows_cover_every_token_once():
    ids = [7, 8, 9, 10, 11]
    contexts, targets = ngram_windows(ids, order=3, pad_id=0)
    assert targets.tolist() == ids
    assert contexts.tolist() == [[0, 0], [0, 7], [7, 8], [8, 9], [9, 10]]


def test_perplexity_is_exp_mean_nll_over_all_tokens():
    model = _model(True)
    torch.manual_seed(1)
    stream = torch.randint(0, 11, (103,))
    contexts, targets = ngram_windows(stream, order=4, pad_id=0)
    log_probs = torch.log_softmax(model(contexts), dim=-1)
    nll = -log_probs[torch.arange(103), targets]
    expected = math.exp(nll.mean().item())
    # batch_size 10 leaves a ragged last batch: the mean must still weight each token once
    assert perplexity(model, contexts, targets, batch_size=10) == pytest.approx(expected, rel=1e-5)


def test_trainer_learns_a_deterministic_sequence():
    torch.manual_seed(0)
    stream = torch.tensor([1, 2, 3, 4, 5, 6] * 40)
    contexts, targets = ngram_windows(stream, order=3, pad_id=0)
    model = NNLM(NNLMConfig(vocab_size=7, order=3, embed_size=4, hidden_size=16))
    before = perplexity(model, contexts, targets)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=0.05), next_token_loss, device="cpu")
    trainer.fit(lambda e: window_batches(contexts, targets, 32, torch.Generator().manual_seed(e)), epochs=15)
    after = perplexity(model, contexts, targets)
    assert before > 5 and after < 1.2
    assert trainer.evaluate(window_batches(contexts, targets, 50)).perplexity == pytest.approx(after, rel=1e-4)


def test_loss_is_cross_entropy():
    model = _model(False)
    x, y = torch.tensor([[1, 2, 3], [3, 2, 1]]), torch.tensor([4, 5])
    assert next_token_loss(model, (x, y)).loss.item() == pytest.approx(F.cross_entropy(model(x), y).item())


@pytest.mark.parametrize("kwargs,message", [
    (dict(order=1), "order"), (dict(vocab_size=1), "vocab_size"), (dict(embed_size=0), "embed_size"),
    (dict(hidden_size=-3), "-3"),
])
def test_bad_config_raises(kwargs, message):
    args = dict(vocab_size=10, order=3, embed_size=2, hidden_size=2) | kwargs
    with pytest.raises(ValueError, match=message):
        NNLMConfig(**args)


def test_bad_inputs_raise():
    model = _model(False)
    check_inputs(model, torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match=r"\(1, 2\)"):
        check_inputs(model, torch.tensor([[1, 2]]))  # an order-4 model needs 3 context words
    with pytest.raises(ValueError, match="torch.float32"):
        check_inputs(model, torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\(0,\)"):
        ngram_windows([], order=3, pad_id=0)
    with pytest.raises(ValueError, match="order.*1"):
        ngram_windows([1, 2, 3], order=1, pad_id=0)
    with pytest.raises(ValueError, match="3 contexts for 4 targets"):
        window_batches(torch.zeros(3, 2, dtype=torch.long), torch.zeros(4, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="batch_size.*0"):
        window_batches(torch.zeros(3, 2, dtype=torch.long), torch.zeros(3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="targets"):
        perplexity(model, torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, dtype=torch.long))
