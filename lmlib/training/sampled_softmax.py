"""The sampled softmax: a language model's training loss without the full output layer.

Jean, Cho, Memisevic & Bengio (2015), "On Using Very Large Target Vocabulary for Neural Machine Translation", after
Bengio & Senécal (2008); the biLM of ELMo (Peters et al. 2018) trained with one, following Jozefowicz et al. (2016),
"Exploring the Limits of Language Modeling".

The exact loss of a next-word softmax needs every word's logit o_w = h·E_w + b_w, a ``(tokens, |V|)`` matrix, in the
forward and again in the backward pass: for a small LSTM that output layer is most of a training step. The sampled
softmax replaces the sum over V by one over the target and K words drawn from a proposal Q, each logit corrected by
the log of its expected number of draws:

    õ_w = o_w − log(K · Q(w))
    loss(y) = −õ_y + log( exp(õ_y) + Σ_{s ∈ S, s ≠ y} exp(õ_s) ),     S = K draws from Q (with replacement)

which is the cross-entropy of a softmax over {y} ∪ S. A draw that equals the target (an "accidental hit") is left
out of that row's sum, so with S = every word once and Q uniform (K·Q = 1) the loss *is* the full cross-entropy.
The K negatives are shared by every token of the batch (one ``(tokens, K)`` matrix), and the target's logit is a
row-wise dot product h_i·E_{y_i}, so no ``(tokens, |V|)`` matrix is ever formed. Training only: perplexity is always
measured with the exact softmax.
"""

from __future__ import annotations

import math

import torch


def unigram_proposal(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """Q(w) ∝ count(w)^power ``(|V|,)``, summing to 1; words never seen get the probability of a word seen once, so
    every word can be drawn. ``power`` < 1 flattens the unigram (Mikolov et al. 2013 use 0.75 for their noise)."""
    counts = counts.double().clamp(min=1.0)
    q = counts.pow(power)
    return (q / q.sum()).float()


def log_uniform_proposal(vocab_size: int) -> torch.Tensor:
    """Zipf's law as a proposal, for a vocabulary sorted by frequency (id 0 the most frequent):
    Q(w) = log((w + 2) / (w + 1)) / log(|V| + 1), the log-uniform sampler of Jozefowicz et al. (2016)."""
    w = torch.arange(vocab_size, dtype=torch.float64)
    return (torch.log((w + 2) / (w + 1)) / math.log(vocab_size + 1)).float()


def sampled_softmax_loss(h: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                         negatives: torch.Tensor, log_q: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean sampled-softmax loss over the tokens whose target is not ``ignore_index`` (see the module docstring).

    ``h`` ``(N, d)`` the hidden states under the output layer, ``targets`` ``(N,)``, ``weight`` ``(|V|, d)`` and
    ``bias`` ``(|V|,)`` the output layer's, ``negatives`` ``(K,)`` the shared draws, ``log_q`` ``(|V|,)`` log Q.
    """
    keep = targets != ignore_index
    h, targets = h[keep], targets[keep]  # (N', d), (N',)
    k = negatives.numel()
    correction = log_q + math.log(k)  # log(K · Q(w)): (|V|,)
    target_logit = (h * weight[targets]).sum(-1) - correction[targets]  # õ_y = h_i·E_{y_i} + b − log KQ: (N',)
    sampled_logit = h @ weight[negatives].t() - correction[negatives]  # õ_s for every row: (N', K)
    if bias is not None:
        target_logit = target_logit + bias[targets]
        sampled_logit = sampled_logit + bias[negatives]
    hits = negatives[None, :] == targets[:, None]  # accidental hits: (N', K)
    sampled_logit = sampled_logit.masked_fill(hits, float("-inf"))
    logits = torch.cat([target_logit[:, None], sampled_logit], dim=1)  # the target in column 0: (N', 1 + K)
    return (torch.logsumexp(logits, dim=1) - target_logit).mean()


class SampledSoftmax:
    """``sampled(h, targets, weight, bias)``: :func:`sampled_softmax_loss` with ``num_samples`` fresh negatives drawn
    from ``proposal`` (``(|V|,)``, e.g. :func:`unigram_proposal`) at each call, from torch's global generator (so a
    checkpoint that saves it resumes the same draws)."""

    def __init__(self, proposal: torch.Tensor, num_samples: int):
        if num_samples < 1:
            raise ValueError(f"num_samples must be at least 1, got {num_samples}")
        if proposal.dim() != 1 or not torch.isclose(proposal.double().sum(), torch.tensor(1.0, dtype=torch.float64),
                                                     atol=1e-4) or (proposal <= 0).any():
            raise ValueError("proposal must be a (vocab_size,) vector of positive probabilities summing to 1")
        self.proposal, self.num_samples = proposal.float(), num_samples
        self.log_q = self.proposal.log()

    def to(self, device) -> SampledSoftmax:
        self.proposal, self.log_q = self.proposal.to(device), self.log_q.to(device)
        return self

    def __call__(self, h: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor,
                 bias: torch.Tensor | None) -> torch.Tensor:
        if self.proposal.device != h.device:
            self.to(h.device)
        negatives = torch.multinomial(self.proposal, self.num_samples, replacement=True)  # S: (K,)
        return sampled_softmax_loss(h, targets, weight, bias, negatives, self.log_q)


__all__ = ["unigram_proposal", "log_uniform_proposal", "sampled_softmax_loss", "SampledSoftmax"]
