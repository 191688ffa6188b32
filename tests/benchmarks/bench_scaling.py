"""A scaling-law experiment at CPU scale (Kaplan et al. 2020; Brown et al. 2020, fig. 3.1): held-out loss against
model size for six lmlib GPTs, in two regimes, and a fit of L(N) = a·N^(−α) + c.

Data: IMDb's unlabelled reviews, tokenized with the byte-level BPE shipped with the pretrained IMDb GPT
(``lmlib.recipes.gpt.load_pretrained``): the 49,000 training reviews as one stream (16.1M tokens, more than any
run below reads, so no run sees its data twice except by chance overlaps of random windows), and the 1,000 held-out
reviews for the loss: nats per BPE token over the first ``VALID_WINDOWS`` non-overlapping 64-token windows
(``evaluate_stream``), the same windows for every model.

Models: pre-norm GPTs, dropout 0, context 64, ``num_layers`` = 1..6 with ``d_model`` = 32·num_layers and one head per
32 dimensions, so N (non-embedding parameters, ``lmlib.eval.scaling.non_embedding_parameters``) runs from 12.8k
to 2.7M, 209×. Every run: seed 0, batch 16 random windows (``random_windows``, seed 0, so every model reads the
same batches in the same order), AdamW (betas 0.9/0.95, weight decay 0.1 on matrices via ``weight_decay_groups``),
linear warm-up over min(100, steps/10) steps then cosine to 5% (``WarmupCosine``), gradient clipping at 1.0, lmlib's
``Trainer``, one torch thread.

* Fixed tokens: every model reads the same D tokens (``FIXED_STEPS`` steps).
* Compute-matched: every model gets the same C = 6·N·D (``COMPUTE``), so D = C / (6N): the small models read many
  tokens, the large ones few. 6N leaves out the embeddings and the 8,192-way softmax, which dominate the cost of the
  small models on a CPU, so the measured seconds are recorded too, and 6·(all parameters)·D beside 6ND.

``--lr-check`` (run before choosing the rate) trains the smallest and the largest model for ``LR_CHECK_STEPS`` steps
at a few rates and writes the ``lr_check`` section. The default run writes everything else; each keeps the other's
section of lmlib/results/scaling.json (written atomically).

    nice -n 10 .venv/bin/python tests/benchmarks/bench_scaling.py --lr-check
    nice -n 10 .venv/bin/python tests/benchmarks/bench_scaling.py              # one thread

with LMLIB_DATA_DIR pointing at the data mirror and LMLIB_OFFLINE=1 where there is no network (the result records
the seconds of each run, the machine and its load).
"""

from __future__ import annotations

import argparse
import datetime
import json
import time

import torch
from common import load, machine, result_path, write_result

from lmlib.eval.scaling import fit_power_law, non_embedding_parameters, training_flops
from lmlib.models.gpt import GPT, GPTConfig
from lmlib.recipes.gpt import encode_stream, evaluate_stream, load_pretrained, random_windows, unsup_split
from lmlib.runtime import seed_everything
from lmlib.training.callbacks import GradientClipping, PrintEvery
from lmlib.training.objectives import next_token_loss
from lmlib.training.schedules import WarmupCosine, weight_decay_groups
from lmlib.training.trainer import Trainer

RESULTS = result_path("scaling")
SIZES = [(1, 32, 1), (2, 64, 2), (3, 96, 3), (4, 128, 4), (5, 160, 5), (6, 192, 6)]  # (num_layers, d_model, num_heads)
CONTEXT, BATCH = 64, 16
# lr 2e-3 (the shipped GPT's) for every size: in the lr_check section it is the best of 1e-3, 2e-3 and 4e-3 for the
# largest model and within 0.03 nats of the best (4e-3) for the smallest.
RECIPE = dict(seed=0, lr=2e-3, max_warmup=100, min_ratio=0.05, weight_decay=0.1, betas=(0.9, 0.95), clip=1.0)
FIXED_STEPS = 768  # × 16 × 64 = 786,432 tokens for every model
COMPUTE = 3.2e11  # C = 6·N·D for every model of the compute-matched regime: 4,079 steps for the smallest, 20 for the largest
VALID_WINDOWS = 512  # × 64 = 32,768 held-out tokens
LR_CHECK_STEPS, LR_CHECK_RATES = 300, (1e-3, 2e-3, 4e-3)


