"""The benchmark results committed with the course, and the checkpoints they were measured with.

Each script in ``tests/benchmarks/`` writes ``lmlib/results/<name>.json``; notebooks read it by name with
:func:`load`. A result that quotes a checkpoint's sha256 is refused beside any other checkpoint
(:func:`load_checked`, :func:`load_for_shipped`), so a table never mixes a new model with an old model's numbers.

What a checkpoint read, on what, and what it replaced is data, not code: a shipped checkpoint's ``pretrain.json``
(``lmlib/pretrained``) names the checkpoint it replaced under ``replaced`` (the archived results that keep that
one's ``pretrain.json`` and numbers); a checkpoint pretrained but not shipped sits in
``lmlib/results/gpu_pretraining/<folder>/`` with a ``pretrain.json`` whose ``candidate_for`` names the shipped
checkpoint it is measured against, and ``held_out_metric`` names the field both are compared on.

The row builders below turn those files into the rows of the course's tables (:mod:`lmlib.course.tables`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
STAGED_DIR = RESULTS_DIR / "gpu_pretraining"  # pretrained checkpoints not shipped, each with its pretrain.json
CPU_RUNS_DIR = RESULTS_DIR / "cpu_pretraining"  # <model>/<milestone>/pretrain.json of the long CPU runs (--preset cpu)


def available() -> list[str]:
    """The names :func:`load` accepts, sorted."""
    return sorted(path.stem for path in RESULTS_DIR.glob("*.json"))


def load(name: str) -> dict:
    """The committed result ``lmlib/results/<name>.json``, e.g. ``load("translation_budget")``."""
    if not name or Path(name).name != name or name.endswith(".json"):
        raise ValueError(f"give a result's bare name, as in load('attention'), not a path or file name; got {name!r}")
    path = RESULTS_DIR / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark result named {name!r} in {RESULTS_DIR}; the results there are: "
                                f"{', '.join(available())}. Each is written by a script in tests/benchmarks/")
    return json.loads(path.read_text())


def field(record: dict, dotted: str):
    """``record["a"]["b"]`` for ``"a.b"``; None where a level is missing."""
    value = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def refuse_another_checkpoint(name: str, recorded: str, loaded: str, rerun: str) -> None:
    """Raise unless the result ``name`` recorded the sha256 of the checkpoint loaded (``rerun``: how to rebuild it)."""
    if recorded != loaded:
        raise RuntimeError(f"{name}.json was measured with another checkpoint (sha256 {str(recorded)[:12]}…) than the "
                           f"one loaded ({loaded[:12]}…); rerun {rerun}")


def load_checked(name: str, sha256: str, *, sha_field: str = "checkpoint_sha256", recipe: dict | None = None,
                 recipe_field: str = "settings.recipe", rerun: str | None = None) -> dict:
    """:func:`load`, refusing a result that does not describe the checkpoint with weights ``sha256``.

    The result quotes the sha256 of the checkpoint it measured at ``sha_field`` (a dotted path such as
    ``"pretrained.sha256"``). With ``recipe``, its fine-tuning settings (at ``recipe_field``) must equal it as well.
    ``rerun`` names the script that rebuilds the file; by default the result's own ``command``.
    """
    result = load(name)
    how = rerun or field(result, "command") or f"the script in tests/benchmarks/ that writes {name}.json"
    recorded = field(result, sha_field)
    if recorded is None:
        raise KeyError(f"{name}.json has no checkpoint sha256 at {sha_field!r}; name the field that holds it")
    refuse_another_checkpoint(name, recorded, sha256, how)
    if recipe is not None and field(result, recipe_field) != json.loads(json.dumps(recipe)):
        raise RuntimeError(f"{name}.json was run with other fine-tuning settings than the recipe's; rerun {how}")
    return result


# -- checkpoints: shipped in lmlib/pretrained, or staged in lmlib/results/gpu_pretraining -------------------------

def _reports(folders) -> dict[str, tuple[dict, Path]]:
    return {folder.name: (json.loads((folder / "pretrain.json").read_text()), folder)
            for folder in folders if (folder / "pretrain.json").is_file()}


def shipped() -> dict[str, tuple[dict, Path]]:
    """Every shipped checkpoint: its name (the stem of its weights file) -> (its ``pretrain.json``, its folder)."""
    from ..recipes.shipping import PRETRAINED_DIR

    return {_weights(report)[:-len(".safetensors")]: (report, folder)
            for report, folder in _reports([PRETRAINED_DIR, *sorted(PRETRAINED_DIR.iterdir())]).values()}


def staged() -> dict[str, tuple[dict, Path]]:
    """Every checkpoint pretrained but not shipped: its folder's name -> (its ``pretrain.json``, its folder)."""
    return _reports(sorted(STAGED_DIR.iterdir()))


