"""BERT: a bidirectional Transformer encoder pre-trained on masked words and sentence pairs (Devlin et al. 2019,
"BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"), built on the encoder of
Vaswani et al. 2017, "Attention Is All You Need".

The input is one or two segments packed into one sequence, ``[CLS] A [SEP] B [SEP]``. "The input embeddings are
the sum of the token embeddings, the segmentation embeddings and the position embeddings" (§3, Figure 2):

    h_0 = LayerNorm(E_tok[x_t] + E_seg[s_t] + E_pos[t])          then dropout

A stack of L post-norm encoder layers follows (Vaswani et al. §3.1, "LayerNorm(x + Sublayer(x))"), with
every position attending to every other real (non-padding) position, left and right:

    a_l = LayerNorm(h_{l−1} + Dropout(MultiHead(h_{l−1}, h_{l−1}, h_{l−1})))
    h_l = LayerNorm(a_l + Dropout(GELU(a_l W_1 + b_1) W_2 + b_2))

Two pre-training heads read the last layer h_L (§3.1):

* masked LM: the final hidden vector of a masked position goes through a dense layer, GELU and LayerNorm, then
  "an output softmax over the vocabulary" whose weights are the token embeddings (tied) plus an own bias;
* next sentence prediction (NSP): "C ∈ R^H", the pooled [CLS] vector tanh(h_L[CLS] W_p + b_p), then a 2-way
  classifier. Class 0 is "IsNext" (B follows A in the text), class 1 "NotNext", as in the released checkpoints.

The attention is lmlib's :class:`~lmlib.models.multihead.MultiHeadAttention`: it has BERT's four projections
(query, key, value, output, each with a bias) and a key padding mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config_checks import check_heads, check_positive_ints, check_probability, check_token_ids
from .multihead import MultiHeadAttention
from .state_dicts import check_hf_model, check_state_dict, copy_hf_weights, hf_from_pretrained, hf_key, normal_init


@dataclass
class BertConfig:
    """Sizes of a BERT. The defaults are BERT-base (L=12, H=768, A=12, 110M parameters, §3); BERT-large is
    ``num_layers=24, d_model=1024, num_heads=16``.

    ``block_size`` is the size of the position table (512 in the paper): the longest input, [CLS] and [SEP]s
    included. ``type_vocab_size`` is the number of segments (2: sentence A and sentence B). ``d_ff`` (the
    feed-forward inner width) defaults to 4·d_model. ``dropout`` is used on the embeddings and on each
    sub-layer's output; ``attention_dropout`` on the attention weights (defaults to ``dropout``; both 0.1 in
    the paper). ``pad_id`` is the [PAD] token: its embedding starts at zero and gets no gradient, as in the
    released code (None: no such token).

    ``pooler``, ``mlm_head`` and ``nsp_head`` say which parts on top of the encoder exist: all three for
    pre-training (``BertForPreTraining``), only the MLM head for ``BertForMaskedLM``, only the pooler for
    ``BertModel``. The NSP head reads the pooler's output, so it needs the pooler.
    """

    vocab_size: int = 30522
    block_size: int = 512
    type_vocab_size: int = 2
    num_layers: int = 12
    num_heads: int = 12
    d_model: int = 768
    d_ff: int | None = None
    dropout: float = 0.1
    attention_dropout: float | None = None
    layer_norm_eps: float = 1e-12
    pad_id: int | None = 0
    pooler: bool = True
    mlm_head: bool = True
    nsp_head: bool = True

    def __post_init__(self):
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        if self.attention_dropout is None:
            self.attention_dropout = self.dropout
        check_positive_ints(self, ("vocab_size", "block_size", "type_vocab_size", "num_layers", "num_heads", "d_model",
                                   "d_ff"))
        check_heads(self.d_model, self.num_heads)
        check_probability(self.dropout, "dropout")
        check_probability(self.attention_dropout, "attention_dropout")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be positive (BERT uses 1e-12), got {self.layer_norm_eps}")
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is not an id of the vocabulary (0..{self.vocab_size - 1}); "
                             f"take it from the tokenizer (token_to_id('[PAD]')) or pass pad_id=None")
        if self.nsp_head and not self.pooler:
            raise ValueError("nsp_head=True needs pooler=True: next sentence prediction classifies the pooled "
                             "[CLS] vector")


class EncoderLayer(nn.Module):
    """One post-norm Transformer encoder layer (Vaswani et al. §3.1; BERT uses it unchanged, with GELU):

        a = LayerNorm(h + Dropout(MultiHead(h, h, h)))
        h' = LayerNorm(a + Dropout(FFN(a))),      FFN(a) = GELU(a W_1 + b_1) W_2 + b_2

    GELU is the exact x·Φ(x) (Hendrycks & Gimpel 2016), Φ the standard normal CDF, written with erf;
    BERT's released checkpoints were trained with it (the tanh approximation is GPT's).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attn = MultiHeadAttention(config.d_model, config.num_heads, dropout=config.attention_dropout)
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.fc = nn.Linear(config.d_model, config.d_ff)
        self.proj = nn.Linear(config.d_ff, config.d_model)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, h: torch.Tensor, padding_mask: torch.Tensor | None = None, need_weights: bool = False):
        a, weights = self.attn(h, h, h, key_padding_mask=padding_mask, need_weights=need_weights)  # (B, T, C)
        a = self.ln_1(h + self.dropout(a))  # (B, T, C)
        f = self.proj(F.gelu(self.fc(a)))  # (B, T, C), through (B, T, d_ff)
        return self.ln_2(a + self.dropout(f)), weights  # (B, T, C); weights (B, H, T, T) or None


