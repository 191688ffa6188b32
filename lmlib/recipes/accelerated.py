"""GPU-sized pretraining of the shipped checkpoints: the same models, objectives and data as the CPU recipes, with
batches hundreds of sequences wide, built on the device, and a loop that does not wait for the GPU at every step.

The CPU recipes (``lmlib.recipes.gpt``, ``bert``, ``elmo``, ``ulmfit``) are sized for one CPU thread: their checkpoints
read 2 to 4 tokens per parameter, far below the ~20 that Hoffmann et al. (2022, "Chinchilla") find compute-optimal,
and too few for the pretrained models to transfer. These recipes read ~100 tokens per parameter (GPT, BERT) and
>= 20 (ELMo, the AWD-LSTM) in minutes on one GPU. What changes, and why:

* **batch size.** A 4-layer, 128-dimension Transformer on 16 sequences leaves a GPU waiting for kernel launches
  (~10 ms a step, 0.2M tokens/s); at 256 sequences it computes (~3M tokens/s in bf16 on an H200). Changing a
  recipe's batch from B to B' scales its learning rate by sqrt(B'/B), the square-root rule for Adam (Malladi et
  al. 2022, "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms"); :func:`scaled_lr` computes it.
* **batches on the device.** GPT's random windows are gathered from the token stream on the GPU; BERT's instances
  are prepared once as fixed-size tensors and masked on the GPU (:func:`mask_on_device`, the same 15% / 80-10-10
  rule as :func:`lmlib.text.bert_data.mask_tokens`); ELMo's sentences are tensors of word-type ids whose character
  rows and softmax ids are looked up on the GPU.
* **the loop** (:func:`device_loop`): fused AdamW, bf16 autocast (ELMo and the AWD-LSTM stay in float32: their
  cuDNN LSTMs), clipping without reading the norm back, and the loss summed on the device and read every
  ``log_every`` steps for the progress line (tokens/s and ETA). A time budget (``--deadline``) shortens the
  schedule so that it still ends, annealed, in time.
* **BERT's segments** are filled to the full length, as Devlin et al. do ("sequences of up to 512 tokens",
  Appendix A.2, spans of consecutive sentences; :func:`packed_instances`), instead of one sentence each.

``python -m lmlib.recipes.accelerated {gpt,bert,bert-mlm,elmo,awd-lstm,ulmfit-imdb} --out DIR`` runs one recipe; the
folder gets the same files as the CPU recipe's (fp16 safetensors, tokenizer or vocabulary, ``pretrain.json`` with the
recipe, device, dtype, batch, tokens seen, time and validation metrics, every file's sha256). GPT and BERT reuse the
shipped tokenizers: their recipes are unchanged, so training them again gives the same files.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import random
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F

from ..runtime import pick_device, seed_everything
from ..training.callbacks import StepProgress, TimeBudget
from ..training.schedules import warmup_cosine, weight_decay_groups
from .shipping import round_to_fp16

RECIPES = {
    # GPT: the run measured on an H200 (251M tokens, 81 s): the CPU recipe's rate and betas at batch 256
    "gpt": dict(seed=0, batch_size=256, steps=7680, lr=2e-3, warmup=200, min_ratio=0.05, weight_decay=0.1,
                betas=(0.9, 0.95), clip=1.0, valid_reviews=1000, valid_windows=256),
    # BERT: packed 128-token instances, 5 passes of other cuts and pairings, masked anew at every step (as RoBERTa
    # does); the CPU recipe's Adam settings at batch 256, ~200M real tokens
    "bert": dict(seed=0, batch_size=256, steps=7200, lr=1e-3, warmup=300, min_ratio=0.0, weight_decay=0.01,
                 betas=(0.9, 0.999), clip=1.0, mask_rate=0.15, max_len=128, short_seq_prob=0.1, dupe_factor=5,
                 nsp=True, valid_reviews=1000, valid_pairs=2000, valid_seed=1),
    "elmo": dict(seed=0, vocab_size=10000, max_words=40, min_words=3, batch_size=1024, steps=4000, lr=3e-3,
                 warmup=200, min_ratio=0.05, clip=1.0, valid_reviews=1000, valid_sentences=2000),
    # AWD-LSTM on PTB for ~80 epochs: the dropouts of a long run (Merity et al. 2018 use 0.4/0.25/0.4/0.1/0.5 for a
    # 24M-parameter model; this one has 3.4M, so a little less)
    "awd-lstm": dict(seed=0, batch_size=128, bptt=70, steps=8000, eta_max=4e-3, cut_frac=0.1, ratio=32.0, clip=0.5,
                     betas=(0.8, 0.99), dropouts=dict(embed_p=0.1, input_p=0.3, hidden_p=0.2, weight_p=0.3,
                                                      output_p=0.3)),
    # ULMFiT stage (b): IMDb's unlabelled reviews (the labelled training reviews are left out: see ulmfit_imdb)
    "ulmfit-imdb": dict(seed=0, held_out_reviews=1000, min_freq=2, max_new=6000, steps=5000, batch_size=64, bptt=70,
                        eta_max=4e-3, factor=2.6, dropouts=dict(embed_p=0.05, input_p=0.25, hidden_p=0.15,
                                                                weight_p=0.2, output_p=0.25)),
}
RECIPES["bert-mlm"] = {**RECIPES["bert"], "nsp": False}
NAMES = {"gpt": "gpt_imdb", "bert": "bert_imdb", "bert-mlm": "bert_imdb", "elmo": "elmo_imdb",
         "awd-lstm": "awd_lstm_ptb", "ulmfit-imdb": "ulmfit_imdb"}


def scaled_lr(lr: float, batch_size: int, new_batch_size: int) -> float:
    """The rate for ``new_batch_size`` when ``lr`` was right for ``batch_size``: lr · sqrt(B' / B), the square-root
    scaling rule for Adam (Malladi et al. 2022)."""
    if batch_size < 1 or new_batch_size < 1:
        raise ValueError(f"batch sizes must be positive, got {batch_size} and {new_batch_size}")
    return lr * math.sqrt(new_batch_size / batch_size)


def command(model: str, out: str | Path, **options) -> str:
    """The command line that reruns a recipe (recorded in ``pretrain.json``)."""
    extra = "".join(f" --{k.replace('_', '-')} {v}" for k, v in options.items() if v is not None)
    return f"python -m lmlib.recipes.accelerated {model} --out {out}{extra}"


# -- the loop -------------------------------------------------------------------------------------------------

def device_loop(model: torch.nn.Module, loss_fn: Callable[[int], tuple[torch.Tensor, torch.Tensor]], steps: int,
                lr_at: Callable[[int, int], float], optimizer: torch.optim.Optimizer, clip: float | None,
                bf16: bool, log_every: int = 200, label: str = "", deadline: float | None = None) -> dict:
    """``steps`` optimizer steps of ``loss_fn(step) -> (mean loss, tokens in the batch)`` (both tensors on the
    device). Each parameter group's rate is its base rate (``initial_lr``) times ``lr_at(step, total steps)``.
    Nothing is read back from the device except every ``log_every`` steps, for the progress line.

    With a ``deadline`` (seconds of training) the run is fitted to it: at each progress line, if the steps left
    would not finish in time at the speed so far, the total is cut to what will, and the schedule is laid over the
    new total (so the rate still decays to its end instead of stopping half way; the warm-up, in the first
    ``log_every`` steps, is unaffected). The total only ever shrinks. Returns the losses logged (mean over each
    interval), tokens seen, seconds, and ``planned_steps``/``steps`` (they differ when the deadline cut the run)."""
    device = next(model.parameters()).device
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
    model.train()
    precision = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
    loss_sum = torch.zeros((), device=device)
    tokens = torch.zeros((), device=device, dtype=torch.long)
    curve, start, planned, step = [], time.perf_counter(), steps, 0
    last_time, last_step = start, 0
    while step < steps:
        factor = lr_at(step, steps)
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] * factor
        with precision:
            loss, n = loss_fn(step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        loss_sum += loss.detach().float()
        tokens += n
        if (step + 1) % log_every == 0 or step + 1 == steps:
            interval = log_every if (step + 1) % log_every == 0 else (step + 1) % log_every
            mean = loss_sum.item() / interval
            if not math.isfinite(mean):
                raise FloatingPointError(f"{label}: the loss became {mean} by step {step + 1}; lower the rate")
            seen, elapsed = int(tokens.item()), time.perf_counter() - start
            curve.append({"step": step + 1, "loss": mean, "tokens": seen, "seconds": round(elapsed, 1)})
            rate = seen / elapsed
            eta = elapsed / (step + 1) * (steps - step - 1)
            print(f"{label} step {step + 1}/{steps} loss {mean:.4f} lr {optimizer.param_groups[0]['lr']:.2e} "
                  f"{rate / 1e6:.2f}M tokens/s ETA {eta:.0f} s", flush=True)
            loss_sum.zero_()
            now = time.perf_counter()
            per_step = (now - last_time) / (step + 1 - last_step)  # the speed of the last interval: past the
            first, last_time, last_step = last_step == 0, now, step + 1  # start-up, and as the GPU is shared now
            if (deadline is not None and not first and step + 1 < steps
                    and elapsed + per_step * (steps - step - 1) > deadline):
                fits = max(step + 2, step + 1 + int(max(0.0, deadline - elapsed) / per_step))
                if fits < steps:
                    print(f"{label}: {steps} steps would not finish in {deadline:.0f} s at this speed: the run now "
                          f"ends at step {fits}", flush=True)
                    steps = fits
        step += 1
    return {"curve": curve, "tokens_seen": int(tokens.item()), "train_seconds": time.perf_counter() - start,
            "planned_steps": planned, "steps": steps}


def fused_adamw(params, lr: float, betas, weight_decay: float, device: torch.device) -> torch.optim.AdamW:
    """AdamW with the fused CUDA kernel on a GPU (one launch for all parameters), the default on the CPU."""
    fused = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(params, lr=lr, betas=tuple(betas), weight_decay=weight_decay, **fused)


def _map_in_pool(fn: Callable, items: Sequence, workers: int) -> list:
    """``[fn(chunk) for chunk in chunks of items]`` flattened, in order, on ``workers`` forked processes (one
    process: in this one)."""
    if workers <= 1 or len(items) < 1000:
        return fn(items)
    size = math.ceil(len(items) / (workers * 4))
    chunks = [items[i: i + size] for i in range(0, len(items), size)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return [x for part in pool.map(fn, chunks) for x in part]


def _workers() -> int:
    return max(1, min(16, (multiprocessing.cpu_count() or 1) - 1))


# -- GPT ------------------------------------------------------------------------------------------------------

_ENCODER = None  # the tokenizer the forked pool workers use


def _bpe_encode(texts: Sequence[str]) -> list[list[int]]:
    return [_ENCODER.encode(t) for t in texts]


def pretrain_gpt(out_dir: str | Path, recipe: dict, device: torch.device, bf16: bool, rerun: str,
                 deadline: float | None = None) -> dict:
    """GPT on IMDb's unlabelled reviews: the shipped BPE, random 128-token windows gathered on the device."""
    global _ENCODER
    from ..models.gpt import GPT, GPTConfig
    from . import gpt as G
    from .shipping import save_shipped

    seed_everything(recipe["seed"])
    tokenizer, shipped = G.load_tokenizer()  # the shipped BPE and config; the weights are not read
    train_texts, valid_texts = G.unsup_split(recipe["valid_reviews"])
    train_texts = train_texts[: recipe.get("train_reviews")]
    _ENCODER, eos = tokenizer, tokenizer.token_to_id(G.EOS)
    start = time.perf_counter()
    encoded = _map_in_pool(_bpe_encode, train_texts, _workers())
    stream = torch.tensor([i for ids in encoded for i in (*ids, eos)], dtype=torch.long)
    valid_stream = G.encode_stream(tokenizer, valid_texts)
    print(f"gpt: {stream.numel():,} training tokens encoded in {time.perf_counter() - start:.0f} s", flush=True)

    config = GPTConfig(**{**shipped["config"], "dropout": 0.0})  # the shipped GPT's config, as pretrained
    model = GPT(config).to(device)
    opt = fused_adamw(weight_decay_groups(model, recipe["weight_decay"]), recipe["lr"], recipe["betas"],
                      recipe["weight_decay"], device)
    stream_d = stream.to(device)
    g = torch.Generator(device=device).manual_seed(recipe["seed"])
    T, B = config.block_size, recipe["batch_size"]
    offsets = torch.arange(T + 1, device=device)

    def loss_fn(step):
        starts = torch.randint(0, stream_d.numel() - T - 1, (B,), generator=g, device=device)
        w = stream_d[starts[:, None] + offsets]  # (B, T + 1): a window and its next tokens
        logits = model(w[:, :-1])  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), w[:, 1:].flatten()), torch.tensor(B * T, device=device)

    steps = recipe["steps"]
    run = device_loop(model, loss_fn, steps, lambda t, total: warmup_cosine(t, total, recipe["warmup"], recipe["min_ratio"]),
                      opt, recipe["clip"], bf16, label="gpt", deadline=deadline)
    model = model.float().cpu().eval()
    round_to_fp16(model)  # the metrics describe the weights as shipped
    valid_nll = G.evaluate_stream(model, valid_stream, recipe["valid_windows"])
    n_tokens = min(recipe["valid_windows"], (valid_stream.numel() - 1) // T) * T
    predicted = valid_stream[1: n_tokens + 1]
    report = {
        "model": "GPT (lmlib.models.gpt), pre-norm, pretrained on IMDb's unlabelled reviews (GPU recipe)",
        "rebuild": rerun, "config": config.__dict__,
        "tokenizer": {**shipped["tokenizer"], "reused": "the BPE shipped before this run (same recipe, same file)"},
        "recipe": recipe, "parameters": model.num_parameters(),
        "tokens_seen": run["tokens_seen"], "tokens_per_parameter": run["tokens_seen"] / model.num_parameters(),
        "train_stream_tokens": int(stream.numel()), "epochs": run["tokens_seen"] / stream.numel(),
        "final_train_loss": run["curve"][-1]["loss"], "train_loss_curve": run["curve"],
        "valid_tokens": n_tokens, "valid_nll": valid_nll, "valid_ppl": math.exp(valid_nll),
        "valid_bits_per_char": G.bits_per_char(valid_nll, tokenizer, predicted),  # <|endoftext|> = 1 character
        "train_seconds": run["train_seconds"], "planned_steps": run["planned_steps"], "steps": run["steps"], **_device_facts(device, bf16),
    }
    return save_shipped(out_dir, G.NAME, model.state_dict(), config.__dict__, report,
                        side_files={"tokenizer.json": tokenizer.save}, skip=("lm_head.weight",))


# -- BERT -----------------------------------------------------------------------------------------------------

def packed_instances(documents: Sequence[Sequence[Sequence[int]]], max_len: int, rng: random.Random, nsp: bool,
                     short_seq_prob: float = 0.1, starts: range | None = None) -> list[tuple[list[int], list[int], bool]]:
    """``(A, B, is_next)`` per instance, segments filled to the full length as in BERT's released pre-processing:
    consecutive sentences of a document are gathered until they reach the target length (``max_len − 3``; with
    probability ``short_seq_prob`` a shorter random target, so short inputs are seen too), then cut at a random
    sentence boundary into A and B. With ``nsp``, half the time B is instead as many sentences as fit from a random
    place in another document (NotNext), and the sentences A left unused go back to be read next. Without ``nsp``
    B is always the true continuation (one contiguous span of text). The pair is then trimmed to fit, from the end
    of the longer segment. ``starts``: build instances from these documents only (NotNext segments still come from
    all of them); default every document."""
    from ..text.bert_data import truncate_pair

    target_max = max_len - 3
    out = []
    for d in range(len(documents)) if starts is None else starts:
        doc = documents[d]
        target = rng.randint(2, target_max) if rng.random() < short_seq_prob else target_max
        chunk, length, i = [], 0, 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if i == len(doc) - 1 or length >= target:
                if chunk:
                    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                    a = [t for s in chunk[:a_end] for t in s]
                    random_next = nsp and (len(chunk) == 1 or rng.random() < 0.5)
                    if random_next and len(documents) > 1:
                        other = rng.randrange(len(documents) - 1)
                        other += other >= d
                        source = documents[other]
                        b, j = [], rng.randrange(len(source)) if source else 0
                        while j < len(source) and len(b) < target - len(a):
                            b.extend(source[j])
                            j += 1
                        i -= len(chunk) - a_end  # the unused sentences are read again
                        is_next = False
                    elif len(chunk) == 1:  # no sentence boundary to cut at: cut the sentence itself
                        half = len(a) // 2
                        a, b, is_next = a[:half], a[half:], True
                    else:
                        b, is_next = [t for s in chunk[a_end:] for t in s], True
                    if a and b:
                        out.append((*truncate_pair(a, b, max_len), is_next))
                target = rng.randint(2, target_max) if rng.random() < short_seq_prob else target_max
                chunk, length = [], 0
            i += 1
    return out


def instance_tensors(instances, specials, max_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids (N, max_len) int32, segments (N, max_len) int8, nsp labels (N,))`` of ``[CLS] A [SEP] B [SEP]``
    padded with [PAD]."""
    from ..text.bert_data import IS_NEXT, NOT_NEXT

    ids = torch.full((len(instances), max_len), specials.pad, dtype=torch.int32)
    segments = torch.zeros((len(instances), max_len), dtype=torch.int8)
    labels = torch.empty(len(instances), dtype=torch.long)
    for row, (a, b, is_next) in enumerate(instances):
        seq = [specials.cls, *a, specials.sep, *b, specials.sep]
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
        segments[row, len(a) + 2: len(seq)] = 1
        labels[row] = IS_NEXT if is_next else NOT_NEXT
    return ids, segments, labels


def mask_on_device(ids: torch.Tensor, special: torch.Tensor, vocab_size: int, n_special: int, rate: float,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking on the device, the rule of :func:`lmlib.text.bert_data.mask_tokens`: each non-special,
    non-padding position is chosen with probability ``rate``; a chosen token becomes [MASK] (80%), a random
    ordinary token (10%) or stays (10%). ``special`` holds (pad, unk, cls, sep, mask); the ordinary ids are
    ``n_special .. vocab_size − 1`` (lmlib's WordPiece puts the five special tokens first). Returns ``(corrupted
    ids, chosen)``."""
    maskable = ~torch.isin(ids, special)
    chosen = maskable & (torch.rand(ids.shape, generator=generator, device=ids.device) < rate)
    u = torch.rand(ids.shape, generator=generator, device=ids.device)
    drawn = torch.randint(n_special, vocab_size, ids.shape, generator=generator, device=ids.device)
    out = torch.where(chosen & (u < 0.8), special[4], ids)  # [MASK]
    out = torch.where(chosen & (u >= 0.8) & (u < 0.9), drawn, out)  # a random ordinary token
    return out, chosen


_DOCUMENTS: list = []  # the encoded documents the forked pool workers pack


def _pack_part(job: tuple[int, int, int, int, bool, float]) -> list:
    """Pool worker: :func:`packed_instances` over documents ``lo .. hi − 1`` (the others stay available as
    NotNext sources) with a generator seeded by ``seed``. It returns plain lists and runs no torch operation: a
    torch op in a process forked after the parent has used its thread pool can hang forever (the first GPU
    session's two BERT runs did, printing nothing for ten minutes)."""
    lo, hi, seed, max_len, nsp, short_seq_prob = job
    return packed_instances(_DOCUMENTS, max_len, random.Random(seed), nsp, short_seq_prob, starts=range(lo, hi))


def packed_tensors(documents: Sequence, max_len: int, seed: int, nsp: bool, short_seq_prob: float, specials,
                   dupe_factor: int, workers: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`instance_tensors` of ``dupe_factor`` passes of :func:`packed_instances` over ``documents`` (each pass
    other cuts and pairings), built in parts of about 2,000 documents on ``workers`` forked processes, each part
    with its own seeded generator (so the result depends on ``seed`` and not on ``workers``)."""
    global _DOCUMENTS
    _DOCUMENTS = list(documents)
    size = 2000
    jobs = [(lo, min(lo + size, len(documents)), seed * 1_000_003 + d * 10_007 + lo, max_len, nsp, short_seq_prob)
            for d in range(dupe_factor) for lo in range(0, len(documents), size)]
    if workers > 1 and len(jobs) > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_pack_part, jobs)
    else:
        parts = [_pack_part(job) for job in jobs]
    return instance_tensors([instance for part in parts for instance in part], specials, max_len)


def _wordpiece_documents(texts: Sequence[str]) -> list[list[list[int]]]:
    from .bert import encode_documents

    return encode_documents(_ENCODER, texts)


def pretrain_bert(out_dir: str | Path, recipe: dict, device: torch.device, bf16: bool, rerun: str,
                 deadline: float | None = None) -> dict:
    """BERT (MLM + NSP, or MLM alone with ``recipe["nsp"]`` False) on IMDb's unlabelled reviews with packed
    128-token instances masked on the device."""
    global _ENCODER
    from ..models.bert import Bert, BertConfig
    from ..text.bert_data import SpecialIds
    from . import bert as Bm
    from .shipping import save_shipped

    seed_everything(recipe["seed"])
    tokenizer, shipped = Bm.load_tokenizer()  # the shipped WordPiece and config; the weights are not read
    specials = SpecialIds.from_tokenizer(tokenizer)
    if sorted(specials.all()) != list(range(5)):
        raise ValueError("the WordPiece's special tokens must be its first five ids")
    train_texts, valid_texts = Bm.unsup_split(recipe["valid_reviews"])
    train_texts = train_texts[: recipe.get("train_reviews")]
    _ENCODER = tokenizer
    start = time.perf_counter()
    documents = [d for d in _map_in_pool(_wordpiece_documents, train_texts, _workers()) if d]
    valid_documents = [d for d in Bm.encode_documents(tokenizer, valid_texts) if d]
    ids, segments, nsp_labels = packed_tensors(documents, recipe["max_len"], recipe["seed"], recipe["nsp"],
                                               recipe["short_seq_prob"], specials, recipe["dupe_factor"], _workers())
    n_instances = ids.size(0)
    valid_packed = packed_instances(valid_documents, recipe["max_len"], random.Random(recipe["valid_seed"]), True,
                                    recipe["short_seq_prob"])[: recipe["valid_pairs"]]
    filled = float((ids != specials.pad).sum(1).float().mean())
    print(f"bert: {len(documents):,} documents -> {n_instances:,} instances ({filled:.1f} tokens on average) in "
          f"{time.perf_counter() - start:.0f} s", flush=True)

    config = BertConfig(**{**shipped["config"], "nsp_head": True})
    model = Bert(config).to(device)
    opt = fused_adamw(weight_decay_groups(model, recipe["weight_decay"]), recipe["lr"], recipe["betas"],
                      recipe["weight_decay"], device)
    ids_d, seg_d, nsp_d = ids.to(device), segments.to(device), nsp_labels.to(device)
    special = torch.tensor(specials.all(), device=device)
    g = torch.Generator(device=device).manual_seed(recipe["seed"])
    order = torch.randperm(n_instances, generator=torch.Generator().manual_seed(recipe["seed"])).to(device)
    B, steps = recipe["batch_size"], recipe["steps"]

    def loss_fn(step):
        k = (step * B) % (n_instances - B + 1)  # walk the shuffled instances, wrapping round
        rows = order[k: k + B]
        x, seg, y_nsp = ids_d[rows].long(), seg_d[rows].long(), nsp_d[rows]
        attention = x != specials.pad
        corrupted, chosen = mask_on_device(x, special, config.vocab_size, 5, recipe["mask_rate"], g)
        out = model(corrupted, seg, attention.long(), masked_positions=chosen)
        loss = F.cross_entropy(out.mlm_logits.float(), x[chosen])
        if recipe["nsp"]:
            loss = loss + F.cross_entropy(out.nsp_logits.float(), y_nsp)
        return loss, attention.sum()

    run = device_loop(model, loss_fn, steps, lambda t, total: Bm.warmup_linear(t, total, recipe["warmup"]), opt,
                      recipe["clip"], bf16, label="bert" if recipe["nsp"] else "bert-mlm", deadline=deadline)
    model = model.float().cpu().eval()
    round_to_fp16(model)
    from ..text.bert_data import SentencePair

    packed_pairs = [SentencePair(a, b, is_next) for a, b, is_next in valid_packed]
    sentence_pairs = Bm.heldout_pairs(tokenizer, valid_texts, recipe["valid_pairs"], recipe["valid_seed"])
    report = {
        "model": "BERT (lmlib.models.bert), " + ("MLM + NSP" if recipe["nsp"] else "MLM alone (the NSP head untrained)")
                 + " pretraining on IMDb's unlabelled reviews, segments filled to 128 tokens (GPU recipe)",
        "rebuild": rerun, "config": config.__dict__,
        "tokenizer": {**shipped["tokenizer"], "reused": "the WordPiece shipped before this run (same recipe, same file)"},
        "recipe": recipe, "parameters": model.num_parameters(), "train_reviews": len(train_texts),
        "train_instances": n_instances, "mean_instance_tokens": filled,
        "tokens_seen": run["tokens_seen"], "tokens_per_parameter": run["tokens_seen"] / model.num_parameters(),
        "final_train_loss": run["curve"][-1]["loss"], "train_loss_curve": run["curve"],
        "valid_packed": Bm.evaluate_pretraining(model, packed_pairs, specials, recipe["max_len"], recipe["mask_rate"],
                                                recipe["valid_seed"]),
        "valid": Bm.evaluate_pretraining(model, sentence_pairs, specials, recipe["max_len"], recipe["mask_rate"],
                                         recipe["valid_seed"]),
        "train_seconds": run["train_seconds"], "planned_steps": run["planned_steps"], "steps": run["steps"], **_device_facts(device, bf16),
    }
    return save_shipped(out_dir, Bm.NAME, model.state_dict(), config.__dict__, report,
                        side_files={"tokenizer.json": tokenizer.save}, skip=("mlm.decoder.weight",))


# -- ELMo -----------------------------------------------------------------------------------------------------

def sentence_type_ids(sentences: Sequence[Sequence[str]], width: int) -> tuple[torch.Tensor, list[str]]:
    """``(ids (N, width) int32, types)``: each sentence as ``<bos> words <eos>`` ids into ``types`` (the distinct
    cased words, with ``<pad>`` = 0, ``<bos>``, ``<eos>`` first), padded with 0."""
    from ..text.vocab import BOS, EOS, PAD

    types = [PAD, BOS, EOS]
    index = {t: i for i, t in enumerate(types)}
    ids = torch.zeros((len(sentences), width), dtype=torch.int32)
    for row, sentence in enumerate(sentences):
        seq = [1, *(index.setdefault(w, len(index)) for w in sentence), 2]
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
    types = list(index)
    return ids, types


def pretrain_elmo(out_dir: str | Path, recipe: dict, device: torch.device, bf16: bool, rerun: str,
                 deadline: float | None = None) -> dict:
    """The ELMo biLM on IMDb's unlabelled reviews: sentences as word-type ids, characters looked up on the device."""
    from collections import Counter

    from ..models.elmo import BiLM, BiLMConfig, encode_words
    from ..text.vocab import PAD
    from . import elmo as E
    from .shipping import save_shipped

    seed_everything(recipe["seed"])
    start = time.perf_counter()
    train, valid = E.unsup_sentences(recipe["valid_reviews"], recipe.get("train_reviews"))
    vocab = E.target_vocab(train, recipe["vocab_size"])
    valid = valid[: recipe["valid_sentences"]]
    counts = Counter(w.lower() for s in train for w in s)
    n_words = sum(counts.values())
    coverage = sum(counts[w] for w in vocab.itos if w in counts) / n_words
    config = BiLMConfig(vocab_size=len(vocab), **E.PRETRAIN_CONFIG)
    ids, types = sentence_type_ids(train, recipe["max_words"] + 2)
    type_chars = encode_words(types, config.max_chars)  # (types, max_chars)
    type_softmax = torch.tensor(vocab.encode([t if t in E.SPECIALS else t.lower() for t in types]))
    type_softmax[0] = vocab.stoi.get(PAD, 0)
    print(f"elmo: {len(train):,} sentences, {n_words:,} words, {len(types):,} types in "
          f"{time.perf_counter() - start:.0f} s", flush=True)

    model = BiLM(config).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=recipe["lr"], **({"fused": True} if device.type == "cuda" else {}))
    ids_d, chars_d, soft_d = ids.to(device), type_chars.to(device), type_softmax.to(device)
    g = torch.Generator(device=device).manual_seed(recipe["seed"])
    B, steps = recipe["batch_size"], recipe["steps"]

    def loss_fn(step):
        rows = torch.randint(0, ids_d.size(0), (B,), generator=g, device=device)
        t = ids_d[rows].long()  # (B, width) type ids
        return E.bilm_loss(model, (chars_d[t], soft_d[t])), (t != 0).sum()

    run = device_loop(model, loss_fn, steps,
                      lambda t, total: warmup_cosine(t, total, recipe["warmup"], recipe["min_ratio"]), opt,
                      recipe["clip"],
                      False, label="elmo", deadline=deadline)  # float32 (TF32): the LSTMs stay in cuDNN's fp32 path
    model = model.float().eval()
    round_to_fp16(model)
    metrics = E.evaluate_bilm(model, valid, vocab)  # on the device
    model = model.cpu()
    parameters = sum(p.numel() for p in model.parameters())
    report = {
        "model": "ELMo biLM (lmlib.models.elmo), pretrained on IMDb's unlabelled reviews (GPU recipe)",
        "rebuild": rerun, "config": config.__dict__, "recipe": recipe, "parameters": parameters,
        "train_sentences": len(train), "train_words": n_words, "vocab_coverage": coverage,
        "tokens_seen": run["tokens_seen"], "tokens_per_parameter": run["tokens_seen"] / parameters,
        "final_train_loss": run["curve"][-1]["loss"], "train_loss_curve": run["curve"],
        "valid_sentences": len(valid), **{f"valid_{k}": v for k, v in metrics.items()},
        "train_seconds": run["train_seconds"], "planned_steps": run["planned_steps"], "steps": run["steps"], **_device_facts(device, False),
    }
    return save_shipped(out_dir, E.NAME, model.state_dict(), config.__dict__, report,
                        side_files={"vocab.json": vocab.save})


# -- ULMFiT: stage (a) on PTB and stage (b) on IMDb ---------------------------------------------------------

def pretrain_awd_lstm(out_dir: str | Path, recipe: dict, device: torch.device, bf16: bool, rerun: str,
                 deadline: float | None = None) -> dict:
    """Stage (a): the AWD-LSTM LM on PTB with the Trainer (its carried state needs the stateful loss), many epochs."""
    from ..models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
    from ..text.batching import batchify, bptt_batches
    from ..text.vocab import PAD
    from ..training.callbacks import GradientClipping
    from ..training.objectives import StatefulLMLoss
    from ..training.schedules import STLR
    from ..training.trainer import Trainer
    from . import ulmfit as U

    seed_everything(recipe["seed"])
    vocab = U.ptb_vocab()
    config = AWDLSTMConfig(vocab_size=len(vocab), pad_id=vocab[PAD],
                           **{k: U.PRETRAIN_CONFIG[k] for k in ("embed_size", "hidden_size", "num_layers")},
                           **recipe["dropouts"])
    model = AWDLSTMLanguageModel(config)
    streams = batchify(U._ptb_ids(vocab, "train"), recipe["batch_size"]).to(device)
    windows = list(bptt_batches(streams, recipe["bptt"]))
    batches = [windows[i % len(windows)] for i in range(recipe["steps"])]
    opt = torch.optim.Adam(model.parameters(), lr=recipe["eta_max"], betas=recipe["betas"])
    trainer = Trainer(model, opt, StatefulLMLoss(state_batch_dim=1),
                      [STLR(recipe["steps"], recipe["cut_frac"], recipe["ratio"]), GradientClipping(recipe["clip"]),
                       *_trainer_watch("awd-lstm", recipe["steps"], recipe["batch_size"] * recipe["bptt"], deadline)],
                      device=device)
    start = time.perf_counter()
    trainer.fit(lambda epoch: batches)
    train_seconds = time.perf_counter() - start
    valid_ppl = U.evaluate_lm(model, U._ptb_ids(vocab, "valid"))
    test_ppl = U.evaluate_lm(model, U._ptb_ids(vocab, "test"))
    model = model.cpu()
    parameters = sum(p.numel() for p in model.parameters())
    tokens = trainer.step * recipe["batch_size"] * recipe["bptt"]
    report = {
        "model": "AWD-LSTM (lmlib.models.awd_lstm), PTB pretraining for ULMFiT (GPU recipe)", "rebuild": rerun,
        "config": config.__dict__, "recipe": recipe, "parameters": parameters, "tokens_seen": tokens,
        "tokens_per_parameter": tokens / parameters, "train_tokens_per_epoch": int(streams.numel()),
        "epochs": tokens / streams.numel(), "final_train_loss": trainer.history[-1]["train_loss"],
        "train_loss_curve": _loss_curve(trainer.batch_losses), "valid_ppl": valid_ppl, "test_ppl": test_ppl,
        "train_seconds": train_seconds, "stopped_at": _stopped_at(trainer, train_seconds, deadline),
        **_device_facts(device, False),
    }
    return U.save_pretrained(model, vocab, out_dir, report)


def finetune_ulmfit_imdb(out_dir: str | Path, recipe: dict, device: torch.device, bf16: bool, rerun: str,
                         stage_a: str | Path, deadline: float | None = None) -> dict:
    """Stage (b): the stage (a) LM in ``stage_a``, its vocabulary grown by IMDb's most frequent new words,
    fine-tuned on the unlabelled reviews with discriminative rates and STLR; held-out perplexity before and after."""
    from ..data import load_imdb
    from ..models.ulmfit import extend_vocab
    from ..training.callbacks import GradientClipping  # noqa: F401  (finetune_lm adds it)
    from . import ulmfit as U

    seed_everything(recipe["seed"])
    held_out, rest = U._split_unsup(load_imdb("unsup").texts, recipe["held_out_reviews"], recipe["seed"])
    if recipe.get("train_reviews") is not None:  # a quick trial: a few reviews to train on, a few held out
        rest, held_out = rest[: recipe["train_reviews"]], held_out[:50]
    order = torch.randperm(len(rest), generator=torch.Generator().manual_seed(recipe["seed"] + 1)).tolist()
    lm_texts = [U.review_tokens(rest[i]) for i in order]
    held_out = [U.review_tokens(t) for t in held_out]
    lm, vocab = U.load_pretrained(stage_a, **recipe["dropouts"])
    lm, vocab = extend_vocab(lm, vocab, lm_texts, recipe["min_freq"], recipe["max_new"])
    train_ids, held_ids = U.review_stream(vocab, lm_texts), U.review_stream(vocab, held_out)
    ptb_test = U._ptb_ids(vocab, "test")
    lm = lm.to(device)
    before = {"imdb_held_out_ppl": U.evaluate_lm(lm, held_ids), "ptb_test_ppl": U.evaluate_lm(lm, ptb_test)}
    print(f"ulmfit-imdb: before {before}", flush=True)
    seed_everything(recipe["seed"])
    watch = _trainer_watch("ulmfit-imdb", recipe["steps"], recipe["batch_size"] * recipe["bptt"], deadline)
    start = time.perf_counter()
    trainer = U.finetune_lm(lm, train_ids.to(device), eta_max=recipe["eta_max"], batch_size=recipe["batch_size"],
                            bptt=recipe["bptt"], max_steps=recipe["steps"], callbacks=watch,
                            factor=recipe["factor"], device=device)
    train_seconds = time.perf_counter() - start
    after = {"imdb_held_out_ppl": U.evaluate_lm(lm, held_ids), "ptb_test_ppl": U.evaluate_lm(lm, ptb_test)}
    print(f"ulmfit-imdb: after {after}", flush=True)
    stage_a_report = json.loads((Path(stage_a) / "pretrain.json").read_text())
    lm = lm.cpu()
    report = {
        "model": "AWD-LSTM (lmlib.models.awd_lstm): ULMFiT stage (b), the PTB LM fine-tuned on IMDb's unlabelled "
                 "reviews (GPU recipe)",
        "rebuild": rerun, "config": lm.config.__dict__, "recipe": recipe,
        "stage_a": {"sha256": stage_a_report["sha256"]["awd_lstm_ptb.safetensors"],
                    "tokens_seen": stage_a_report["tokens_seen"], "ptb_test_ppl": stage_a_report["test_ppl"]},
        "vocab_size": len(vocab), "new_words": len(vocab) - len(U.ptb_vocab()),
        "reviews_available": len(lm_texts), "train_stream_tokens": int(train_ids.numel()),
        "tokens_seen": trainer.step * recipe["batch_size"] * recipe["bptt"],
        "held_out_reviews": len(held_out), "held_out_tokens": int(held_ids.numel()),
        "held_out_unk_rate": (held_ids == vocab.unk_id).float().mean().item(),
        "before": before, "after": after, "final_train_loss": trainer.history[-1]["train_loss"],
        "train_loss_curve": _loss_curve(trainer.batch_losses), "train_seconds": train_seconds,
        "stopped_at": _stopped_at(trainer, train_seconds, deadline), **_device_facts(device, False),
    }
    return U.save_pretrained(lm, vocab, out_dir, report, stem="ulmfit_imdb")


# -- shared pieces --------------------------------------------------------------------------------------------

def _device_facts(device: torch.device, bf16: bool) -> dict:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"run": {"device": device.type, "device_name": name, "dtype": "bfloat16 autocast" if bf16 else "float32",
                    "torch": torch.__version__}}


