"""Loss functions in the shape the Trainer wants: ``loss_fn(model, batch) -> BatchResult``.

Each loss calls the model it is given and needs nothing from the model's module, so training sits
above the models without importing them. Language-model losses are the mean negative log-likelihood
per target token, so ``exp(loss)`` is the perplexity:  PPL = exp(-(1/N) Σ_i log p(w_i | w_<i)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..runtime import map_tensors
from .trainer import BatchResult


def next_token_loss(model, batch) -> BatchResult:
    """For stateless LMs: ``model(x)`` returns logits ``(..., vocab)`` for targets ``y`` ``(...)``: a
    window model's ``(batch, vocab)`` for ``(batch,)`` next words (the NNLM), or ``(batch, time, vocab)``
    for ``(batch, time)``. The loss is -(1/N) Σ log P(y | x) over the N targets."""
    x, y = batch
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    return BatchResult(loss, y.numel())


def _zip_tensors(states: list, fn):
    """``fn`` applied to each group of corresponding tensors of ``states`` (equal nestings of tuples and lists)."""
    first = states[0]
    if first is None:
        return None
    if isinstance(first, torch.Tensor):
        return fn(states)
    return type(first)(_zip_tensors([s[i] for s in states], fn) for i in range(len(first)))


class StatefulLMLoss:
    """For RNN LMs trained with truncated BPTT: ``model(x, state) -> (logits, state)``.

    The hidden state flows from one window to the next (the streams are contiguous text) but is
    detached, so gradients stop at the window boundary. ``reset()`` (called by the Trainer before each
    pass) starts again from a zero state.

    ``sampled`` (a :class:`~lmlib.training.sampled_softmax.SampledSoftmax`) replaces the exact softmax while the
    model trains: the loss then calls ``model.features(x, state) -> (h, state)`` and reads the output layer
    ``model.decoder``'s weight and bias; in eval mode the loss is always the exact cross-entropy.

    ``state_batch_dim`` is where the state's tensors hold one row per stream: 1 for ``nn.LSTM``'s and the
    AWD-LSTM's ``(layers, batch, hidden)``, 0 for Transformer-XL's ``(batch, memory, d_model)`` memories. Knowing it,
    :meth:`regroup_state` moves a run's carried state to another number of processes when a checkpoint resumes
    (under DDP each rank carries the rows of its own streams).
    """

    def __init__(self, state_batch_dim: int | None = None, sampled=None):
        self.state = None
        self.state_batch_dim = state_batch_dim
        self.sampled = sampled

    def reset(self) -> None:
        self.state = None

    def state_dict(self) -> dict:
        """The carried hidden state, so a checkpoint taken between two windows resumes with it."""
        return {"state": self.state}

    def load_state_dict(self, state: dict) -> None:
        self.state = state["state"]

    def regroup_state(self, states: list[dict], rank: int, world_size: int) -> dict:
        """Rank ``rank`` of ``world_size``'s share of the state carried by ``len(states)`` ranks (their
        :meth:`state_dict`, in rank order). The ranks' rows stack to the state of the whole batch, as the ranks'
        shares stack to the global batch (:func:`~lmlib.training.distributed.shard`); that is then cut again."""
        if all(s["state"] is None for s in states):
            return {"state": None}
        dim = self.state_batch_dim
        if dim is None:
            raise ValueError("this checkpoint carries a hidden state written by another number of processes, and the "
                             "loss does not know the state's batch dimension: build it as "
                             "StatefulLMLoss(state_batch_dim=...) (1 for LSTMs, 0 for Transformer-XL memories), or "
                             f"resume with the {len(states)} process(es) that wrote it")
        whole = _zip_tensors([s["state"] for s in states], lambda ts: torch.cat(ts, dim))

        def share(t: torch.Tensor) -> torch.Tensor:
            if t.size(dim) % world_size:
                raise ValueError(f"the carried state holds {t.size(dim)} streams, which {world_size} processes "
                                 f"cannot share equally: resume with a number of processes that divides it")
            rows = t.size(dim) // world_size
            return t.narrow(dim, rank * rows, rows).clone()

        return {"state": map_tensors(whole, share)}

    def __call__(self, model, batch) -> BatchResult:
        x, y = batch
        state = map_tensors(self.state, torch.Tensor.detach)
        if self.sampled is not None and model.training:
            h, state = model.features(x, state)  # (B, T, d): the output layer's input
            out = model.decoder
            loss = self.sampled(h.reshape(-1, h.size(-1)), y.reshape(-1), out.weight, out.bias)
        else:
            logits, state = model(x, state)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        self.state = map_tensors(state, torch.Tensor.detach)
        return BatchResult(loss, y.numel())


def classification_loss(model, batch) -> BatchResult:
    """For classifiers: ``model(ids, mask)`` returns logits ``(batch, classes)`` for ``labels``."""
    logits = model(batch.ids, batch.mask)
    loss = F.cross_entropy(logits, batch.labels)
    correct = int((logits.argmax(-1) == batch.labels).sum())
    return BatchResult(loss, batch.labels.numel(), correct)


def seq2seq_loss(model, batch) -> BatchResult:
    """For translation models that return log-probabilities: ``model(src, src_mask, tgt_in) -> (logp
    (batch, T, V), attention)`` on a :class:`lmlib.text.translation.Seq2SeqBatch`. Mean negative
    log-likelihood per real target token (padding ignored), with the token accuracy."""
    logp, _ = model(batch.src, batch.src_mask, batch.tgt_in)
    mask = batch.tgt_mask
    nll = -logp.gather(-1, batch.tgt_out.unsqueeze(-1)).squeeze(-1)
    n = int(mask.sum())
    loss = (nll * mask).sum() / n
    correct = int(((logp.argmax(-1) == batch.tgt_out) & mask).sum())
    return BatchResult(loss, n, correct)


def translation_loss(model, batch) -> BatchResult:
    """For translation models that return logits: ``model(src, src_mask, tgt_in) -> (batch, T, V)`` on a
    :class:`lmlib.text.translation.Seq2SeqBatch` (the Transformer). Mean cross-entropy per real target
    token (padding ignored), with the number of tokens and how many the model predicted right."""
    return label_smoothed_loss(0.0)(model, batch)


def label_smoothed_loss(epsilon: float = 0.1):
    """:func:`translation_loss` with label smoothing ε: the target distribution puts 1 − ε on the true word
    and spreads ε over the vocabulary (Vaswani et al. 2017, §5.4: ε_ls = 0.1 "hurts perplexity ... but
    improves BLEU")."""
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon must be in [0, 1), got {epsilon}")

    def loss_fn(model, batch) -> BatchResult:
        logits = model(batch.src, batch.src_mask, batch.tgt_in)
        mask = batch.tgt_mask
        loss = F.cross_entropy(logits[mask], batch.tgt_out[mask], label_smoothing=epsilon)
        correct = int((logits.argmax(-1)[mask] == batch.tgt_out[mask]).sum())
        return BatchResult(loss, int(mask.sum()), correct)

    return loss_fn


class NegativeSamplingLoss:
    """For skip-gram with negative sampling: draws K noise words per (centre, context) pair from P_n and
    returns the mean of ``model(centres, contexts, negatives)``, the per-pair SGNS loss
    −[log σ(u_o·v_c) + Σ_k log σ(−u_k·v_c)] (Mikolov et al. 2013b, eq. 4).

    ``noise`` is P_n over the vocabulary (``(|V|,)``, summing to 1); draws come from ``generator``.
    """

    def __init__(self, noise: torch.Tensor, negative: int, generator: torch.Generator):
        if negative < 1:
            raise ValueError(f"negative (K noise words per pair) must be at least 1, got {negative}")
        self.cdf = noise.cumsum(0).float()
        self.cdf[-1] = 1.0  # guards against rounding leaving the last bucket unreachable
        self.negative, self.generator = negative, generator

    def __call__(self, model, batch) -> BatchResult:
        centres, contexts = batch
        uniform = torch.rand(len(centres) * self.negative, generator=self.generator)
        negatives = torch.searchsorted(self.cdf, uniform).view(len(centres), self.negative)
        return BatchResult(model(centres, contexts, negatives).mean(), len(centres))


def text_lm_targets(ids: torch.Tensor, extract_pos: torch.Tensor) -> torch.Tensor:
    """Next-token targets ``(batch, seq − 1)`` for the text of GPT-1 fine-tuning inputs: position t predicts token
    t + 1 for every token after ``[start]`` and before ``[extract]`` (the special tokens and the padding are not
    text, so they are -100, which ``cross_entropy`` ignores)."""
    targets = ids[:, 1:].clone()  # (B, T-1): token t+1 for position t
    position = torch.arange(1, ids.size(1), device=ids.device)  # (T-1,): the index of each target token
    targets[position[None, :] >= extract_pos[:, None]] = -100  # [extract] and the padding after it
    return targets


def gpt_finetune_loss(lam: float = 0.5):
    """GPT-1's fine-tuning objective (Radford et al. 2018, eq. 5) for a classifier that returns ``(logits, hidden)``
    and has ``lm_logits(hidden)`` (:class:`lmlib.models.gpt_finetune.GPTClassifier`):

        L_3(C) = L_2(C) + λ · L_1(C)

    L_2 is the task's cross-entropy, L_1 the language-modelling loss on the same inputs' text (the mean next-token
    NLL, :func:`text_lm_targets`). The paper uses λ = 0.5; λ = 0 is plain fine-tuning (and skips the output layer).
    Reported accuracy is the task's."""
    if not lam >= 0:
        raise ValueError(f"lambda (the auxiliary LM loss weight) must be >= 0, got {lam}")

    def loss_fn(model, batch) -> BatchResult:
        out = model(batch.ids, batch.extract_pos, batch.pairs)
        loss = F.cross_entropy(out.logits, batch.labels)  # L_2
        if lam > 0:
            lm_logits = model.lm_logits(out.hidden[:, :-1])  # (B, T-1, V)
            loss = loss + lam * F.cross_entropy(lm_logits.flatten(0, 1),  # + λ·L_1
                                                text_lm_targets(batch.ids, batch.extract_pos).flatten(), ignore_index=-100)
        correct = int((out.logits.argmax(-1) == batch.labels).sum())
        return BatchResult(loss, batch.labels.numel(), correct)

    return loss_fn
