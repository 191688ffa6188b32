"""ULMFiT's stage (b) pretrained for 150M IMDb tokens on a CPU (``python -m lmlib pretrain ulmfit-imdb --preset
cpu``; notebooks 07 and 12): what its milestones' frozen features probe, what the paper's stage (c) makes of the
final LM against the same classifier from random weights and the bag of words, and how many tokens the trend of the
milestones says the frozen features would need to reach the bag of words.

The bars are the ones the course holds every transfer lesson to (:func:`lmlib.course.results.lesson_holds`): the
pretrained classifier must beat the random init by at least 0.05 and by more than two standard errors, and it must
not trail the bag of words that reads the same words (difference ≥ 0, beyond noise above it not asked for).

Every number comes from a committed result file, refused when it was measured on another checkpoint than the
milestone's committed ``pretrain.json`` names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from . import results
from .tables import html_table, mean_se
from .transfer_gains import CHANCE, _difference

FINAL = "ulmfit_imdb/tokens_150M"  # the run's last milestone, its weights committed
MILESTONES = "ulmfit_cpu_milestones"  # bench_transfer_milestones.py's probes of every milestone
CONDITIONS = {"ulmfit": "ULMFiT, the paper's stage (c)", "ulmfit_flat": "ULMFiT, one rate, all layers",
              "scratch": "the same classifier from random weights"}
BAR = 0.05  # pretrained − random init, as every transfer lesson of the course


def stage_c(milestone: str = FINAL) -> dict:
    """``bench_ulmfit_stage_c.py``'s result on the milestone ``milestone`` (``"<model>/<folder>"`` of
    :func:`lmlib.course.results.cpu_milestones`), refused unless it names that milestone's weights."""
    found = results.cpu_milestones()
    if milestone not in found:
        raise ValueError(f"no CPU milestone {milestone!r}; the committed ones are {sorted(found)}")
    sha = results.weights_sha256(found[milestone][0])
    name = f"ulmfit_stage_c_{sha[:12]}"
    data = results.load(name)
    results.refuse_another_checkpoint(name, data["checkpoint_sha256"], sha, data.get("command", name))
    return data


def _entry(data: Mapping, n: int, condition: str) -> dict | None:
    return next((s for s in data["summary"] if s["n_labels"] == n and s["condition"] == condition), None)


def stage_c_checks(data: Mapping) -> list[dict]:
    """Per label count and per pretrained condition (the paper's schedule, the one-rate ablation): its difference
    from the random init (bar +0.05, beyond two standard errors) and from the bag of words on the words it reads at
    its dev-chosen length (bar 0). Rows: ``condition``, ``against``, ``n_labels``, ``difference``, ``se`` (None: one
    seed on a side), ``bar``, ``holds``, ``seeds`` (the fewer of the two sides')."""
    from .results import lesson_holds

    checks = []
    for n in data["settings"]["sizes"]:
        scratch = _entry(data, n, "scratch")
        for condition in ("ulmfit", "ulmfit_flat"):
            ours = _entry(data, n, condition)
            if ours is None:
                continue
            bow = _entry(data, n, f"bow_{ours['max_len']}")
            for against, other, bar in (("random init", scratch, BAR), ("bag of words, same words", bow, 0.0)):
                if other is None:
                    continue
                d, se = _difference((ours["mean"], ours["se"]), (other["mean"], other["se"]))
                holds = (lesson_holds(d, se, bar) if bar > 0 else d >= 0 and se is not None)
                checks.append(dict(condition=condition, against=against, n_labels=n, difference=d, se=se, bar=bar,
                                   holds=holds, seeds=min(ours["seeds"], other["seeds"])))
    return checks


