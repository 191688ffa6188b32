"""What pretraining bought, against how much in-domain text it read: one fair comparison of the course's four
transfer models (issue 36; notebook 12).

A model's *transfer gain* is the accuracy of the pretrained model minus that of the same architecture from random
weights, measured on the same label samples and the same test reviews:

- ``"fine-tuned"``: the pretrained model trained on the labels, minus the same architecture from random init
  trained on them at the rate its own dev split chose (Howard & Ruder 2018; Radford et al. 2018; Devlin et al.
  2019). ELMo is not fine-tuned (Peters et al. 2018 add its features to a task model): its point in this panel is
  the task model with ELMo minus the task model alone.
- ``"frozen"``: the best frozen layer of the pretrained model under a linear probe, minus the best layer of the same
  architecture at random init.

Each gain is placed at the IMDb tokens its checkpoint read in pretraining (ULMFiT: stage (b) alone, with those of
the checkpoint a long CPU run started from; its PTB stage (a) is general-domain text). A gain carries the standard error of a difference of two means over seeds,
``sqrt(se_a² + se_b²)``, or None when a side has one seed. ``bow_gap`` = bag of words on the same reviews and the
same cut of them − the same random init, where measured: a gain above its ``bow_gap`` beats the bag of words.

Every number comes from a committed result file; a file measured with another checkpoint than the one it is read
for is refused.
"""

from __future__ import annotations

import math
from pathlib import Path

from . import results

KINDS = ("fine-tuned", "frozen")
MODELS = ("GPT", "BERT", "ELMo", "ULMFiT")  # the order of the legend; colours follow plotly's sequence
PANELS = {"fine-tuned": "trained on the labels", "frozen": "frozen, linear probe"}
CHANCE = 0.55  # accuracy on balanced test reviews at or below which a run is treated as one that did not train


def _mean_se(summary_row: dict) -> tuple[float, float | None, int]:
    seeds = summary_row.get("seeds", 1)
    se = summary_row.get("se") if seeds > 1 else None
    return float(summary_row["mean"]), None if se is None else float(se), seeds


def _one(rows: list[dict], name: str, **match) -> dict:
    hits = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    if len(hits) != 1:
        raise ValueError(f"{name}.json: {len(hits)} summary rows match {match}, expected one")
    return hits[0]


def _pair(rows: list[dict], name: str, key: str, variant: str, **match) -> tuple[tuple, tuple] | None:
    """``(variant, "scratch")`` as ``(mean, se, seeds)`` from summary ``rows``; None when either is missing."""
    try:
        return tuple(_mean_se(_one(rows, name, **{key: v}, **match)) for v in (variant, "scratch"))
    except ValueError:
        return None


def _best(rows, key: str = "mean") -> dict[str, dict]:
    """The best-scoring row of each init, ``"pretrained"`` and ``"random"``."""
    return {init: max((r for r in rows if r["init"] == init), key=lambda r: r[key]) for init in ("pretrained", "random")}


def _difference(a: tuple, b: tuple) -> tuple[float, float | None]:
    se = math.hypot(a[1], b[1]) if a[1] is not None and b[1] is not None else None
    return a[0] - b[0], se


def _bow(name: str, n_labels: int, sha256: str) -> tuple[float, float | None, int]:
    """The bag of words on the same text, refused unless its text was cut by the file with this ``sha256``."""
    data = results.load_checked(name, sha256)
    return _mean_se(_one(data["summary"], name, truncation="model_view", n_labels=n_labels))


def _point(model, budget, tokens, kind, n_labels, a, b, what, source, test_reviews, bow=None, bow_source=None):
    gain, se = _difference(a, b)
    point = dict(model=model, budget=budget, tokens=int(tokens), kind=kind, n_labels=n_labels, pretrained=a[0],
                 baseline=b[0], gain=gain, se=se, seeds=min(a[2], b[2]), what=what, source=source,
                 test_reviews=test_reviews, bow_gap=None, bow_gap_se=None, bow_source=None)
    if bow is not None:
        point["bow_gap"], point["bow_gap_se"] = _difference(bow, b)
        point["bow_source"] = bow_source
    return point


