"""Does pretraining transfer? The GPU-pretrained checkpoints (each one's pretrain.json says how it was made) against
the same architectures from random weights, on IMDb sentiment, fine-tuned and as frozen features.

Every condition reads the benchmarks' fixed 1,000 test reviews (``imdb_test_subset(1000, 0)``, the set of
bench_gpt_finetune.py and bench_bert_finetune.py) and the balanced training samples of seeds 0-2
(``sample_balanced``) at 100 and 1,000 labels. Learning rates are chosen on a dev split of 1,000 *other* training
reviews (``common.dev_split``), never on the test set: each condition, pretrained or from scratch, is
fine-tuned at every rate of its grid on the seed-0 sample of 1,000 labels and keeps its best.

* ``gpt``: GPT-1 fine-tuning (``lmlib.recipes.gpt.finetune_classifier``) with λ = 0 reading the [extract] state,
  ``gpt_mean`` the mean of the top states instead, ``gpt_aux`` λ = 0.5; ``scratch`` and ``scratch_mean`` the same
  architecture from random weights. Frozen features: each layer's states mean-pooled, a linear probe.
* ``bert``: [CLS] fine-tuning (``lmlib.recipes.bert.finetune``) against ``scratch``; frozen features: each layer's
  [CLS] state and mean-pooled states, a linear probe.
* ``elmo``: frozen features only, as ELMo is used: each layer and the scalar mix, mean-pooled over a review's first
  128 tokens, against a biLM at random init.
* ``ulmfit``: stage (c) (gradual unfreezing, discriminative rates, STLR) on the stage (b) LM, against the
  same AWD-LSTM from random weights with one rate and no unfreezing.

The labelled reviews travel to a GPU machine as one file, made here from the full dataset:

    .venv/bin/python tests/benchmarks/bench_gpu_transfer.py prepare --out gpu-carry/labelled.json
    python tests/benchmarks/bench_gpu_transfer.py gpt --checkpoint DIR --labelled labelled.json --out gpt.json --device cuda
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from common import dev_split, imdb_test_subset, summarise, write_result

SIZES, SEEDS, TEST, TEST_SEED = (100, 1000), (0, 1, 2), 1000, 0
GRIDS = {"gpt": (2.5e-4, 5e-4, 1e-3, 2e-3), "bert": (1e-4, 2e-4, 5e-4, 1e-3), "ulmfit": (3e-3, 1e-2, 3e-2)}
PROBE = dict(steps=300, lr=0.01, weight_decay=1e-4)
OPTIONS = {"probes": True, "scratch": True, "rate": None, "conditions": None}


# -- the labelled reviews --------------------------------------------------------------------------------

def prepare(out: Path) -> None:
    """The test subset, each seed's training samples and the dev split, as indices into one list of texts."""
    from lmlib.data import load_imdb
    from lmlib.recipes.ulmfit import sample_balanced

    train = load_imdb("train")
    texts: dict[str, int] = {}

    def keep(batch, labels):
        return {"idx": [texts.setdefault(t, len(texts)) for t in batch], "labels": list(labels)}

    data = {"test": keep(*imdb_test_subset(TEST, TEST_SEED)),
            "dev": keep(*dev_split(list(train.texts), list(train.labels))),
            "train": {str(n): {str(s): keep(*sample_balanced(train.texts, train.labels, n, seed=s)) for s in SEEDS}
                      for n in SIZES}}
    data["texts"] = list(texts)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data))
    print(f"wrote {out}: {len(texts):,} reviews")


class Labelled:
    def __init__(self, path: Path):
        raw = json.loads(Path(path).read_text())
        self.raw, self.texts = raw, raw["texts"]

    def encoded(self, encode: Callable) -> Callable:
        """``inputs(split, size, seed) -> (encode(texts), labels)``, each split encoded once."""
        cache = {}

        def inputs(name: str, size: int | None = None, seed: int | None = None):
            if (name, size, seed) not in cache:
                texts, labels = self.split(name, size, seed)
                cache[name, size, seed] = (encode(texts), labels)
            return cache[name, size, seed]
        return inputs

    def split(self, name: str, size: int | None = None, seed: int | None = None) -> tuple[list[str], list[int]]:
        part = self.raw[name] if size is None else self.raw[name][str(size)][str(seed)]
        n = 100 if OPTIONS.get("quick") and size is None else None  # a trial scores 100 test and dev reviews
        return [self.texts[i] for i in part["idx"][:n]], part["labels"][:n]