def cpu_milestones() -> dict[str, tuple[dict, Path]]:
    """The milestones of the long CPU pretraining runs: ``"<model>/<milestone>"`` -> (its ``pretrain.json``, its
    folder), the weights there only where they are kept (``python -m lmlib pretrain ... --preset cpu``)."""
    runs = sorted(p for p in CPU_RUNS_DIR.iterdir() if p.is_dir()) if CPU_RUNS_DIR.is_dir() else []
    return {f"{run.name}/{name}": entry for run in runs for name, entry in _reports(sorted(run.iterdir())).items()}


def _weights(report: dict) -> str:
    return next(name for name in report["sha256"] if name.endswith(".safetensors"))


def weights_sha256(report: dict) -> str:
    """The sha256 of a checkpoint's weights file, as its ``pretrain.json`` records it."""
    return report["sha256"][_weights(report)]


def tokens_read(report: dict) -> int:
    """The tokens a checkpoint has read in all: its own run's ``tokens_seen`` and, for a run that went on from another
    checkpoint, that one's (``start`` in its ``pretrain.json``)."""
    return report["tokens_seen"] + (report.get("start") or {}).get("tokens_seen", 0)


def cpu_milestones_by_sha256() -> dict[str, dict]:
    """The ``pretrain.json`` of every CPU milestone (:func:`cpu_milestones`), by the sha256 of its weights."""
    return {weights_sha256(report): report for report, _ in cpu_milestones().values()}


def shipped_report(checkpoint: str) -> dict:
    """The ``pretrain.json`` of a shipped checkpoint (recipe, tokens seen, metrics, sha256 of each file)."""
    everything = shipped()
    if checkpoint not in everything:
        raise ValueError(f"unknown checkpoint {checkpoint!r}; the shipped ones are {sorted(everything)}")
    return everything[checkpoint][0]


def shipped_sha256(checkpoint: str) -> str:
    """The sha256 of a shipped checkpoint's weights, as its ``pretrain.json`` records it."""
    return weights_sha256(shipped_report(checkpoint))


def load_for_shipped(result: str, checkpoint: str, **check) -> dict:
    """The committed result ``result``, refused unless it was measured on the shipped ``checkpoint`` (``check``:
    ``sha_field``, ``recipe``, ... as in :func:`load_checked`)."""
    return load_checked(result, shipped_sha256(checkpoint), **check)


def short_pretraining_report(checkpoint: str) -> dict:
    """The ``pretrain.json`` of the checkpoint that the shipped ``checkpoint`` replaced: its ``replaced`` entry
    names the archived result that keeps it (``checkpoint_report``), checked against the sha256 that result's rows
    were measured with."""
    replaced = shipped_report(checkpoint).get("replaced")
    if replaced is None:
        raise ValueError(f"{checkpoint!r} has not been replaced; its pretrain.json names no 'replaced' checkpoint")
    data = load(replaced["report"])
    report = data["checkpoint_report"]
    if weights_sha256(report) != data["checkpoint_sha256"]:
        raise RuntimeError(f"{replaced['report']}.json: its checkpoint_report is not the checkpoint its rows were "
                           f"measured with")
    return report


def measured_checkpoint(sha256: dict, result: str) -> tuple[str, dict, Path]:
    """``(name, pretrain.json, folder)`` of the shipped or staged checkpoint whose files have exactly ``sha256``;
    the result ``result`` is refused when there is none."""
    for name, (report, folder) in [*shipped().items(), *staged().items()]:
        if report["sha256"] == sha256:
            return name, report, folder
    raise RuntimeError(f"{result}.json was measured with another checkpoint than any shipped or staged one; rerun "
                       f"the script in its 'command' on the checkpoint to compare")