class MaskedLMHead(nn.Module):
    """P(x_t = w | context) = softmax(LayerNorm(GELU(h_t W_t + b_t)) E_tokᵀ + b)_w

    ``dense`` and ``norm`` are the transform; ``decoder`` holds the output layer: its weight is the token
    embedding E_tok (tied by :class:`Bert`), its bias b is the head's own.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        t = self.norm(F.gelu(self.dense(h)))  # (B, T, C)
        return self.decoder(t)  # (B, T, V): logits before the softmax


@dataclass
class BertOutput:
    """What :class:`Bert` returns. Heads the model lacks (see :class:`BertConfig`) give None.

    ``mlm_logits`` (batch, seq, vocab), or (N, vocab) with ``masked_positions``; ``nsp_logits`` (batch, 2),
    class 0 = IsNext; ``pooled`` (batch, d_model), the tanh-pooled [CLS] vector; ``hidden_states``: num_layers + 1
    tensors (batch, seq, d_model), the embedding output h_0 first, then each layer's h_l; ``attentions``: with
    ``return_attentions=True``, one (batch, heads, seq, seq) tensor per layer (the layout bertviz takes), else
    None.
    """

    mlm_logits: torch.Tensor | None
    nsp_logits: torch.Tensor | None
    pooled: torch.Tensor | None
    hidden_states: tuple[torch.Tensor, ...]
    attentions: tuple[torch.Tensor, ...] | None = None

    @property
    def last_hidden_state(self) -> torch.Tensor:
        """h_L, the last layer's output (batch, seq, d_model): the contextual vector of every token."""
        return self.hidden_states[-1]


