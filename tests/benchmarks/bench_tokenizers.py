"""lmlib.text.tokenizers against Hugging Face tokenizers (Rust) on IMDb train: training and encoding time, and
whether the encodings agree.

Run from the repository root:
    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_tokenizers.py [--vocab-size 8000]

One process, one thread on each side, timed in CPU seconds (wall seconds are recorded too): lmlib is plain Python, and tokenizers is held to one thread
(TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1, set before it is imported). Both sides get the same
25,000 reviews (break tags turned into newlines by load_imdb), the same vocabulary size, min_frequency=2
and the same special tokens. Encoding is timed with an empty word cache, over every review; tokenizers'
model is built from lmlib's own merges (BPE) or vocabulary (WordPiece), so the ids must be identical, and
the script counts the reviews where they are not. tokenizers is timed with encode_batch_fast (ids only, the
work lmlib does) and with encode_batch (which also tracks character offsets through normalization); each
encoder runs --rounds times in rotating order and its fastest round is reported (every round is recorded).
Training runs once per side. Training results differ a little by design (ties are broken
differently), so the overlap of the learned merges and vocabularies is reported too.
Results go to lmlib/results/tokenizers.json.
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import tokenizers  # noqa: E402
from common import write_result
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers  # noqa: E402

from lmlib.data import load_imdb  # noqa: E402
from lmlib.text.tokenizers import BPE_SPECIALS, WORDPIECE_SPECIALS, ByteLevelBPE, WordPiece  # noqa: E402


def timed(fn, *args, **kwargs):
    """Result, and CPU seconds of this process (all its threads): on a shared machine, wall time mostly measures
    the neighbours; with one thread per side, CPU time is the work done. Wall seconds go to WALL."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args, **kwargs)
    WALL.append(round(time.perf_counter() - wall, 3))
    return result, round(time.process_time() - cpu, 3)


WALL: list[float] = []


def hf_bpe(vocab=None, merges=None) -> Tokenizer:
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return tok


def hf_wordpiece(vocab=None) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def train_hf_bpe(texts, vocab_size):
    tok = hf_bpe()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(BPE_SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def train_hf_wordpiece(texts, vocab_size):
    tok = hf_wordpiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                        special_tokens=list(WORDPIECE_SPECIALS), limit_alphabet=100_000)
    tok.train_from_iterator(texts, trainer)
    return tok


def hf_merges(tok: Tokenizer) -> list[tuple[str, str]]:
    return [tuple(m) if not isinstance(m, str) else tuple(m.split(" ")) for m in
            json.loads(tok.to_str())["model"]["merges"]]


def encode_both(texts, ours, theirs: Tokenizer, rounds: int):
    """Every review through each encoder, ``rounds`` times in rotating order; the fastest round of each is kept
    (lmlib's word cache is emptied before each of its rounds, so each round fills it again)."""
    runs = {
        "lmlib": lambda: (ours._cache.clear(), [ours.encode(t) for t in texts])[1],
        "hf_tokenizers": lambda: [e.ids for e in theirs.encode_batch_fast(texts)],  # ids only, like lmlib
        "hf_tokenizers_with_offsets": lambda: [e.ids for e in theirs.encode_batch(texts)],
    }
    theirs.encode_batch_fast(texts[:10])  # let tokenizers set itself up untimed
    cpu, wall, ids = {k: [] for k in runs}, {k: [] for k in runs}, {}
    names = list(runs)
    for r in range(rounds):
        for name in names[r % 3:] + names[: r % 3]:
            ids[name], seconds = timed(runs[name])
            cpu[name].append(seconds)
            wall[name].append(WALL[-1])
    differ = sum(a != b or a != c for a, b, c in zip(ids["lmlib"], ids["hf_tokenizers"],
                                                     ids["hf_tokenizers_with_offsets"], strict=True))
    best = {k: min(v) for k, v in cpu.items()}
    hf_best = min(best["hf_tokenizers"], best["hf_tokenizers_with_offsets"])  # the ratio is against its faster call
    return {"lmlib_s": best["lmlib"], "hf_tokenizers_s": hf_best, "ratio_lmlib_over_hf": round(best["lmlib"] / hf_best, 2),
            "hf_tokenizers_ids_only_s": best["hf_tokenizers"],
            "hf_tokenizers_with_offsets_s": best["hf_tokenizers_with_offsets"],
            "cpu_s_every_round": cpu, "wall_s_every_round": wall,
            "tokens": sum(map(len, ids["lmlib"])), "reviews_with_different_ids": differ}


