"""lmlib's GPT against transformers' GPT2LMHeadModel: speed, and the quality of a character GPT on Tiny Shakespeare.

Speed (default): one process, both models built from the same weights (lmlib's is copied from the HF model
with ``GPT.from_hf``), same config, batch and thread count. Each measurement alternates the contenders in
rounds (A B C, C B A, ...) and reports the median, so load from other processes hits all of them alike.

* training step (forward, cross-entropy, backward, AdamW step; train mode, dropout 0): lmlib vs HF with
  attention "eager" and "sdpa", at 4 layers / 4 heads / d_model 128 / context 64 and 6 / 6 / 384 / 256,
  batch 12, on 1 and 2 threads, in tokens per second;
* forward (eval, no grad) over the same batch;
* greedy generation, batch 1, with the key/value cache: ``lmlib.models.gpt.generate`` vs ``model.generate``
  (cache on, ``do_sample=False``); both must give the same tokens.

Quality (``--quality``): the character GPT at 4 / 4 / 128, context 64, batch 12, 2,000 AdamW steps, lr 1e-3
cosine to 1e-4 (100 warm-up steps), no dropout, on the first 90% of Tiny Shakespeare; the validation loss is
the mean over 200 random windows of the last 10%.

    .venv/bin/python tests/benchmarks/bench_gpt.py              # speed section of results/gpt.json
    nice -n 10 .venv/bin/python tests/benchmarks/bench_gpt.py --quality   # quality section (1 thread)

Each run rewrites only its own section of lmlib/results/gpt.json.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from common import load, machine, result_path, write_result

from lmlib.models.gpt import GPT, GPTConfig, generate
from lmlib.training.schedules import weight_decay_groups

RESULTS = result_path("gpt")
VOCAB = 65  # Tiny Shakespeare's characters
BATCH = 12
SIZES = {  # name: (num_layers, num_heads, d_model, context)
    "small": (4, 4, 128, 64),
    "larger": (6, 6, 384, 256),
}
TRAIN_ROUNDS = {"small": (9, 5), "larger": (5, 1)}  # (rounds, steps per round)
GENERATION = {"small": (4, 60), "larger": (16, 112)}  # (prompt length, new tokens), batch 1


def save_section(name: str, section: dict) -> None:
    """Rewrite one section of the results file (atomically), keeping the other."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["what"] = ("lmlib.models.gpt.GPT vs transformers GPT2LMHeadModel (eager and sdpa attention): training "
                       "step, forward and cached greedy generation in tokens/s (ratio = lmlib / HF, > 1 means "
                       "lmlib is faster); and a character GPT's validation loss on Tiny Shakespeare")
    results[name] = section
    write_result(RESULTS, results)


# --- speed ------------------------------------------------------------------------------------------------------

def hf_pair(size: str):
    """Two HF GPT-2 models with the same weights (eager and sdpa attention) and lmlib's copy of them."""
    from transformers import GPT2Config, GPT2LMHeadModel

    layers, heads, d_model, context = SIZES[size]
    config = GPT2Config(vocab_size=VOCAB, n_positions=context, n_layer=layers, n_head=heads, n_embd=d_model,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None,
                        pad_token_id=0)
    torch.manual_seed(0)
    eager = GPT2LMHeadModel(config)
    # each model needs its own config object: the attention implementation is stored on the config
    sdpa = GPT2LMHeadModel(copy.deepcopy(config))
    eager.set_attn_implementation("eager")
    sdpa.set_attn_implementation("sdpa")
    sdpa.load_state_dict(eager.state_dict())
    ours = GPT.from_hf(eager)
    with torch.no_grad():  # eager returns attention weights; sdpa returns none
        x = torch.zeros(1, 4, dtype=torch.long)
        assert all(a is not None for a in eager(x, output_attentions=True).attentions), "eager is not in use"
        assert eager.config._attn_implementation == "eager" and sdpa.config._attn_implementation == "sdpa"
    return {"lmlib": ours, "hf_eager": eager, "hf_sdpa": sdpa}


def alternate(calls: dict, rounds: int, repeat: int) -> dict:
    """Median seconds per call of each function, timed in rounds whose order alternates."""
    times = {name: [] for name in calls}
    order = list(calls)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            for _ in range(repeat):
                calls[name]()
            times[name].append((time.perf_counter() - start) / repeat)
    return {name: statistics.median(ts) for name, ts in times.items()}


def logits_of(model, x):
    return model(x) if isinstance(model, GPT) else model(input_ids=x).logits