class Bert(nn.Module):
    """BERT: ``out = model(input_ids, segment_ids, attention_mask)`` with (batch, seq) tensors, returning a
    :class:`BertOutput`.

    ``segment_ids`` are 0 for [CLS], A and the first [SEP], 1 for B and the last [SEP] (all 0 when omitted);
    ``attention_mask`` is 1 (or True) at real tokens and 0 at padding, as in BERT's code and ``transformers``
    (all real when omitted). No position attends to padding; the vectors computed at padded positions mean
    nothing and should be ignored.

    ``masked_positions`` (batch, seq) bool, for pre-training: run the MLM head only where it is True, so
    ``mlm_logits`` is (N, vocab) for the N selected positions, matching ``labels[masked_positions]``.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.seg_emb = nn.Embedding(config.type_vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.block_size, config.d_model)
        self.emb_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.emb_dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_layers))
        self.pooler = nn.Linear(config.d_model, config.d_model) if config.pooler else None
        self.mlm = MaskedLMHead(config) if config.mlm_head else None
        self.nsp = nn.Linear(config.d_model, 2) if config.nsp_head else None
        if self.mlm is not None:
            self.mlm.decoder.weight = self.tok_emb.weight  # tied output layer: logits = t E_tokᵀ + b
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """BERT's initialisation: weights from a normal distribution with std 0.02 (truncated in the released
        code), zero biases, LayerNorm 1/0, the [PAD] embedding zero."""
        normal_init(self)
        if self.config.pad_id is not None:
            self.tok_emb.weight[self.config.pad_id].zero_()

    def num_parameters(self) -> int:
        """Parameters counted once (the tied MLM output layer is the token embedding)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, return_attentions: bool = False,
                masked_positions: torch.Tensor | None = None) -> BertOutput:
        padding = None if attention_mask is None else attention_mask == 0  # (B, T), True = padding
        T = input_ids.size(1)
        e = self.tok_emb(input_ids) + self.pos_emb.weight[:T]  # (B, T, C): E_tok[x_t] + E_pos[t]
        e = e + (self.seg_emb(segment_ids) if segment_ids is not None else self.seg_emb.weight[0])  # + E_seg[s_t]
        h = self.emb_dropout(self.emb_norm(e))  # (B, T, C): h_0
        hidden_states, attentions = [h], []
        for layer in self.layers:
            h, weights = layer(h, padding, return_attentions)  # (B, T, C); weights (B, H, T, T) or None
            hidden_states.append(h)
            attentions.append(weights)
        pooled = torch.tanh(self.pooler(h[:, 0])) if self.pooler is not None else None  # (B, C): C = tanh(h_[CLS] W_p + b_p)
        # With masked_positions the MLM head reads only the N masked states, in the order of labels[masked_positions]:
        # the loss needs no more, and the released code gathers them too, skipping most of the (..., V) product.
        h_mlm = h if masked_positions is None else h[masked_positions]  # (B, T, C) or (N, C)
        return BertOutput(
            mlm_logits=self.mlm(h_mlm) if self.mlm is not None else None,  # (B, T, V) or (N, V)
            nsp_logits=self.nsp(pooled) if self.nsp is not None else None,  # (B, 2)
            pooled=pooled,
            hidden_states=tuple(hidden_states),
            attentions=tuple(attentions) if return_attentions else None,
        )

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``, but a checkpoint of another vocabulary or size says which setting
        differs and what to do."""
        check_state_dict(self, state_dict, strict=strict, shape_hint=_config_hint, companion="its tokenizer",
                         structure_fields="num_layers, pooler, mlm_head or nsp_head")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @classmethod
    def from_hf(cls, hf_model) -> Bert:
        """Copy a ``transformers`` ``BertForPreTraining``, ``BertForMaskedLM``, ``BertForNextSentencePrediction``
        or ``BertModel`` (any size) into a new lmlib BERT with the same parts, in eval mode.

        Every weight is listed in ``HF_BERT_NAMES``; each key and shape is checked, and no weight of the source
        may be left over. The MLM output weight must be the word embedding (tied) and its two bias entries equal.
        """
        config = _config_from_hf(hf_model)
        model = cls(config)
        source = hf_model.state_dict()
        prefix = "" if type(hf_model).__name__ == "BertModel" else "bert."
        used = copy_hf_weights(model, source, lambda key: _hf_name(key, prefix), "BERT", tied="mlm.decoder.weight")
        if config.mlm_head:
            decoder = source["cls.predictions.decoder.weight"]
            assert torch.equal(decoder, source[prefix + "embeddings.word_embeddings.weight"]), \
                "the MLM decoder of this BERT is not tied to its word embeddings; lmlib's BERT always ties them"
            assert torch.equal(source["cls.predictions.decoder.bias"], source["cls.predictions.bias"]), \
                "cls.predictions.decoder.bias and cls.predictions.bias differ; BERT has one output bias"
            used.update(("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"))
        left = [k for k in source if k not in used]
        assert not left, f"weights of the BERT model that have no place in lmlib's BERT: {left}"
        return model.eval()

    @classmethod
    def from_pretrained(cls, name: str = "bert-base-uncased", **hf_kwargs) -> Bert:
        """Google's BERT weights from the Hugging Face Hub (``bert-base-uncased``, ``bert-large-cased``, ... or a
        local directory), through ``transformers``' ``BertForPreTraining`` and :meth:`from_hf`."""
        hf_model = hf_from_pretrained("BertForPreTraining", name, "BERT", "build Bert(BertConfig(...)) and pre-train it", **hf_kwargs)
        return cls.from_hf(hf_model)


