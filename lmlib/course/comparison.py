"""The whole course side by side (notebook 12): the PTB perplexity ladder, the transfer table, and the pretrained
models' directions of context, each read from the committed results and the shipped checkpoints.

Every row names where its number comes from (a committed script's JSON or a shipped checkpoint's ``pretrain.json``),
and a result measured with another checkpoint than the one shipped today is refused (:func:`require_checkpoint`),
so a table never mixes a new model with an old model's numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from ..recipes import bert, elmo, gpt, ulmfit
from ..recipes.shipping import pretrained_on_gpu
from . import results
from .leaderboard import PUBLISHED
from .results import load_checked, refuse_another_checkpoint

CHECKPOINTS = {  # shipped checkpoint -> (folder, weights file), where each recipe writes it
    **{recipe.NAME: (recipe.CHECKPOINT_DIR, f"{recipe.NAME}.safetensors") for recipe in (ulmfit, elmo, gpt, bert)},
    "ulmfit_imdb": (ulmfit.IMDB_DIR, "ulmfit_imdb.safetensors"),
}


def shipped_report(checkpoint: str) -> dict:
    """The ``pretrain.json`` of a shipped checkpoint (recipe, tokens seen, metrics, sha256 of each file)."""
    if checkpoint not in CHECKPOINTS:
        raise ValueError(f"unknown checkpoint {checkpoint!r}; the shipped ones are {sorted(CHECKPOINTS)}")
    folder, _ = CHECKPOINTS[checkpoint]
    return json.loads((Path(folder) / "pretrain.json").read_text())


def require_checkpoint(result: str, recorded_sha256: str, checkpoint: str) -> None:
    """Refuse the committed result ``result`` unless it was measured with the shipped ``checkpoint``."""
    refuse_another_checkpoint(result, recorded_sha256, shipped_sha256(checkpoint),
                              "the script that wrote it (its name is in the file's 'command' or docstring)")


def shipped_sha256(checkpoint: str) -> str:
    """The sha256 of a shipped checkpoint's weights, as its ``pretrain.json`` records it."""
    report = shipped_report(checkpoint)  # refuses an unknown name
    return report["sha256"][CHECKPOINTS[checkpoint][1]]


def load_for_shipped(result: str, checkpoint: str, **check) -> dict:
    """The committed result ``result``, refused unless it was measured on the shipped ``checkpoint`` (one call in
    place of a notebook's guard cell; ``check``: ``sha_field``, ``recipe``, ... as in :func:`results.load_checked`)."""
    return load_checked(result, shipped_sha256(checkpoint), **check)


def _published(name: str) -> tuple[float, str] | None:
    for model, ppl, source in PUBLISHED:
        if model == name:
            return ppl, source
    return None


def ptb_ladder(awd_parameters: int, zaremba_parameters: int) -> list[dict]:
    """One row per PTB-trained model of the course, worst to best test perplexity: where the number comes from,
    parameters, CPU seconds of training (one thread unless stated), and the published figure for that model.

    The parameter counts of the AWD-LSTM and of Zaremba's LSTM are passed in, counted from the shipped checkpoint
    and from the recorded config by the caller (building models is the notebook's business, not this table's)."""
    ngram = {row["model"]: row for row in results.load("ngram")["full_ptb"]}["MKN5, all of PTB"]
    nnlm, lstm = results.load("nnlm"), results.load("zaremba_small")
    awd = shipped_report("awd_lstm_ptb")
    transformers = results.load("ptb_transformers")
    rows = [
        dict(model="modified Kneser-Ney 5-gram", notebook="01", test_ppl=ngram["test_perplexity"], parameters=None,
             seconds=ngram["fit_s"], source="tests/benchmarks/bench_ngram.py", published=_published("Kneser-Ney 5-gram")),
        dict(model="Bengio NNLM (5-gram window, direct connections)", notebook="02", test_ppl=nnlm["test_ppl"],
             parameters=nnlm["config"]["parameters"], seconds=nnlm["seconds"], source="tests/benchmarks/train_nnlm.py",
             published=_published("Feed-forward NNLM")),
        dict(model="LSTM 2x200 (Zaremba small)", notebook="03", test_ppl=lstm["test_ppl"], parameters=zaremba_parameters,
             seconds=lstm["seconds"], source="tests/benchmarks/train_zaremba_small.py",
             published=_published("LSTM small, 2x200 (Zaremba)")),
        dict(model="AWD-LSTM (ULMFiT's general-domain LM)", notebook="06-07", test_ppl=awd["test_ppl"],
             parameters=awd_parameters, seconds=awd["train_seconds"], source="lmlib/pretrained (shipped)",
             published=_published("AWD-LSTM")),
    ]
    names = {"gpt_style": ("GPT-style decoder (absolute positions)", None),
             "transformer_xl": ("Transformer-XL (memory 64)", _published("Transformer-XL"))}
    for key, run in transformers["runs"].items():
        name, published = names[key]
        rows.append(dict(model=name, notebook="11-12", test_ppl=run["test_ppl"], parameters=run["parameters"],
                         seconds=run["train_seconds"], source="tests/benchmarks/bench_ptb_transformers.py",
                         published=published))
    return sorted(rows, key=lambda r: -r["test_ppl"])


