"""What each saved language model transfers: the frozen-feature sentiment probe of lmlib.recipes.transfer on checkpoints
(ULMFiT stage (b) AWD-LSTM LMs, ELMo biLMs), each beside the same architecture at random init.

Meant for the checkpoints a pretraining run keeps at milestones of tokens read (a learning curve of transfer), and
for any one checkpoint folder (``pretrain.json`` beside its weights, as ``lmlib/pretrained/ulmfit_imdb`` or
``lmlib/pretrained/elmo_imdb``). Each folder's kind is read from its config (a character CNN's ``filters``: ELMo).

The reviews: 2,000 IMDb *test* reviews that no other transfer benchmark reads (none of ``imdb_test_subset(1000, 0)``
of the GPT / BERT / bag-of-words / gpu_transfer benchmarks, ``bench_elmo_probes.test_indices`` of the ELMo probes, nor
bench_ulmfit_imdb.py's ``sample_balanced(test, 2500, 0)``), drawn balanced by ``sample_balanced(rest, 2000, 0)``;
labelled samples by ``sample_balanced(train, n, seed)`` at 100 and 1,000 labels, seeds 0-2. Every review is read
to its first and last 64 tokens. ``--bow`` adds the bag of words (TF-IDF + logistic regression) on the same words.

    LMLIB_DATA_DIR=... nice -n 5 env OMP_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_transfer_milestones.py \\
        lmlib/pretrained/elmo_imdb --bow --out lmlib/results/elmo_sentiment_128.json

The result file (written whole after each checkpoint, through common.write_result) records each checkpoint's
sha256 and the tokens it read from its ``pretrain.json`` (a single checkpoint's weights also as ``checkpoint_sha256``); a rerun with the same settings keeps the checkpoints
already measured (by sha256). ``--append`` also keeps, in order of tokens read, the checkpoints the file holds whose
folders are not given: the curve of a run that crosses sessions grows by its new milestones though the weights of
the earlier ones are gone.

    LMLIB_DATA_DIR=... nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python tests/benchmarks/bench_transfer_milestones.py \\
        pretrained-runs/cpu/ulmfit_imdb/tokens_100M --bow --append --out lmlib/results/ulmfit_cpu_milestones.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path

import torch
from common import load, machine, write_result  # noqa: E402

from lmlib.recipes import transfer as T  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = dict(sizes=[100, 1000], seeds=[0, 1, 2], test_reviews=2000, test_seed=0, max_tokens=T.MAX_TOKENS,
                probe=dataclasses.asdict(T.ProbeConfig()), random_init_seed=0,
                test_rule="sample_balanced(IMDb test reviews outside the other benchmarks' test sets, test_reviews, "
                          "test_seed)",
                labels_rule="sample_balanced(IMDb train, n_labels, seed)")


def kind_of(report: dict) -> str:
    """``"elmo"`` for a biLM (its config has a character CNN's ``filters``), ``"ulmfit"`` for an AWD-LSTM LM."""
    config = report.get("config", {})
    if "filters" in config:
        return "elmo"
    if "tie_weights" in config or "hidden_size" in config:
        return "ulmfit"
    raise ValueError(f"cannot tell the model of a pretrain.json with config keys {sorted(config)}")


def other_benchmarks_test_texts(test) -> set[str]:
    """The IMDb test reviews the other transfer benchmarks read."""
    from bench_elmo_probes import test_indices
    from bench_ulmfit_imdb import SETTINGS as UL
    from common import imdb_test_subset

    from lmlib.recipes.ulmfit import sample_balanced

    used = set(imdb_test_subset(1000, 0)[0])
    used.update(test.texts[i] for i in test_indices(test.labels))
    used.update(sample_balanced(test.texts, test.labels, UL["test_reviews"], UL["test_seed"])[0])
    return used


def probe_data(settings: dict) -> tuple[T.ProbeData, int]:
    """The reviews every checkpoint is probed on, and how many test reviews the other benchmarks hold."""
    from lmlib.data import load_imdb
    from lmlib.recipes.ulmfit import sample_balanced

    train, test = load_imdb("train"), load_imdb("test")
    used = other_benchmarks_test_texts(test)
    rest = [(t, y) for t, y in zip(test.texts, test.labels) if t not in used]
    test_part = sample_balanced([t for t, _ in rest], [y for _, y in rest], settings["test_reviews"],
                                settings["test_seed"])
    labelled = {(n, s): sample_balanced(train.texts, train.labels, n, seed=s)
                for n in settings["sizes"] for s in settings["seeds"]}
    return T.ProbeData(test=test_part, train=labelled), len(used)


def checkpoint_record(folder: Path, report: dict) -> dict:
    folder = folder.resolve()
    where = str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder)
    return {"folder": where, "kind": kind_of(report), "sha256": report["sha256"],
            "tokens_seen": report.get("tokens_seen"),
            "stage_a_tokens_seen": (report.get("stage_a") or {}).get("tokens_seen"),
            "device": (report.get("run") or {}).get("device", report.get("device")), "rebuild": report.get("rebuild")}


