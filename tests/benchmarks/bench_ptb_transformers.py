"""Two Transformer language models on PTB, for the perplexity ladder of notebook 12: a decoder-only Transformer with
absolute positions (GPT's architecture; ``lmlib.recipes.transformer_xl``'s "vanilla" variant, which the tests show
equal to lmlib's GPT) and Transformer-XL with a memory, the same size, trained alike on the same segments.

Word-level PTB (Mikolov's 10,000-word version, ``<eos>`` at each line end), 4 layers, 4 heads, d_model 128, segments
of 64 words, dropout 0.3 (PTB is small: without dropout these models overfit within two epochs), batch 16, AdamW with
warm-up and cosine, the same steps for both. Validation and test perplexity per word, reading the text as 8 parallel
streams in segments of 64 (Transformer-XL with its memory of 64 per layer), every word scored.

    nice -n 10 .venv/bin/python tests/benchmarks/bench_ptb_transformers.py     # one thread

writes lmlib/results/ptb_transformers.json.
"""

from __future__ import annotations

import argparse
import datetime
import math
import time

import torch
from common import load, machine, result_path, write_result

from lmlib.data import load_ptb
from lmlib.recipes import transformer_xl as X
from lmlib.text.vocab import Vocab

RESULTS = result_path("ptb_transformers")
MODEL = dict(num_layers=4, num_heads=4, d_model=128, segment_len=64, dropout=0.3)
RECIPE = dict(batch_size=16, lr=2e-3, warmup=200)
VARIANTS = {"gpt_style": "vanilla", "transformer_xl": "xl"}
EVAL_STREAMS = 8


def streams() -> tuple[Vocab, dict[str, torch.Tensor]]:
    splits = {name: load_ptb(name) for name in ("train", "valid", "test")}
    vocab = Vocab((w for line in splits["train"] for w in line), unk="<unk>")
    return vocab, {name: torch.tensor(vocab.encode(w for line in lines for w in line)) for name, lines in splits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before, started = load(), time.perf_counter()
    vocab, data = streams()
    runs = {}
    for name, variant in VARIANTS.items():
        mem = {} if variant == "vanilla" else {"mem_len": MODEL["segment_len"]}
        model = X.build(variant, len(vocab), **MODEL, **mem)
        start = time.perf_counter()
        trainer = X.train(model, data["train"], args.steps, recipe=RECIPE)
        seconds = time.perf_counter() - start
        nll = {split: X.evaluate_with_memory(model, data[split], model.config.mem_len, streams=EVAL_STREAMS)
               for split in ("valid", "test")}
        runs[name] = {"variant": variant, "config": dict(model.config.__dict__), "parameters": model.num_parameters(),
                      "steps": trainer.step, "epochs": round(trainer.step * RECIPE["batch_size"] * MODEL["segment_len"]
                                                             / data["train"].numel(), 2),
                      "tokens_seen": trainer.step * RECIPE["batch_size"] * MODEL["segment_len"],
                      "train_seconds": round(seconds, 1),
                      "train_loss_last_100": round(sum(trainer.batch_losses[-100:]) / 100, 4),
                      "valid_ppl": round(math.exp(nll["valid"]), 2), "test_ppl": round(math.exp(nll["test"]), 2)}
        print(f"{name}: valid {runs[name]['valid_ppl']}, test {runs[name]['test_ppl']}, {seconds:.0f} s", flush=True)
    result = {
        "what": "a GPT-style decoder (absolute positions, no memory) and Transformer-XL (memory 64), same size and "
                "training, on word-level PTB: validation and test perplexity per word",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"model": MODEL, "recipe": {**X.RECIPE, **RECIPE}, "steps": args.steps, "vocab_size": len(vocab),
                     "train_tokens": int(data["train"].numel()),
                     "eval": f"{EVAL_STREAMS} contiguous streams in segments of {MODEL['segment_len']}, every word scored",
                     "threads": torch.get_num_threads()},
        "runs": runs, "machine": machine(), "load_before": load_before, "load_after": load(),
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    write_result(RESULTS, result)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
