"""A GPT pretrained on IMDb reviews: the byte-level BPE, the seeded recipe, the loader of the checkpoint shipped in
``lmlib/pretrained/gpt_imdb/``, and GPT-1's fine-tuning for classification.

Radford et al. (2018) pretrain on BooksCorpus (about 800M words) for 100 epochs of 512-token windows; this is the
same objective, L_1 = Σ_i log P(u_i | u_{i−k}, ..., u_{i−1}), at a course's scale: IMDb's 50,000 unlabelled
reviews, a byte-level BPE of 8,192 tokens trained on them (so the model and its tokenizer speak the same text, as in
GPT-2), a 4-layer pre-norm GPT of 128 dimensions, random 128-token windows.

``--preset full`` is sized for one CPU core (a few million tokens, two per parameter: too few for the pretraining to
transfer); ``--preset gpu`` (batches of 256 windows gathered on the device, bf16, about a hundred tokens per
parameter) made the shipped checkpoint (:data:`REBUILD`) with the BPE shipped before it. The validation perplexity is
measured on the last ``valid_reviews`` unlabelled reviews, never trained on, per BPE token and as bits per character
(which compares across tokenizers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from ..models.gpt import GPT, GPTConfig
from ..models.gpt_finetune import FinetuneTokens, GPTClassifier, classification_input, finetune_batches
from ..runtime import eval_mode, seed_everything
from ..text.tokenizers import SPECIAL_TOKENS, ByteLevelBPE
from ..training.callbacks import GradientClipping
from ..training.objectives import gpt_finetune_loss, next_token_loss
from ..training.schedules import WarmupCosine, weight_decay_groups
from ..training.trainer import Trainer, evaluate
from .finetuning import finetune_plan
from .pretraining import PretrainRun, RunOptions, last_losses, plan, unsup_split
from .shipping import PRETRAINED_DIR, load_shipped, save_shipped, verify_shipped

NAME = "gpt_imdb"
CHECKPOINT_DIR = PRETRAINED_DIR / NAME
REBUILD = "python -m lmlib pretrain gpt --preset gpu --device cuda --out lmlib/pretrained/gpt_imdb"
EOS = SPECIAL_TOKENS["bpe"]["eos"]
# <|endoftext|> separates reviews in pretraining; GPT-1's fine-tuning tokens are reserved in the vocabulary from
# the start, so a fine-tuned model needs no new rows (they are never seen in pretraining: their vectors stay untrained).
GPT_SPECIALS = (EOS, *SPECIAL_TOKENS["gpt_finetune"].values())

TOKENIZER_RECIPE = dict(vocab_size=8192, min_frequency=2)
PRETRAIN_CONFIG = dict(block_size=128, num_layers=4, num_heads=4, d_model=128, dropout=0.0, norm="pre")
PRETRAIN_RECIPE = dict(seed=0, batch_size=16, steps=2000, lr=2e-3, warmup=100, min_ratio=0.05, weight_decay=0.1,
                       betas=(0.9, 0.95), clip=1.0, valid_reviews=1000, valid_windows=256)
# `--preset teach`: the same recipe on 400 reviews with a tiny model, a few seconds on one core
PRETRAIN_TEACH = dict(recipe=dict(steps=40, batch_size=8, train_reviews=400, valid_reviews=50, valid_windows=16),
                      config=dict(block_size=32, num_layers=2, num_heads=2, d_model=32),
                      tokenizer=dict(vocab_size=512))
# `--preset gpu`: 256 windows a step at the same rate (what the shipped checkpoint was trained with), the shipped BPE
PRETRAIN_GPU = dict(recipe=dict(batch_size=256, steps=7680, warmup=200), bf16=True)


def encode_stream(tokenizer: ByteLevelBPE, texts: Sequence[str]) -> torch.Tensor:
    """One long token stream: every text followed by ``<|endoftext|>`` (GPT-2's document separator)."""
    eos = tokenizer.token_to_id(EOS)
    return torch.tensor([i for text in texts for i in (*tokenizer.encode(text), eos)], dtype=torch.long)


def random_windows(stream: torch.Tensor, block_size: int, batch_size: int, steps: int,
                   seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` batches of ``batch_size`` windows of ``block_size + 1`` tokens starting at seeded random offsets:
    inputs ``x = w[:-1]`` and next-token targets ``y = w[1:]``, each ``(batch_size, block_size)``. Every start
    from 0 to ``numel − block_size − 1`` (the last full window) is equally likely. The windows are gathered where
    ``stream`` lives (on a GPU: no copy from the host per step)."""
    if stream.numel() < block_size + 1:
        raise ValueError(f"the stream holds {stream.numel()} tokens, too few for windows of {block_size + 1}")
    g = torch.Generator(device=stream.device).manual_seed(seed)
    offsets = torch.arange(block_size + 1, device=stream.device)
    for _ in range(steps):
        starts = torch.randint(0, stream.numel() - block_size, (batch_size,), generator=g,
                               device=stream.device)  # high is exclusive
        w = stream[starts[:, None] + offsets]  # (B, block_size + 1)
        yield w[:, :-1], w[:, 1:]


def text_characters(tokenizer: ByteLevelBPE, ids: Sequence[int] | torch.Tensor) -> int:
    """The number of characters of text that ``ids`` spell, each ``<|endoftext|>`` counted as one character (the
    boundary between two reviews, as a newline between documents is in a character-level corpus), not as the 13
    characters of its spelling."""
    eos = tokenizer.token_to_id(EOS)
    ids = [int(i) for i in ids]
    boundaries = [k for k, i in enumerate(ids) if i == eos]
    pieces = [ids[a + 1: b] for a, b in zip([-1, *boundaries], [*boundaries, len(ids)])]  # the texts between them
    return sum(len(tokenizer.decode(piece)) for piece in pieces) + len(boundaries)


def bits_per_char(nll: float, tokenizer: ByteLevelBPE, ids: Sequence[int] | torch.Tensor) -> float:
    """A mean next-token loss ``nll`` (nats per token) over the tokens ``ids``, as bits per character of their text:

        bpc = nll · (tokens / characters) / ln 2

    with characters counted by :func:`text_characters`; it compares models whatever their tokenizer."""
    chars = text_characters(tokenizer, ids)
    if chars == 0:
        raise ValueError("the ids spell no characters: bits per character needs some text")
    return nll * len(ids) / chars / math.log(2)


def evaluate_stream(model: GPT, stream: torch.Tensor, windows: int, batch_size: int = 32) -> float:
    """Mean next-token NLL (nats) over the first ``windows`` non-overlapping ``block_size`` windows of ``stream``,
    each predicted from the tokens inside its window only."""
    T = model.config.block_size
    n = min(windows, (stream.numel() - 1) // T)
    if n < 1:
        raise ValueError(f"the stream holds {stream.numel()} tokens, too few for one window of {T + 1}")
    x = stream[: n * T].view(n, T)
    y = stream[1: n * T + 1].view(n, T)
    total = 0.0
    with eval_mode(model), torch.no_grad():
        for i in range(0, n, batch_size):
            logits = model(x[i: i + batch_size])
            total += torch.nn.functional.cross_entropy(logits.flatten(0, 1), y[i: i + batch_size].flatten(),
                                                       reduction="sum").item()
    return total / (n * T)


def pretrain(out_dir: str | Path, steps: int | None = None, preset: str = "full",
             run: RunOptions | None = None, overrides: dict | None = None) -> dict | None:
    """Train the BPE and the GPT with ``preset``'s recipe (``gpu``: with the shipped BPE) and write the checkpoint to
    ``out_dir``; arguments and result as in :mod:`lmlib.recipes.pretraining`."""
    recipe, model_config, tokenizer_recipe = plan(preset, steps, PRETRAIN_RECIPE, PRETRAIN_CONFIG, PRETRAIN_TEACH,
                                                  TOKENIZER_RECIPE, PRETRAIN_GPU, overrides)
    recipe["warmup"] = min(recipe["warmup"], recipe["steps"] // 10)  # a shortened run keeps a proportionate warm-up
    job = PretrainRun(NAME, out_dir, {"recipe": recipe, "config": model_config, "tokenizer": tokenizer_recipe}, run,
                      preset, bf16=PRETRAIN_GPU["bf16"])
    seed_everything(recipe["seed"])
    train_texts, valid_texts = unsup_split(recipe["valid_reviews"])
    train_texts = train_texts[: recipe.get("train_reviews")]  # every one unless the preset takes fewer
    start = time.perf_counter()
    if preset == "gpu":  # the BPE shipped with the checkpoint (the same recipe trained it)
        tokenizer = load_tokenizer()[0]
    else:
        tokenizer = ByteLevelBPE.train(train_texts, tokenizer_recipe["vocab_size"],
                                       min_frequency=tokenizer_recipe["min_frequency"], special_tokens=GPT_SPECIALS)
    tokenizer_seconds = time.perf_counter() - start
    train_stream, valid_stream = encode_stream(tokenizer, train_texts), encode_stream(tokenizer, valid_texts)
    if job.writes:  # rank 0 alone under torchrun
        print(f"tokenizer: {len(tokenizer)} tokens in {tokenizer_seconds:.0f} s; train stream "
              f"{train_stream.numel():,} tokens, held-out {valid_stream.numel():,}", flush=True)

    config = GPTConfig(vocab_size=len(tokenizer), **model_config)
    model = GPT(config)
    opt = job.adam(weight_decay_groups(model, recipe["weight_decay"]), lr=recipe["lr"], betas=recipe["betas"])
    trainer = Trainer(model, opt, next_token_loss,
                      [WarmupCosine(recipe["steps"], recipe["warmup"], recipe["min_ratio"]),
                       GradientClipping(recipe["clip"]), job.progress(lambda batch: batch[0].numel())],
                      **job.trainer_options())
    stream = train_stream.to(job.device)  # windows are gathered on the device
    job.fit(trainer, lambda epoch: random_windows(stream, config.block_size, recipe["batch_size"], recipe["steps"],
                                                  recipe["seed"]))
    if not job.writes:
        return None
    model.cpu()  # the held-out streams live on the CPU

    valid_nll = evaluate_stream(model, valid_stream, recipe["valid_windows"])
    n_tokens = min(recipe["valid_windows"], (valid_stream.numel() - 1) // config.block_size) * config.block_size
    report = {
        "model": "GPT (lmlib.models.gpt), pre-norm, pretrained on IMDb's unlabelled reviews",
        "config": config.__dict__, "tokenizer": {**tokenizer_recipe, "special_tokens": list(GPT_SPECIALS),
                                                 "train_seconds": tokenizer_seconds},
        "recipe": recipe, "parameters": model.num_parameters(),
        "tokens_seen": trainer.step * recipe["batch_size"] * config.block_size, "steps": trainer.step,
        "train_stream_tokens": int(train_stream.numel()),
        **last_losses(trainer.batch_losses),
        "valid_tokens": n_tokens, "valid_nll": valid_nll, "valid_ppl": math.exp(valid_nll),
        "valid_bits_per_char": bits_per_char(valid_nll, tokenizer, valid_stream[1: n_tokens + 1]),  # the targets
    }
    report = save_shipped(out_dir, NAME, model.state_dict(), config.__dict__, job.annotate(report),
                          side_files={"tokenizer.json": tokenizer.save}, skip=("lm_head.weight",))
    job.finish()
    return report


def load_pretrained(directory: str | Path = CHECKPOINT_DIR) -> tuple[GPT, ByteLevelBPE, dict]:
    """``(model, tokenizer, report)`` of the shipped IMDb GPT, after checking every file's sha256; eval mode."""
    config, tensors, report = load_shipped(directory, NAME, REBUILD)
    model = GPT(GPTConfig(**config))
    if model.config.tie_embeddings:
        tensors["lm_head.weight"] = tensors["tok_emb.weight"]
    model.load_state_dict(tensors)
    return model.eval(), ByteLevelBPE.load(Path(directory) / "tokenizer.json"), report


def load_tokenizer(directory: str | Path = CHECKPOINT_DIR) -> tuple[ByteLevelBPE, dict]:
    """``(tokenizer, report)`` of the shipped IMDb GPT after checking the tokenizer's sha256 alone: what rebuilding
    the weights needs (the gpu preset keeps this BPE), even when they are missing or corrupt."""
    # a new tokenizer comes only with the one-core recipe, which trains the model as well
    report = verify_shipped(directory, "python -m lmlib pretrain gpt --preset full", files=("tokenizer.json",))
    return ByteLevelBPE.load(Path(directory) / "tokenizer.json"), report


def shakespeare_chars(valid_frac: float = 0.1) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """Tiny Shakespeare as character ids: ``(itos, train, valid)``, the first 90% for training and the last 10%
    held out (the split of the committed character-GPT run in lmlib/results/gpt.json)."""
    from ..data import load_tiny_shakespeare

    if not 0 < valid_frac < 1:
        raise ValueError(f"valid_frac must be in (0, 1), got {valid_frac}")
    text = load_tiny_shakespeare()
    itos = sorted(set(text))
    stoi = {c: i for i, c in enumerate(itos)}
    ids = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    cut = int(len(ids) * (1 - valid_frac))
    return itos, ids[:cut], ids[cut:]


# -- GPT-1 fine-tuning on labelled reviews ----------------------------------------------------------------

FINETUNE_RECIPE = dict(max_len=128, batch_size=16, lr=5e-4, warmup_frac=0.1, weight_decay=0.01, dropout=0.1,
                       clip=1.0, min_steps=80, epochs=3)


def pretrained_classifier(num_classes: int = 2, pretrained: bool = True, dropout: float = FINETUNE_RECIPE["dropout"],
                          directory: str | Path = CHECKPOINT_DIR, pooling: str = "extract") -> tuple[GPTClassifier, ByteLevelBPE]:
    """A :class:`GPTClassifier` on the shipped IMDb GPT (``pretrained=False``: the same architecture and tokenizer,
    random weights), with ``dropout`` inside the GPT and before the head, as GPT-1 fine-tunes (0.1); ``pooling`` as in
    :class:`GPTClassifier`."""
    gpt, tokenizer, _ = load_pretrained(directory)
    fresh = GPT(GPTConfig(**{**gpt.config.__dict__, "dropout": dropout}))
    if pretrained:
        fresh.load_state_dict(gpt.state_dict())
    return GPTClassifier(fresh, num_classes, dropout, pooling), tokenizer


def review_inputs(tokenizer: ByteLevelBPE, texts: Sequence[str], max_len: int = FINETUNE_RECIPE["max_len"]) -> list[list[int]]:
    """``[start] review [extract]`` for each review, cut to ``max_len`` tokens by head_and_tail."""
    tokens = FinetuneTokens.from_tokenizer(tokenizer)
    return [classification_input(tokenizer.encode(t) or [tokens.pad], tokens, max_len) for t in texts]


def finetune_classifier(model: GPTClassifier, inputs: Sequence[Sequence[int]], labels: Sequence[int], lam: float,
                        pad: int, seed: int = 0, callbacks=(), device: str = "cpu", **overrides) -> Trainer:
    """Fine-tune on ``inputs`` with L_3 = L_2 + λ·L_1 (λ = ``lam``): AdamW, linear warm-up then cosine decay to 0,
    dropout 0.1, ``epochs`` shuffled passes repeated until at least ``min_steps`` steps (so 100 labels still get a
    useful number of updates). ``overrides`` change entries of ``FINETUNE_RECIPE``; ``device`` is where it trains
    (the batches are built on the CPU and moved there)."""
    r, epochs, total = finetune_plan(FINETUNE_RECIPE, overrides, len(inputs))
    opt = torch.optim.AdamW(weight_decay_groups(model, r["weight_decay"]), lr=r["lr"])
    trainer = Trainer(model, opt, gpt_finetune_loss(lam),
                      [WarmupCosine(total, int(r["warmup_frac"] * total), 0.0), GradientClipping(r["clip"]), *callbacks],
                      device=device)
    trainer.fit(lambda epoch: finetune_batches(inputs, labels, r["batch_size"], pad, shuffle=True, seed=seed + 1000 * epoch),
                epochs=epochs)
    return trainer


def classifier_accuracy(model: GPTClassifier, inputs: Sequence[Sequence[int]], labels: Sequence[int], pad: int,
                        batch_size: int = 64) -> float:
    """The share of ``inputs`` classified as their label (on the device the model is on)."""
    device = next(model.parameters()).device
    return evaluate(model, gpt_finetune_loss(0.0), finetune_batches(inputs, labels, batch_size, pad), device).accuracy
