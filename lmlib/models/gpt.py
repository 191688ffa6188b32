"""GPT: a decoder-only Transformer language model (Radford et al. 2018, "Improving Language Understanding by
Generative Pre-Training"; Radford et al. 2019, "Language Models are Unsupervised Multitask Learners").

The model predicts each token from the tokens before it, maximising the likelihood (2018, eq. 1)

    L_1(U) = Σ_i log P(u_i | u_{i−k}, ..., u_{i−1}; Θ)

with a stack of Transformer decoder blocks (2018, eq. 2):

    h_0 = U W_e + W_p
    h_l = transformer_block(h_{l−1})     for l = 1..n
    P(u) = softmax(h_n W_eᵀ)

``W_e`` is the token embedding, ``W_p`` the learned position embedding, and the output layer reuses
``W_e`` (tied embeddings). GPT-1 puts LayerNorm after each residual sum ("post-norm", as in Vaswani et
al. 2017); GPT-2 "moved [layer normalization] to the input of each sub-block ... and an additional layer
normalization was added after the final self-attention block" ("pre-norm", ``GPTConfig(norm="pre")``).

Attention maps come back per layer as ``(batch, heads, query, key)`` tensors, the layout bertviz's
``head_view`` / ``model_view`` take: ``logits, maps = model(idx, return_attentions=True)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime import eval_mode
from .config_checks import check_choice, check_heads, check_positive_ints, check_probability, check_token_ids
from .multihead import causal_mask, scaled_dot_product_attention
from .positional import LearnedPositionalEncoding
from .state_dicts import check_hf_model, check_state_dict, copy_hf_weights, hf_from_pretrained, hf_key, normal_init

ACTIVATIONS = {"gelu_tanh": "tanh", "gelu": "none"}  # name -> F.gelu's `approximate`
NORMS = ("pre", "post")


@dataclass
class GPTConfig:
    """Sizes of a GPT. The defaults are GPT-2 small (124M parameters); GPT-1 is the same size with
    ``block_size=512, norm="post"`` and its own 40,478-token vocabulary.

    ``d_ff`` (the MLP's inner width) defaults to 4·d_model, as in both papers. ``dropout`` is used on the
    embeddings, the attention weights and each sub-layer's output. ``tie_embeddings`` makes the output layer
    reuse the token embedding ``W_e``. ``activation`` is ``"gelu_tanh"`` (GPT-1 and GPT-2:
    0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))) or ``"gelu"`` (the exact x·Φ(x)).
    """

    vocab_size: int = 50257
    block_size: int = 1024
    num_layers: int = 12
    num_heads: int = 12
    d_model: int = 768
    d_ff: int | None = None
    dropout: float = 0.1
    norm: str = "pre"
    tie_embeddings: bool = True
    layer_norm_eps: float = 1e-5
    activation: str = "gelu_tanh"
    bias: bool = True

    def __post_init__(self):
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        check_positive_ints(self, ("vocab_size", "block_size", "num_layers", "num_heads", "d_model", "d_ff"))
        check_heads(self.d_model, self.num_heads)
        check_probability(self.dropout, "dropout")
        check_choice(self, "norm", NORMS)
        check_choice(self, "activation", ACTIVATIONS)
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be positive (GPT-2 uses 1e-5), got {self.layer_norm_eps}")


class KVCache:
    """The keys and values of every token seen so far, one ``(batch, heads, length, head_dim)`` pair per layer.

    Generating token t+1 needs the keys and values of tokens 1..t in every layer. They do not change once
    computed (a token only ever attends to earlier ones), so :func:`generate` keeps them here and feeds the
    model only the new token: one position of work per step instead of the whole prefix.
    """

    def __init__(self, num_layers: int):
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers

    def __len__(self) -> int:
        """Number of cached positions."""
        return 0 if self.keys[0] is None else self.keys[0].size(2)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions' keys and values of ``layer``; return all of them, cached ones first."""
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=2)  # (B, H, P+T, hs)
            v = torch.cat([self.values[layer], v], dim=2)  # (B, H, P+T, hs)
        self.keys[layer], self.values[layer] = k, v
        return k, v


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention: head_i = softmax(Q_i K_iᵀ / √d_k + M) V_i, M = −∞ above the diagonal.

    Q, K and V come from one ``d_model → 3·d_model`` projection (``qkv``), the layout of GPT-2's ``c_attn``.
    Without attention maps the fused ``F.scaled_dot_product_attention(is_causal=True)`` does the work; with
    them, lmlib's written-out :func:`~lmlib.models.multihead.scaled_dot_product_attention` does, masked by
    :func:`~lmlib.models.multihead.causal_mask`. With a :class:`KVCache`, the T new queries attend to the P
    cached keys and to the new keys up to their own position.
    """

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.layer, self.num_heads, self.d_model = layer, config.num_heads, config.d_model
        self.dropout = config.dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=config.bias)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, need_weights: bool = False):
        B, T, C = x.shape  # batch, new positions, d_model
        H = self.num_heads
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 × (B, T, C)
        q = q.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, hs)
        k = k.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, hs)
        v = v.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, hs)
        if cache is not None:
            k, v = cache.extend(self.layer, k, v)  # (B, H, P+T, hs): cached keys first
        P = k.size(2) - T  # cached positions
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            mask = causal_mask(P + T, x.device)[P:]  # (T, P+T), True = may not attend
            y, weights = scaled_dot_product_attention(q, k, v, mask, p)  # (B, H, T, hs), (B, H, T, P+T)
        elif P == 0 or T == 1:  # whole prefix at once, or one new query that may see every key
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=P == 0 and T > 1)  # (B, H, T, hs)
        else:
            allowed = ~causal_mask(P + T, x.device)[P:]  # (T, P+T), True = may attend
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)  # (B, H, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C): heads side by side
        return self.resid_dropout(self.proj(y)), weights  # (B, T, C)


class MLP(nn.Module):
    """FFN(x) = GELU(x W_1 + b_1) W_2 + b_2, position-wise, with a 4·d_model inner layer."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.proj = nn.Linear(config.d_ff, config.d_model, bias=config.bias)
        self.approximate = ACTIVATIONS[config.activation]
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.fc(x), approximate=self.approximate)  # (B, T, d_ff)
        return self.dropout(self.proj(h))  # (B, T, C)