def save_section(name: str, section: dict) -> None:
    """Rewrite one section of the results file (atomically), keeping the others."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["what"] = (f"held-out loss (nats per BPE token, IMDb held-out reviews) of {len(SIZES)} GPTs from 12.8k to 2.7M "
                       "non-embedding parameters N, trained on the same number of tokens (fixed_tokens) and on the "
                       "same compute C = 6ND (compute_matched); fit of L(N) = a·N^(−α) + c to the fixed-token runs")
    results[name] = section
    write_result(RESULTS, results)


def data() -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The train and held-out token streams of IMDb's unlabelled reviews, in the shipped GPT's BPE."""
    start = time.perf_counter()
    _, tokenizer, _ = load_pretrained()
    train_texts, valid_texts = unsup_split()
    train, valid = encode_stream(tokenizer, train_texts), encode_stream(tokenizer, valid_texts)
    info = {"corpus": "IMDb unlabelled reviews (lmlib.recipes.gpt.unsup_split): all 49,000 train reviews as one "
                      "stream, the last 1,000 held out", "tokenizer": "the shipped gpt_imdb byte-level BPE",
            "vocab_size": len(tokenizer), "train_reviews": len(train_texts), "train_tokens": int(train.numel()),
            "valid_reviews": len(valid_texts), "valid_tokens_total": int(valid.numel()),
            "valid_tokens_scored": VALID_WINDOWS * CONTEXT, "encode_seconds": round(time.perf_counter() - start, 1)}
    print(f"train stream {train.numel():,} tokens, held-out {valid.numel():,} ({info['encode_seconds']} s)", flush=True)
    return train, valid, info


def build(size: tuple[int, int, int], vocab_size: int) -> GPT:
    num_layers, d_model, num_heads = size
    seed_everything(RECIPE["seed"])
    return GPT(GPTConfig(vocab_size=vocab_size, block_size=CONTEXT, num_layers=num_layers, num_heads=num_heads,
                         d_model=d_model, dropout=0.0, norm="pre"))