def stage_c_table(data: Mapping):
    """Each condition's test accuracy at its dev-chosen length, mean ± standard error over seeds, beside the bag of
    words on the same words and on the full review."""
    rows = []
    for n in data["settings"]["sizes"]:
        for condition, name in CONDITIONS.items():
            s = _entry(data, n, condition)
            if s is not None:
                rows.append([f"{n:,}", name, str(s["max_len"]), mean_se(s["mean"], s["se"], s["seeds"]), s["seeds"]])
        for view, name in (("whole", "bag of words, the words ULMFiT reads"), ("full", "bag of words, full review")):
            s = _entry(data, n, f"bow_{view}")
            if s is not None:
                rows.append([f"{n:,}", name, view, mean_se(s["mean"], s["se"], s["seeds"]), s["seeds"]])
    return html_table(["labels", "classifier", "length read", "test accuracy", "seeds"], rows,
                      numeric=[True, False, False, True, True],
                      caption=f"stage (c) on the {data['checkpoint']['tokens_seen'] / 1e6:.0f}M-token CPU stage (b) "
                              f"LM, {data['settings']['test_reviews']:,} test reviews (± one standard error over "
                              "seeds; the length each classifier reads was chosen on a dev split of training reviews)")


def checks_table(checks: Sequence[Mapping]):
    """:func:`stage_c_checks` as an HTML table."""
    return html_table(
        ["labels", "classifier", "minus", "difference", "bar", "holds"],
        [[f"{c['n_labels']:,}", CONDITIONS[c["condition"]], c["against"],
          mean_se(c["difference"], c["se"], c["seeds"], signed=True), f"{c['bar']:+.2f}",
          "yes" if c["holds"] else "no" if c["se"] is not None else "one seed: no verdict"] for c in checks],
        numeric=[True, False, False, True, True, False],
        caption="the lesson's bars: ahead of the random init by the bar and by more than two standard errors; "
                "level with or ahead of the bag of words on the same words")


def milestone_curve(n_labels: int = 1000, feature: str = "concat") -> list[dict]:
    """The frozen ``feature`` of each milestone at ``n_labels`` labels, with the IMDb tokens it had read in all
    (this run's and its start checkpoint's, from the milestone's ``pretrain.json``, matched by sha256): rows
    ``tokens``, ``mean``, ``se``, ``random`` (the random init's same feature), ``held_out_ppl`` (the milestone's exact
    perplexity on held-out reviews), fewest tokens first."""
    data = results.load(MILESTONES)
    reports = results.cpu_milestones_by_sha256()
    rows = []
    for ckpt in data["checkpoints"]:
        sha = ckpt["sha256"]["ulmfit_imdb.safetensors"]
        if sha not in reports:
            raise RuntimeError(f"{MILESTONES}.json probed a checkpoint (sha256 {sha[:12]}…) that no committed "
                               "milestone's pretrain.json names")
        by = {r["init"]: r for r in ckpt["summary"] if r["n_labels"] == n_labels and r["feature"] == feature}
        if len(by) == 2:
            report = reports[sha]
            ppl = report.get("imdb_held_out_ppl") or (report.get("after") or {}).get("imdb_held_out_ppl")
            rows.append(dict(tokens=results.tokens_read(report), mean=by["pretrained"]["mean"],
                             se=by["pretrained"]["se"], random=by["random"]["mean"], held_out_ppl=ppl))
    return sorted(rows, key=lambda r: r["tokens"])


def milestone_bow(n_labels: int = 1000) -> dict:
    """The bag of words on the words the milestones' probes read (their head and tail), at ``n_labels``."""
    data = results.load(MILESTONES)
    return next(r for r in data["bow"]["ulmfit"]["summary"] if r["n_labels"] == n_labels)


def tokens_to_reach(curve: Sequence[Mapping], target: float) -> dict:
    """The least-squares line accuracy = a + b·log10(tokens) through ``curve``'s means, and the tokens at which it
    reaches ``target``: ``slope`` (accuracy per 10× tokens), ``tokens`` (None when the slope is not positive) and
    ``last`` (the most tokens measured). An extrapolation: it says what the trend so far implies, not what a run
    would measure."""
    if len(curve) < 2:
        raise ValueError("a trend needs at least two milestones")
    xs, ys = [math.log10(r["tokens"]) for r in curve], [r["mean"] for r in curve]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    tokens = 10 ** (mx + (target - my) / slope) if slope > 0 else None
    return dict(slope=slope, tokens=tokens, last=curve[-1]["tokens"])


