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
from . import results
from .leaderboard import PUBLISHED

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
    folder, weights = CHECKPOINTS[checkpoint]
    shipped = shipped_report(checkpoint)["sha256"][weights]
    if recorded_sha256 != shipped:
        raise RuntimeError(f"{result}.json was measured with another {checkpoint} checkpoint (sha256 "
                           f"{str(recorded_sha256)[:12]}...) than the one shipped in {folder} ({shipped[:12]}...); "
                           f"rerun the script that wrote it (its name is in the file's 'command' or docstring)")


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
                 "scratch": ("from scratch", "GPT architecture, random init")}
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
        family, name = ("BERT", "BERT fine-tuned") if r["condition"] == "bert" else ("from scratch", "BERT architecture, random init")
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


def staged_report(checkpoint: str) -> dict:
    """The ``pretrain.json`` of a checkpoint pretrained on a GPU by ``lmlib.recipes.accelerated`` and kept in
    ``tests/benchmarks/results/gpu_pretraining/<checkpoint>/`` until the notebooks are moved to it."""
    path = GPU_STAGED / checkpoint / "pretrain.json"
    if not path.is_file():
        raise ValueError(f"no GPU-pretrained {checkpoint!r} in {GPU_STAGED}; there are "
                         f"{sorted(d.name for d in GPU_STAGED.iterdir() if d.is_dir())}")
    return json.loads(path.read_text())


def longer_pretraining_rows() -> list[dict]:
    """Does a longer pretraining pay? The GPT pretrained on a GPU (``staged_report("gpt_imdb")``: ~244M tokens)
    beside the shipped GPT (4.1M tokens) and the same architecture from random weights, all fine-tuned by the same
    recipe (``lmlib.recipes.gpt.FINETUNE_RECIPE``, rate 5e-4, λ = 0) on the same label samples and scored on the same
    1,000 IMDb test reviews, and the bag of words on the same text; then frozen features (a linear probe on each
    layer's mean-pooled states, the best layer at 1,000 labels) of the GPU GPT against the same GPT at random init.
    Rows: ``method``, ``tokens`` (pretraining tokens, None for none), ``n_labels``, ``mean``, ``se``, ``seeds``,
    ``source``. Each result file is checked against the checkpoint it claims."""
    staged = staged_report("gpt_imdb")
    gpu = results.load("gpu_transfer_gpt")
    if gpu["checkpoint"]["sha256"] != staged["sha256"]:
        raise RuntimeError("gpu_transfer_gpt.json was measured with another checkpoint than the staged GPU GPT; rerun "
                           "tests/benchmarks/gpu_transfer.py gpt on it")
    shipped = results.load("gpt_finetune")
    require_checkpoint("gpt_finetune", shipped["checkpoint_sha256"], "gpt_imdb")
    if shipped["settings"]["recipe"]["lr"] != 5e-4 or gpu["settings"]["test_reviews"] != shipped["settings"]["n_test"]:
        raise RuntimeError("the shipped and GPU GPT results were measured with different recipes or test sets")
    rows: list[dict] = []

    def add(method, tokens, r, source):
        rows.append(dict(method=method, tokens=tokens, n_labels=int(r["n_labels"]), mean=float(r["mean"]),
                         se=None if r["se"] is None else float(r["se"]), seeds=r["seeds"], source=source))

    sizes = {100, 1000}
    for condition, method, tokens in (("scratch", "GPT architecture, random init", None),
                                      ("gpt", "GPT fine-tuned, shipped (CPU) pretraining", shipped_report("gpt_imdb")["tokens_seen"])):
        for r in shipped["summary"]:
            if r["condition"] == condition and r["n_labels"] in sizes:
                add(method, tokens, r, "gpt_finetune")
    names = {"gpt": "GPT fine-tuned, GPU pretraining", "gpt_mean": "GPT fine-tuned, GPU pretraining, mean-pooled head"}
    for r in gpu["summary"]:
        if r.get("condition") in names and r["n_labels"] in sizes:
            add(names[r["condition"]], staged["tokens_seen"], r, "gpu_transfer_gpt")
    for r in bow_baseline_rows("model_view"):
        if r["n_labels"] in sizes:
            add(r["method"], None, r, "bow_baseline")
    for init, method, tokens in (("pretrained", "frozen features, GPU GPT (best layer, linear probe)", staged["tokens_seen"]),
                                 ("random", "frozen features, GPT at random init (best layer, linear probe)", None)):
        probes = [r for r in gpu["summary"] if r.get("init") == init]
        best = max((r for r in probes if r["n_labels"] == 1000), key=lambda r: r["mean"])["layer"]
        for r in probes:
            if r["layer"] == best:
                add(f"{method}: layer {best}", tokens, r, "gpu_transfer_gpt")
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