def pretraining_loss_curves(checkpoint: str) -> dict[str, tuple[list[float], list[float]]]:
    """The training loss against the tokens read so far (in millions) of the shipped ``checkpoint`` and of the one
    it replaced (:func:`short_pretraining_report`), as ``{label: (tokens, losses)}`` for a line plot. The shipped run
    logs its loss with the tokens read; the replaced one every 100 steps, its tokens counted as its mean per step."""
    new, old = shipped_report(checkpoint), short_pretraining_report(checkpoint)
    if "train_loss_per_100_steps" not in old:
        raise ValueError(f"the archived report of {checkpoint!r} keeps no training curve")
    per_step = old["tokens_seen"] / old["recipe"]["steps"]
    losses = old["train_loss_per_100_steps"]
    return {
        f"one CPU thread, {old['tokens_seen'] / 1e6:.1f}M tokens (shipped before)":
            ([100 * (k + 1) * per_step / 1e6 for k in range(len(losses))], list(losses)),
        f"one {new['run']['device_name']}, {new['tokens_seen'] / 1e6:.0f}M tokens (shipped)":
            ([r["tokens"] / 1e6 for r in new["train_loss_curve"]], [r["loss"] for r in new["train_loss_curve"]]),
    }


def gpu_made(report: dict) -> bool:
    """Whether the run that wrote this ``pretrain.json`` ran on a GPU (``run.device``; a CPU run records none or cpu)."""
    return (report.get("run") or {}).get("device") == "cuda"


def staged_pretraining_rows() -> list[dict]:
    """Each GPU-pretrained checkpoint beside the CPU checkpoint it replaced (``replaced``) or is measured against
    (``candidate_for``, or the one that replaced), most tokens first. Rows: ``checkpoint``, ``shipped`` (``"GPU"``,
    ``"CPU"``, or neither when another GPU checkpoint ships), ``metric`` (``held_out_metric``), ``gpu_tokens``,
    ``gpu_tokens_per_parameter``, ``gpu_seconds``, ``device``, ``gpu_value``, ``cpu_tokens``, ``cpu_value``."""
    rows = []
    candidates = [(name, *entry) for name, entry in shipped().items() if "replaced" in entry[0] and gpu_made(entry[0])] + \
                 [(name, *entry) for name, entry in staged().items() if "candidate_for" in entry[0]]
    for name, gpu, folder in candidates:
        target = gpu.get("candidate_for")
        if target is None:
            cpu, ships = short_pretraining_report(name), "GPU"
        elif gpu_made(shipped_report(target)):
            cpu, ships = short_pretraining_report(target), f"neither ({target} from the GPU)"
        else:  # the CPU checkpoint that ships (a CPU run may have gone on from this one)
            cpu, ships = shipped_report(target), "CPU"
        metric = gpu["held_out_metric"]
        per_parameter = gpu.get("tokens_per_parameter") or gpu["tokens_seen"] / _parameters(gpu, folder)
        rows.append(dict(checkpoint=name, shipped=ships, metric=metric["name"], gpu_tokens=gpu["tokens_seen"],
                         gpu_tokens_per_parameter=per_parameter, gpu_seconds=gpu["train_seconds"],
                         device=gpu["run"]["device_name"], gpu_value=field(gpu, metric["field"]),
                         cpu_tokens=tokens_read(cpu), cpu_value=field(cpu, metric["field"])))
    return sorted(rows, key=lambda r: -r["gpu_tokens"])


def _parameters(report: dict, folder: Path) -> int:
    """A checkpoint's parameter count from its ``pretrain.json``, or from the tensor shapes its safetensors header
    lists (ULMFiT's stage (b) report does not record it)."""
    if "parameters" in report:
        return int(report["parameters"])
    from safetensors import safe_open

    with safe_open(str(folder / _weights(report)), framework="pt") as fh:
        return sum(math.prod(fh.get_slice(k).get_shape()) for k in fh.keys())