FEATURES = {"concat": "concat pooling of every LSTM layer", "embeddings": "mean of the word embeddings"}


def milestone_table(sizes: Sequence[int] = (100, 1000)):
    """Each milestone's frozen features under a linear probe (mean ± standard error over label samples) at each of
    ``sizes`` labels, the random init's and the bag of words on the same words last."""
    data = results.load(MILESTONES)
    last, settings = data["checkpoints"][-1]["summary"], data["settings"]
    cells, random, tokens = {}, {}, set()
    for n in sizes:
        for feature in FEATURES:
            for r in milestone_curve(n, feature):
                cells[r["tokens"], feature, n] = mean_se(r["mean"], r["se"])
                tokens.add(r["tokens"])
            rnd = next(r for r in last if (r["init"], r["feature"], r["n_labels"]) == ("random", feature, n))
            random[feature, n] = mean_se(rnd["mean"], rnd["se"])
    bow = {n: milestone_bow(n) for n in sizes}
    rows = [[f"{t / 1e6:.1f}M", *(cells.get((t, f, n), "") for n in sizes for f in FEATURES)] for t in sorted(tokens)]
    rows.append(["random init", *(random[f, n] for n in sizes for f in FEATURES)])
    rows.append(["bag of words, same words", *(mean_se(bow[n]["mean"], bow[n]["se"]) for n in sizes for _ in FEATURES)])
    return html_table(["IMDb tokens read", *(f"{n:,} labels: {f}" for n in sizes for f in FEATURES)], rows,
                      caption=f"frozen stage (b) features under a linear probe, first and last "
                              f"{settings['max_tokens'] // 2} tokens of {settings['test_reviews']:,} test reviews "
                              f"(concat: {FEATURES['concat']}; embeddings: {FEATURES['embeddings']}; ± one standard "
                              f"error over {len(settings['seeds'])} label samples; {MILESTONES}.json)")


