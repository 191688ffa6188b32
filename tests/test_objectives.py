"""The losses against their definitions: per-token means over real targets, label smoothing, noise draws."""

import pytest
import torch
import torch.nn.functional as F

from lmlib.text.translation import Seq2SeqBatch
from lmlib.training.objectives import (
    NegativeSamplingLoss,
    label_smoothed_loss,
    next_token_loss,
    seq2seq_loss,
    translation_loss,
)


def _batch(seed=0, batch=3, T=4, V=7):
    g = torch.Generator().manual_seed(seed)
    tgt_out = torch.randint(1, V, (batch, T), generator=g)
    mask = torch.tensor([[True] * T, [True] * 2 + [False] * (T - 2), [True] + [False] * (T - 1)])
    return Seq2SeqBatch(torch.zeros(batch, 2, dtype=torch.long), torch.ones(batch, 2, dtype=torch.bool),
                        torch.zeros(batch, T, dtype=torch.long), tgt_out.masked_fill(~mask, 0), mask)


def test_translation_losses_average_over_real_target_tokens_only():
    b = _batch()
    logits = torch.randn(3, 4, 7, generator=torch.Generator().manual_seed(1))
    real = [(i, t) for i in range(3) for t in range(4) if b.tgt_mask[i, t]]
    by_hand = sum(-F.log_softmax(logits[i, t], -1)[b.tgt_out[i, t]] for i, t in real) / len(real)
    result = translation_loss(lambda src, src_mask, tgt_in: logits, b)
    assert result.loss.item() == pytest.approx(by_hand.item(), rel=1e-6) and result.n == len(real) == 7
    logp = F.log_softmax(logits, -1)
    assert seq2seq_loss(lambda src, src_mask, tgt_in: (logp, None), b).loss.item() == pytest.approx(by_hand.item(), rel=1e-6)
    smoothed = label_smoothed_loss(0.1)(lambda *a: logits, b).loss
    flat = torch.stack([logits[i, t] for i, t in real])
    expected = 0.9 * by_hand + 0.1 * (-F.log_softmax(flat, -1).mean(-1)).mean()
    assert smoothed.item() == pytest.approx(expected.item(), rel=1e-6)
    with pytest.raises(ValueError, match="epsilon"):
        label_smoothed_loss(1.0)


def test_next_token_loss_takes_windows_or_sequences():
    logits = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 5, 2, 2])
    result = next_token_loss(lambda x: logits, (None, y))
    assert result.loss.item() == pytest.approx(F.cross_entropy(logits, y).item()) and result.n == 4
    assert next_token_loss(lambda x: logits.view(2, 2, 6), (None, y.view(2, 2))).loss.item() == pytest.approx(result.loss.item())


def test_negative_sampling_draws_k_noise_words_from_the_noise_distribution():
    seen = {}

    def model(centres, contexts, negatives):
        seen["negatives"] = negatives
        return torch.ones(len(centres))

    noise = torch.tensor([0.0, 0.0, 1.0, 0.0])  # all the mass on word 2
    loss = NegativeSamplingLoss(noise, negative=3, generator=torch.Generator().manual_seed(0))
    result = loss(model, (torch.tensor([0, 1]), torch.tensor([1, 3])))
    assert result.n == 2 and result.loss.item() == 1.0
    assert seen["negatives"].shape == (2, 3) and (seen["negatives"] == 2).all()
    with pytest.raises(ValueError, match="negative"):
        NegativeSamplingLoss(noise, negative=0, generator=torch.Generator())