# -- rows for the course's tables ------------------------------------------------------------------------------

def transformer_xl_result(vocab_size: int) -> dict:
    """``transformer_xl.json``, refused unless each run's model config is the one
    :func:`lmlib.recipes.transformer_xl.build` makes today for ``vocab_size`` (the rows describe today's recipe)."""
    from lmlib.recipes import transformer_xl as X

    result = load("transformer_xl")
    for variant, runs in result["runs"].items():
        today = json.loads(json.dumps(X.build(variant, vocab_size).config.__dict__))
        if any(run["config"] != today for run in runs):
            raise RuntimeError(f"transformer_xl.json's {variant} model was built with another config than "
                               f"lmlib.recipes.transformer_xl's; rerun {result.get('command', 'its script')}")
    return result


def ptb_ladder(awd_parameters: int, zaremba_parameters: int) -> list[dict]:
    """One row per PTB-trained model of the course, worst to best test perplexity: where the number comes from,
    parameters, CPU seconds of training, and the published figure for that model. The parameter counts of the
    AWD-LSTM and of Zaremba's LSTM are passed in (building models is the notebook's business, not this table's)."""
    from .leaderboard import PUBLISHED

    published = {model: (ppl, source) for model, ppl, source in PUBLISHED}
    ngram = {row["model"]: row for row in load("ngram")["full_ptb"]}["MKN5, all of PTB"]
    nnlm, lstm, transformers = load("nnlm"), load("zaremba_small"), load("ptb_transformers")
    awd = shipped_report("awd_lstm_ptb")
    rows = [
        dict(model="modified Kneser-Ney 5-gram", notebook="01", test_ppl=ngram["test_perplexity"], parameters=None,
             seconds=ngram["fit_s"], source="ngram", published=published["Kneser-Ney 5-gram"]),
        dict(model="Bengio NNLM (5-gram window, direct connections)", notebook="02", test_ppl=nnlm["test_ppl"],
             parameters=nnlm["config"]["parameters"], seconds=nnlm["seconds"], source="nnlm",
             published=published["Feed-forward NNLM"]),
        dict(model="LSTM 2x200 (Zaremba small)", notebook="03", test_ppl=lstm["test_ppl"], parameters=zaremba_parameters,
             seconds=lstm["seconds"], source="zaremba_small", published=published["LSTM small, 2x200 (Zaremba)"]),
        dict(model="AWD-LSTM (ULMFiT's general-domain LM" + (f", trained on one {awd['run']['device_name']}" if "run" in awd
                                                             else "") + ")", notebook="06-07", test_ppl=awd["test_ppl"],
             parameters=awd_parameters, seconds=awd["train_seconds"], source="lmlib/pretrained (shipped)",
             published=published["AWD-LSTM"]),
    ]
    names = {"gpt_style": ("GPT-style decoder (absolute positions)", None),
             "transformer_xl": ("Transformer-XL (memory 64)", published["Transformer-XL"])}
    for key, run in transformers["runs"].items():
        rows.append(dict(model=names[key][0], notebook="11-12", test_ppl=run["test_ppl"], parameters=run["parameters"],
                         seconds=run["train_seconds"], source="ptb_transformers", published=names[key][1]))
    return sorted(rows, key=lambda r: -r["test_ppl"])


def _row(r: dict, **keys) -> dict:
    """A table row from a summary entry ``r``: its label count, mean, standard error and seeds, and ``keys``."""
    return dict(keys, n_labels=int(r["n_labels"]), mean=float(r["mean"]), se=None if r["se"] is None else float(r["se"]),
                seeds=r["seeds"])