def _finetuned(model: str, name: str, condition: str, task: str | None, n_labels: int) -> list[dict]:
    """GPT or BERT fine-tuned (recipe rate) minus the random init at its dev-chosen rate, from ``name``: the shipped
    GPU checkpoint's result or the archived result of the CPU checkpoint shipped before it."""
    checkpoint = f"{model.lower()}_imdb"
    data = results.load(name)
    if "checkpoint_report" in data:  # archived: the CPU checkpoint shipped before the GPU one
        report, budget, what = data["checkpoint_report"], "CPU", "the checkpoint its archived report describes"
    else:
        report, budget, what = results.shipped_report(checkpoint), "GPU", f"the shipped lmlib/pretrained/{checkpoint}"
    results.refuse_another_checkpoint(name, data.get("checkpoint_sha256"),
                                      report["sha256"][f"{checkpoint}.safetensors"], what)
    match = {"n_labels": n_labels} if task is None else {"n_labels": n_labels, "task": task}
    pair = _pair(data["summary"], name, "condition", condition, **match)
    if pair is None:
        return []
    test = data["settings"].get("n_test") or data["settings"].get("imdb_test")
    bow = None
    if model == "GPT":  # the bag of words read exactly the GPT's cut of the same test reviews
        bow = _bow("bow_baseline", n_labels, report["sha256"]["tokenizer.json"])
    return [_point(model, budget, report["tokens_seen"], "fine-tuned", n_labels, *pair,
                   f"{model} fine-tuned − random init at its own rate", name, test, bow,
                   "bow_baseline" if bow else None)]


def _gpu_transfer(model: str, n_labels: int) -> list[dict]:
    """The staged or shipped GPU checkpoint's ``gpu_transfer_<model>.json``: ULMFiT's stage (c) minus the random
    init (each at its dev-chosen rate), and for every model the best probed layer minus the random init's best."""
    name, weights = f"gpu_transfer_{model.lower()}", f"{model.lower()}_imdb.safetensors"
    data = results.load(name)
    if data.get("model") != model.lower():
        raise RuntimeError(f"{name}.json holds the results of {data.get('model')!r}, not {model.lower()!r}")
    if weights not in data["checkpoint"]["sha256"]:
        raise RuntimeError(f"{name}.json names no {weights}; it was measured on another model's checkpoint")
    results.measured_checkpoint(data["checkpoint"]["sha256"], name)  # refused unless shipped or staged
    tokens, test, summary = data["checkpoint"]["tokens_seen"], data["settings"]["test_reviews"], data["summary"]
    points = []
    if model == "ULMFiT":
        a, b = _pair(summary, name, "condition", "ulmfit", n_labels=n_labels)
        points.append(_point(model, "GPU", tokens, "fine-tuned", n_labels, a, b,
                             "ULMFiT stage (c) − random init at its own rate", name, test))
    probes = [r for r in summary if "init" in r and r["n_labels"] == n_labels]
    if probes:
        best = _best(probes)
        layer = {init: _layer_name(r) for init, r in best.items()}
        points.append(_point(model, "GPU", tokens, "frozen", n_labels, _mean_se(best["pretrained"]),
                             _mean_se(best["random"]), f"best frozen layer ({layer['pretrained']}) − random init's "
                             f"best ({layer['random']})", name, test))
    return points


FEATURES = {"mean": "mean-pooled ", "cls": "[CLS] ", "layers": "", "mix": ""}


def _layer_name(probe: dict) -> str:
    """A probed layer as a person reads it: ``mean-pooled layer 2``, ``[CLS] layer 1``, ``scalar mix``."""
    if probe["layer"] == "mix":
        return "scalar mix of all layers"
    return f"{FEATURES.get(probe['feature'], probe['feature'] + ' ')}layer {probe['layer']}"


def _bert_features_short(n_labels: int) -> list[dict]:
    """The CPU BERT shipped before the GPU one: best probed feature, pretrained minus random weights (one seed)."""
    name = "bert_features_short_pretraining"
    report = results.load("bert_finetune_short_pretraining")["checkpoint_report"]
    imdb = results.load_checked(name, report["sha256"]["bert_imdb.safetensors"])["imdb"]
    if imdb["train_reviews"] != n_labels:
        return []
    best = _best(imdb["rows"], "accuracy")
    a, b = ((float(best[i]["accuracy"]), None, 1) for i in ("pretrained", "random"))
    return [_point("BERT", "CPU", report["tokens_seen"], "frozen", n_labels, a, b,
                   f"best frozen feature ({best['pretrained']['features']}) − random init's best "
                   f"({best['random']['features']})", name, imdb["test_reviews"])]