def transfer_rows() -> list[dict]:
    """Every sentiment-transfer measurement of notebooks 07-10, one row per (dataset, method, labels): mean accuracy,
    standard error over seeds (None for one seed), seeds, test size and the result file. Results measured with
    another checkpoint than the shipped one are refused."""
    rows: list[dict] = []

    def add(dataset, family, method, n_labels, mean, se, seeds, n_test, source):
        rows.append(dict(dataset=dataset, family=family, method=method, n_labels=int(n_labels), mean=float(mean),
                         se=None if se is None else float(se), seeds=seeds, n_test=n_test, source=source))

    elmo = results.load("elmo_transfer")
    require_checkpoint("elmo_transfer", elmo["pretrained"]["sha256"], "elmo_imdb")
    elmo_family = {"ELMo (scalar mix)": "ELMo", "static vectors (char-CNN layer)": "ELMo",
                   "from scratch (bag of embeddings)": "from scratch", "from scratch + ELMo (the paper's use)": "ELMo"}
    for r in elmo["results"]:
        add("IMDb", elmo_family[r["method"]], f"ELMo study: {r['method']}", r["n_labels"], r["mean"],
            r["se"] if len(r["values"]) > 1 else None, len(r["values"]), r["n_test"], "elmo_transfer")

    gpt = results.load("gpt_finetune")
    require_checkpoint("gpt_finetune", gpt["checkpoint_sha256"], "gpt_imdb")
    gpt_names = {"gpt_aux": ("GPT", "GPT fine-tuned, λ = 0.5"), "gpt": ("GPT", "GPT fine-tuned, λ = 0"),
                 "scratch": ("from scratch", "GPT architecture, random init"),
                 "scratch_at_recipe_rate": ("from scratch", "GPT architecture, random init, at GPT's rate 5e-4")}
    gpt_test = gpt["settings"]["n_test"]
    for r in gpt["summary"]:
        family, name = gpt_names[r["condition"]]
        add("IMDb", family, name, r["n_labels"], r["mean"], r["se"], r["seeds"], gpt_test, "gpt_finetune")

    bert = results.load("bert_finetune")
    require_checkpoint("bert_finetune", bert["checkpoint_sha256"], "bert_imdb")
    tests = {}
    for r in bert["rows"]:
        tests[(r["task"], r["condition"], r["n_labels"])] = r.get("n_test")
    for r in bert["summary"]:
        family, name = {"bert": ("BERT", "BERT fine-tuned"), "scratch": ("from scratch", "BERT architecture, random init"),
                        "scratch_at_recipe_rate": ("from scratch", "BERT architecture, random init, at BERT's rate 5e-4")
                        }[r["condition"]]
        add({"imdb": "IMDb", "sst2": "SST-2 dev"}[r["task"]], family, name, r["n_labels"], r["mean"], r["se"], r["seeds"],
            tests.get((r["task"], r["condition"], r["n_labels"])), "bert_finetune")

    features = results.load("bert_features")
    require_checkpoint("bert_features", features["checkpoint_sha256"], "bert_imdb")
    imdb = features["imdb"]
    for init, family in (("pretrained", "BERT"), ("random", "from scratch")):
        candidates = [r for r in imdb["rows"] if r["init"] == init]
        best = max(candidates, key=lambda r: r["accuracy"])
        add("IMDb", family, f"BERT features ({init} weights), best layer: {best['features']}",
            imdb["train_reviews"], best["accuracy"], None, 1, imdb["test_reviews"], "bert_features")

    imdb_ulmfit = results.load("ulmfit_imdb")
    require_checkpoint("ulmfit_imdb", imdb_ulmfit["checkpoint"]["imdb_sha256"], "ulmfit_imdb")
    cut = imdb_ulmfit["settings"]["max_len"]
    for r in imdb_ulmfit["summary"]:
        if r["variant"] in ("ulmfit", "scratch") and r["max_len"] == cut:
            family, name = (("ULMFiT", "ULMFiT (PTB LM fine-tuned on IMDb)") if r["variant"] == "ulmfit"
                            else ("from scratch", "AWD-LSTM classifier, random init"))
            add("IMDb", family, name, r["n_labels"], r["mean"], r["se"], r["seeds"],
                imdb_ulmfit["settings"]["test_reviews"], "ulmfit_imdb")

    for part, family in (("ulmfit", "ULMFiT"), ("scratch", "from scratch")):
        curve = results.load(f"ulmfit_curve_{part}")
        if part == "ulmfit":
            require_checkpoint("ulmfit_curve_ulmfit", curve["pretrained"]["sha256"], "awd_lstm_ptb")
        for r in curve["results"]:
            if r["dataset"] == "sst2":
                name = "ULMFiT (PTB-pretrained AWD-LSTM)" if part == "ulmfit" else "AWD-LSTM classifier, random init"
                add("SST-2 dev", family, name, r["n_labels"], r["accuracy"], None, 1, r["n_test"], f"ulmfit_curve_{part}")
    return rows