def transfer_rows() -> list[dict]:
    """Every sentiment-transfer measurement of notebooks 07-10, one row per (dataset, method, labels): mean accuracy,
    standard error over seeds (None for one seed), seeds, test size and the result file. Results measured with
    another checkpoint than the shipped one are refused."""
    rows: list[dict] = []

    def add(dataset, family, method, r, n_test, source):
        rows.append(_row(r, dataset=dataset, family=family, method=method) | dict(n_test=n_test, source=source))

    elmo = load_for_shipped("elmo_transfer", "elmo_imdb", sha_field="pretrained.sha256")
    elmo_family = {"ELMo (scalar mix)": "ELMo", "static vectors (char-CNN layer)": "ELMo",
                   "from scratch (bag of embeddings)": "from scratch", "from scratch + ELMo (the paper's use)": "ELMo"}
    for r in elmo["results"]:
        seeds = len(r["values"])
        add("IMDb", elmo_family[r["method"]], f"ELMo study: {r['method']}",
            dict(r, se=r["se"] if seeds > 1 else None, seeds=seeds), r["n_test"], "elmo_transfer")

    gpt = load_for_shipped("gpt_finetune", "gpt_imdb")
    gpt_names = {"gpt_aux": ("GPT", "GPT fine-tuned, λ = 0.5"), "gpt": ("GPT", "GPT fine-tuned, λ = 0"),
                 "scratch": ("from scratch", "GPT architecture, random init"),
                 "scratch_at_recipe_rate": ("from scratch", "GPT architecture, random init, at GPT's rate 5e-4")}
    for r in gpt["summary"]:
        add("IMDb", *gpt_names[r["condition"]], r, gpt["settings"]["n_test"], "gpt_finetune")

    bert = load_for_shipped("bert_finetune", "bert_imdb")
    tests = {(r["task"], r["condition"], r["n_labels"]): r.get("n_test") for r in bert["rows"]}
    bert_names = {"bert": ("BERT", "BERT fine-tuned"), "scratch": ("from scratch", "BERT architecture, random init"),
                  "scratch_at_recipe_rate": ("from scratch", "BERT architecture, random init, at BERT's rate 5e-4")}
    for r in bert["summary"]:
        add({"imdb": "IMDb", "sst2": "SST-2 dev"}[r["task"]], *bert_names[r["condition"]], r,
            tests.get((r["task"], r["condition"], r["n_labels"])), "bert_finetune")

    imdb = load_for_shipped("bert_features", "bert_imdb")["imdb"]
    for init, family in (("pretrained", "BERT"), ("random", "from scratch")):
        best = max((r for r in imdb["rows"] if r["init"] == init), key=lambda r: r["accuracy"])
        add("IMDb", family, f"BERT features ({init} weights), best layer: {best['features']}",
            dict(n_labels=imdb["train_reviews"], mean=best["accuracy"], se=None, seeds=1), imdb["test_reviews"],
            "bert_features")

    ulmfit = load_for_shipped("ulmfit_imdb", "ulmfit_imdb", sha_field="checkpoint.imdb_sha256")
    ulmfit_names = {"ulmfit": ("ULMFiT", "ULMFiT (PTB LM fine-tuned on IMDb)"),
                    "scratch": ("from scratch", "AWD-LSTM classifier, random init")}
    for r in ulmfit["summary"]:
        if r["variant"] in ulmfit_names and r["max_len"] == ulmfit["settings"]["max_len"]:
            add("IMDb", *ulmfit_names[r["variant"]], r, ulmfit["settings"]["test_reviews"], "ulmfit_imdb")

    for part, family, method in (("ulmfit", "ULMFiT", "ULMFiT (PTB-pretrained AWD-LSTM)"),
                                 ("scratch", "from scratch", "AWD-LSTM classifier, random init")):
        curve = load_for_shipped("ulmfit_curve_ulmfit", "awd_lstm_ptb", sha_field="pretrained.sha256") \
            if part == "ulmfit" else load("ulmfit_curve_scratch")
        for r in curve["results"]:
            if r["dataset"] == "sst2":
                add("SST-2 dev", family, method, dict(r, mean=r["accuracy"], se=None, seeds=1), r["n_test"],
                    f"ulmfit_curve_{part}")
    return rows


BOW_METHODS = {  # truncation in bow_baseline.json -> the row's name in a transfer table
    "full": "bag of words (TF-IDF + logistic regression), full review",
    "model_view": "bag of words (TF-IDF + logistic regression), first and last 63 GPT tokens",
}