def _ulmfit_cpu(n_labels: int) -> list[dict]:
    """ULMFiT's labelled-examples curve (bench_ulmfit_imdb.py: the paper's stage (c) minus the same classifier from
    random weights at its own rate) on the shipped stage (b) LM, and on the one it replaced (the archived result)."""
    points = []
    for name, bow_name in (("ulmfit_imdb_short_pretraining", "bow_ulmfit_imdb_short_pretraining"),
                           ("ulmfit_imdb", "bow_ulmfit_imdb")):
        if name == "ulmfit_imdb":
            data = results.load_for_shipped(name, name, sha_field="checkpoint.imdb_sha256")
            report = results.shipped_report(name)
        else:  # archived with the pretrain.json of the checkpoint it was measured with
            data = results.load(name)
            report = data["checkpoint_report"]
            results.refuse_another_checkpoint(name, data["checkpoint"]["imdb_sha256"],
                                              report["sha256"]["ulmfit_imdb.safetensors"],
                                              "the checkpoint its archived report describes")
        pair = _pair(data["summary"], name, "variant", "ulmfit", n_labels=n_labels, max_len=data["settings"]["max_len"])
        if pair is None:
            continue
        bow = _bow(bow_name, n_labels, report["sha256"]["ulmfit_imdb.safetensors"])  # its vocabulary cut the text
        points.append(_point("ULMFiT", "CPU", results.tokens_read(report), "fine-tuned", n_labels, *pair,
                             "ULMFiT stage (c) − random init at its own rate", name, data["settings"]["test_reviews"],
                             bow, bow_name))
    return points


def _elmo_cpu(n_labels: int) -> list[dict]:
    """The shipped CPU ELMo as the paper uses it: a task model with ELMo minus the same task model alone."""
    name = "elmo_transfer"
    data = results.load_for_shipped(name, "elmo_imdb", sha_field="pretrained.sha256")
    by = {(r["method"], r["n_labels"]): r for r in data["results"]}
    pair = ("from scratch + ELMo (the paper's use)", "from scratch (bag of embeddings)")
    if any((m, n_labels) not in by for m in pair):
        return []
    a, b = (((r := by[m, n_labels])["mean"], r["se"] if len(r["values"]) > 1 else None, len(r["values"]))
            for m in pair)
    bow = _bow("bow_elmo_transfer", n_labels, results.shipped_sha256("elmo_imdb"))
    return [_point("ELMo", "CPU", results.shipped_report("elmo_imdb")["tokens_seen"], "fine-tuned", n_labels, a, b,
                   "task model + ELMo − the task model alone", name, data["settings"]["test_reviews"], bow,
                   "bow_elmo_transfer")]


# bench_transfer_milestones.py's result files: the CPU runs' milestones, then the shipped checkpoint
MILESTONE_PROBES = {"ELMo": ("elmo_cpu_milestones", "elmo_sentiment_128"), "ULMFiT": ("ulmfit_cpu_milestones",)}
PROBED = {"ELMo": "layer", "ULMFiT": "feature"}  # ELMo: its single layers (0, 1, 2); ULMFiT: concat pooling, embeddings


def _probed(model: str, feature) -> bool:
    return str(feature).isdigit() if PROBED[model] == "layer" else feature in ("concat", "embeddings")


def _milestone_probes(model: str, n_labels: int) -> list[dict]:
    """Each checkpoint of the files ``MILESTONE_PROBES[model]``: the best single probed feature of the pretrained LM
    minus the best of the same architecture at random init, both probed on the same reviews' head and tail, with the
    bag of words on the same words. A shipped checkpoint's sha256 must be the shipped one's. A milestone's tokens
    include those of the checkpoint its run started from."""
    return [p for name in MILESTONE_PROBES[model] for p in _probed_checkpoints(model, name, n_labels)]