BOW_METHODS = {  # truncation in bow_baseline.json -> the row's name in a transfer table
    "full": "bag of words (TF-IDF + logistic regression), full review",
    "model_view": "bag of words (TF-IDF + logistic regression), first and last 63 GPT tokens",
}


def bow_baseline_rows(truncation: str | None = None) -> list[dict]:
    """The bag-of-words baseline (``tests/benchmarks/bench_bow_baseline.py``) as transfer-table rows, in the keys of
    :func:`transfer_rows` plus ``truncation``: one row per truncation (``"full"``, ``"model_view"``, or only the one
    named) and label count, fewest labels first, with the mean accuracy on the GPT and BERT benchmarks' 1,000 IMDb
    test reviews and its standard error over seeds (None for one seed).

    ``"model_view"`` is the text the fine-tuned GPT reads, cut with the shipped GPT tokenizer: its rows are refused
    when the file was measured with another tokenizer. A notebook adds the baseline to a table with one call, e.g.
    ``rows = transfer_rows() + bow_baseline_rows()``."""
    if truncation is not None and truncation not in BOW_METHODS:
        raise ValueError(f"unknown truncation {truncation!r}; the baseline has {sorted(BOW_METHODS)} (or None for both)")
    data = results.load("bow_baseline")
    wanted = list(BOW_METHODS) if truncation is None else [truncation]
    if "model_view" in wanted:
        shipped = shipped_report("gpt_imdb")["sha256"]["tokenizer.json"]
        if data["checkpoint_sha256"] != shipped:
            raise RuntimeError(f"bow_baseline.json cut its 'model_view' reviews with another GPT tokenizer (sha256 "
                               f"{str(data['checkpoint_sha256'])[:12]}...) than the one shipped in {gpt.CHECKPOINT_DIR} "
                               f"({shipped[:12]}...); rerun tests/benchmarks/bench_bow_baseline.py")
    order = {t: k for k, t in enumerate(wanted)}
    summary = sorted((s for s in data["summary"] if s["truncation"] in order),
                     key=lambda s: (order[s["truncation"]], s["n_labels"]))
    return [dict(dataset="IMDb", family="bag of words", method=BOW_METHODS[s["truncation"]], n_labels=int(s["n_labels"]),
                 mean=float(s["mean"]), se=None if s["se"] is None else float(s["se"]), seeds=s["seeds"],
                 n_test=data["settings"]["n_test"], source="bow_baseline", truncation=s["truncation"])
            for s in summary]


GPU_STAGED = results.RESULTS_DIR / "gpu_pretraining"  # checkpoints pretrained on a GPU, not shipped yet


def dev_sweep_table(result: dict, caption: str | None = None, **match):
    """The from-scratch learning-rate sweep of a fine-tuning result (``dev_rows`` and ``scratch_rates`` of
    gpt_finetune.json or bert_finetune.json, ``match`` e.g. ``task="imdb"``) as an HTML table: a row per rate, a
    column per label count, mean dev accuracy ± se over the seeds run; the rate each label count chose is marked."""
    import statistics

    from .tables import html_table, mean_se

    rows = [r for r in result["dev_rows"] if all(r.get(k) == v for k, v in match.items())]
    if not rows:
        raise ValueError(f"no dev rows match {match}")
    sizes, rates = sorted({r["n_labels"] for r in rows}), sorted({r["lr"] for r in rows})
    prefix = f"{match['task']}:" if "task" in match else ""
    chosen = {n: result["scratch_rates"].get(f"{prefix}{n}") for n in sizes}
    lines = []
    for lr in rates:
        cells = []
        for n in sizes:
            accs = [r["dev_accuracy"] for r in rows if (r["lr"], r["n_labels"]) == (lr, n)]
            se = statistics.stdev(accs) / len(accs) ** 0.5 if len(accs) > 1 else None
            cell = mean_se(statistics.mean(accs), se, len(accs)) if accs else "–"
            cells.append(cell + (" ◀ chosen" if chosen[n] == lr else ""))
        lines.append([f"{lr:.0e}", *cells])
    return html_table(["rate", *(f"{n:,} labels" for n in sizes)], lines, caption=caption)