def bow_baseline_rows(truncation: str | None = None) -> list[dict]:
    """The bag-of-words baseline (``bow_baseline.json``) as transfer-table rows, in the keys of
    :func:`transfer_rows` plus ``truncation``: one row per truncation (``"full"``, ``"model_view"``, or only the one
    named) and label count, fewest labels first, with the mean accuracy on the GPT and BERT benchmarks' IMDb test
    reviews and its standard error over seeds (None for one seed).

    ``"model_view"`` is the text the fine-tuned GPT reads, cut with the shipped GPT tokenizer: its rows are refused
    when the file was measured with another tokenizer."""
    if truncation is not None and truncation not in BOW_METHODS:
        raise ValueError(f"unknown truncation {truncation!r}; the baseline has {sorted(BOW_METHODS)} (or None for both)")
    data = load("bow_baseline")
    wanted = list(BOW_METHODS) if truncation is None else [truncation]
    if "model_view" in wanted:
        refuse_another_checkpoint("bow_baseline", data["checkpoint_sha256"],
                                  shipped_report("gpt_imdb")["sha256"]["tokenizer.json"], data["command"])
    order = {t: k for k, t in enumerate(wanted)}
    summary = sorted((s for s in data["summary"] if s["truncation"] in order),
                     key=lambda s: (order[s["truncation"]], s["n_labels"]))
    return [_row(s, dataset="IMDb", family="bag of words", method=BOW_METHODS[s["truncation"]])
            | dict(n_test=data["settings"]["n_test"], source="bow_baseline", truncation=s["truncation"])
            for s in summary]


# -- every GPU-pretrained checkpoint: fine-tuning and frozen features against the same architecture at random init

GPU_NAMES = {  # gpu_transfer_<model>.json -> (the pretrained model's name, its architecture's name) in the tables
    "gpt": ("GPT", "GPT"), "bert": ("BERT", "BERT"), "bert-mlm": ("BERT, MLM alone", "BERT"),
    "elmo": ("ELMo", "ELMo biLM"), "ulmfit": ("ULMFiT", "AWD-LSTM classifier"),
}
FEATURES = {"layers": "features of one layer", "mix": "features, scalar mix of all layers", "cls": "[CLS] features",
            "mean": "mean-pooled features"}  # the transfer benchmark's feature kinds, as the tables name them


def _gpu_transfer(model: str) -> tuple[str, dict, dict]:
    """``(result name, result, pretrain.json of the checkpoint it measured)`` of ``gpu_transfer_<model>.json``."""
    if model not in GPU_NAMES:
        raise ValueError(f"unknown model {model!r}; GPU transfer results exist for {sorted(GPU_NAMES)}")
    source = f"gpu_transfer_{model.replace('-', '_')}"
    data = load(source)
    return source, data, measured_checkpoint(data["checkpoint"]["sha256"], source)[1]


def gpu_transfer_checkpoint(model: str) -> tuple[int, bool]:
    """``(tokens it read, whether it is the shipped one)`` of the checkpoint ``gpu_transfer_<model>.json`` measured."""
    _, data, report = _gpu_transfer(model)
    return report["tokens_seen"], any(r["sha256"] == data["checkpoint"]["sha256"] for r, _ in shipped().values())


def _best_probes(summary: list[dict], init: str, feature: str | None = None, sizes=None) -> list[dict]:
    """The probe summaries (at ``sizes``, or all) of the feature and layer that scored best at the most labels, for
    one init and, if given, one feature kind."""
    probes = [r for r in summary if r.get("init") == init and (feature is None or r["feature"] == feature)]
    if not probes:
        return []
    most = max(r["n_labels"] for r in probes)
    best = max((r for r in probes if r["n_labels"] == most), key=lambda r: r["mean"])
    return [r for r in probes if (r["feature"], r["layer"]) == (best["feature"], best["layer"])
            and (sizes is None or r["n_labels"] in sizes)]