def training_step(model, x, y):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        logits = logits_of(model, x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def forward_call(model, x):
    def forward():
        with torch.no_grad():
            logits_of(model, x)

    return forward


def generation_call(model, prompt, new_tokens, out: list):
    def run():
        if isinstance(model, GPT):
            out.append(generate(model, prompt, new_tokens, greedy=True, use_cache=True))
        else:
            out.append(model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, use_cache=True,
                                      max_new_tokens=new_tokens, min_new_tokens=new_tokens))

    return run


def summarize(kind: str, size: str, threads: int, tokens: int, seconds: dict) -> dict:
    row = {"measure": kind, "size": size, "threads": threads, "tokens_per_call": tokens}
    for name, s in seconds.items():
        row[f"{name}_tokens_per_s"] = round(tokens / s, 1)
    for ref in ("hf_eager", "hf_sdpa"):
        row[f"ratio_vs_{ref}"] = round(seconds[ref] / seconds["lmlib"], 3)
    print(f"{kind:10s} {size:6s} {threads} thr  " + "  ".join(
        f"{n} {row[f'{n}_tokens_per_s']:9.1f} tok/s" for n in seconds) +
        f"  ratio eager {row['ratio_vs_hf_eager']:.3f} sdpa {row['ratio_vs_hf_sdpa']:.3f}", flush=True)
    return row


def speed() -> None:
    load_before = load()
    started = time.time()
    rows = []
    for size in SIZES:
        models = hf_pair(size)
        layers, heads, d_model, context = SIZES[size]
        g = torch.Generator().manual_seed(1)
        x = torch.randint(0, VOCAB, (BATCH, context), generator=g)
        y = torch.randint(0, VOCAB, (BATCH, context), generator=g)
        with torch.no_grad():  # same numbers before timing the same computation
            ref = models["hf_eager"](input_ids=x).logits
            for model in models.values():
                model.eval()
                torch.testing.assert_close(logits_of(model, x), ref, atol=1e-4, rtol=1e-4)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            rounds, repeat = TRAIN_ROUNDS[size]
            states = {n: {k: v.clone() for k, v in m.state_dict().items()} for n, m in models.items()}
            steps = {n: training_step(m, x, y) for n, m in models.items()}
            for step in steps.values():  # warm up
                step()
            rows.append(summarize("train", size, threads, BATCH * context, alternate(steps, rounds, repeat)))
            for n, m in models.items():  # back to the shared weights for the next measurements
                m.load_state_dict(states[n])
                m.eval()
            forwards = {n: forward_call(m, x) for n, m in models.items()}
            for f in forwards.values():
                f()
            rows.append(summarize("forward", size, threads, BATCH * context, alternate(forwards, rounds, repeat)))
            prompt_len, new_tokens = GENERATION[size]
            prompt = x[:1, :prompt_len]
            outputs = {n: [] for n in models}
            gens = {n: generation_call(m, prompt, new_tokens, outputs[n]) for n, m in models.items()}
            for f in gens.values():
                f()
            row = summarize("generate", size, threads, new_tokens, alternate(gens, 5, 1))
            row["same_tokens"] = all(torch.equal(o, outputs["lmlib"][0]) for out in outputs.values() for o in out)
            row["prompt_tokens"] = prompt_len
            rows.append(row)
    ratios = lambda kind, ref: [r[f"ratio_vs_{ref}"] for r in rows if r["measure"] == kind]  # noqa: E731
    summary = {
        "train_min_ratio_vs_hf_eager": min(ratios("train", "hf_eager")),
        "train_min_ratio_vs_hf_sdpa": min(ratios("train", "hf_sdpa")),
        "forward_min_ratio_vs_hf_sdpa": min(ratios("forward", "hf_sdpa")),
        "generate_min_ratio_vs_hf_sdpa": min(ratios("generate", "hf_sdpa")),
        "generate_min_ratio_vs_hf_eager": min(ratios("generate", "hf_eager")),
        "goals": "training: lmlib >= 1.2x HF eager and >= 1.0x HF sdpa; generation: >= 1.0x HF",
    }
    summary["goals_met"] = (summary["train_min_ratio_vs_hf_eager"] >= 1.2 and summary["train_min_ratio_vs_hf_sdpa"]
                            >= 1.0 and min(summary["generate_min_ratio_vs_hf_sdpa"],
                                           summary["generate_min_ratio_vs_hf_eager"]) >= 1.0)
    import transformers

    print(json.dumps(summary, indent=1))
    fields = ("num_layers", "num_heads", "d_model", "context")
    save_section("speed", {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"vocab_size": VOCAB, "batch": BATCH,
                     "sizes": {k: dict(zip(fields, v, strict=True)) for k, v in SIZES.items()},
                     "train_rounds_and_steps_per_round": TRAIN_ROUNDS, "generation_prompt_and_new_tokens": GENERATION,
                     "optimizer": "AdamW lr 1e-4 (same for all)", "dropout": 0.0,
                     "hf_attention": "eager and sdpa models built from separate config objects, checked before timing",
                     "timing": "median over rounds in alternating order (A B C, C B A, ...)"},
        "machine": {**machine(), "transformers": transformers.__version__},
        "load_before": load_before, "load_after": load(), "seconds": round(time.time() - started, 1),
        "summary": summary, "rows": rows,
    })


