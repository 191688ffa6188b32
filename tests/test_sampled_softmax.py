"""The sampled softmax (lmlib.training.sampled_softmax) against the exact cross-entropy it approximates, a hand
computation of its formula, and a tiny LM trained each way."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lmlib.models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
from lmlib.models.elmo import BiLM, BiLMConfig, encode_sentences
from lmlib.text.batching import batchify, bptt_batches
from lmlib.training.objectives import StatefulLMLoss
from lmlib.training.sampled_softmax import (
    SampledSoftmax,
    log_uniform_proposal,
    sampled_softmax_loss,
    unigram_proposal,
)
from lmlib.training.trainer import Trainer, evaluate


def every_class(vocab_size: int):
    """A 'sample' that is every class once, under a uniform proposal: K·Q = 1, so no correction."""
    negatives = torch.arange(vocab_size)
    log_q = torch.full((vocab_size,), -math.log(vocab_size))
    return lambda h, t, w, b: sampled_softmax_loss(h, t, w, b, negatives, log_q)


def test_with_every_class_sampled_it_is_the_full_cross_entropy_and_its_gradient():
    g = torch.Generator().manual_seed(0)
    V, d, N = 50, 8, 30
    h = torch.randn(N, d, generator=g, requires_grad=True)
    w = torch.randn(V, d, generator=g, requires_grad=True)
    b = torch.randn(V, generator=g, requires_grad=True)
    y = torch.randint(0, V, (N,), generator=g)
    sampled = every_class(V)(h, y, w, b)
    exact = F.cross_entropy(h @ w.t() + b, y)
    torch.testing.assert_close(sampled, exact)
    grads = torch.autograd.grad(sampled, (h, w, b))
    expected = torch.autograd.grad(exact, (h, w, b))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_the_loss_is_the_formula_of_jean_et_al_computed_by_hand():
    """õ_w = o_w − log(K·Q(w)); loss = −õ_y + log(exp õ_y + Σ_{s ≠ y} exp õ_s), draws equal to y left out, repeats
    kept (a word drawn twice counts twice)."""
    g = torch.Generator().manual_seed(1)
    V, d = 7, 3
    h, w, b = torch.randn(2, d, generator=g), torch.randn(V, d, generator=g), torch.randn(V, generator=g)
    q = torch.rand(V, generator=g) + 0.1
    q = q / q.sum()
    y = torch.tensor([2, 5])
    negatives = torch.tensor([2, 4, 4, 0])  # row 0's target drawn once (an accidental hit), 4 drawn twice
    K = 4
    expected = []
    for i in range(2):
        corrected = lambda v, i=i: float(h[i] @ w[v] + b[v]) - math.log(K * float(q[v]))  # noqa: E731
        terms = [math.exp(corrected(int(y[i])))] + [math.exp(corrected(int(s))) for s in negatives if s != y[i]]
        expected.append(-corrected(int(y[i])) + math.log(sum(terms)))
    got = sampled_softmax_loss(h, y, w, b, negatives, q.log())
    assert got.item() == pytest.approx(sum(expected) / 2, rel=1e-5)


def test_targets_marked_ignore_index_take_no_part():
    g = torch.Generator().manual_seed(2)
    V, d = 20, 4
    h, w, b = torch.randn(6, d, generator=g), torch.randn(V, d, generator=g), torch.randn(V, generator=g)
    y = torch.tensor([1, -100, 3, -100, 5, 7])
    keep = y != -100
    torch.testing.assert_close(every_class(V)(h, y, w, b), F.cross_entropy(h[keep] @ w.t() + b, y[keep]))


def test_proposals_are_distributions_and_follow_their_definitions():
    counts = torch.tensor([9.0, 3.0, 0.0, 1.0])
    q = unigram_proposal(counts, power=1.0)
    torch.testing.assert_close(q, torch.tensor([9.0, 3.0, 1.0, 1.0]) / 14)  # an unseen word counts as one
    torch.testing.assert_close(unigram_proposal(counts, 0.5), torch.tensor([3.0, 3 ** 0.5, 1, 1]) / (5 + 3 ** 0.5))
    z = log_uniform_proposal(1000)
    assert z.sum().item() == pytest.approx(1.0, abs=1e-5)
    assert z[0].item() == pytest.approx(math.log(2) / math.log(1001))
    assert (z[1:] < z[:-1]).all()


@pytest.mark.parametrize("proposal, k", [(torch.tensor([0.5, 0.6]), 4), (torch.tensor([1.0, 0.0]), 4),
                                         (torch.tensor([0.5, 0.5]), 0)])
def test_a_bad_proposal_or_sample_size_is_refused(proposal, k):
    with pytest.raises(ValueError):
        SampledSoftmax(proposal, k)


def test_draws_come_from_the_global_generator_so_a_seed_repeats_them():
    sampler = SampledSoftmax(unigram_proposal(torch.arange(1.0, 101.0)), 16)
    h, w, b, y = torch.randn(5, 3), torch.randn(100, 3), torch.zeros(100), torch.randint(0, 100, (5,))
    torch.manual_seed(3)
    first = sampler(h, y, w, b)
    torch.manual_seed(3)
    assert sampler(h, y, w, b).item() == first.item()


def tiny_lm(vocab_size: int) -> AWDLSTMLanguageModel:
    torch.manual_seed(0)
    return AWDLSTMLanguageModel(AWDLSTMConfig(vocab_size=vocab_size, embed_size=16, hidden_size=32, num_layers=2,
                                              embed_p=0.0, input_p=0.0, hidden_p=0.0, weight_p=0.0, output_p=0.0))


def test_the_lm_loss_is_exact_in_eval_mode_and_sampled_in_training():
    model = tiny_lm(40)
    x, y = torch.randint(0, 40, (3, 5)), torch.randint(0, 40, (3, 5))
    exact = StatefulLMLoss()(model.eval(), (x, y)).loss
    sampled = StatefulLMLoss(sampled=SampledSoftmax(torch.full((40,), 1 / 40), 8))
    assert sampled(model, (x, y)).loss.item() == exact.item()  # eval mode: the exact softmax
    model.train()
    assert sampled(model, (x, y)).loss.item() != pytest.approx(exact.item(), rel=1e-3)
    everything = StatefulLMLoss(sampled=every_class(40))  # and its sampled path computes the same loss
    assert everything(model, (x, y)).loss.item() == pytest.approx(exact.item(), rel=1e-5)


def test_the_bilm_with_every_class_sampled_gives_its_exact_nll():
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=30, embed_size=8, hidden_size=16, num_layers=2, dropout=0.0,
                           char_embed_size=4, filters=((1, 4), (2, 4)), num_highway=1, max_chars=10))
    chars = encode_sentences([["a", "cat", "sat"], ["dogs", "run"]], 10)
    words = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 9, 3, 0]])
    exact = bilm.nll(chars, words)
    sampled = bilm.nll(chars, words, sampled=every_class(30))
    for got, want in zip(sampled, exact):
        assert got.item() == pytest.approx(want.item(), rel=1e-5)


class TinyLM(torch.nn.Module):
    """Embedding, one nn.LSTM, an output layer: what StatefulLMLoss needs (``features``, ``decoder``)."""

    def __init__(self, vocab_size: int, size: int = 32):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, size)
        self.lstm = torch.nn.LSTM(size, size, batch_first=True)
        self.decoder = torch.nn.Linear(size, vocab_size)

    def features(self, ids, state=None):
        return self.lstm(self.embedding(ids), state)

    def forward(self, ids, state=None):
        h, state = self.features(ids, state)
        return self.decoder(h), state


def test_a_tiny_lm_trained_with_the_sampled_softmax_reaches_the_held_out_perplexity_of_the_exact_one(one_thread):
    """Same text, model, seed and steps; 64 draws over 200 words per step. Held-out perplexity (exact) within 5%."""
    g = torch.Generator().manual_seed(0)
    V = 200
    successors = torch.randint(0, V, (V, 2), generator=g)  # a text to learn: each word has two likely successors
    ids = [0]
    for _ in range(10_000):
        ids.append(int(successors[ids[-1], torch.randint(0, 2, (1,), generator=g)]) if torch.rand(1, generator=g) < 0.8
                   else int(torch.randint(0, V, (1,), generator=g)))
    ids = torch.tensor(ids)
    train, held = ids[:8_000], ids[8_000:]
    counts = torch.bincount(train, minlength=V)
    ppl = {}
    for name, sampled in (("exact", None), ("sampled", SampledSoftmax(unigram_proposal(counts), 64))):
        torch.manual_seed(0)
        model = TinyLM(V)
        trainer = Trainer(model, torch.optim.Adam(model.parameters(), 1e-2), StatefulLMLoss(sampled=sampled))
        trainer.fit(list(bptt_batches(batchify(train, 8), 10)), epochs=4)
        ppl[name] = evaluate(model, StatefulLMLoss(), bptt_batches(batchify(held, 8), 10)).perplexity
    assert ppl["exact"] < V / 10  # it learned the successors
    assert abs(ppl["sampled"] / ppl["exact"] - 1) < 0.05, ppl
