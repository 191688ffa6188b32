"""Every table the course shows, one call each: HTML with the numbers right-aligned and each mean beside its
standard error, from rows (dicts with ``mean``, ``se`` and ``seeds``) as :mod:`lmlib.course.results` builds them.
"""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Mapping, Sequence

from IPython.display import HTML

from . import results

_STYLE = "border-collapse:collapse;font-variant-numeric:tabular-nums"
_CELL = "padding:2px 10px;border-bottom:1px solid #ddd"


def mean_se(mean: float | None, se: float | None = None, seeds: int | None = None, digits: int = 3,
            signed: bool = False) -> str:
    """``"0.766 ± 0.009"``; one seed (``se`` None) shows ``"0.766 (1 seed)"``; no mean shows an empty string.
    ``signed`` (for a difference) writes the sign of a positive mean too: ``"+0.012 ± 0.009"``."""
    if mean is None:
        return ""
    shown = f"{mean:+.{digits}f}" if signed else f"{mean:.{digits}f}"
    if se is None:
        return shown + (" (1 seed)" if seeds == 1 else "")
    return f"{shown} ± {se:.{digits}f}"


def html_table(header: Sequence[str], rows: Sequence[Sequence[object]], numeric: Sequence[bool] | None = None,
               caption: str | None = None) -> HTML:
    """An HTML table: ``header`` and ``rows`` of cells (shown as text, escaped); the columns flagged in ``numeric``
    (default: every column but the first) are right-aligned."""
    numeric = list(numeric) if numeric is not None else [False] + [True] * (len(header) - 1)
    if len(numeric) != len(header) or any(len(r) != len(header) for r in rows):
        raise ValueError(f"every row and the numeric flags need {len(header)} cells, one per header")

    def cell(tag: str, value: object, right: bool) -> str:
        align = "right" if right else "left"
        return f"<{tag} style='{_CELL};text-align:{align}'>{html.escape(str(value))}</{tag}>"

    head = "".join(cell("th", h, n) for h, n in zip(header, numeric))
    body = "".join("<tr>" + "".join(cell("td", v, n) for v, n in zip(r, numeric)) + "</tr>" for r in rows)
    title = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    return HTML(f"<table style='{_STYLE}'>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def by_labels(rows: Sequence[Mapping], extra: Sequence[tuple[str, str]] = (), caption: str | None = None) -> HTML:
    """One line per ``method`` (in order of first appearance), one column per ``n_labels`` holding
    :func:`mean_se`; ``extra`` adds columns ``(key, header)`` read from the method's first row (e.g.
    ``[("tokens", "pretraining tokens")]``; numbers above a million are shown in millions)."""
    sizes = sorted({int(r["n_labels"]) for r in rows})
    lines = []
    for method in dict.fromkeys(r["method"] for r in rows):
        cells = {int(r["n_labels"]): r for r in rows if r["method"] == method}
        first = next(iter(cells.values()))
        shown = [_shown(first.get(key)) for key, _ in extra]
        lines.append([method, *shown, *(mean_se(cells[n]["mean"], cells[n].get("se"), cells[n].get("seeds"))
                                        if n in cells else "" for n in sizes)])
    header = ["method", *(h for _, h in extra), *(f"{n:,} labels" for n in sizes)]
    return html_table(header, lines, caption=caption)


def _shown(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, (int, float)) and abs(value) >= 1e6:  # one decimal below ten million: 7.5M, not 8M
        return f"{value / 1e6:.1f}M" if abs(value) < 1e7 else f"{value / 1e6:.0f}M"
    return str(value)


# -- notebook 11: the memory study and the scaling runs ---------------------------------------------------------

XL_NAMES = {"xl": "Transformer-XL (memory 64)", "relative_no_memory": "relative positions, no memory",
            "vanilla": "vanilla (absolute positions)"}


def memory_table(result: Mapping, names: Mapping[str, str] = XL_NAMES):
    """The memory study: a row per model (its mean training seconds), a column per memory length used at
    evaluation, held-out loss as mean ± standard error over seeds; an empty cell where a model was not evaluated
    with that memory."""
    memories = sorted({r["mem_len"] for rows in result["summary"].values() for r in rows})
    lines = []
    for variant, rows in result["summary"].items():
        runs = result["runs"][variant]
        at = {r["mem_len"]: r for r in rows}
        lines.append([names.get(variant, variant), f"{sum(r['train_seconds'] for r in runs) / len(runs):.0f}",
                      *(mean_se(at[m]["mean"], at[m]["se"], len(runs)) if m in at else "" for m in memories)])
    return html_table(["model", "train s", *(f"memory {m}" for m in memories)], lines,
                      caption=f"held-out loss (nats per character) by the memory used at evaluation; "
                              f"{result['settings']['steps']:,} steps each, {result['scored_characters']:,} "
                              f"characters scored, mean ± standard error over seeds")


def speed_table(result: Mapping):
    """Cached (Transformer-XL) against sliding-window evaluation at each context: tokens per second, speed-up and
    the loss of each (the same targets)."""
    return html_table(
        ["context", "sliding tokens/s", "cached tokens/s", "speed-up", "loss sliding", "loss cached"],
        [[f"{r['context']:,}", f"{r['sliding_tokens_per_s']:,.0f}", f"{r['cached_tokens_per_s']:,.0f}",
          f"{r['speedup']:.1f}×", f"{r['sliding_loss']:.3f}", f"{r['cached_loss']:.3f}"] for r in result["speed"]],
        caption="evaluation with a cache against a sliding window, batch 1, one CPU thread")


def loss_by_memory_table(losses: Mapping[str, Mapping[int, float]], caption: str | None = None):
    """Live losses ``{model: {memory: loss}}`` as a table, a row per model and a column per memory."""
    memories = sorted({m for by_memory in losses.values() for m in by_memory})
    return html_table(["model", *(f"memory {m}" for m in memories)],
                      [[name, *(f"{by_memory[m]:.3f}" if m in by_memory else "" for m in memories)]
                       for name, by_memory in losses.items()], caption=caption)


def scaling_table(runs: Sequence[Mapping]):
    """The fixed-token scaling runs: size, parameters (non-embedding and all), 6ND FLOPs, seconds, held-out loss."""
    return html_table(
        ["layers", "d_model", "N (non-embedding)", "all parameters", "6ND FLOPs", "seconds", "held-out loss"],
        [[f"{r['num_layers']}", f"{r['d_model']}", f"{r['n_non_embedding']:,}", f"{r['n_total']:,}",
          f"{r['flops_6ND']:.2e}", f"{r['train_seconds']:.0f}", f"{r['valid_loss']:.3f}"] for r in runs],
        numeric=[True] * 7)


def compute_matched_table(runs: Sequence[Mapping], best: Mapping):
    """The compute-matched runs: parameters, tokens, seconds, held-out loss; the lowest loss marked."""
    return html_table(
        ["N (non-embedding)", "tokens", "seconds", "held-out loss", ""],
        [[f"{r['n_non_embedding']:,}", f"{r['tokens']:,}", f"{r['train_seconds']:.0f}", f"{r['valid_loss']:.3f}",
          "lowest" if r["n_non_embedding"] == best["n_non_embedding"] else ""] for r in runs],
        numeric=[True, True, True, True, False])


# -- notebooks 07-12: transfer, pretraining, the course's checks ------------------------------------------------

MEASURED_BY_SCRIPT_ONLY = {"ptb_transformers": "bench_ptb_transformers.py (no notebook trains it)"}
"""Ladder rows whose result file (``source``) a committed script measured and no notebook trains: the table names
the script instead of a notebook."""


def ladder_table(ladder: Sequence[Mapping]):
    """The PTB perplexity ladder (:func:`lmlib.course.results.ptb_ladder`): where each row was measured (the notebook,
    or the script for rows no notebook trains), test perplexity, parameters, CPU minutes, the published figure and
    the distance to it."""
    lines = []
    for r in ladder:
        published = r["published"][0] if r["published"] else None
        lines.append([r["model"], MEASURED_BY_SCRIPT_ONLY.get(r.get("source"), r["notebook"]), f"{r['test_ppl']:.1f}",
                      f"{r['parameters'] / 1e6:.2f}M" if r["parameters"] else "counts", f"{r['seconds'] / 60:.1f}",
                      "–" if published is None else f"{published:.1f}",
                      "–" if published is None else f"{round(r['test_ppl'] - published, 1) + 0.0:+.1f}"])  # no -0.0
    return html_table(["model", "measured in", "test perplexity", "parameters", "CPU minutes", "published",
                       "here − published"], lines, numeric=[False, False, True, True, True, True, True],
                      caption="PTB test perplexity, lower is better (82,430 test tokens)")


def transfer_table(rows: Sequence[Mapping], dataset: str):
    """The transfer rows of one dataset: a row per method, a column per number of labels, accuracy as mean ±
    standard error (one seed: no error)."""
    part = [r for r in rows if r["dataset"] == dataset]
    if not part:
        raise ValueError(f"no rows for {dataset!r}; the rows hold {sorted({r['dataset'] for r in rows})}")
    return by_labels(part, caption=f"{dataset}: test accuracy by number of labelled training examples "
                                   "(mean ± standard error over seeds)")


PRETRAINED_VS_SCRATCH = [  # (pretrained, the same architecture from random weights), as transfer_rows names them
    ("GPT fine-tuned, λ = 0", "GPT architecture, random init"),
    ("BERT fine-tuned", "BERT architecture, random init"),
    ("ELMo study: from scratch + ELMo (the paper's use)", "ELMo study: from scratch (bag of embeddings)"),
    ("ULMFiT (PTB LM fine-tuned on IMDb)", "AWD-LSTM classifier, random init"),
    ("ULMFiT (PTB-pretrained AWD-LSTM)", "AWD-LSTM classifier, random init"),
]


def pretraining_gains(rows: Sequence[Mapping], pairs: Sequence[tuple[str, str]] = PRETRAINED_VS_SCRATCH) -> list[dict]:
    """Pretrained minus random init, for each pair, dataset and label count both were measured at (the random-init
    method named exactly, or else the one method whose name starts with it): ``dataset``, ``n_labels``,
    ``pretrained``, ``scratch``, ``difference``, ``se`` (None when either side has one seed) and ``verdict``
    (within noise when |difference| ≤ 2 se)."""
    gains = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        methods = list(dict.fromkeys(r["method"] for r in rows if r["dataset"] == dataset))
        for pretrained, scratch in pairs:
            if scratch not in methods:  # else the one method named after it (a random init named with its rate)
                starting = [m for m in methods if m.startswith(scratch)]
                scratch = starting[0] if len(starting) == 1 else None
            a = {r["n_labels"]: r for r in rows if r["dataset"] == dataset and r["method"] == pretrained}
            b = {r["n_labels"]: r for r in rows if r["dataset"] == dataset and r["method"] == scratch}
            for n in sorted(set(a) & set(b)):
                d = a[n]["mean"] - b[n]["mean"]
                se = math.hypot(a[n]["se"], b[n]["se"]) if a[n]["se"] is not None and b[n]["se"] is not None else None
                from .verdicts import beyond_noise  # here: verdicts builds on this module

                verdict = ("one seed" if se is None else "within noise" if not beyond_noise(d, se)
                           else "pretraining helps" if d > 0 else "pretraining hurts")
                gains.append(dict(dataset=dataset, n_labels=n, pretrained=pretrained, scratch=scratch, difference=d,
                                  se=se, verdict=verdict))
    return gains


def pretraining_gains_table(rows: Sequence[Mapping], pairs: Sequence[tuple[str, str]] = PRETRAINED_VS_SCRATCH):
    """:func:`pretraining_gains` as an HTML table."""
    return html_table(
        ["dataset", "labels", "pretrained", "minus", "difference", "verdict"],
        [[g["dataset"], f"{g['n_labels']:,}", g["pretrained"], g["scratch"], mean_se(g["difference"], g["se"], 1, signed=True),
          g["verdict"]] for g in pretraining_gains(rows, pairs)],
        numeric=[False, True, False, False, True, False],
        caption="pretrained minus the same architecture from random weights (± standard error; within noise: "
                "|difference| ≤ 2 standard errors)")


def dev_sweep_table(result: dict, caption: str | None = None, **match):
    """The from-scratch learning-rate sweep of a fine-tuning result (``dev_rows`` and ``scratch_rates`` of
    gpt_finetune.json or bert_finetune.json, ``match`` e.g. ``task="imdb"``) as an HTML table: a row per rate, a
    column per label count, mean dev accuracy ± se over the seeds run; the rate each label count chose is marked."""
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


def staged_pretraining_table():
    """:func:`lmlib.course.results.staged_pretraining_rows` as an HTML table."""
    def value(v):
        return f"{v:.1%}" if v < 1 else f"{v:.1f}"

    rows = results.staged_pretraining_rows()
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
    """:func:`lmlib.course.results.lesson_checks` of each of ``models`` as one HTML table: the GPU checkpoint
    measured (the tokens it read, and whether it is the one lmlib/pretrained ships), the check, the difference ± its
    standard error, the bar, and whether it holds."""
    def checkpoint(model):
        tokens, shipped = results.gpu_transfer_checkpoint(model)
        return f"GPU, {tokens / 1e6:.1f}M tokens ({'shipped' if shipped else 'not shipped'})"

    return html_table(["model", "checkpoint", "check", "labels", "difference", "bar", "verdict"],
                      [[results.GPU_NAMES[model][0], checkpoint(model), c["check"], f"{c['n_labels']:,}",
                        mean_se(c["difference"], c["se"], 1, signed=True), f"≥ {c['bar']:+.2f}",
                        "holds" if c["holds"] else "falls short"]
                       for model in models for c in results.lesson_checks(model)],
                      numeric=[False, False, False, True, True, True, False])