# --- quality ------------------------------------------------------------------------------------------------------

def cosine_lr(step: int, steps: int, lr_max: float = 1e-3, lr_min: float = 1e-4, warmup: int = 100) -> float:
    """Linear warm-up to lr_max, then lr_min + (lr_max − lr_min)·(1 + cos(π·progress))/2 down to lr_min."""
    if step < warmup:
        return lr_max * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr_min + (lr_max - lr_min) * 0.5 * (1.0 + math.cos(math.pi * progress))


def quality(steps: int = 2000, eval_batches: int = 200) -> None:
    mirror = Path(__file__).resolve().parents[3] / "shared" / "data"  # the data mirror beside the checkout, as in CI
    if "LMLIB_DATA_DIR" not in os.environ and (mirror / "manifest.json").is_file():
        os.environ["LMLIB_DATA_DIR"] = str(mirror)
    from lmlib.data import load_tiny_shakespeare

    torch.set_num_threads(1)
    load_before = load()
    text = load_tiny_shakespeare()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    context = 64
    config = GPTConfig(vocab_size=len(chars), block_size=context, num_layers=4, num_heads=4, d_model=128, dropout=0.0)
    torch.manual_seed(1337)
    model = GPT(config)
    optimizer = torch.optim.AdamW(weight_decay_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.99))
    g = torch.Generator().manual_seed(0)

    def batch(source):
        starts = torch.randint(len(source) - context - 1, (BATCH,), generator=g)
        x = torch.stack([source[s:s + context] for s in starts])  # (B, T)
        y = torch.stack([source[s + 1:s + 1 + context] for s in starts])  # (B, T): the next characters
        return x, y

    @torch.no_grad()
    def evaluate(source, batches):
        model.eval()
        losses = []
        for _ in range(batches):
            x, y = batch(source)
            losses.append(F.cross_entropy(model(x).reshape(-1, config.vocab_size), y.reshape(-1)).item())
        model.train()
        return sum(losses) / len(losses)

    start = time.time()
    curve = []
    model.train()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = cosine_lr(step, steps)
        x, y = batch(train)
        loss = F.cross_entropy(model(x).reshape(-1, config.vocab_size), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if (step + 1) % 500 == 0 and step + 1 < steps:
            curve.append({"step": step + 1, "train_loss": round(loss.item(), 4),
                          "val_loss_20_batches": round(evaluate(val, 20), 4), "seconds": round(time.time() - start, 1)})
            print(curve[-1], flush=True)
    train_seconds = time.time() - start
    val_loss = evaluate(val, eval_batches)
    train_loss = evaluate(train, eval_batches)
    total = time.time() - start
    sample = generate(model, torch.tensor([[stoi["\n"]]]), 200, seed=0, top_k=20)[0, 1:]
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"num_layers": 4, "num_heads": 4, "d_model": 128, "context": context, "batch": BATCH,
                     "steps": steps, "optimizer": "AdamW betas (0.9, 0.99), weight decay 0.1 on matrices, grad clip 1.0",
                     "lr": "1e-3, 100 warm-up steps, cosine to 1e-4", "dropout": 0.0, "split": "first 90% / last 10%",
                     "eval": f"mean loss over {eval_batches} random windows", "threads": torch.get_num_threads(),
                     "parameters": model.num_parameters(), "vocab_size": len(chars)},
        "val_loss": round(val_loss, 4), "train_loss": round(train_loss, 4), "goal": "val_loss <= 1.90",
        "goal_met": val_loss <= 1.90, "train_seconds": round(train_seconds, 1), "total_seconds": round(total, 1),
        "ms_per_step": round(1e3 * train_seconds / steps, 1), "curve": curve,
        "sample_top_k_20": "".join(chars[i] for i in sample.tolist()),
        "machine": machine(), "load_before": load_before, "load_after": load(),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "curve"}, indent=1))
    save_section("quality", result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quality", action="store_true", help="train the character GPT instead of timing")
    parser.add_argument("--steps", type=int, default=2000, help="training steps of the quality run")
    args = parser.parse_args()
    if args.quality:
        quality(args.steps)
    else:
        speed()