def check_inputs(model: Bert, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, masked_positions: torch.Tensor | None = None) -> None:
    """Refuse inputs that :meth:`Bert.forward` would misread, saying what to do."""
    c = model.config
    check_token_ids(input_ids, c.vocab_size, "input_ids", c.block_size,
                    f" positions (block_size); truncate the pairs (lmlib.text.bert_data.encode_pair with "
                    f"max_len={c.block_size})")
    for name, x in (("segment_ids", segment_ids), ("attention_mask", attention_mask)):
        if x is not None and (not isinstance(x, torch.Tensor) or x.shape != input_ids.shape or x.is_floating_point()):
            got = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{name} must be an integer tensor shaped like input_ids {tuple(input_ids.shape)}, "
                             f"got {got}")
    if segment_ids is not None:
        low, high = int(segment_ids.min()), int(segment_ids.max())
        if low < 0 or high >= c.type_vocab_size:
            raise ValueError(f"segment_ids holds {low if low < 0 else high}, but this BERT knows "
                             f"type_vocab_size={c.type_vocab_size} segments (0 for [CLS] A [SEP], 1 for B [SEP]); "
                             f"build pairs with lmlib.text.bert_data.encode_pair")
    if attention_mask is not None:
        real = attention_mask.bool()
        if not torch.equal(real.to(attention_mask.dtype), attention_mask):
            raise ValueError(f"attention_mask must hold only 1 (real token) and 0 (padding), got values "
                             f"{sorted(set(attention_mask.unique().tolist()))}")
        if not real.any(dim=1).all():
            raise ValueError("some row of attention_mask is all padding: every sequence needs at least [CLS]; "
                             "drop empty rows from the batch")
        if not real[:, 0].all():
            raise ValueError("attention_mask is 0 at position 0 of some row: BERT's padding goes after the tokens "
                             "(right padding), since position 0 holds [CLS], which the pooler reads")
    if masked_positions is not None:
        if model.mlm is None:
            raise ValueError("masked_positions selects where the MLM head runs, but this BERT has no MLM head "
                             "(BertConfig(mlm_head=False)); leave it out")
        if not isinstance(masked_positions, torch.Tensor) or masked_positions.dtype != torch.bool \
                or masked_positions.shape != input_ids.shape:
            got = (f"{masked_positions.dtype} {tuple(masked_positions.shape)}"
                   if isinstance(masked_positions, torch.Tensor) else type(masked_positions).__name__)
            raise ValueError(f"masked_positions must be a bool tensor shaped like input_ids "
                             f"{tuple(input_ids.shape)}, True where the MLM logits are wanted (e.g. labels != -100), "
                             f"got {got}")


class BertClassifier(nn.Module):
    """Sentence classification as in Devlin et al. §4.1: "the final hidden vector C ∈ R^H corresponding to the
    first input token ([CLS])" (here the pooled, tanh(h_[CLS] W_p + b_p), as in the released classifier), dropout,
    then "a classification layer W ∈ R^{K×H}", log softmax(C Wᵀ). ``model(batch)`` takes the (input_ids,
    segment_ids, attention_mask) of :func:`lmlib.recipes.bert.classification_batches`; returns (batch, num_classes) logits."""

    def __init__(self, bert: Bert, num_classes: int = 2, dropout: float = 0.1):
        super().__init__()
        if bert.pooler is None:
            raise ValueError("the classifier reads the pooled [CLS] vector; build the BERT with pooler=True")
        self.bert = bert
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(bert.config.d_model, num_classes)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        out = self.bert(input_ids, segment_ids, attention_mask)
        return self.head(self.dropout(out.pooled))  # (B, K)