def summary_of(rows: list[dict]) -> list[dict]:
    """Means and standard errors over seeds: probes by (init, feature, layer, labels), fine-tuning by (condition,
    labels)."""
    probes = [r for r in rows if r["condition"] == "probe"]
    tuned = [r for r in rows if r["condition"] != "probe"]
    return ((summarise(probes, ("init", "feature", "layer", "n_labels")) if probes else [])
            + (summarise(tuned, ("condition", "n_labels")) if tuned else []))


class Results:
    """Rows written to ``out`` after each one, with the checkpoint's sha256 and the settings."""

    def __init__(self, out: Path, model: str, checkpoint: dict, device: torch.device):
        self.out, self.rows, self.dev = out, [], []
        self.head = {"what": __doc__.split("\n\n")[0], "model": model, "checkpoint": checkpoint,
                     "settings": {"sizes": SIZES, "seeds": SEEDS, "test_reviews": TEST, "test_seed": TEST_SEED,
                                  "grids": GRIDS, "probe": PROBE},
                     "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}

    def add(self, row: dict, dev: bool = False) -> None:
        (self.dev if dev else self.rows).append(row)
        print(json.dumps(row), flush=True)
        write_result(self.out, {**self.head, "dev_rows": self.dev, "rows": self.rows, "summary": summary_of(self.rows)})


def merge(parts: list[Path], out: Path) -> None:
    """One result file from several runs of the same checkpoint that split the work (by ``--conditions``, or
    ``--no-probes`` beside a probe run): rows and dev rows joined, the summary recomputed, each part's settings and
    device kept. Parts measured with different checkpoints, test sets or seeds are refused."""
    loaded = [json.loads(p.read_text()) for p in parts]
    if not loaded:
        raise SystemExit("merge needs at least one result file")
    for key in ("model", "checkpoint"):
        if any(d[key] != loaded[0][key] for d in loaded):
            raise SystemExit(f"the parts differ in {key!r}: merge only parts of one checkpoint")
    for key in ("test_reviews", "test_seed", "seeds", "sizes", "probe"):
        if any(d["settings"][key] != loaded[0]["settings"][key] for d in loaded):
            raise SystemExit(f"the parts differ in settings[{key!r}]: they were not measured alike")
    rows = [r for d in loaded for r in d["rows"]]
    keys = [(r["condition"], r.get("init"), r.get("feature"), r.get("layer"), r["n_labels"], r["seed"]) for r in rows]
    if len(set(keys)) != len(keys):
        raise SystemExit("two parts hold the same row: split the work so each row is measured once")
    head = {k: v for k, v in loaded[0].items() if k not in ("dev_rows", "rows", "summary", "settings", "device")}
    write_result(out, {**head, "settings": loaded[0]["settings"],
                       "parts": [{"file": p.name, "settings": d["settings"], "device": d["device"],
                                  "conditions": sorted({r["condition"] for r in d["rows"]})}
                                 for p, d in zip(parts, loaded)],
                       "device": sorted({d["device"] for d in loaded}),
                       "dev_rows": [r for d in loaded for r in d["dev_rows"]], "rows": rows, "summary": summary_of(rows)})


def _kept(conditions: tuple[str, ...]) -> tuple[str, ...]:
    wanted = OPTIONS.get("conditions")
    return tuple(c for c in conditions if (OPTIONS["scratch"] or not c.startswith("scratch"))
                 and (wanted is None or c in wanted))


def _late(deadline: float | None, start: float) -> bool:
    return deadline is not None and time.perf_counter() - start > deadline


def tune_and_test(results: Results, grid: str, tuned: tuple[str, ...], run, inputs, start: float,
                  deadline: float | None, borrowed: dict[str, str] | None = None) -> None:
    """Fine-tuning rows. Each ``tuned`` condition is trained at every rate of ``GRIDS[grid]`` on the seed-0 sample of
    the largest size and scored on the dev split (or takes ``--rate``), and keeps its best rate; ``borrowed`` maps
    further conditions to the one whose rate they take. Then every condition is trained on each size and seed and
    scored on the test reviews. ``run(condition, rate, train, evaluate, seed) -> (accuracy, steps, seconds)``;
    ``inputs(split, size, seed)`` gives ``(inputs, labels)``. Nothing new starts past the deadline."""
    borrowed = borrowed or {}
    best = {}
    for condition in _kept(tuned):
        if OPTIONS["rate"] is not None:
            best[condition] = OPTIONS["rate"]
            continue
        scores = {}
        for rate in GRIDS[grid]:
            if _late(deadline, start):
                return
            acc, steps, _ = run(condition, rate, inputs("train", SIZES[-1], 0), inputs("dev"), 0)
            scores[rate] = acc
            results.add({"condition": condition, "lr": rate, "n_labels": SIZES[-1], "seed": 0, "dev_accuracy": acc,
                         "steps": steps}, dev=True)
        best[condition] = max(scores, key=scores.get)
    best.update({c: best[source] for c, source in borrowed.items() if source in best})
    if OPTIONS["rate"] is not None:  # a borrowed condition run without its source takes --rate
        best.update({c: OPTIONS["rate"] for c in borrowed if c not in best})
    for size in SIZES:
        for seed in SEEDS:
            for condition in _kept((*tuned, *borrowed)):
                if _late(deadline, start):
                    return
                acc, steps, seconds = run(condition, best[condition], inputs("train", size, seed), inputs("test"), seed)
                results.add({"condition": condition, "lr": best[condition], "n_labels": size, "seed": seed,
                             "accuracy": acc, "steps": steps, "train_seconds": round(seconds, 1)})


# -- frozen features ------------------------------------------------------------------------------------------

def probe_rows(results: Results, features: dict, labelled: Labelled, start: float, deadline: float | None) -> None:
    """A linear probe on every feature set, ``features[(init, feature)] = (train_x by (size, seed), test_x)`` with
    layers on dim 1; one row per layer (and the scalar mix where ``feature`` is ``"mix"``)."""
    from lmlib.recipes import elmo as E

    _, test_y = labelled.split("test")
    test_y = torch.tensor(test_y)
    for (init, feature), (train_x, test_x) in features.items():
        layers = [None] if feature == "mix" else range(test_x.size(1))
        for size in SIZES:
            for seed in SEEDS:
                if _late(deadline, start):
                    return
                _, y = labelled.split("train", size, seed)
                x_train, x_test = E.standardize(train_x[(size, seed)], test_x)
                for layer in layers:
                    probe = E.fit_probe(x_train, torch.tensor(y), layer, 2, seed, **PROBE)
                    results.add({"condition": "probe", "init": init, "feature": feature,
                                 "layer": "mix" if layer is None else str(layer), "n_labels": size, "seed": seed,
                                 "accuracy": E.probe_accuracy(probe, x_test, test_y)})


def probe_inits(results: Results, labelled: Labelled, extractor, models: dict, start: float,
                deadline: float | None) -> None:
    """:func:`probe_rows` for each of ``models`` (``{init: model}``): ``extractor(model)`` gives ``extract(texts) ->
    {feature: (n, layers, d)}``, run on every training sample and the test set. Nothing with ``--no-probes``."""
    if not OPTIONS["probes"]:
        return
    features = {}
    for init, model in models.items():
        extract = extractor(model)
        test = extract(labelled.split("test")[0])
        train = {(size, seed): extract(labelled.split("train", size, seed)[0]) for size in SIZES for seed in SEEDS}
        features.update({(init, f): ({k: v[f] for k, v in train.items()}, test[f]) for f in test})
    probe_rows(results, features, labelled, start, deadline)


def masked_mean(stack: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, L + 1, T, C)`` states and a ``(B, T)`` mask of real tokens -> ``(B, L + 1, C)`` means over the real
    tokens, on the CPU."""
    m = mask[:, None, :, None].float()
    return ((stack * m).sum(2) / m.sum(2)).float().cpu()


# -- GPT --------------------------------------------------------------------------------------------------------

def gpt(checkpoint: Path, labelled: Labelled, results: Results, device: torch.device, start: float,
        deadline: float | None) -> None:
    from lmlib.models.gpt import GPT, GPTConfig
    from lmlib.models.gpt_finetune import FinetuneTokens
    from lmlib.recipes import gpt as G
    from lmlib.runtime import seed_everything

    pretrained, tokenizer, _ = G.load_pretrained(checkpoint)
    pad = FinetuneTokens.from_tokenizer(tokenizer).pad
    conditions = {"gpt": (True, 0.0, "extract"), "gpt_mean": (True, 0.0, "mean"), "gpt_aux": (True, 0.5, "extract"),
                  "scratch": (False, 0.0, "extract"), "scratch_mean": (False, 0.0, "mean")}
    inputs = labelled.encoded(lambda texts: G.review_inputs(tokenizer, texts))

    def run(condition, lr, train, evaluate, seed):
        is_pretrained, lam, pooling = conditions[condition]
        seed_everything(seed)
        model, _ = G.pretrained_classifier(pretrained=is_pretrained, directory=checkpoint, pooling=pooling)
        t = time.perf_counter()
        trainer = G.finetune_classifier(model, *train, lam, pad, seed=seed, device=device, lr=lr)
        return G.classifier_accuracy(model, *evaluate, pad), trainer.step, time.perf_counter() - t

    # the features first: they are cheap and answer the frozen-feature question
    def extractor(model):
        model = model.to(device).eval()

        @torch.no_grad()
        def extract(texts):
            ids_list = G.review_inputs(tokenizer, texts)
            out = []
            for i in range(0, len(ids_list), 256):
                rows = ids_list[i: i + 256]
                width = max(len(r) for r in rows)
                ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)
                real = torch.arange(width, device=device)[None] < torch.tensor([len(r) for r in rows], device=device)[:, None]
                h = model.pos_emb(model.tok_emb(ids))
                layers = [h]
                for block in model.blocks:
                    h, _ = block(h, None, False)
                    layers.append(h)
                layers[-1] = model.ln_f(h)
                out.append(masked_mean(torch.stack(layers, 1), real))  # (B, L + 1, C)
            return {"mean": torch.cat(out)}
        return extract

    torch.manual_seed(0)
    random_gpt = GPT(GPTConfig(**pretrained.config.__dict__))
    probe_inits(results, labelled, extractor, {"pretrained": pretrained, "random": random_gpt}, start, deadline)

    tune_and_test(results, "gpt", ("gpt", "scratch"), run, inputs, start, deadline,
                  borrowed={"gpt_mean": "gpt", "gpt_aux": "gpt"})


# -- BERT -------------------------------------------------------------------------------------------------------

def bert(checkpoint: Path, labelled: Labelled, results: Results, device: torch.device, start: float,
         deadline: float | None) -> None:
    from lmlib.models.bert import Bert, BertConfig
    from lmlib.recipes import bert as B
    from lmlib.runtime import seed_everything

    pretrained, tokenizer = B.load_pretrained(checkpoint)
    pad = tokenizer.token_to_id("[PAD]")
    inputs = labelled.encoded(lambda texts: B.encode_single(tokenizer, texts, 128))

    def extractor(model):
        model = model.to(device).eval()

        @torch.no_grad()
        def extract(texts):
            cls, mean = [], []
            for (ids, seg, mask), _ in B.classification_batches(B.encode_single(tokenizer, texts, 128),
                                                                 [0] * len(texts), 256, pad):
                out = model(ids.to(device), seg.to(device), mask.to(device))
                stack = torch.stack(out.hidden_states, 1)  # (B, L + 1, T, C)
                cls.append(stack[:, :, 0].float().cpu())
                mean.append(masked_mean(stack, mask.to(device)))
            return {"cls": torch.cat(cls), "mean": torch.cat(mean)}
        return extract

    torch.manual_seed(0)
    random_bert = Bert(BertConfig(**pretrained.config.__dict__))
    probe_inits(results, labelled, extractor, {"pretrained": pretrained, "random": random_bert}, start, deadline)

    def run(condition, lr, train, evaluate, seed):
        seed_everything(seed)
        model, _ = B.classifier(pretrained=condition == "bert", directory=checkpoint)
        t = time.perf_counter()
        trainer = B.finetune(model, *train, pad, seed=seed, device=device, lr=lr)
        predicted = B.predict(model, evaluate[0], pad)
        acc = float((predicted == torch.tensor(evaluate[1])).float().mean())
        return acc, trainer.step, time.perf_counter() - t

    tune_and_test(results, "bert", ("bert", "scratch"), run, inputs, start, deadline)


# -- ELMo -------------------------------------------------------------------------------------------------------

def elmo(checkpoint: Path, labelled: Labelled, results: Results, device: torch.device, start: float,
         deadline: float | None) -> None:
    from lmlib.models.elmo import BiLM
    from lmlib.recipes import elmo as E

    pretrained, _, _ = E.load_pretrained(checkpoint)
    torch.manual_seed(0)
    random_bilm = BiLM(pretrained.config)

    def extractor(model):
        model = model.to(device).eval()

        @torch.no_grad()
        def extract(texts):
            layers = E.pooled_features(model, texts, 128)
            return {"layers": layers, "mix": layers}  # each layer alone, and the scalar mix of all
        return extract

    probe_inits(results, labelled, extractor, {"pretrained": pretrained, "random": random_bilm}, start, deadline)


# -- ULMFiT -----------------------------------------------------------------------------------------------------

def ulmfit(checkpoint: Path, labelled: Labelled, results: Results, device: torch.device, start: float,
           deadline: float | None) -> None:
    from lmlib.models.awd_lstm import AWDLSTMLanguageModel
    from lmlib.models.ulmfit import ULMFiTClassifier
    from lmlib.recipes import ulmfit as U
    from lmlib.runtime import seed_everything

    lm, vocab = U.load_pretrained(checkpoint, **U.IMDB_RECIPE["dropouts"])
    settings = dict(epochs=5, batch_size=32, max_len=128, min_steps_per_epoch=10, max_steps_per_epoch=160)
    results.head["settings"]["ulmfit"] = settings
    inputs = labelled.encoded(lambda texts: [U.head_and_tail(x, settings["max_len"]) for x in
                                             U.encode_texts(vocab, [U.review_tokens(t) for t in texts])])

    # ulmfit: the paper's stage (c), gradual unfreezing and rates divided by 2.6 per layer group; ulmfit_flat: the
    # same pretrained encoder trained as scratch is (every group from the start, one rate): does the pretraining
    # transfer, whatever the schedule? (bench_ulmfit_ablation.py found the gradual schedule under-trains the
    # lowest groups in 5 epochs.)
    schedule = {"ulmfit": (True, True, 2.6), "ulmfit_flat": (True, False, 1.0), "scratch": (False, False, 1.0)}

    def run(condition, eta, train, evaluate, seed):
        pretrained, gradual, factor = schedule[condition]
        seed_everything(seed)
        fresh = AWDLSTMLanguageModel(lm.config)
        if pretrained:
            fresh.encoder.load_state_dict(lm.encoder.state_dict())
        model = ULMFiTClassifier(fresh.encoder, 2, p1=0.25, p2=0.1)
        t = time.perf_counter()
        trainer = U.train_classifier(model, *train, settings["epochs"], eta, gradual=gradual,
                                     factor=factor, batch_size=settings["batch_size"],
                                     max_len=settings["max_len"], min_steps_per_epoch=settings["min_steps_per_epoch"],
                                     max_steps_per_epoch=settings["max_steps_per_epoch"], seed=seed, device=device)
        return U.accuracy(model, *evaluate, max_len=settings["max_len"]), trainer.step, time.perf_counter() - t

    tune_and_test(results, "ulmfit", ("ulmfit", "ulmfit_flat", "scratch"), run, inputs, start, deadline)


MODELS = {"gpt": gpt, "bert": bert, "elmo": elmo, "ulmfit": ulmfit}
WEIGHTS = {"gpt": "gpt_imdb", "bert": "bert_imdb", "elmo": "elmo_imdb", "ulmfit": "ulmfit_imdb"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["prepare", "merge", *MODELS])
    parser.add_argument("parts", nargs="*", type=Path, help="merge: result files of one checkpoint, split by condition")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--labelled", type=Path)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--deadline", type=float, default=None, help="stop starting new runs after this many seconds")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a trial of the script: one seed, 100 labels, one rate")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="labelled sizes (default 100 1000)")
    parser.add_argument("--rate", type=float, default=None, help="one rate for every condition (no dev sweep)")
    parser.add_argument("--grid", type=float, nargs="+", default=None, help="the rates of the dev sweep")
    parser.add_argument("--conditions", nargs="+", default=None, help="only these fine-tuning conditions")
    parser.add_argument("--no-probes", action="store_true", help="fine-tuning only")
    parser.add_argument("--pretrained-only", action="store_true", help="no from-scratch conditions")
    args = parser.parse_args(argv)
    global SIZES, SEEDS, OPTIONS
    if args.quick:
        SIZES, SEEDS = (100,), (0,)
        for k, grid in GRIDS.items():
            GRIDS[k] = grid[1:2]
    if args.sizes:
        SIZES = tuple(args.sizes)
    if args.rate is not None:
        for k in GRIDS:
            GRIDS[k] = (args.rate,)
    if args.grid:
        for k in GRIDS:
            GRIDS[k] = tuple(args.grid)
    OPTIONS = {"probes": not args.no_probes, "scratch": not args.pretrained_only, "quick": args.quick,
               "rate": args.rate, "conditions": args.conditions}
    torch.set_num_threads(args.threads)
    if args.what == "prepare":
        prepare(args.out)
        return 0
    if args.what == "merge":
        merge(args.parts, args.out)
        return 0
    if args.checkpoint is None or args.labelled is None:
        parser.error(f"{args.what} needs --checkpoint and --labelled")
    from lmlib.runtime import pick_device

    device = pick_device(args.device)
    report = json.loads((args.checkpoint / "pretrain.json").read_text())
    results = Results(args.out, args.what, {"sha256": report["sha256"], "tokens_seen": report.get("tokens_seen"),
                                            "rebuild": report.get("rebuild")}, device)
    MODELS[args.what](args.checkpoint, Labelled(args.labelled), results, device, time.perf_counter(), args.deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