class Block(nn.Module):
    """One decoder block, with the residual sums placed as each paper has them.

    GPT-1 (post-norm):  h = LN(h + Attn(h));   h = LN(h + FFN(h))
    GPT-2 (pre-norm):   h = h + Attn(LN(h));   h = h + FFN(LN(h))
    """

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.pre_norm = config.norm == "pre"
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
        self.attn = CausalSelfAttention(config, layer)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, h: torch.Tensor, cache: KVCache | None = None, need_weights: bool = False):
        if self.pre_norm:
            a, weights = self.attn(self.ln_1(h), cache, need_weights)  # (B, T, C)
            h = h + a  # (B, T, C)
            h = h + self.mlp(self.ln_2(h))  # (B, T, C)
        else:
            a, weights = self.attn(h, cache, need_weights)  # (B, T, C)
            h = self.ln_1(h + a)  # (B, T, C)
            h = self.ln_2(h + self.mlp(h))  # (B, T, C)
        return h, weights


# How transformers' GPT2LMHeadModel names each weight of lmlib's GPT ("{i}" = layer index): every module but the
# embeddings has a weight and a bias.
HF_GPT2_NAMES = {
    "tok_emb.weight": "transformer.wte.weight",
    "pos_emb.pe": "transformer.wpe.weight",
    **{f"{ours}.{p}": f"transformer.{theirs}.{p}" for p in ("weight", "bias") for ours, theirs in {
        "blocks.{i}.ln_1": "h.{i}.ln_1",
        "blocks.{i}.attn.qkv": "h.{i}.attn.c_attn",
        "blocks.{i}.attn.proj": "h.{i}.attn.c_proj",
        "blocks.{i}.ln_2": "h.{i}.ln_2",
        "blocks.{i}.mlp.fc": "h.{i}.mlp.c_fc",
        "blocks.{i}.mlp.proj": "h.{i}.mlp.c_proj",
        "ln_f": "ln_f",
    }.items()},
}
# GPT-2's Conv1D stores its weight as (in, out), nn.Linear as (out, in): these four are transposed.
HF_GPT2_TRANSPOSED = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
# Entries of a GPT-2 state dict that are not weights of their own (the tied head) or not weights at all.
HF_GPT2_SKIPPED = ("lm_head.weight", ".attn.bias", ".attn.masked_bias")