# How transformers names each weight of lmlib's BERT ("{i}" = layer index). Encoder keys sit under "bert." in
# the models with heads (BertForPreTraining, BertForMaskedLM, ...) and at the top in BertModel; head keys
# ("cls.") are never prefixed. The tied MLM decoder weight is the word embedding and is not listed; each module
# below the embeddings has a weight and a bias.
HF_BERT_NAMES = {
    "tok_emb.weight": "embeddings.word_embeddings.weight",
    "seg_emb.weight": "embeddings.token_type_embeddings.weight",
    "pos_emb.weight": "embeddings.position_embeddings.weight",
    "mlm.decoder.bias": "cls.predictions.bias",
    **{f"{ours}.{p}": f"{theirs}.{p}" for p in ("weight", "bias") for ours, theirs in {
        "emb_norm": "embeddings.LayerNorm",
        "layers.{i}.attn.w_q": "encoder.layer.{i}.attention.self.query",
        "layers.{i}.attn.w_k": "encoder.layer.{i}.attention.self.key",
        "layers.{i}.attn.w_v": "encoder.layer.{i}.attention.self.value",
        "layers.{i}.attn.w_o": "encoder.layer.{i}.attention.output.dense",
        "layers.{i}.ln_1": "encoder.layer.{i}.attention.output.LayerNorm",
        "layers.{i}.fc": "encoder.layer.{i}.intermediate.dense",
        "layers.{i}.proj": "encoder.layer.{i}.output.dense",
        "layers.{i}.ln_2": "encoder.layer.{i}.output.LayerNorm",
        "pooler": "pooler.dense",
        "mlm.dense": "cls.predictions.transform.dense",
        "mlm.norm": "cls.predictions.transform.LayerNorm",
        "nsp": "cls.seq_relationship",
    }.items()},
}
HF_BERT_CLASSES = ("BertForPreTraining", "BertForMaskedLM", "BertForNextSentencePrediction", "BertModel")


def _hf_name(key: str, prefix: str) -> str:
    """lmlib's parameter name -> transformers' name, through HF_BERT_NAMES; ``prefix`` goes before the encoder's."""
    name = hf_key(HF_BERT_NAMES, key)
    return name if name.startswith("cls.") else prefix + name


def _config_from_hf(hf_model) -> BertConfig:
    """The BertConfig of a transformers BERT, refusing models and settings lmlib's BERT cannot copy."""
    check_hf_model(hf_model, HF_BERT_CLASSES, "bert", "Bert.from_hf",
                   "BertForPreTraining.from_pretrained('bert-base-uncased') (or Bert.from_pretrained)",
                   {"hidden_act": ("gelu",), "position_embedding_type": ("absolute",), "is_decoder": (False,),
                    "add_cross_attention": (False,)},
                   "recipe (exact GELU, absolute positions, a bidirectional encoder)")
    c = hf_model.config
    state = hf_model.state_dict()
    prefix = "" if type(hf_model).__name__ == "BertModel" else "bert."
    return BertConfig(vocab_size=c.vocab_size, block_size=c.max_position_embeddings,
                      type_vocab_size=c.type_vocab_size, num_layers=c.num_hidden_layers,
                      num_heads=c.num_attention_heads, d_model=c.hidden_size, d_ff=c.intermediate_size,
                      dropout=c.hidden_dropout_prob, attention_dropout=c.attention_probs_dropout_prob,
                      layer_norm_eps=c.layer_norm_eps, pad_id=c.pad_token_id,
                      pooler=prefix + "pooler.dense.weight" in state,
                      mlm_head="cls.predictions.transform.dense.weight" in state,
                      nsp_head="cls.seq_relationship.weight" in state)


def _config_hint(key: str) -> str:
    """Which BertConfig field sets the shape of the parameter ``key``."""
    if key.startswith("tok_emb") or key.startswith("mlm.decoder"):
        return "vocab_size or d_model differ"
    if key.startswith("pos_emb"):
        return "block_size or d_model differ"
    if key.startswith("seg_emb"):
        return "type_vocab_size or d_model differ"
    if key.endswith(("fc.weight", "fc.bias", "proj.weight")):
        return "d_ff or d_model differ"
    return "d_model differs"


__all__ = ["Bert", "BertClassifier", "BertConfig", "BertOutput", "EncoderLayer", "MaskedLMHead", "HF_BERT_NAMES",
           "check_inputs"]