def overlap(a, b) -> float:
    return round(len(set(a) & set(b)) / max(len(set(a)), 1), 4)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--reviews", type=int, default=None, help="first N reviews only (a quick probe)")
    parser.add_argument("--rounds", type=int, default=2, help="encoding rounds per encoder (fastest kept)")
    args = parser.parse_args()
    texts = load_imdb("train").texts[: args.reviews]
    load_before = [round(x, 2) for x in os.getloadavg()]
    report = {
        "what": "lmlib.text.tokenizers (pure Python) vs Hugging Face tokenizers (Rust), training and encoding on IMDb "
                "train; *_s are CPU seconds of the process (one thread per side), ratio = lmlib / tokenizers; "
                "wall_s for reference",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "settings": {"corpus": f"IMDb train via load_imdb ({len(texts):,} reviews, {sum(map(len, texts)):,} characters)",
                     "vocab_size": args.vocab_size, "min_frequency": 2, "threads": {"lmlib": 1, "hf_tokenizers": 1},
                     "bpe_special_tokens": list(BPE_SPECIALS), "wordpiece_special_tokens": list(WORDPIECE_SPECIALS)},
        "machine": {"machine": platform.machine(), "processor": _cpu_name(), "python": platform.python_version(),
                    "tokenizers": tokenizers.__version__, "cores": "2, shared with other jobs (see load averages)"},
        "load_average_before": load_before,
    }

    bpe, bpe_s = timed(ByteLevelBPE.train, texts, args.vocab_size)
    hf_trained, hf_bpe_s = timed(train_hf_bpe, texts, args.vocab_size)
    theirs = hf_merges(hf_trained)
    first_diff = next((i for i, (a, b) in enumerate(zip(bpe.merges, theirs, strict=False)) if a != b), None)
    report["bpe"] = {
        "train": {"lmlib_s": bpe_s, "hf_tokenizers_s": hf_bpe_s, "ratio_lmlib_over_hf": round(bpe_s / hf_bpe_s, 2),
                  "wall_s": {"lmlib": WALL[-2], "hf_tokenizers": WALL[-1]},
                  "lmlib_merges": len(bpe.merges), "hf_merges": len(theirs),
                  "shared_merges_fraction": overlap(bpe.merges, theirs), "first_different_merge": first_diff},
        "encode": encode_both(texts, bpe, hf_bpe(bpe.stoi, bpe.merges), args.rounds),
    }
    print(json.dumps(report["bpe"], indent=1), flush=True)

    report["wordpiece"] = {}
    hf_wp, hf_wp_s = timed(train_hf_wordpiece, texts, args.vocab_size)
    hf_wp_wall = WALL[-1]
    hf_vocab = hf_wp.get_vocab()
    for score in ("frequency", "likelihood"):
        wp, wp_s = timed(WordPiece.train, texts, args.vocab_size, score=score)
        row = {"train": {"lmlib_s": wp_s, "hf_tokenizers_s": hf_wp_s, "ratio_lmlib_over_hf": round(wp_s / hf_wp_s, 2),
                         "wall_s": {"lmlib": WALL[-1], "hf_tokenizers": hf_wp_wall},
                         "lmlib_vocab": len(wp), "hf_vocab": len(hf_vocab),
                         "shared_tokens_fraction_with_hf_trainer": overlap(wp.vocab, hf_vocab)},
               "encode": encode_both(texts, wp, hf_wordpiece(wp.stoi), args.rounds)}
        report["wordpiece"][score] = row
        print(score, json.dumps(row, indent=1), flush=True)
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    report["note"] = ("tokenizers' WordPieceTrainer scores pairs by frequency; lmlib's 'likelihood' row has no "
                      "tokenizers counterpart, and its training time is compared with the same frequency trainer")
    if args.reviews is None:
        write_result("tokenizers", report, ensure_ascii=False)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