def measure(folder: Path, data: T.ProbeData, config: T.ProbeConfig, settings: dict) -> tuple[dict, object]:
    """The probe rows of one checkpoint (pretrained and random init); also returns its vocabulary (ULMFiT) or None."""
    report = json.loads((folder / "pretrain.json").read_text())
    record = checkpoint_record(folder, report)
    start = time.perf_counter()
    if record["kind"] == "ulmfit":
        from lmlib.recipes import ulmfit as U

        lm, vocab = U.load_pretrained(folder)  # checks every file's sha256 against pretrain.json
        rows = T.ulmfit_probes(lm, vocab, data, config, settings["random_init_seed"], settings["max_tokens"])
    else:
        from lmlib.recipes import elmo as E

        bilm, vocab, _ = E.load_pretrained(folder)  # checks every file's sha256 against pretrain.json
        rows = T.elmo_probes(bilm, data, config, settings["random_init_seed"], settings["max_tokens"])
        layers = [str(j) for j in range(bilm.config.num_layers + 1)]
        rows += T.best_layer_rows(rows, layers)
        vocab = None
    record.update(rows=rows, summary=T.summary(rows), seconds=round(time.perf_counter() - start, 1))
    return record, vocab


def bow_view(kind: str, vocab, max_tokens: int):
    """The words a model of ``kind`` reads, for the bag of words: ULMFiT's ``review_tokens`` in its vocabulary
    (other words ``<unk>``), ELMo's words lower-cased; the first and last ``max_tokens // 2`` of them."""
    from lmlib.eval.bow_baseline import words_view

    if kind == "ulmfit":
        from lmlib.recipes import ulmfit as U
        return lambda t: words_view(U.review_tokens(t), max_tokens, "head_and_tail", vocab)
    from lmlib.recipes import elmo as E
    return lambda t: words_view([w.lower() for s in E.sentences_of(t, min_words=1) for w in s], max_tokens,
                                "head_and_tail")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", type=Path, nargs="+", help="folders holding pretrain.json and the weights")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--bow", action="store_true", help="also the bag of words on the same words")
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--test-reviews", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--append", action="store_true",
                        help="keep the checkpoints --out holds whose folders are not given (same settings only)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    settings = dict(SETTINGS)
    for key, value in (("sizes", args.sizes), ("seeds", args.seeds), ("test_reviews", args.test_reviews)):
        if value is not None:
            settings[key] = value
    for folder in args.checkpoints:
        if not (folder / "pretrain.json").is_file():
            parser.error(f"{folder} holds no pretrain.json")
    reports = [json.loads((folder / "pretrain.json").read_text()) for folder in args.checkpoints]
    config = T.ProbeConfig()
    previous = json.loads(args.out.read_text()) if args.out.is_file() else None
    same = previous is not None and previous["settings"] == json.loads(json.dumps(settings))
    if args.append and previous is not None and not same:
        parser.error(f"--append: {args.out} was measured with other settings; its rows would not compare")
    done = {json.dumps(c["sha256"], sort_keys=True): c for c in previous["checkpoints"]} if same else {}
    given = {json.dumps(report["sha256"], sort_keys=True) for report in reports}
    kept = [c for key, c in done.items() if key not in given] if args.append else []
    result = {"what": __doc__.split("\n\n")[0], "command": shlex.join(["python", "tests/benchmarks/bench_transfer_milestones.py",
                                                                      *(argv if argv is not None else sys.argv[1:])]),
              "settings": settings, "checkpoints": kept, "bow": previous.get("bow", {}) if same else {},
              "machine": machine("sklearn"), "load_before": load()}
    if kept:  # the commands that measured the checkpoints kept, oldest first
        result["earlier_commands"] = [*previous.get("earlier_commands", []), previous["command"]]
    data, excluded = probe_data(settings)
    result["test"] = {"reviews": len(data.test[0]), "positive": sum(data.test[1]),
                      "other_benchmarks_test_reviews_excluded": excluded}
    for folder, report in zip(args.checkpoints, reports):
        key = json.dumps(report["sha256"], sort_keys=True)
        if key in done:
            record, vocab = done[key], None
            print(f"{folder}: kept from {args.out}", flush=True)
        else:
            record, vocab = measure(folder, data, config, settings)
        result["checkpoints"] = sorted([*result["checkpoints"], record],
                                       key=lambda c: (c["tokens_seen"] is None, c["tokens_seen"] or 0))
        if len(result["checkpoints"]) == 1:  # one checkpoint: named where lmlib.course.results.load_for_shipped looks
            weights = next(f for f in record["sha256"] if f.endswith(".safetensors"))
            result["checkpoint_sha256"] = record["sha256"][weights]
        if args.bow and record["kind"] not in result["bow"]:
            if record["kind"] == "ulmfit" and vocab is None:
                from lmlib.recipes import ulmfit as U
                _, vocab = U.load_pretrained(folder)
            rows = T.bow_rows(data, bow_view(record["kind"], vocab, settings["max_tokens"]))
            result["bow"][record["kind"]] = {"words": "ULMFiT's review_tokens in the checkpoint's vocabulary"
                                             if record["kind"] == "ulmfit" else "ELMo's words, lower-cased",
                                             "vocab_of": record["folder"] if record["kind"] == "ulmfit" else None,
                                             "rows": rows, "summary": T.summary(rows)}
        result["load_after"] = load()
        write_result(args.out, result)
        for s in record["summary"]:
            print(json.dumps({"folder": record["folder"], **s}), flush=True)
    for kind, bow in result["bow"].items():
        for s in bow["summary"]:
            print(json.dumps({"bow": kind, **s}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