def staged_report(checkpoint: str) -> dict:
    """The ``pretrain.json`` of a checkpoint pretrained on a GPU by ``lmlib.recipes.accelerated``: kept in
    ``tests/benchmarks/results/gpu_pretraining/<checkpoint>/`` until the notebooks are moved to it, and, once it is
    shipped, the shipped one's (whose ``run`` names a CUDA device)."""
    path = GPU_STAGED / checkpoint / "pretrain.json"
    if path.is_file():
        return json.loads(path.read_text())
    if gpu_shipped(checkpoint):
        return shipped_report(checkpoint)
    raise ValueError(f"no GPU-pretrained {checkpoint!r} in {GPU_STAGED} or shipped; there are "
                     f"{sorted(d.name for d in GPU_STAGED.iterdir() if d.is_dir())} staged and "
                     f"{sorted(c for c in CHECKPOINTS if gpu_shipped(c))} shipped")


def gpu_shipped(checkpoint: str) -> bool:
    """Was the shipped ``checkpoint`` pretrained on a GPU (``lmlib.recipes.accelerated``)?"""
    return checkpoint in CHECKPOINTS and pretrained_on_gpu(shipped_report(checkpoint))


SHORT_PRETRAINING = {  # shipped checkpoint replaced by a GPU-pretrained one -> the archived results of the CPU one
    "gpt_imdb": "gpt_finetune_short_pretraining",
    "bert_imdb": "bert_finetune_short_pretraining",
}


def short_pretraining_report(checkpoint: str) -> dict:
    """The ``pretrain.json`` of the CPU checkpoint that was shipped as ``checkpoint`` before a GPU-pretrained one
    replaced it, as its archived results keep it (``checkpoint_report``), checked against the sha256 they were
    measured with."""
    if checkpoint not in SHORT_PRETRAINING:
        raise ValueError(f"{checkpoint!r} has not been replaced; archived CPU checkpoints: {sorted(SHORT_PRETRAINING)}")
    data = results.load(SHORT_PRETRAINING[checkpoint])
    report = data["checkpoint_report"]
    if report["sha256"][CHECKPOINTS[checkpoint][1]] != data["checkpoint_sha256"]:
        raise RuntimeError(f"{SHORT_PRETRAINING[checkpoint]}.json: its checkpoint_report is not the checkpoint its "
                           f"rows were measured with")
    return report


def pretraining_loss_curves(checkpoint: str) -> dict[str, tuple[list[float], list[float]]]:
    """The training loss against the tokens read so far (in millions) of the GPU-pretrained ``checkpoint`` that
    ships and of the CPU checkpoint shipped before it (:func:`short_pretraining_report`), as ``{label: (tokens,
    losses)}`` for a line plot. The GPU run logs its loss every 200 steps with the tokens read; the one-core run every
    100 steps, whose tokens are counted as its mean per step (``tokens_seen / steps``)."""
    gpu, cpu = staged_report(checkpoint), short_pretraining_report(checkpoint)
    if "train_loss_per_100_steps" not in cpu:
        raise ValueError(f"the archived report of {checkpoint!r} keeps no training curve")
    per_step = cpu["tokens_seen"] / cpu["recipe"]["steps"]
    cpu_losses = cpu["train_loss_per_100_steps"]
    return {
        f"one CPU thread, {cpu['tokens_seen'] / 1e6:.1f}M tokens (shipped before)":
            ([100 * (k + 1) * per_step / 1e6 for k in range(len(cpu_losses))], list(cpu_losses)),
        f"one {gpu['run']['device_name']}, {gpu['tokens_seen'] / 1e6:.0f}M tokens (shipped)":
            ([r["tokens"] / 1e6 for r in gpu["train_loss_curve"]], [r["loss"] for r in gpu["train_loss_curve"]]),
    }