class GPT(nn.Module):
    """A GPT language model: ``logits = model(idx)`` maps ``(batch, seq)`` token ids to ``(batch, seq, vocab)``
    next-token logits (the logits at position t score token t+1).

    ``model(idx, return_attentions=True)`` returns ``(logits, attentions)``, one ``(batch, heads, seq, seq)``
    tensor per layer, computed explicitly (slower; for plots and bertviz). ``model(idx, cache=c)`` with a
    :class:`KVCache` reads and extends the cache: ``idx`` then holds only the positions after the cached ones.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = LearnedPositionalEncoding(config.d_model, config.block_size, config.dropout)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.num_layers))
        self.ln_f = (nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
                     if config.norm == "pre" else nn.Identity())
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """GPT-2's initialisation: N(0, 0.02) weights, zero biases, LayerNorm 1/0, and the projections that
        write into the residual stream scaled by 1/√N, N = 2·num_layers residual layers (2019, §2.3)."""
        normal_init(self)  # N(0, 0.02) weights, zero biases, LayerNorm 1/0
        nn.init.normal_(self.pos_emb.pe, std=0.01)  # GPT-2's position table starts smaller
        for block in self.blocks:
            for proj in (block.attn.proj, block.mlp.proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * self.config.num_layers))

    def num_parameters(self) -> int:
        """Parameters counted once (the tied output layer is the token embedding)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, return_attentions: bool = False):
        h, attentions = self.hidden_states(idx, cache, return_attentions)  # (B, T, C)
        logits = self.lm_head(h)  # (B, T, V): h_n W_eᵀ, before the softmax
        return (logits, attentions) if return_attentions else logits

    def hidden_states(self, idx: torch.Tensor, cache: KVCache | None = None, return_attentions: bool = False):
        """``(h_n, attentions)``: the top block's states ``(batch, seq, d_model)`` (after the final LayerNorm of
        GPT-2), the input of the output layer and of a fine-tuning head; attentions as in ``forward`` (or Nones)."""
        past = 0 if cache is None else len(cache)
        h = self.pos_emb(self.tok_emb(idx), offset=past)  # (B, T, C): h_0 = U W_e + W_p
        attentions = []
        for block in self.blocks:
            h, weights = block(h, cache, return_attentions)  # (B, T, C); weights (B, H, T, past+T) or None
            attentions.append(weights)
        return self.ln_f(h), tuple(attentions)  # (B, T, C)

    def new_cache(self) -> KVCache:
        """An empty :class:`KVCache` for this model's layers."""
        return KVCache(self.config.num_layers)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``, but a checkpoint of another size says which setting differs."""
        check_state_dict(self, state_dict, strict=strict, shape_hint=_config_hint, companion="its vocabulary",
                         structure_fields="num_layers, norm or bias")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @classmethod
    def from_hf(cls, hf_model) -> GPT:
        """Copy a ``transformers`` ``GPT2LMHeadModel`` (any size) into a new lmlib GPT, in eval mode.

        Every weight is listed in ``HF_GPT2_NAMES``; the four Conv1D weights in ``HF_GPT2_TRANSPOSED`` are
        transposed; each key and shape is checked, and no weight of the source may be left over. GPTConfig's one
        ``dropout`` is GPT-2's ``embd_pdrop = attn_pdrop = resid_pdrop``; a model whose three rates differ is refused.
        """
        model = cls(_config_from_hf(hf_model))
        source = hf_model.state_dict()
        used = copy_hf_weights(model, source, lambda key: hf_key(HF_GPT2_NAMES, key), "GPT-2", tied="lm_head.weight",
                               transposed=HF_GPT2_TRANSPOSED)
        left = [k for k in source if k not in used and not k.endswith(HF_GPT2_SKIPPED)]
        assert not left, f"weights of the GPT-2 model that have no place in lmlib's GPT: {left}"
        assert torch.equal(source["lm_head.weight"], source["transformer.wte.weight"]), "GPT-2's head is not tied"
        return model.eval()

    @classmethod
    def from_pretrained(cls, name: str = "gpt2", **hf_kwargs) -> GPT:
        """OpenAI's GPT-2 weights from the Hugging Face Hub (``gpt2``, ``gpt2-medium``, ``gpt2-large``,
        ``gpt2-xl``, ``distilgpt2``, or a local directory), through ``transformers`` and :meth:`from_hf`."""
        hf_model = hf_from_pretrained("GPT2LMHeadModel", name, "GPT-2", "build GPT(GPTConfig(...)) and train it", **hf_kwargs)
        return cls.from_hf(hf_model)


def check_inputs(model: GPT, idx: torch.Tensor, cache: KVCache | None = None) -> None:
    """Refuse ids that :meth:`GPT.forward` would misread, saying what to do: ``idx`` a (batch, seq) integer tensor
    of ids inside the vocabulary, at most ``block_size`` positions with the cached ones (:func:`generate` calls it)."""
    past = 0 if cache is None else len(cache)
    check_token_ids(idx, model.config.vocab_size, "idx", model.config.block_size - past,
                    f" positions left after {past} cached ones (block_size={model.config.block_size}); crop the "
                    f"input to its last tokens (idx[:, -block_size:]), as generate() does")


def _config_from_hf(hf_model) -> GPTConfig:
    """The GPTConfig of a transformers GPT2LMHeadModel, refusing models and settings lmlib's GPT cannot copy."""
    activations = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
    check_hf_model(hf_model, ("GPT2LMHeadModel",), "gpt2", "GPT.from_hf",
                   "GPT2LMHeadModel.from_pretrained('gpt2') (or GPT.from_pretrained('gpt2'))",
                   {"activation_function": tuple(activations), "scale_attn_weights": (True,),
                    "scale_attn_by_inverse_layer_idx": (False,), "reorder_and_upcast_attn": (False,),
                    "add_cross_attention": (False,), "tie_word_embeddings": (True,)},
                   "GPT-2 recipe (gelu_new, scaled attention, tied head)")
    c = hf_model.config
    dropouts = {"embd_pdrop": c.embd_pdrop, "attn_pdrop": c.attn_pdrop, "resid_pdrop": c.resid_pdrop}
    if len(set(dropouts.values())) > 1:
        raise ValueError(f"this GPT-2 uses different dropout rates {dropouts}, but lmlib's GPTConfig has one dropout "
                         f"for the embeddings, the attention weights and the residual branches; load it with one "
                         f"rate for all three, e.g. GPT2LMHeadModel.from_pretrained(name, embd_pdrop=0.1, "
                         f"attn_pdrop=0.1, resid_pdrop=0.1)")
    return GPTConfig(vocab_size=c.vocab_size, block_size=c.n_positions, num_layers=c.n_layer, num_heads=c.n_head,
                     d_model=c.n_embd, d_ff=c.n_inner or 4 * c.n_embd, dropout=c.resid_pdrop, norm="pre",
                     tie_embeddings=True, layer_norm_eps=c.layer_norm_epsilon,
                     activation=activations[c.activation_function])