def gpu_transfer_rows(model: str, sizes: tuple[int, ...] = (100, 1000)) -> list[dict]:
    """Does the GPU pretraining of ``model`` transfer? Its ``gpu_transfer_<model>.json`` as rows: the pretrained
    model fine-tuned and the same architecture from random weights, each at the rate that scored best on a dev split
    of the training reviews; then frozen features (a linear probe on each layer, the best layer at the most labels)
    of the pretrained model and of the architecture at random init; then the bag of words on the same test reviews.
    Rows: ``method``, ``tokens`` (pretraining tokens, None for none), ``n_labels``, ``mean``, ``se``, ``seeds``,
    ``lr``, ``source``, and for a probe ``feature`` and ``init``. The result is refused unless its checkpoint is a
    shipped or staged one (the sha256 of every file)."""
    source, data, report = _gpu_transfer(model)
    name, architecture = GPU_NAMES[model]
    tokens = report["tokens_seen"]
    rate = {r["condition"]: r.get("lr") for r in reversed(data["rows"])}  # each condition's first row
    rows: list[dict] = []

    def add(method, tokens, r, lr=None, where=source, **probe):
        rows.append(_row(r, method=method, tokens=tokens) | dict(lr=lr, source=where, **probe))

    tuned = {"gpt": f"{name} fine-tuned", "bert": f"{name} fine-tuned", "ulmfit": f"{name} fine-tuned",
             "gpt_mean": f"{name} fine-tuned, mean-pooled head", "gpt_aux": f"{name} fine-tuned, λ = 0.5",
             "ulmfit_flat": f"{name} fine-tuned, every layer from the start at one rate",
             "scratch": f"{architecture}, random init"}
    for condition, method in tuned.items():
        for r in data["summary"]:
            if r.get("condition") == condition and r["n_labels"] in sizes:
                add(method, None if condition == "scratch" else tokens, r, rate.get(condition))
    for feature in sorted({r["feature"] for r in data["summary"] if "init" in r}):
        for init, seen in (("pretrained", tokens), ("random", None)):
            probes = _best_probes(data["summary"], init, feature, sizes)
            who = f"{name} (pretrained)" if init == "pretrained" else f"{architecture} at random init"
            where = "" if not probes or probes[0]["layer"] == "mix" else f", best layer ({probes[0]['layer']})"
            for r in probes:
                add(f"frozen {FEATURES.get(feature, feature)}, {who}{where}", seen, r, feature=feature, init=init)
    for r in bow_baseline_rows("model_view"):
        if r["n_labels"] in sizes:
            add(r["method"], None, r, where="bow_baseline")
    return rows


def longer_pretraining_rows(model: str = "gpt") -> list[dict]:
    """What a longer pretraining buys: the shipped ``model`` (GPT or BERT) beside the checkpoint it replaced (its
    ``pretrain.json``'s ``replaced``: the archived results of the same fine-tuning benchmark), both fine-tuned by
    the same recipe, the same architecture from random weights at its own dev-chosen rate, on the same label samples
    and test reviews, and the bag of words on the same text; then frozen features (the best feature and layer at
    the most labels) of the shipped model against the architecture at random init (``gpu_transfer_<model>.json``).
    Rows: ``method``, ``tokens`` (pretraining tokens, None for none), ``n_labels``, ``mean``, ``se``, ``seeds``,
    ``source``. Each result file is checked against the checkpoint it claims."""
    source, gpu, gpu_report = _gpu_transfer(model)
    checkpoint = next((name for name, (report, _) in shipped().items()
                       if report["sha256"] == gpu_report["sha256"] and "replaced" in report), None)
    if checkpoint is None:
        raise ValueError(f"{source}.json measured no shipped checkpoint that replaced another one")
    replaced = gpu_report["replaced"]
    result = next(now for now, before in replaced["results"].items() if before == replaced["report"])
    name = GPU_NAMES[model][0]
    shipped_result = load_for_shipped(result, checkpoint)
    short, cpu_report = load(replaced["report"]), short_pretraining_report(checkpoint)
    settings = shipped_result["settings"]
    test_reviews = next(settings[key] for key in ("n_test", "imdb_test") if key in settings)
    if not (settings == short["settings"] and settings["recipe"]["lr"] == 5e-4
            and gpu["settings"]["test_reviews"] == test_reviews):
        raise RuntimeError(f"the {name} results were measured with different recipes or test sets")
    rows: list[dict] = []

    def add(method, tokens, r, where):
        rows.append(_row(r, method=method, tokens=tokens) | dict(source=where))

    for wanted, method, tokens, data, where in (
            ("scratch", f"{name} architecture, random init", None, shipped_result, result),
            (model, f"{name} fine-tuned, short CPU pretraining (shipped before)", cpu_report["tokens_seen"], short,
             replaced["report"]),
            (model, f"{name} fine-tuned, GPU pretraining (shipped)", gpu_report["tokens_seen"], shipped_result,
             result)):
        for r in data["summary"]:
            if r["condition"] == wanted and r.get("task", "imdb") == "imdb":
                add(method, tokens, r, where)
    for r in gpu["summary"]:
        if r.get("condition") == f"{model}_mean":
            add(f"{name} fine-tuned, GPU pretraining, mean-pooled head", gpu_report["tokens_seen"], r, source)
    for r in bow_baseline_rows("model_view"):
        add(r["method"], None, r, "bow_baseline")
    several = len({r["feature"] for r in gpu["summary"] if "init" in r}) > 1  # BERT: [CLS] and mean-pooled
    for init, who, tokens in (("pretrained", f"GPU {name}", gpu_report["tokens_seen"]),
                              ("random", f"{name} at random init", None)):
        probes = _best_probes(gpu["summary"], init)
        best = probes[0]
        kind = FEATURES.get(best["feature"], best["feature"]) if several else "features"
        for r in probes:
            add(f"frozen {kind}, {who} (best layer, linear probe): layer {best['layer']}", tokens, r, source)
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
    se = math.hypot(x["se"], y["se"]) if x.get("se") is not None and y.get("se") is not None else None
    return x["mean"] - y["mean"], se