LONGER_PRETRAINING = {  # model -> (checkpoint, fine-tuning result, its fine-tuned condition, test-size setting, task)
    "gpt": ("gpt_imdb", "gpt_finetune", "gpt", "n_test", None),
    "bert": ("bert_imdb", "bert_finetune", "bert", "imdb_test", "imdb"),
}


def longer_pretraining_rows(model: str = "gpt") -> list[dict]:
    """What a longer pretraining buys: the shipped ``model`` (GPT or BERT), pretrained on a GPU (GPT ~244M tokens,
    BERT ~173M), beside the same model shipped before it (a few million tokens on one CPU thread; its results
    archived in ``<result>_short_pretraining.json``), both fine-tuned by the same recipe (the recipe module's
    ``FINETUNE_RECIPE``, rate 5e-4; GPT at λ = 0), the same architecture from random weights at its own dev-chosen
    rate, on the same label samples and scored on the same 1,000 IMDb test reviews, and the bag of words on the same
    text; then frozen features (a linear probe on each layer, the best feature and layer at 1,000 labels) of the
    GPU model against the same architecture at random init (``gpu_transfer_<model>.json``). Rows: ``method``,
    ``tokens`` (pretraining tokens, None for none), ``n_labels``, ``mean``, ``se``, ``seeds``, ``source``. Each
    result file is checked against the checkpoint it claims."""
    if model not in LONGER_PRETRAINING:
        raise ValueError(f"unknown model {model!r}; a shipped GPU checkpoint replaced a CPU one for "
                         f"{sorted(LONGER_PRETRAINING)}")
    checkpoint, result, condition, test_size, task = LONGER_PRETRAINING[model]
    name = GPU_MODELS[model][1]
    gpu_report = staged_report(checkpoint)
    gpu = results.load(f"gpu_transfer_{model}")
    if gpu["checkpoint"]["sha256"] != gpu_report["sha256"]:
        raise RuntimeError(f"gpu_transfer_{model}.json was measured with another checkpoint than the GPU {name}; rerun "
                           f"tests/benchmarks/gpu_transfer.py {model} on it")
    shipped = load_for_shipped(result, checkpoint)
    short = results.load(SHORT_PRETRAINING[checkpoint])
    cpu_report = short_pretraining_report(checkpoint)
    if not (shipped["settings"] == short["settings"] and shipped["settings"]["recipe"]["lr"] == 5e-4
            and gpu["settings"]["test_reviews"] == shipped["settings"][test_size]):
        raise RuntimeError(f"the {name} results were measured with different recipes or test sets")
    rows: list[dict] = []

    def add(method, tokens, r, source):
        rows.append(dict(method=method, tokens=tokens, n_labels=int(r["n_labels"]), mean=float(r["mean"]),
                         se=None if r["se"] is None else float(r["se"]), seeds=r["seeds"], source=source))

    for wanted, method, tokens, data, source in (
            ("scratch", f"{name} architecture, random init", None, shipped, result),
            (condition, f"{name} fine-tuned, short CPU pretraining (shipped before)", cpu_report["tokens_seen"], short,
             SHORT_PRETRAINING[checkpoint]),
            (condition, f"{name} fine-tuned, GPU pretraining (shipped)", gpu_report["tokens_seen"], shipped, result)):
        for r in data["summary"]:
            if r["condition"] == wanted and r.get("task", task) == task:
                add(method, tokens, r, source)
    for r in gpu["summary"]:
        if r.get("condition") == f"{model}_mean":
            add(f"{name} fine-tuned, GPU pretraining, mean-pooled head", gpu_report["tokens_seen"], r,
                f"gpu_transfer_{model}")
    for r in bow_baseline_rows("model_view"):
        add(r["method"], None, r, "bow_baseline")
    several = len({r["feature"] for r in gpu["summary"] if "init" in r}) > 1  # BERT: [CLS] and mean-pooled
    for init, who, tokens in (("pretrained", f"GPU {name}", gpu_report["tokens_seen"]),
                              ("random", f"{name} at random init", None)):
        probes = [r for r in gpu["summary"] if r.get("init") == init]
        best = max((r for r in probes if r["n_labels"] == 1000), key=lambda r: r["mean"])
        kind = FEATURES.get(best["feature"], best["feature"]) if several else "features"
        for r in probes:
            if (r["feature"], r["layer"]) == (best["feature"], best["layer"]):
                add(f"frozen {kind}, {who} (best layer, linear probe): layer {best['layer']}", tokens, r,
                    f"gpu_transfer_{model}")
    return rows


