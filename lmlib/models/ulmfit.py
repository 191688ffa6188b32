"""ULMFiT's model: Howard & Ruder (2018), "Universal Language Model Fine-tuning for Text Classification".

ULMFiT reuses the AWD-LSTM language model (Merity, Keskar & Socher 2018; :mod:`lmlib.models.awd_lstm`,
notebook 06) in three stages: (a) pretraining it on a general corpus, (b) fine-tuning it on the target
task's text, (c) fine-tuning a classifier built on its encoder. This module holds what the stages add
to the model:

* the vocabulary extension of stage (b): words of the target text that the general vocabulary lacks
  get new rows initialised with the mean embedding (:func:`extend_vocab`, :func:`grow_vocab`);
* the classifier of stage (c): the encoder under a new head, concat pooling
  h_c = [h_T, maxpool(H), meanpool(H)] (:func:`concat_pool`), then
  BatchNorm → Dropout → Linear → ReLU → BatchNorm → Dropout → Linear (:class:`PoolingClassifierHead`);
  a whole document is read through BPT3C (:func:`bpt3c`).

Training them (STLR, discriminative rates, gradual unfreezing, the shipped pretrained checkpoint and the
labelled-examples experiment) is the recipe :mod:`lmlib.recipes.ulmfit`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch
from torch import nn

from ..text.vocab import PAD, Vocab
from .awd_lstm import AWDLSTMConfig, AWDLSTMEncoder, AWDLSTMLanguageModel
from .awd_lstm import check_inputs as check_encoder_inputs
from .config_checks import check_positive_ints, check_probability


def extend_vocab(model: AWDLSTMLanguageModel, vocab: Vocab, texts: Sequence[Sequence[str]], min_freq: int = 2,
                 max_new: int | None = None) -> tuple[AWDLSTMLanguageModel, Vocab]:
    """Add the target texts' frequent new words to ``vocab`` and ``model`` (Howard & Ruder 2018, sec. 3.2).

    Words seen fewer than ``min_freq`` times stay ``<unk>``; at most ``max_new`` (most frequent first) are
    added, each as :func:`grow_vocab` adds it. Returns a new model and vocabulary; the inputs are not modified.
    """
    if min_freq < 1:
        raise ValueError(f"min_freq must be at least 1, got {min_freq}")
    counts = Counter(tok for text in texts for tok in text)
    new_words = sorted((w for w, c in counts.items() if c >= min_freq and w not in vocab), key=lambda w: (-counts[w], w))
    return grow_vocab(model, vocab, new_words[:max_new], counts)


def grow_vocab(model: AWDLSTMLanguageModel, vocab: Vocab, new_words: Sequence[str],
               counts: Counter | None = None) -> tuple[AWDLSTMLanguageModel, Vocab]:
    """``vocab`` and ``model`` with ``new_words`` appended, in that order. Known words keep their pretrained rows;
    each new word's embedding row is the mean of the pretrained rows (and its decoder bias the mean bias), so
    a new word starts as an "average word" rather than noise. ``counts`` (optional) are the new words' counts,
    kept in the vocabulary. Returns a new model and vocabulary; the inputs are not modified."""
    clash = [w for w in new_words if w in vocab]
    if clash or len(set(new_words)) != len(new_words):
        raise ValueError(f"new_words must be new and distinct; already known or repeated: {(clash or list(new_words))[:5]}")
    counts = counts or Counter()
    new_vocab = Vocab.from_itos(vocab.itos + list(new_words), vocab.unk,
                                Counter(vocab.counts) + Counter({w: counts[w] for w in new_words}))
    config = AWDLSTMConfig(**{**model.config.__dict__, "vocab_size": len(new_vocab)})
    new_model = AWDLSTMLanguageModel(config)
    state = model.state_dict()
    old_emb, old_bias = state["encoder.embedding.weight"], state["decoder.bias"]
    keep = [i for i, t in enumerate(vocab.itos) if t != PAD] if PAD in vocab else list(range(len(vocab)))
    emb = torch.cat([old_emb, old_emb[keep].mean(0, keepdim=True).expand(len(new_words), -1)])
    bias = torch.cat([old_bias, old_bias[keep].mean().expand(len(new_words))])
    state = {**state, "encoder.embedding.weight": emb, "decoder.bias": bias}
    if config.tie_weights:
        state["decoder.weight"] = emb
    new_model.load_state_dict(state)
    return new_model, new_vocab


def concat_pool(H: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Concat pooling (Howard & Ruder 2018, sec. 3.3) of hidden states H ``(batch, time, d)``:

        h_c = [h_T, maxpool(H), meanpool(H)]   -> ``(batch, 3d)``

    padding-aware: ``mask`` ``(batch, time)`` is True at real tokens; h_T is each sequence's last real
    token, and padded positions take part in neither the max nor the mean.
    """
    mask = mask.bool()  # (batch, time)
    lengths = mask.sum(1)  # (batch,): real tokens per row
    # index of the last True per row (right padding is not assumed)
    positions = torch.arange(H.size(1), device=H.device).expand_as(mask)
    last = torch.where(mask, positions, -1).max(1).values
    h_last = H[torch.arange(H.size(0), device=H.device), last]
    h_max = H.masked_fill(~mask[..., None], float("-inf")).max(1).values
    h_mean = (H * mask[..., None]).sum(1) / lengths[:, None].to(H.dtype)
    return torch.cat([h_last, h_max, h_mean], dim=1)