def lesson_holds(d: float, se: float | None, bar: float) -> bool:
    """A lesson check holds when the difference ``d`` reaches its ``bar`` and is positive beyond noise: more than two
    standard errors above zero (:func:`lmlib.course.verdicts.beyond_noise`, the rule of every verdict). With one seed
    (no standard error) it does not hold."""
    from .verdicts import beyond_noise

    return d >= bar and d > 0 and beyond_noise(d, se)


LESSON_BARS = {"fine-tuned − random init": 0.05, "fine-tuned − bag of words": 0.0, "frozen − random init": 0.05}


def lesson_checks(model: str) -> list[dict]:
    """Does pretraining transfer, in the GPU-pretrained ``model``'s own numbers? From :func:`gpu_transfer_rows`:
    fine-tuned minus the same architecture at random init (at each label count, bar +0.05), fine-tuned minus the bag
    of words on the same reviews (at the most labels, bar 0), and the best frozen layer minus the best layer at
    random init (at the most labels, bar +0.05); each holds only when it also clears two standard errors
    (:func:`lesson_holds`). A check whose rows the result lacks is left out. Rows: ``check``, ``n_labels``,
    ``difference``, ``se``, ``bar``, ``holds``."""
    rows = gpu_transfer_rows(model)
    name, architecture = GPU_NAMES[model]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    most = max(r["n_labels"] for r in rows)
    scratch = f"{architecture}, random init"
    pairs = []
    for variant in (m for m in methods if m.startswith(f"{name} fine-tuned")):
        how = variant.removeprefix(f"{name} fine-tuned").removeprefix(", ")
        suffix = f" ({how})" if how else ""
        if scratch in methods:
            pairs += [("fine-tuned − random init", suffix, variant, scratch, n)
                      for n in sorted({r["n_labels"] for r in rows if r["method"] == variant})]
        pairs.append(("fine-tuned − bag of words", suffix, variant, "bag of words", most))
    for feature in dict.fromkeys(r["feature"] for r in rows if "feature" in r):
        ours, theirs = ([r["method"] for r in rows if r.get("feature") == feature and r["init"] == init][0]
                        for init in ("pretrained", "random"))
        pairs.append(("frozen − random init", f": {FEATURES.get(feature, feature)}", ours, theirs, most))
    checks = []
    for check, suffix, a, b, n in pairs:
        d, se = difference(rows, a, b, n)
        checks.append(dict(check=check + suffix, n_labels=n, difference=d, se=se, bar=LESSON_BARS[check],
                           holds=lesson_holds(d, se, LESSON_BARS[check])))
    return checks