def milestone_figure(sizes: Sequence[int] = (100, 1000), feature: str = "concat"):
    """Left: the held-out perplexity of each milestone. Right: its frozen ``feature`` under a linear probe at each of
    ``sizes`` labels (error bars of one standard error), with the random init (dotted) and the bag of words on the
    same words (dash-dot) in the same colour; label counts differ by colour, marker and dash."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from .viz import DASHES, LAYOUT, PALETTE, SYMBOLS

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "held-out perplexity (exact softmax)", f"frozen {feature} features, linear probe"))
    curves = {n: milestone_curve(n, feature) for n in sizes}
    first = curves[sizes[0]]
    fig.add_trace(go.Scatter(x=[r["tokens"] for r in first], y=[r["held_out_ppl"] for r in first], name="perplexity",
                             mode="lines+markers", line=dict(color=PALETTE[6]), marker=dict(symbol=SYMBOLS[2]),
                             showlegend=False), row=1, col=1)
    span = [first[0]["tokens"] / 1.5, first[-1]["tokens"] * 1.5]
    for k, n in enumerate(sizes):
        rows, colour = curves[n], PALETTE[k]
        fig.add_trace(go.Scatter(
            x=[r["tokens"] for r in rows], y=[r["mean"] for r in rows], name=f"{n:,} labels: pretrained",
            mode="lines+markers", line=dict(color=colour, dash=DASHES[k]), marker=dict(symbol=SYMBOLS[k], size=9),
            error_y=dict(type="data", array=[r["se"] for r in rows], visible=True)), row=1, col=2)
        for y, name, dash in ((rows[-1]["random"], "random init", "dot"),
                              (milestone_bow(n)["mean"], "bag of words, same words", "dashdot")):
            fig.add_trace(go.Scatter(x=span, y=[y, y], mode="lines", name=f"{n:,} labels: {name}",
                                     line=dict(color=colour, dash=dash, width=1.5)), row=1, col=2)
    fig.update_xaxes(type="log", title_text="IMDb tokens read in stage (b) (log scale)")
    fig.update_yaxes(title_text="perplexity", row=1, col=1)
    fig.update_yaxes(title_text="test accuracy", row=1, col=2)
    fig.update_layout(**{**LAYOUT, "height": 440, "margin": dict(l=60, r=20, t=90, b=50)},
                      title="ULMFiT's stage (b) on a CPU, milestone by milestone",
                      legend=dict(font_size=11))
    return fig


def reading(data: Mapping, feature: str = "concat") -> str:
    """Markdown: each lesson bar's verdict (:func:`stage_c_checks`), the random-init runs at the chosen length that
    stayed at chance (accuracy ≤ :data:`~lmlib.course.transfer_gains.CHANCE`), and, for each label count, the tokens
    at which the milestones' trend (:func:`tokens_to_reach`) brings the frozen ``feature`` to the bag of words on its
    words; every number computed from the result files."""
    checks = stage_c_checks(data)
    lines = []
    for c in checks:
        verdict = ("holds" if c["holds"] else "one seed: no verdict" if c["se"] is None else "does not hold")
        se = "" if c["se"] is None else f" ± {c['se']:.3f}"
        lines.append(f"- {c['n_labels']:,} labels, {CONDITIONS[c['condition']]} − {c['against']}: "
                     f"{c['difference']:+.3f}{se} (bar {c['bar']:+.2f}): **{verdict}**")
    trend = []
    for n in data["settings"]["sizes"]:
        curve, bow = milestone_curve(n, feature), milestone_bow(n)["mean"]
        t = tokens_to_reach(curve, bow)
        where = ("never: the trend does not rise" if t["tokens"] is None else
                 f"about {t['tokens'] / 1e6:,.0f}M tokens, {t['tokens'] / t['last']:.1f}× the {t['last'] / 1e6:.0f}M read")
        trend.append(f"at {n:,} labels the frozen features gain {t['slope']:+.3f} per tenfold tokens and would reach "
                     f"the bag of words' {bow:.3f} at {where}")
    chosen = {(s["n_labels"], s["condition"]): s["max_len"] for s in data["summary"] if "max_len" in s}
    failed = [r for r in data["rows"] if r["condition"] == "scratch" and r["test_accuracy"] <= CHANCE
              and r.get("max_len") == chosen.get((r["n_labels"], "scratch"))]
    if failed:
        lines.append("- random-init runs that stayed at chance (their mean includes them): " + "; ".join(
            f"{r['n_labels']:,} labels, seed {r['seed']} (test {r['test_accuracy']:.3f}, dev {r['dev_accuracy']:.3f})"
            for r in failed))
    return ("\n".join(lines) + "\n\n**The trend of the milestones** (a straight line in log tokens through the frozen "
            "probes, an extrapolation, not a measurement): " + "; ".join(trend) + ".")


GROUPS = ("embedding", "LSTM 1", "LSTM 2", "LSTM 3", "head")


def movement_table(data: Mapping, n_labels: int = 1000):
    """How far stage (c) moved each layer group, ‖θ_after − θ_before‖ / ‖θ_before‖, mean over the seeds of each
    condition at its dev-chosen length (the rows the summary reads)."""
    chosen = {s["condition"]: s["max_len"] for s in data["summary"] if s["n_labels"] == n_labels and "max_len" in s}
    rows = []
    for condition, name in CONDITIONS.items():
        runs = [r["relative_change"] for r in data["rows"] if r["condition"] == condition
                and r["n_labels"] == n_labels and r.get("max_len") == chosen.get(condition)]
        if runs:
            rows.append([name, *(f"{sum(x) / len(x):.1%}" for x in zip(*runs)), len(runs)])
    return html_table(["classifier", *GROUPS, "seeds"], rows,
                      caption=f"how far stage (c) moved each layer group at {n_labels:,} labels: the change of its "
                              "weights relative to their size at the start")