def _probed_checkpoints(model: str, name: str, n_labels: int) -> list[dict]:
    try:
        data = results.load(name)
    except FileNotFoundError:
        return []
    points, milestones = [], results.cpu_milestones_by_sha256()
    for ckpt in data["checkpoints"]:
        if ckpt.get("kind") != model.lower():
            raise RuntimeError(f"{name}.json holds a {ckpt.get('kind')!r} checkpoint, not {model.lower()!r}")
        folder = Path(ckpt["folder"])
        sha = results.weights_sha256(ckpt)
        if folder.parent.name == "pretrained":
            results.refuse_another_checkpoint(name, sha, results.shipped_sha256(folder.name),
                                              f"the shipped lmlib/pretrained/{folder.name}")
        layers = [r for r in ckpt["summary"] if r["n_labels"] == n_labels and _probed(model, r["feature"])]
        if not layers:
            continue
        best = _best(layers)
        bow = next((r for r in data.get("bow", {}).get(model.lower(), {}).get("summary", [])
                    if r["n_labels"] == n_labels), None)
        budget = "GPU" if "cuda" in str(ckpt.get("device") or "") else "CPU"
        test = data["settings"]["test_reviews"]
        kind = PROBED[model]
        shown = {i: f"layer {r['feature']}" if kind == "layer" else r["feature"] for i, r in best.items()}
        milestone = milestones.get(sha)
        tokens = ckpt["tokens_seen"] if milestone is None else results.tokens_read(milestone)
        points.append(_point(model, budget, tokens, "frozen", n_labels, _mean_se(best["pretrained"]),
                             _mean_se(best["random"]),
                             f"best frozen {kind} ({shown['pretrained']}) − random init's best "
                             f"({shown['random']}), first and last "
                             f"{data['settings']['max_tokens'] // 2} words", name, test,
                             None if bow is None else _mean_se(bow), name if bow else None))
    return points


def _ulmfit_cpu_stage_c(n_labels: int) -> list[dict]:
    """The paper's stage (c) on the final CPU milestone of ULMFiT's stage (b) minus the same classifier from random
    weights, each at the length its dev split chose, with the bag of words on the words ULMFiT reads."""
    from .ulmfit_cpu import FINAL, stage_c

    try:
        data = stage_c(FINAL)
    except (FileNotFoundError, ValueError):
        return []
    entry = {s["condition"]: s for s in data["summary"] if s["n_labels"] == n_labels}
    if "ulmfit" not in entry or "scratch" not in entry:
        return []
    tokens = results.tokens_read(results.cpu_milestones()[FINAL][0])
    bow = entry.get(f"bow_{entry['ulmfit']['max_len']}")
    name = f"ulmfit_stage_c_{data['checkpoint_sha256'][:12]}"
    return [_point("ULMFiT", "CPU", tokens, "fine-tuned", n_labels, _mean_se(entry["ulmfit"]),
                   _mean_se(entry["scratch"]), "ULMFiT stage (c) − random init, each at its dev-chosen length", name,
                   data["settings"]["test_reviews"], None if bow is None else _mean_se(bow), name if bow else None)]


def transfer_gains(n_labels: int = 1000) -> list[dict]:
    """Every transfer gain measured with ``n_labels`` labelled reviews, from every checkpoint measured, fewest
    tokens first within each model. A point: ``model``, ``budget`` (``"CPU"``: pretrained on a CPU, the checkpoint
    first shipped or a long CPU run's milestone; ``"GPU"``: the long GPU pretraining), ``tokens`` (IMDb tokens read in pretraining), ``kind`` (``"fine-tuned"`` or
    ``"frozen"``), ``n_labels``, ``pretrained`` and ``baseline`` (mean accuracies), ``gain``, ``se`` (None: one
    seed), ``seeds``, ``what``, ``source`` (the result file), ``test_reviews``, and ``bow_gap``/``bow_gap_se``/
    ``bow_source`` (bag of words on the same text minus the same baseline, where measured).

    A point is left out when its baseline sat at chance (accuracy ≤ :data:`CHANCE`): a random init that did not
    train measures nothing about pretraining."""
    points = (_finetuned("GPT", "gpt_finetune_short_pretraining", "gpt", None, n_labels)
              + _finetuned("GPT", "gpt_finetune", "gpt", None, n_labels)
              + _gpu_transfer("GPT", n_labels)
              + _finetuned("BERT", "bert_finetune_short_pretraining", "bert", "imdb", n_labels)
              + _bert_features_short(n_labels)
              + _finetuned("BERT", "bert_finetune", "bert", "imdb", n_labels)
              + _gpu_transfer("BERT", n_labels)
              + _elmo_cpu(n_labels) + _milestone_probes("ELMo", n_labels) + _gpu_transfer("ELMo", n_labels)
              + _ulmfit_cpu(n_labels) + _ulmfit_cpu_stage_c(n_labels) + _milestone_probes("ULMFiT", n_labels)
              + _gpu_transfer("ULMFiT", n_labels))
    points = [p for p in points if p["baseline"] > CHANCE]
    return sorted(points, key=lambda p: (MODELS.index(p["model"]), p["kind"], p["tokens"]))