def context_directions(states: Callable[[object], torch.Tensor], original, changed, position: int) -> dict[str, bool]:
    """Which positions' representations move when the token at ``position`` is replaced: ``{"earlier": ...,
    "later": ...}``. ``states(x)`` maps an input to ``(1, T, d)`` representations; ``changed`` is ``original`` with
    the token at ``position`` replaced. A left-to-right model moves only later positions, a bidirectional one both."""
    with torch.no_grad():
        delta = (states(changed) - states(original)).abs().amax(dim=-1)[0]  # (T,)
    if delta.numel() <= position:
        raise ValueError(f"position {position} is outside the {delta.numel()} positions of the input")
    return {"earlier": bool((delta[:position] > 1e-5).any()), "later": bool((delta[position + 1:] > 1e-5).any())}


# -- every GPU-pretrained checkpoint: fine-tuning and frozen features against the same architecture at random init

FEATURES = {"layers": "features of one layer", "mix": "features, scalar mix of all layers", "cls": "[CLS] features",
            "mean": "mean-pooled features"}  # gpu_transfer.py's feature kinds, as the tables name them
GPU_MODELS = {  # model -> (staged folder, what its fine-tuned condition is called, its architecture's name)
    "gpt": ("gpt_imdb", "GPT", "GPT"),
    "bert": ("bert_imdb", "BERT", "BERT"),
    "bert-mlm": ("bert_mlm_imdb", "BERT, MLM alone", "BERT"),
    "elmo": ("elmo_imdb", "ELMo", "ELMo biLM"),
    "ulmfit": ("ulmfit_imdb", "ULMFiT", "AWD-LSTM classifier"),
}


def gpu_transfer_rows(model: str, sizes: tuple[int, ...] = (100, 1000)) -> list[dict]:
    """Does the GPU pretraining of ``model`` transfer? Its ``tests/benchmarks/results/gpu_transfer_<model>.json``
    (``tests/benchmarks/gpu_transfer.py``: the benchmarks' 1,000 IMDb test reviews, balanced label samples, seeds
    0-2) as rows: the pretrained model fine-tuned and the same architecture from random weights, each at the rate
    that scored best on a dev split taken from the training reviews; then frozen features (a linear probe on each
    layer, the best layer at the largest label count) of the pretrained model and of the same architecture at random
    init; then the bag of words on the same test reviews (the text GPT reads). Rows: ``method``, ``tokens``
    (pretraining tokens, None for none), ``n_labels``, ``mean``, ``se``, ``seeds``, ``lr``, ``source``, and for a
    probe ``feature`` and ``init``.

    The result must have been measured with the checkpoint whose ``pretrain.json`` is staged in :data:`GPU_STAGED`
    or, once that checkpoint ships, is the shipped one (its sha256 of every file), or it is refused."""
    if model not in GPU_MODELS:
        raise ValueError(f"unknown model {model!r}; GPU transfer results exist for {sorted(GPU_MODELS)}")
    folder, name, architecture = GPU_MODELS[model]
    staged = staged_report(folder)
    source = f"gpu_transfer_{model.replace('-', '_')}"
    data = results.load(source)
    if data["checkpoint"]["sha256"] != staged["sha256"]:
        raise RuntimeError(f"{source}.json was measured with another checkpoint than the GPU-pretrained {folder}; rerun "
                           f"tests/benchmarks/gpu_transfer.py on it")
    rate = {}
    for r in data["rows"]:
        rate.setdefault(r["condition"], r.get("lr"))
    rows: list[dict] = []

    def add(method, tokens, r, lr=None, where=source, **probe):
        rows.append(dict(method=method, tokens=tokens, n_labels=int(r["n_labels"]), mean=float(r["mean"]),
                         se=None if r["se"] is None else float(r["se"]), seeds=r["seeds"], lr=lr, source=where,
                         **probe))

    tuned = {"gpt": f"{name} fine-tuned", "bert": f"{name} fine-tuned", "ulmfit": f"{name} fine-tuned",
             "gpt_mean": f"{name} fine-tuned, mean-pooled head", "gpt_aux": f"{name} fine-tuned, λ = 0.5",
             "ulmfit_flat": f"{name} fine-tuned, every layer from the start at one rate",
             "scratch": f"{architecture}, random init"}
    for condition, method in tuned.items():
        for r in data["summary"]:
            if r.get("condition") == condition and r["n_labels"] in sizes:
                add(method, None if condition == "scratch" else staged["tokens_seen"], r, rate.get(condition))
    for feature in sorted({r["feature"] for r in data["summary"] if "init" in r}):
        for init, tokens in (("pretrained", staged["tokens_seen"]), ("random", None)):
            probes = [r for r in data["summary"] if r.get("init") == init and r["feature"] == feature]
            if not probes:
                continue
            largest = max(r["n_labels"] for r in probes)
            best = max((r for r in probes if r["n_labels"] == largest), key=lambda r: r["mean"])["layer"]
            who = f"{name} (pretrained)" if init == "pretrained" else f"{architecture} at random init"
            where = "" if best == "mix" else f", best layer ({best})"
            for r in probes:
                if r["layer"] == best and r["n_labels"] in sizes:
                    add(f"frozen {FEATURES.get(feature, feature)}, {who}{where}", tokens, r, feature=feature,
                        init=init)
    for r in bow_baseline_rows("model_view"):
        if r["n_labels"] in sizes:
            add(r["method"], None, r, where="bow_baseline")
    return rows


