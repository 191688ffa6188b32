"""lmlib's BERT against transformers' BertForPreTraining: forward and training-step speed at equal config and batch.

One process; three contenders built from the same weights: transformers' model with attention "eager", the same
with "sdpa", and lmlib's copy (``Bert.from_hf``). Each batch holds sentence pairs with both segment ids and
padding in some rows (``attention_mask``), as pre-training batches do. Before timing, the three must give the
same logits.

* forward: eval mode, no grad, MLM and NSP logits for the whole batch;
* training step: train mode with dropout 0, MLM cross-entropy on ~15% of the positions plus NSP cross-entropy,
  computed the same way outside every model, backward, AdamW step;
* training step, lmlib with ``masked_positions`` (the MLM head only where there are labels, as the released
  BERT code does; same loss and gradients), against the same HF steps: shown apart, not part of the goals.

Timing rotates the contenders in rounds (A B C, B C A, C A B, ...) and reports the median of each, so load from
other processes hits all of them alike. Tokens per second count every position of the padded batch. Each row
also has the ratio of CPU time (``time.process_time``), which leaves out time spent waiting for a core and so
is the steadier number on a shared, loaded machine.

    .venv/bin/python tests/benchmarks/bench_bert.py            # writes lmlib/results/bert.json
    .venv/bin/python tests/benchmarks/bench_bert.py --quick    # one small size, few rounds, prints only
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import statistics
import time

import torch
import torch.nn.functional as F
from common import load, machine, result_path, write_result

from lmlib.models.bert import Bert

RESULTS = result_path("bert")
VOCAB = 8192
BATCH = 8
SIZES = {  # name: (num_layers, num_heads, d_model, seq)
    "small": (4, 4, 256, 128),
    "larger": (4, 8, 512, 256),
}
ROUNDS = {"small": (9, 2), "larger": (6, 1)}  # (rounds, calls per round)
THREADS = (1, 2)
GOALS = {"hf_eager": 1.0, "hf_sdpa": 0.9}  # lmlib / HF tokens-per-second ratio wanted, every row


def contenders(size: str) -> dict:
    """transformers' BertForPreTraining with eager and with sdpa attention (same weights) and lmlib's copy."""
    from transformers import BertConfig, BertForPreTraining

    layers, heads, d_model, seq = SIZES[size]
    config = BertConfig(vocab_size=VOCAB, hidden_size=d_model, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * d_model, max_position_embeddings=seq, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    # one config object each: models built from the same config share it, and set_attn_implementation on one
    # would switch the other too
    eager = BertForPreTraining(copy.deepcopy(config))
    eager.set_attn_implementation("eager")
    sdpa = BertForPreTraining(copy.deepcopy(config))
    sdpa.set_attn_implementation("sdpa")
    sdpa.load_state_dict(eager.state_dict())
    assert (eager.config._attn_implementation, sdpa.config._attn_implementation) == ("eager", "sdpa")
    return {"lmlib": Bert.from_hf(eager), "hf_eager": eager, "hf_sdpa": sdpa}


def make_batch(seq: int) -> dict:
    """Pairs with both segments; every other row padded after 60-90% of its positions; ~15% MLM labels."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, VOCAB, (BATCH, seq), generator=g)
    segments = torch.zeros_like(ids)
    attention_mask = torch.ones_like(ids)
    for row in range(BATCH):
        length = seq if row % 2 == 0 else int(seq * (0.6 + 0.3 * row / BATCH))
        segments[row, length // 2:length] = 1
        attention_mask[row, length:] = 0
    ids[:, 0] = 2
    ids[attention_mask == 0] = 0
    chosen = (torch.rand(ids.shape, generator=g) < 0.15) & attention_mask.bool()
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    nsp = torch.randint(0, 2, (BATCH,), generator=g)
    return {"ids": ids, "segments": segments, "attention_mask": attention_mask, "labels": labels, "nsp": nsp}


def logits_of(model, b: dict) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(model, Bert):
        out = model(b["ids"], b["segments"], b["attention_mask"])
        return out.mlm_logits, out.nsp_logits
    out = model(input_ids=b["ids"], token_type_ids=b["segments"], attention_mask=b["attention_mask"])
    return out.prediction_logits, out.seq_relationship_logits


def training_step(model, b: dict, masked_only: bool = False):
    """One AdamW step on MLM + NSP cross-entropy. ``masked_only`` (lmlib only): the MLM head runs at the
    labelled positions alone (``masked_positions``), as in the released BERT code; same loss and gradients."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    chosen = b["labels"] != -100

    def step():
        if masked_only:
            out = model(b["ids"], b["segments"], b["attention_mask"], masked_positions=chosen)
            mlm, nsp, labels = out.mlm_logits, out.nsp_logits, b["labels"][chosen]  # (N, V), (B, 2), (N,)
        else:
            (mlm, nsp), labels = logits_of(model, b), b["labels"]  # (B, T, V), (B, 2), (B, T)
        loss = F.cross_entropy(mlm.reshape(-1, VOCAB), labels.reshape(-1)) + F.cross_entropy(nsp, b["nsp"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def forward_call(model, b: dict):
    def forward():
        with torch.no_grad():
            logits_of(model, b)

    return forward


def alternate(calls: dict, rounds: int, repeat: int) -> tuple[dict, dict]:
    """Median wall seconds and median CPU seconds (this process's, all threads) per call of each function, timed
    in rounds whose order rotates (A B C, B C A, C A B, ...): every contender takes every slot, and none runs
    twice in a row, so a burst of load from elsewhere is shared out. On a loaded machine the CPU time is the
    steadier of the two: it leaves out the time the process waited for a core."""
    wall, cpu = {name: [] for name in calls}, {name: [] for name in calls}
    names = list(calls)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(repeat):
                calls[name]()
            wall[name].append((time.perf_counter() - start) / repeat)
            cpu[name].append((time.process_time() - start_cpu) / repeat)
    return ({name: statistics.median(ts) for name, ts in wall.items()},
            {name: statistics.median(ts) for name, ts in cpu.items()})


def summarize(kind: str, size: str, threads: int, tokens: int, timed: tuple[dict, dict]) -> dict:
    seconds, cpu_seconds = timed
    row = {"measure": kind, "size": size, "threads": threads, "tokens_per_call": tokens}
    for name, s in seconds.items():
        row[f"{name}_tokens_per_s"] = round(tokens / s, 1)
    for ref in GOALS:
        row[f"ratio_vs_{ref}"] = round(seconds[ref] / seconds["lmlib"], 3)
    for ref in GOALS:
        row[f"cpu_time_ratio_vs_{ref}"] = round(cpu_seconds[ref] / cpu_seconds["lmlib"], 3)
    row["wall_over_cpu_lmlib"] = round(seconds["lmlib"] / cpu_seconds["lmlib"], 2)
    print(f"{kind:17s} {size:6s} {threads} thr  " + "  ".join(
        f"{n} {row[f'{n}_tokens_per_s']:8.1f} tok/s" for n in seconds) +
        f"  ratio eager {row['ratio_vs_hf_eager']:.3f} sdpa {row['ratio_vs_hf_sdpa']:.3f}"
        f"  (cpu time: {row['cpu_time_ratio_vs_hf_eager']:.3f} {row['cpu_time_ratio_vs_hf_sdpa']:.3f})", flush=True)
    return row


def main(quick: bool = False) -> None:
    sizes = ["small"] if quick else list(SIZES)
    load_before = load()
    started = time.time()
    rows = []
    for size in sizes:
        models = contenders(size)
        b = make_batch(SIZES[size][3])
        tokens = b["ids"].numel()
        with torch.no_grad():  # the same numbers before timing the same computation
            ref = logits_of(models["hf_eager"].eval(), b)
            for model in models.values():
                for got, want in zip(logits_of(model.eval(), b), ref):
                    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        rounds, repeat = (3, 1) if quick else ROUNDS[size]
        for threads in THREADS:
            torch.set_num_threads(threads)
            states = {n: {k: v.clone() for k, v in m.state_dict().items()} for n, m in models.items()}
            forwards = {n: forward_call(m.eval(), b) for n, m in models.items()}
            for f in forwards.values():  # warm up
                f()
            rows.append(summarize("forward", size, threads, tokens, alternate(forwards, rounds, repeat)))
            steps = {n: training_step(m, b) for n, m in models.items()}
            for step in steps.values():
                step()
            rows.append(summarize("train", size, threads, tokens, alternate(steps, rounds, repeat)))
            if not quick and threads == 1:  # the same loss, MLM head at the labelled positions only (not judged)
                for n, m in models.items():
                    m.load_state_dict(states[n])
                steps = {"lmlib": training_step(models["lmlib"], b, masked_only=True),
                         "hf_eager": steps["hf_eager"], "hf_sdpa": steps["hf_sdpa"]}
                steps["lmlib"]()
                rows.append(summarize("train_masked_only", size, threads, tokens, alternate(steps, rounds, repeat)))
            for n, m in models.items():  # back to the shared weights for the next thread count
                m.load_state_dict(states[n])
    summary = {f"{kind}_min_ratio_vs_{ref}": min(r[f"ratio_vs_{ref}"] for r in rows if r["measure"] == kind)
               for kind in ("forward", "train", "train_masked_only") if any(r["measure"] == kind for r in rows)
               for ref in GOALS}
    summary.update({f"{kind}_min_cpu_time_ratio_vs_{ref}": min(r[f"cpu_time_ratio_vs_{ref}"] for r in rows
                                                                if r["measure"] == kind)
                    for kind in ("forward", "train") for ref in GOALS})
    summary["goals"] = ("every forward and train row (equal work): lmlib >= 1.0x HF eager and >= 0.9x HF sdpa "
                        "(tokens/s); train_masked_only rows are shown, not judged")
    summary["goals_met"] = all(r[f"ratio_vs_{ref}"] >= goal for r in rows if r["measure"] != "train_masked_only"
                               for ref, goal in GOALS.items())
    print(json.dumps(summary, indent=1))
    if quick:
        return
    result = {
        "what": ("lmlib.models.bert.Bert vs transformers BertForPreTraining (eager and sdpa attention), same "
                 "weights: forward and training-step tokens/s (ratio = lmlib / HF, > 1 means lmlib is faster)"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"vocab_size": VOCAB, "batch": BATCH, "threads": THREADS,
                     "sizes": {k: dict(zip(("num_layers", "num_heads", "d_model", "seq"), v)) for k, v in SIZES.items()},
                     "d_ff": "4 * d_model", "rounds_and_calls_per_round": ROUNDS,
                     "batch_contents": "pairs with both segment ids; odd rows padded after 60-90% of positions; "
                                       "15% of real positions labelled for the MLM loss; NSP labels random",
                     "train_step": "MLM + NSP cross-entropy, backward, AdamW lr 1e-4; train mode, dropout 0",
                     "forward": "eval mode, no grad, MLM and NSP logits",
                     "timing": "median over rounds in rotating order (A B C, B C A, C A B, ...), one process; "
                               "ratio_* from wall time, cpu_time_ratio_* from this process's CPU time"},
        "machine": machine("transformers"), "load_before": load_before, "load_after": load(),
        "seconds": round(time.time() - started, 1), "summary": summary, "rows": rows,
    }
    if RESULTS.exists():  # keep the summaries of earlier runs: on a shared machine one run is one sample
        earlier = json.loads(RESULTS.read_text())
        result["previous_runs"] = [{k: earlier[k] for k in ("date", "load_before", "load_after", "summary")},
                                   *earlier.get("previous_runs", [])][:5]
    write_result(RESULTS, result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small size, few rounds; print, write nothing")
    main(parser.parse_args().quick)