def _tokens(n: int) -> str:
    return f"{n / 1e6:.1f}M"


def gains_table(points: list[dict]):
    """The points of :func:`transfer_gains` as an HTML table, one row per point."""
    from .tables import html_table, mean_se

    return html_table(
        ["model", "checkpoint", "IMDb tokens read", "panel", "what is compared", "gain",
         "bag of words − the same random init", "result file"],
        [[p["model"], p["budget"], _tokens(p["tokens"]), PANELS[p["kind"]], p["what"],
          mean_se(p["gain"], p["se"], 1, signed=True), mean_se(p["bow_gap"], p["bow_gap_se"], 1, signed=True),
          p["source"]] for p in points],
        numeric=[False, False, True, False, False, True, True, False],
        caption=f"transfer gain at {points[0]['n_labels']:,} labels: pretrained minus the same architecture from "
                "random weights (± standard error of the difference)" if points else None)


def gains_figure(points: list[dict]):
    """Transfer gain against IMDb tokens read (log axis): one panel per kind of gain, one colour per model, error bars
    of one standard error, and the bag of words on the same text as a dashed line in the model's colour at the gain
    that would tie it."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    from .viz import LAYOUT

    if not points:
        raise ValueError("no transfer gains to draw")
    colour = dict(zip(MODELS, qualitative.Plotly))
    symbol = {"CPU": "circle-open", "GPU": "circle"}
    n_labels = points[0]["n_labels"]
    tokens = [p["tokens"] for p in points]
    span = [math.log10(min(tokens) / 3), math.log10(max(tokens) * 3)]  # the same range in both panels
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06, subplot_titles=(
        f"{PANELS['fine-tuned']}: pretrained − random init", f"{PANELS['frozen']}: best layer − random init's best"))
    for col, kind in enumerate(KINDS, start=1):
        for model in MODELS:
            pts = [p for p in points if p["model"] == model and p["kind"] == kind]
            if not pts:
                continue
            fig.add_trace(go.Scatter(
                x=[p["tokens"] for p in pts], y=[p["gain"] for p in pts], mode="lines+markers", name=model,
                legendgroup=model, showlegend=not any(t.name == model for t in fig.data),
                line=dict(color=colour[model], width=1.5),
                marker=dict(size=11, color=colour[model], symbol=[symbol[p["budget"]] for p in pts],
                            line=dict(width=2, color=colour[model])),
                error_y=dict(type="data", array=[p["se"] or 0 for p in pts], visible=True),
                customdata=[[p["budget"], p["what"], p["source"], "" if p["se"] is not None else " (1 seed)"]
                            for p in pts],
                hovertemplate=(f"{model}, %{{customdata[0]}} checkpoint<br>%{{x:.3s}} IMDb tokens<br>%{{customdata[1]}}:"
                               " %{y:+.3f}%{customdata[3]}<br>%{customdata[2]}.json<extra></extra>")), row=1, col=col)
            for p in pts:
                if p["bow_gap"] is None:
                    continue
                fig.add_trace(go.Scatter(
                    x=[p["tokens"] / 2, p["tokens"] * 2], y=[p["bow_gap"]] * 2, mode="lines", legendgroup=model,
                    showlegend=False, line=dict(color=colour[model], dash="dash", width=2),
                    hovertemplate=(f"bag of words on the same text − {model}'s random init: {p['bow_gap']:+.3f}"
                                   f"<br>{p['bow_source']}.json<extra></extra>")), row=1, col=col)
        fig.add_hline(y=0, line_color="gray", line_width=1, row=1, col=col)
        fig.update_xaxes(type="log", title_text="IMDb tokens read in pretraining (log scale)", row=1, col=col,
                         range=span)
    fig.update_yaxes(title_text=f"accuracy gain at {n_labels:,} labels", row=1, col=1)
    fig.update_layout(**{**LAYOUT, "height": 460, "margin": dict(l=70, r=20, t=80, b=60)},
                      title=f"Transfer gain against the in-domain text read ({n_labels:,} labels; open marker: "
                            "pretrained on a CPU, filled: on a GPU; dashed: the bag of words on the same text)",
                      title_font_size=13, legend_title_text="model")
    return fig


def probe_table(model: str = "ELMo"):
    """The frozen-feature probes of the shipped checkpoint (the last of ``MILESTONE_PROBES[model]``) as an HTML
    table: each probed feature, pretrained beside the same architecture at random init, and the bag of words on the
    same words, mean ± standard error over seeds at each label count."""
    from .tables import html_table

    name = MILESTONE_PROBES[model][-1]
    data = results.load(name)
    sizes = data["settings"]["sizes"]

    def cell(rows, n):
        r = next((r for r in rows if r["n_labels"] == n), None)
        return "" if r is None else f"{r['mean']:.3f} ± {r['se']:.3f}"

    out = []
    for ckpt in data["checkpoints"]:
        tokens = _tokens(ckpt["tokens_seen"])
        for feature in dict.fromkeys(r["feature"] for r in ckpt["summary"]):
            label = {"all": "all layers concatenated", "best": "the layer cross-validation picks",
                     "concat": "concat pooling", "embeddings": "mean word embedding"}.get(
                str(feature), f"layer {feature}")
            for init in ("pretrained", "random"):
                rows = [r for r in ckpt["summary"] if r["feature"] == feature and r["init"] == init]
                who = f"{model} ({tokens} tokens)" if init == "pretrained" else f"{model} at random init"
                out.append([who, label, *(cell(rows, n) for n in sizes)])
    bow = data.get("bow", {}).get(model.lower(), {}).get("summary", [])
    if bow:
        out.append(["bag of words (TF-IDF, logistic regression)", "the same words", *(cell(bow, n) for n in sizes)])
    return html_table(["features of", "feature", *(f"{n:,} labels" for n in sizes)], out,
                      numeric=[False, False, *([True] * len(sizes))],
                      caption=f"{model}: frozen features of the first and last {data['settings']['max_tokens'] // 2} "
                              f"words of {data['settings']['test_reviews']:,} IMDb test reviews under a linear probe "
                              f"(mean ± standard error over {len(data['settings']['seeds'])} label samples; {name}.json)")


def matched_budgets(points: list[dict], within: float = 2.0) -> list[dict]:
    """Pairs of gains of two different models in the same panel whose checkpoints read within a factor ``within``
    of each other's IMDb tokens: the only comparisons of architectures the figure supports. Each pair: ``kind``,
    ``a`` and ``b`` (the points, fewer tokens first), ``difference`` (a's gain − b's), ``se`` (None when a side has
    one seed) and ``beyond_noise`` (:func:`lmlib.course.verdicts.beyond_noise`). The two gains were measured by
    different scripts on their own test reviews, which the standard error does not cover."""
    from .verdicts import beyond_noise

    if within < 1:
        raise ValueError(f"within is a factor of at least 1, got {within}")
    pairs = []
    for kind in KINDS:
        at = sorted((p for p in points if p["kind"] == kind), key=lambda p: p["tokens"])
        for i, a in enumerate(at):
            for b in at[i + 1:]:
                if a["model"] != b["model"] and b["tokens"] <= within * a["tokens"]:
                    d, se = _difference((a["gain"], a["se"]), (b["gain"], b["se"]))
                    pairs.append(dict(kind=kind, a=a, b=b, difference=d, se=se, beyond_noise=beyond_noise(d, se)))
    return pairs


def matched_budgets_table(points: list[dict], within: float = 2.0):
    """:func:`matched_budgets` as an HTML table."""
    from .tables import html_table, mean_se

    def who(p):
        return f"{p['model']} at {_tokens(p['tokens'])}"

    rows = [[PANELS[m["kind"]], who(m["a"]), mean_se(m["a"]["gain"], m["a"]["se"], m["a"]["seeds"], signed=True),
             who(m["b"]), mean_se(m["b"]["gain"], m["b"]["se"], m["b"]["seeds"], signed=True),
             mean_se(m["difference"], m["se"], signed=True),
             "one seed: no verdict" if m["se"] is None else "beyond noise" if m["beyond_noise"] else "within noise"]
            for m in matched_budgets(points, within)]
    return html_table(["panel", "model", "gain", "against", "gain", "difference", "reading"], rows,
                      numeric=[False, False, True, False, True, True, False],
                      caption=f"gains of two architectures whose pretraining read within {within:g}× the same IMDb "
                              "tokens (each gain over its own random init; the two were measured on their own test "
                              "reviews)")