def difference(rows: list[dict], a: str, b: str, n_labels: int) -> tuple[float, float | None]:
    """``(mean of a − mean of b, its standard error)`` at ``n_labels`` for two methods of ``rows`` (a method is
    matched by its name, or else by its start); the standard error is None when either side has one seed."""
    def pick(start):
        at = [r for r in rows if r["n_labels"] == n_labels]
        hits = [r for r in at if r["method"] == start] or [r for r in at if r["method"].startswith(start)]
        if len(hits) != 1:
            raise ValueError(f"{len(hits)} rows start with {start!r} at {n_labels} labels; name one method")
        return hits[0]
    x, y = pick(a), pick(b)
    se = (x["se"] ** 2 + y["se"] ** 2) ** 0.5 if x["se"] is not None and y["se"] is not None else None
    return x["mean"] - y["mean"], se


LESSON_BARS = {"fine-tuned − random init": 0.05, "fine-tuned − bag of words": 0.0, "frozen − random init": 0.05}


def lesson_checks(model: str) -> list[dict]:
    """Does pretraining transfer, in the GPU-pretrained ``model``'s own numbers? The checks the course holds its
    second half to, from :func:`gpu_transfer_rows`: fine-tuned minus the same architecture at random init (at
    each label count, bar +0.05), fine-tuned minus the bag of words on the same reviews (at the most labels, bar
    0), and the best frozen layer minus the best layer at random init (at the most labels, bar +0.05). A check
    whose rows the result lacks is left out. Rows: ``check``, ``n_labels``, ``difference``, ``se``, ``bar``,
    ``holds``."""
    rows = gpu_transfer_rows(model)
    _, name, architecture = GPU_MODELS[model]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    most = max(r["n_labels"] for r in rows)
    scratch, bow = f"{architecture}, random init", "bag of words"
    pairs = []
    for variant in (m for m in methods if m.startswith(f"{name} fine-tuned")):
        how = variant.removeprefix(f"{name} fine-tuned").removeprefix(", ")
        suffix = f" ({how})" if how else ""
        if scratch in methods:
            pairs += [("fine-tuned − random init", suffix, variant, scratch, n)
                      for n in sorted({r["n_labels"] for r in rows if r["method"] == variant})]
        pairs.append(("fine-tuned − bag of words", suffix, variant, bow, most))
    for feature in dict.fromkeys(r["feature"] for r in rows if "feature" in r):
        ours, theirs = ([r["method"] for r in rows if r.get("feature") == feature and r["init"] == init][0]
                        for init in ("pretrained", "random"))
        pairs.append(("frozen − random init", f": {FEATURES.get(feature, feature)}", ours, theirs, most))
    checks = []
    for check, suffix, a, b, n in pairs:
        bar = LESSON_BARS[check]
        d, se = difference(rows, a, b, n)
        checks.append(dict(check=check + suffix, n_labels=n, difference=d, se=se, bar=bar, holds=d >= bar))
    return checks


STAGED_METRICS = {  # staged folder -> (shipped checkpoint, held-out metric, how to read it from a pretrain.json)
    "gpt_imdb": ("gpt_imdb", "IMDb perplexity (BPE)", lambda r: r["valid_ppl"]),
    "bert_imdb": ("bert_imdb", "MLM accuracy", lambda r: r["valid"]["mlm_accuracy"]),
    "bert_mlm_imdb": ("bert_imdb", "MLM accuracy", lambda r: r["valid"]["mlm_accuracy"]),
    "elmo_imdb": ("elmo_imdb", "IMDb perplexity (forward)", lambda r: r["valid_forward_ppl"]),
    "awd_lstm_ptb": ("awd_lstm_ptb", "PTB test perplexity", lambda r: r["test_ppl"]),
    "ulmfit_imdb": ("ulmfit_imdb", "IMDb perplexity after stage (b)", lambda r: r["after"]["imdb_held_out_ppl"]),
}