class PoolingClassifierHead(nn.Module):
    """BatchNorm → Dropout → Linear → ReLU → BatchNorm → Dropout → Linear on h_c ``(batch, 3d)`` -> logits.

    The paper's two blocks (sec. 3.3); ``p1``/``p2`` are the two dropout probabilities, ``hidden`` the
    width of the intermediate layer (50 in the paper).
    """

    def __init__(self, in_features: int, n_classes: int, hidden: int = 50, p1: float = 0.2, p2: float = 0.1):
        super().__init__()
        self.in_features, self.n_classes, self.hidden = in_features, n_classes, hidden
        check_positive_ints(self, ("in_features", "n_classes", "hidden"))
        check_probability(p1, "p1")
        check_probability(p2, "p2")
        self.layers = nn.Sequential(
            nn.BatchNorm1d(in_features), nn.Dropout(p1), nn.Linear(in_features, hidden), nn.ReLU(),
            nn.BatchNorm1d(hidden), nn.Dropout(p2), nn.Linear(hidden, n_classes),
        )

    def forward(self, h_c: torch.Tensor) -> torch.Tensor:
        return self.layers(h_c)


def bpt3c(encoder: AWDLSTMEncoder, ids: torch.Tensor, bptt: int) -> torch.Tensor:
    """Backpropagation through time for text classification (BPT3C; Howard & Ruder 2018, sec. 3.3): "We divide the
    document into fixed-length batches of size b. At the beginning of each batch, the model is initialized with the
    final state of the previous batch; we keep track of the hidden states for mean and max-pooling; gradients are
    back-propagated to the batches whose hidden states contributed to the final prediction."

    ``ids`` ``(batch, time)`` is read ``bptt`` tokens at a time, each piece starting from the previous piece's final
    (h, c); that state is detached, so a gradient flows back within each piece only, as in truncated BPTT, while the
    forward values are those of one pass over the whole document. Every piece's hidden states are pooled, so every
    piece gets gradients. Returns the last layer's outputs for all of ``ids``, ``(batch, time, d)``.
    """
    state, pieces = None, []
    for start in range(0, ids.size(1), bptt):
        outputs, _, state = encoder(ids[:, start:start + bptt], state)  # outputs[-1]: (batch, ≤ bptt, d)
        state = [(h.detach(), c.detach()) for h, c in state]  # the next piece starts here, no gradient across
        pieces.append(outputs[-1])
    return torch.cat(pieces, dim=1)


class ULMFiTClassifier(nn.Module):
    """AWD-LSTM encoder + concat pooling + head: ``model(ids, mask) -> logits (batch, n_classes)``.

    With ``bptt`` set, a text longer than ``bptt`` tokens is read through :func:`bpt3c` (pieces of ``bptt`` tokens,
    the state carried); ``None`` reads it in one pass, gradients through every step."""

    def __init__(self, encoder: AWDLSTMEncoder, n_classes: int, hidden: int = 50, p1: float = 0.2, p2: float = 0.1,
                 bptt: int | None = None):
        super().__init__()
        if bptt is not None and (isinstance(bptt, bool) or not isinstance(bptt, int) or bptt < 1):
            raise ValueError(f"bptt must be a whole number of tokens >= 1 (or None for one pass), got {bptt!r}")
        self.encoder, self.bptt = encoder, bptt
        self.head = PoolingClassifierHead(3 * encoder.config.layer_sizes()[-1][1], n_classes, hidden, p1, p2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.bptt is not None and ids.size(1) > self.bptt:
            H = bpt3c(self.encoder, ids, self.bptt)  # (batch, time, d)
        else:
            H = self.encoder(ids)[0][-1]  # last layer after output dropout: (batch, time, d)
        return self.head(concat_pool(H, mask))

    def layer_groups(self) -> list[nn.Module]:
        """Lowest first: embedding, LSTM 1..L, head — the units of discriminative rates and unfreezing."""
        return [*self.encoder.layer_groups(), self.head]


def check_inputs(model: ULMFiTClassifier, ids: torch.Tensor, mask: torch.Tensor) -> None:
    """Refuse a batch the classifier would misread, saying what to do: the encoder's checks on ``ids``, ``mask``
    shaped like them and at least one real token per row (concat pooling over no tokens is undefined)."""
    check_encoder_inputs(model.encoder, ids)
    if mask.shape != ids.shape:
        raise ValueError(f"ids {tuple(ids.shape)} and mask {tuple(mask.shape)} must both be (batch, time)")
    empty = mask.bool().sum(1) == 0
    if empty.any():
        raise ValueError(f"rows {empty.nonzero().flatten().tolist()[:5]} of the batch have no real tokens; drop "
                         f"empty texts before batching")