def train_one(size: tuple[int, int, int], steps: int, lr: float, train: torch.Tensor, valid: torch.Tensor,
              vocab_size: int) -> dict:
    """Train one model for ``steps`` steps with the shared recipe; its sizes, cost and losses."""
    model = build(size, vocab_size)
    n, tokens = non_embedding_parameters(model), steps * BATCH * CONTEXT
    warmup = min(RECIPE["max_warmup"], steps // 10)
    opt = torch.optim.AdamW(weight_decay_groups(model, RECIPE["weight_decay"]), lr=lr, betas=RECIPE["betas"])
    trainer = Trainer(model, opt, next_token_loss, [WarmupCosine(steps, warmup, RECIPE["min_ratio"]),
                                                    GradientClipping(RECIPE["clip"]), PrintEvery(max(100, steps // 5))],
                      device="cpu")
    print(f"-- layers {size[0]} d_model {size[1]}: N {n:,}, {steps} steps, D {tokens:,} tokens, lr {lr:g}", flush=True)
    start = time.perf_counter()
    trainer.fit(lambda epoch: random_windows(train, CONTEXT, BATCH, steps, RECIPE["seed"]), epochs=1)
    seconds = time.perf_counter() - start
    last = trainer.batch_losses[-50:]
    row = {"num_layers": size[0], "d_model": size[1], "num_heads": size[2], "n_non_embedding": n,
           "n_total": model.num_parameters(), "lr": lr, "steps": steps, "warmup": warmup, "batch": BATCH,
           "tokens": tokens, "tokens_per_n": round(tokens / n, 2), "flops_6ND": training_flops(n, tokens),
           "flops_6ND_all_parameters": training_flops(model.num_parameters(), tokens),
           "train_seconds": round(seconds, 1), "seconds_per_step": round(seconds / steps, 4),
           "torch_threads": torch.get_num_threads(), "train_loss_last_50": round(sum(last) / len(last), 4),
           "valid_loss": round(evaluate_stream(model, valid, VALID_WINDOWS), 4)}
    print(f"   valid {row['valid_loss']:.4f}  train(last 50) {row['train_loss_last_50']:.4f}  {seconds:.0f} s", flush=True)
    return row


def lr_check() -> None:
    """The smallest and the largest model at a few rates for ``LR_CHECK_STEPS`` steps."""
    torch.set_num_threads(1)
    load_before, started = load(), time.time()
    train, valid, info = data()
    rows = [train_one(size, LR_CHECK_STEPS, lr, train, valid, info["vocab_size"])
            for size in (SIZES[0], SIZES[-1]) for lr in LR_CHECK_RATES]
    save_section("lr_check", {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "what": f"smallest and largest model, {LR_CHECK_STEPS} steps (shorter than either regime), at each rate",
        "rows": rows, "machine": machine(), "load_before": load_before, "load_after": load(),
        "seconds": round(time.time() - started, 1)})


def main() -> None:
    torch.set_num_threads(1)
    load_before, started = load(), time.time()
    train, valid, info = data()
    vocab = info["vocab_size"]
    fixed = [train_one(size, FIXED_STEPS, RECIPE["lr"], train, valid, vocab) for size in SIZES]
    fit = fit_power_law([r["n_non_embedding"] for r in fixed], [r["valid_loss"] for r in fixed])
    print(f"fit: L = {fit.a:.3g}·N^(−{fit.alpha:.3f}) + {fit.c:.3f}, α 95% interval "
          f"[{fit.alpha_interval[0]:.3f}, {fit.alpha_interval[1]:.3f}]", flush=True)
    matched = []
    for size in SIZES:
        n = non_embedding_parameters(build(size, vocab))
        steps = max(1, round(COMPUTE / (6 * n * BATCH * CONTEXT)))  # D = C / (6N), in whole steps
        matched.append(train_one(size, steps, RECIPE["lr"], train, valid, vocab))
    best = min(matched, key=lambda r: r["valid_loss"])
    save_section("settings", {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "data": info, "context": CONTEXT, "batch": BATCH, "recipe": RECIPE,
        "sizes": [dict(zip(("num_layers", "d_model", "num_heads"), s)) for s in SIZES],
        "model": "lmlib GPT, pre-norm, dropout 0, tied embeddings, d_ff = 4·d_model",
        "lr": "the same for every size; see the lr_check section",
        "n_counts": "n_non_embedding: Kaplan's N (no token/position embeddings, tied output layer); n_total: all",
        "train_loss": "mean of the last 50 training batches (fewer when the run is shorter)",
        "valid_loss": f"nats per BPE token over the first {VALID_WINDOWS} 64-token windows of the held-out stream",
        "machine": machine("scipy"), "load_before": load_before, "load_after": load(),
        "total_seconds": round(time.time() - started, 1)})
    save_section("fixed_tokens", {"steps": FIXED_STEPS, "tokens": FIXED_STEPS * BATCH * CONTEXT, "runs": fixed})
    save_section("fit", {
        "law": "valid_loss = a · N^(−alpha) + c, N non-embedding parameters, fixed-token runs",
        "a": fit.a, "alpha": fit.alpha, "c": fit.c, "alpha_95": list(fit.alpha_interval),
        "interval": "linearised: covariance of the least-squares estimates, Student t with n − 3 degrees of freedom",
        "c_at_bound": fit.c_at_bound,
        "residuals": [{"n_non_embedding": r["n_non_embedding"], "valid_loss": r["valid_loss"], "residual": res}
                      for r, res in zip(fixed, fit.residuals)],
        "note": "alpha comes with a constant c that absorbs the loss of seeing only D tokens and the text's entropy, "
                "so it is not Kaplan's alpha_N = 0.076 (no constant, converged models)"})
    save_section("compute_matched", {
        "compute_6ND": COMPUTE, "runs": matched,
        "best_by_valid_loss": {k: best[k] for k in ("num_layers", "d_model", "n_non_embedding", "tokens", "valid_loss")},
        "seconds_vs_6ND": "6ND counts non-embedding parameters only; the token embedding and the 8,192-way output "
                          "layer it is tied to are in flops_6ND_all_parameters, and train_seconds is what it cost"})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lr-check", action="store_true", help="only the learning-rate check (lr_check section)")
    args = parser.parse_args()
    lr_check() if args.lr_check else main()