def staged_pretraining_rows() -> list[dict]:
    """Each GPU-pretrained checkpoint beside the CPU checkpoint it replaces or is to replace: staged in
    :data:`GPU_STAGED` beside the shipped CPU one, or shipped beside the CPU one shipped before it
    (:func:`short_pretraining_report`). Tokens read (and per parameter), seconds, the device, and one held-out
    metric of each. Rows: ``checkpoint``, ``shipped`` (which of the two ships: ``"GPU"`` or ``"CPU"``, or neither
    when another GPU checkpoint does, as for BERT with MLM alone), ``metric``, ``gpu_tokens``,
    ``gpu_tokens_per_parameter``, ``gpu_seconds``, ``device``, ``gpu_value``, ``cpu_tokens``, ``cpu_value``."""
    rows = []
    for folder, (shipped_name, metric, read) in STAGED_METRICS.items():
        if (GPU_STAGED / folder / "pretrain.json").is_file():
            gpu, where = staged_report(folder), GPU_STAGED / folder
            if gpu_shipped(shipped_name):  # an alternative to the GPU checkpoint shipped (BERT with MLM alone)
                cpu, shipped = short_pretraining_report(shipped_name), f"neither ({shipped_name} from the GPU)"
            else:
                cpu, shipped = shipped_report(shipped_name), "CPU"
        elif folder == shipped_name and gpu_shipped(folder):
            gpu, cpu, where, shipped = shipped_report(folder), short_pretraining_report(folder), \
                Path(CHECKPOINTS[folder][0]), "GPU"
        else:
            continue
        per_parameter = gpu.get("tokens_per_parameter") or gpu["tokens_seen"] / _parameters(gpu, where)
        rows.append(dict(checkpoint=folder, shipped=shipped, metric=metric, gpu_tokens=gpu["tokens_seen"],
                         gpu_tokens_per_parameter=per_parameter, gpu_seconds=gpu["train_seconds"],
                         device=gpu["run"]["device_name"], gpu_value=read(gpu), cpu_tokens=cpu["tokens_seen"],
                         cpu_value=read(cpu)))
    return rows


def _parameters(report: dict, folder: Path) -> int:
    """A checkpoint's parameter count from its ``pretrain.json``, or from the tensor shapes the safetensors header
    in ``folder`` lists (ULMFiT's stage (b) report does not record it)."""
    if "parameters" in report:
        return int(report["parameters"])
    import math

    from safetensors import safe_open

    weights = next(name for name in report["sha256"] if name.endswith(".safetensors"))
    with safe_open(str(folder / weights), framework="pt") as fh:
        return sum(math.prod(fh.get_slice(k).get_shape()) for k in fh.keys())


def staged_pretraining_table():
    """:func:`staged_pretraining_rows` as an HTML table (:mod:`lmlib.course.tables`)."""
    from .tables import html_table

    def value(v):
        return f"{v:.1%}" if v < 1 else f"{v:.1f}"

    rows = staged_pretraining_rows()
    return html_table(
        ["checkpoint", "tokens read (GPU)", "per parameter", "seconds", "held-out metric", "GPU checkpoint",
         "CPU checkpoint", "tokens read (CPU)", "shipped"],
        [[r["checkpoint"], f"{r['gpu_tokens'] / 1e6:.1f}M", f"{r['gpu_tokens_per_parameter']:.0f}",
          f"{r['gpu_seconds']:.0f}", r["metric"], value(r["gpu_value"]), value(r["cpu_value"]),
          f"{r['cpu_tokens'] / 1e6:.1f}M", r["shipped"]] for r in rows],
        numeric=[False, True, True, True, False, True, True, True, False],
        caption=f"pretrained on one {rows[0]['device']} (GPU) and on one CPU thread; the last column says which "
                f"of the two lmlib/pretrained/ ships")


def lesson_checks_table(models: tuple[str, ...]):
    """:func:`lesson_checks` of each of ``models`` as one HTML table: the check, the difference ± its standard
    error, the bar, and whether it holds."""
    from .tables import html_table

    lines = []
    for model in models:
        for c in lesson_checks(model):
            difference = f"{c['difference']:+.3f}" + (f" ± {c['se']:.3f}" if c["se"] is not None else " (1 seed)")
            lines.append([GPU_MODELS[model][1], c["check"], f"{c['n_labels']:,}", difference,
                          f"≥ {c['bar']:+.2f}", "holds" if c["holds"] else "falls short"])
    return html_table(["model", "check", "labels", "difference", "bar", "verdict"], lines,
                      numeric=[False, False, True, True, True, False])
