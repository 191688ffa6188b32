"""Speed of lmlib's multi-head attention (fused path) against torch.nn.MultiheadAttention, side by side.

Same shapes, same weights, one process, one thread (the course machine has two shared cores). For each
size and mode the two modules are timed in interleaved rounds (ours, theirs, theirs, ours, ...), and the
median time per call is reported. Modes: ``forward`` (eval, no grad: PyTorch may take its native fused
inference path) and ``forward+backward`` (train mode, dropout 0), each for plain and causal self-attention.

    .venv/bin/python tests/benchmarks/bench_attention.py        # writes lmlib/results/attention.json
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time

import torch
from common import write_result
from torch import nn

from lmlib.models.multihead import MultiHeadAttention, causal_mask

SIZES = [  # (batch, seq, d_model, heads)
    (64, 16, 128, 4),
    (32, 32, 128, 4),
    (16, 64, 256, 8),
    (8, 128, 512, 8),
]
ROUNDS, CALLS = 15, 10


def timer(fn) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - start) / CALLS


def make_calls(ours, ref, x, causal: bool, backward: bool):
    mask = causal_mask(x.size(1)) if causal else None

    def run_ours():
        out, _ = ours(x, x, x, causal=causal)
        if backward:
            out.sum().backward()

    def run_ref():
        out, _ = ref(x, x, x, attn_mask=mask, need_weights=False, is_causal=causal)
        if backward:
            out.sum().backward()

    return run_ours, run_ref


def bench() -> list[dict]:
    rows = []
    for batch, seq, d_model, heads in SIZES:
        torch.manual_seed(0)
        ref = nn.MultiheadAttention(d_model, heads, batch_first=True)
        ours = MultiHeadAttention(d_model, heads).load_from_torch(ref)
        for backward in (False, True):
            for causal in (False, True):
                ours.train(backward), ref.train(backward)
                x = torch.randn(batch, seq, d_model, requires_grad=backward)
                run_ours, run_ref = make_calls(ours, ref, x, causal, backward)
                ctx = torch.enable_grad() if backward else torch.no_grad()
                with ctx:
                    # same numbers first, so we time the same computation
                    a, _ = ours(x, x, x, causal=causal)
                    b, _ = ref(x, x, x, attn_mask=causal_mask(seq) if causal else None, need_weights=False,
                               is_causal=causal)
                    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
                    for _ in range(3):
                        run_ours(), run_ref()
                    t_ours, t_ref = [], []
                    for r in range(ROUNDS):
                        pair = [(t_ours, run_ours), (t_ref, run_ref)]
                        for store, fn in pair if r % 2 == 0 else pair[::-1]:
                            store.append(timer(fn))
                mo, mr = statistics.median(t_ours), statistics.median(t_ref)
                row = dict(batch=batch, seq=seq, d_model=d_model, heads=heads,
                           mode="forward+backward" if backward else "forward", causal=causal,
                           lmlib_ms=round(mo * 1e3, 4), torch_ms=round(mr * 1e3, 4), ratio=round(mo / mr, 3))
                rows.append(row)
                print(f"{batch:3d}x{seq:<4d} d={d_model:<4d} h={heads} {row['mode']:17s} causal={causal!s:5s} "
                      f"lmlib {row['lmlib_ms']:8.3f} ms  torch {row['torch_ms']:8.3f} ms  ratio {row['ratio']:.3f}")
    return rows


def main() -> None:
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    rows = bench()
    ratios = [r["ratio"] for r in rows]
    summary = {
        "median_ratio": round(statistics.median(ratios), 3),
        "max_ratio": round(max(ratios), 3),
        "median_ratio_forward": round(statistics.median(r["ratio"] for r in rows if r["mode"] == "forward"), 3),
        "median_ratio_forward_backward": round(
            statistics.median(r["ratio"] for r in rows if r["mode"] == "forward+backward"), 3),
        "goal": "ratio (lmlib / torch) <= 1.1",
    }
    print(json.dumps(summary, indent=1))
    write_result("attention", {
        "what": "lmlib.models.multihead.MultiHeadAttention (fused path) vs torch.nn.MultiheadAttention, self-attention, "
                "median time per call over interleaved rounds",
        "torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.machine(),
        "rounds": ROUNDS, "calls_per_round": CALLS,
        "load_average_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)], "summary": summary, "rows": rows,
    })


if __name__ == "__main__":
    main()