def _config_hint(key: str) -> str:
    """Which GPTConfig field sets the shape of the parameter ``key``."""
    if key.startswith(("tok_emb", "lm_head")):
        return "vocab_size or d_model differ"
    if key.startswith("pos_emb"):
        return "block_size or d_model differ"
    if ".mlp." in key:
        return "d_ff or d_model differ"
    return "d_model differs"


# ---------------------------------------------------------------------------------------------------------
# Sampling: pure functions on a (..., vocab) tensor of logits, applied in this order by generate().


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(z / τ): logits divided by the temperature τ > 0. τ < 1 sharpens the distribution, τ > 1
    flattens it, τ → 0 approaches the argmax (use ``greedy=True`` for exactly that)."""
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not temperature > 0:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}; for argmax decoding use "
                         f"greedy=True instead of temperature 0")
    scaled = logits / temperature
    if (torch.isfinite(logits) & ~torch.isfinite(scaled)).any():  # z / τ overflowed (or τ rounded to 0)
        raise ValueError(f"temperature {temperature!r} is so small that logits / temperature overflow "
                         f"{logits.dtype}; for argmax decoding use greedy=True instead of a tiny temperature")
    return scaled


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row, set the rest to −∞ (Fan et al. 2018).

    Ties: every logit equal to the k-th largest is kept too, so a row keeps more than k tokens when
    several share the boundary value (the rule does not depend on the order of the vocabulary).
    ``k`` at least the vocabulary size keeps everything.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"top_k must be an int >= 1 (the number of tokens kept), got {k!r}; use top_k=None to "
                         f"keep every token")
    if k >= logits.size(-1):
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest value
    return logits.masked_fill(logits < kth, float("-inf"))


TOP_P_TOLERANCE = 1e-5  # float32 sums of probabilities are good to about 1e-6; a mass this close to p reaches it


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter (Holtzman et al. 2020): keep the smallest set of most probable tokens whose probability
    mass reaches p, set the rest to −∞.

    Token i is kept when the tokens strictly more probable than it hold less than p in total:
    Σ_{j: P(j) > P(i)} P(j) < p. So the most probable token is always kept, the kept set is the shortest
    prefix of the sorted distribution with mass ≥ p, and tokens tied in probability are kept or dropped
    together (a tie at the boundary keeps all of them). ``p = 1`` keeps every token.

    Probabilities computed in floating point are not exact (0.4 comes back as 0.40000001 or 0.39999998), so a
    mass within ``TOP_P_TOLERANCE`` (1e-5) below p counts as reaching it: p = 0.4 on [0.4, 0.3, 0.3] keeps one token.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1] (the probability mass kept), got {p!r}; use top_p=None or "
                         f"1.0 to keep every token")
    if p >= 1.0:
        return logits
    probs = torch.softmax(logits.float(), dim=-1)  # (..., V)
    ascending = probs.sort(dim=-1).values  # (..., V)
    # mass above each probability: total mass of the tokens whose probability is strictly greater
    mass_upto = torch.cat([torch.zeros_like(ascending[..., :1]), ascending.cumsum(dim=-1)], dim=-1)  # (..., V+1)
    at_or_below = torch.searchsorted(ascending, probs.contiguous(), right=True)  # (..., V): how many ≤ P(i)
    above = mass_upto[..., -1:] - mass_upto.gather(-1, at_or_below)  # (..., V)
    return logits.masked_fill(above >= p - TOP_P_TOLERANCE, float("-inf"))


@torch.no_grad()
def generate(model: GPT, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, greedy: bool = False, generator: torch.Generator | None = None,
             seed: int | None = None, use_cache: bool = True) -> torch.Tensor:
    """Append ``max_new_tokens`` tokens to each row of ``idx`` (batch, seq), one at a time; returns (batch, seq + new).

    Each step takes the logits of the last position, divides them by ``temperature``, applies
    :func:`top_k_filter` then :func:`top_p_filter`, and samples from the softmax (or takes the argmax,
    first index on ties, with ``greedy=True``). ``seed`` (or a ``torch.Generator``) makes sampling
    repeatable. With ``use_cache`` each step feeds only the new token and reuses the cached keys and values;
    once the context is full (``block_size``), the window slides: the model rereads the last ``block_size``
    tokens, since every position embedding changes.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if generator is not None and seed is not None:
        raise ValueError("give either a generator or a seed, not both")

    def filtered(logits: torch.Tensor) -> torch.Tensor:  # (B, V) -> (B, V)
        logits = apply_temperature(logits, temperature)
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        return logits if top_p is None else top_p_filter(logits, top_p)

    if not greedy:
        filtered(torch.zeros(1))  # checks the filters' arguments before any work
    check_inputs(model, idx[:, -model.config.block_size:])
    if seed is not None:
        generator = torch.Generator(device=idx.device).manual_seed(seed)
    block_size = model.config.block_size
    with eval_mode(model):
        cache = None
        for _ in range(max_new_tokens):
            if not use_cache:
                logits = model(idx[:, -block_size:])  # (B, T, V)
            elif cache is None or idx.size(1) > block_size:  # first step, or the window slid: read it afresh
                cache = model.new_cache()
                logits = model(idx[:, -block_size:], cache=cache)  # (B, T, V)
            else:
                logits = model(idx[:, len(cache) - idx.size(1):], cache=cache)  # (B, 1, V): the newest token only
            logits = logits[:, -1, :]  # (B, V): scores for the next token
            if greedy:
                next_id = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                next_id = torch.multinomial(torch.softmax(filtered(logits), dim=-1), 1, generator=generator)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)  # (B, T+1)
    return idx


__all__ = ["GPT", "GPTConfig", "KVCache", "apply_temperature", "check_inputs", "generate", "top_k_filter", "top_p_filter",
           "HF_GPT2_NAMES", "HF_GPT2_TRANSPOSED", "TOP_P_TOLERANCE"]