def _trainer_watch(label: str, total: int, tokens_per_step: int, deadline: float | None) -> list:
    """The Trainer's callbacks for a GPU recipe run through it: the course's progress line (tokens/s, ETA) and,
    with a deadline, the course's time budget (training stops at the first step past it)."""
    watch = [StepProgress(total, tokens=lambda batch: tokens_per_step, desc=label)]
    return watch + [TimeBudget(deadline)] if deadline is not None else watch


def _stopped_at(trainer, seconds: float, deadline: float | None) -> int | None:
    """The step at which the time budget stopped a Trainer run (None: it was not stopped)."""
    return trainer.step if deadline is not None and seconds >= deadline else None


def _loss_curve(losses: Sequence[float], every: int = 500) -> list[dict]:
    """The mean training loss over each ``every`` steps, as ``{"step": last step, "loss": mean}``."""
    return [{"step": i + len(chunk), "loss": sum(chunk) / len(chunk)}
            for i in range(0, len(losses), every) for chunk in [losses[i: i + every]]]


PRETRAINERS = {"gpt": pretrain_gpt, "bert": pretrain_bert, "bert-mlm": pretrain_bert, "elmo": pretrain_elmo,
               "awd-lstm": pretrain_awd_lstm}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmlib.recipes.accelerated", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=[*PRETRAINERS, "ulmfit-imdb"])
    parser.add_argument("--out", type=Path, required=True, help="output folder (created)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the recipe's)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="sequences per step (default: the recipe's); the rate follows the square-root rule")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--no-bf16", action="store_true", help="float32 throughout (default: bf16 autocast on CUDA)")
    parser.add_argument("--stage-a", type=Path, default=None, help="ulmfit-imdb: the stage (a) checkpoint folder")
    parser.add_argument("--deadline", type=float, default=None,
                        help="stop training after this many seconds (the model trained so far is saved, and "
                             "pretrain.json says where it stopped)")
    parser.add_argument("--train-reviews", type=int, default=None, help="use only the first N training reviews "
                                                                         "(a quick trial)")
    args = parser.parse_args(argv)
    try:
        device = pick_device(args.device)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.steps is not None and args.steps < 1:
        print(f"error: --steps must be at least 1, got {args.steps}", file=sys.stderr)
        return 2
    if args.batch_size is not None and args.batch_size < 1:
        print(f"error: --batch-size must be at least 1, got {args.batch_size}", file=sys.stderr)
        return 2
    if args.model == "ulmfit-imdb" and (args.stage_a is None or not (args.stage_a / "pretrain.json").is_file()):
        print("error: ulmfit-imdb needs --stage-a naming a folder with a stage (a) checkpoint (pretrain.json)",
              file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"error: --out {args.out} is a file; name a folder", file=sys.stderr)
        return 2
    recipe = dict(RECIPES[args.model])
    if args.steps is not None:
        recipe["steps"] = args.steps
        for key in ("warmup",):
            if key in recipe:
                recipe[key] = min(recipe[key], max(1, args.steps // 10))
    if args.batch_size is not None:
        rate = "lr" if "lr" in recipe else "eta_max"
        recipe[rate] = scaled_lr(recipe[rate], recipe["batch_size"], args.batch_size)
        recipe["batch_size"] = args.batch_size
    if args.train_reviews is not None:
        recipe["train_reviews"] = args.train_reviews
    bf16 = device.type == "cuda" and not args.no_bf16
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    rerun = command(args.model, args.out, steps=args.steps, batch_size=args.batch_size,
                    stage_a=args.stage_a, train_reviews=args.train_reviews)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.model == "ulmfit-imdb":
        report = finetune_ulmfit_imdb(args.out, recipe, device, False, rerun, args.stage_a, args.deadline)
    else:
        report = PRETRAINERS[args.model](args.out, recipe, device, bf16 if args.model != "awd-lstm" else False, rerun,
                                         args.deadline)
    summary = {k: v for k, v in report.items() if k not in ("config", "train_loss_curve", "recipe")}
    print(json.dumps(summary, indent=1, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
