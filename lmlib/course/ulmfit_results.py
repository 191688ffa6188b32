"""Notebook 07's ULMFiT results as a reader reads them: variants by name rather than by the ids the scripts
write, and each variant against the random init at its own rate, with a verdict that follows from the numbers.

The paper's claim the curve is measured against (Howard & Ruder 2018, abstract and §5, Figure 3): on IMDb, ULMFiT
with 100 labelled examples matches training from scratch on 10× as many labels when only the labelled examples are
used (supervised), and on 100× as many when stage (b) also reads the 50,000 unlabelled reviews (semi-supervised), as
this course's stage (b) does.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence

from .verdicts import beyond_noise

VARIANT_NAMES = {  # the ids of bench_ulmfit_imdb.py and bench_ulmfit_ablation.py -> what a reader sees
    "ulmfit": "ULMFiT",
    "recorded": "ULMFiT, the paper's schedule",
    "scratch": "from scratch",
    "neither": "ULMFiT, one rate, all layers",
    "neither_no_lm_finetuning": "one rate, all layers, without stage (b)",
    "no_lm_finetuning": "without LM fine-tuning (stage b)",
    "no_discriminative": "without discriminative rates",
    "no_stlr": "without STLR (constant rate)",
    "no_gradual": "without gradual unfreezing",
    "no_vocab_extension": "without the new review words (PTB vocabulary)",
    "more_epochs": "ULMFiT, 10 epochs",
}
_EPOCHS = re.compile(r"^(?P<base>.+)_(?P<epochs>\d+)_epochs$")


def variant_name(variant: str) -> str:
    """The reader's name of a variant id: ``"no_discriminative_10_epochs"`` -> ``"without discriminative rates,
    10 epochs"``. An id with no name raises, so a new variant cannot reach a table as a raw id."""
    if variant in VARIANT_NAMES:
        return VARIANT_NAMES[variant]
    m = _EPOCHS.match(variant)
    if m and m["base"] in VARIANT_NAMES:
        return f"{VARIANT_NAMES[m['base']]}, {int(m['epochs'])} epochs"
    raise KeyError(f"no name for the ULMFiT variant {variant!r}; add it to VARIANT_NAMES")


def standard_error(entry: Mapping, n_test: int) -> float:
    """A summary entry's standard error: over its seeds, or with one seed the test set's binomial
    sqrt(a (1 − a) / n_test)."""
    if entry.get("se") is not None and entry.get("seeds", 2) > 1:
        return float(entry["se"])
    return math.sqrt(entry["mean"] * (1 - entry["mean"]) / n_test)


def _minus(summary: Sequence[Mapping], n_test: int, max_len: int, variant: str, other: str) -> list[dict]:
    """``variant`` minus ``other`` at every label count both were run with at ``max_len``."""
    table = {(s["variant"], s["n_labels"]): s for s in summary if s["max_len"] == max_len}
    rows = []
    for n in sorted(n for v, n in table if v == variant and (other, n) in table):
        a, b = table[variant, n], table[other, n]
        d, se = a["mean"] - b["mean"], math.hypot(standard_error(a, n_test), standard_error(b, n_test))
        verdict = "ahead" if d > 0 and beyond_noise(d, se) else "behind" if beyond_noise(d, se) else "within noise"
        rows.append(dict(n_labels=n, variant=a, scratch=b, difference=d, se=se, verdict=verdict))
    return rows


def against_scratch(summary: Sequence[Mapping], n_test: int, max_len: int, variant: str = "ulmfit") -> list[dict]:
    """``variant`` minus the random init at its own rate (``"scratch"``) at every label count both were run with at
    ``max_len``: ``n_labels``, ``variant`` and ``scratch`` (summary entries), ``difference``, ``se`` (of the
    difference) and ``verdict``: ``"ahead"`` or ``"behind"`` when more than two standard errors from 0, else
    ``"within noise"``."""
    rows = _minus(summary, n_test, max_len, variant, "scratch")
    if not rows:
        raise ValueError(f"no label count has both {variant!r} and 'scratch' at max_len {max_len}")
    return rows


def against_scratch_table(summary: Sequence[Mapping], n_test: int, max_len: int, variant: str = "ulmfit",
                          lm: str | None = None):
    """:func:`against_scratch` as an HTML table; ``lm`` names the stage (b) LM in the caption."""
    from .tables import html_table, mean_se

    name = variant_name(variant)
    return html_table(
        ["labels", name, "from scratch, own rate", f"{name} − scratch", "reading"],
        [[f"{r['n_labels']:,}", mean_se(r["variant"]["mean"], r["variant"]["se"], r["variant"]["seeds"]),
          mean_se(r["scratch"]["mean"], r["scratch"]["se"], r["scratch"]["seeds"]),
          f"{r['difference']:+.3f} ± {r['se']:.3f}", r["verdict"]]
         for r in against_scratch(summary, n_test, max_len, variant)],
        numeric=[True, True, True, True, False],
        caption=f"{name} against the same classifier from random weights at its own rate, on {n_test:,} test reviews"
                f"{f', stage (b) LM: {lm}' if lm else ''} (± one standard error; a verdict only beyond two)")


def curve_reading(summary: Sequence[Mapping], n_test: int, max_len: int, variant: str = "ulmfit") -> str:
    """Markdown: the curve read the paper's way (how many labels from scratch needs to reach ``variant`` with the
    fewest), beside the paper's own result, then the label counts where ``variant`` is ahead, within noise and
    behind, all computed from ``summary``."""
    rows = against_scratch(summary, n_test, max_len, variant)
    name = variant_name(variant)
    fewest, target = rows[0]["n_labels"], rows[0]["variant"]["mean"]
    reach = next((r["n_labels"] for r in rows if r["scratch"]["mean"] >= target), None)
    if reach is None:
        found = f"from scratch never reaches it, not even with {rows[-1]['n_labels']:,} labels"
    elif reach == fewest:
        found = f"from scratch matches it with the same {fewest:,} labels, so pretraining bought nothing there"
    else:
        found = f"from scratch first reaches it with {reach:,} labels ({reach / fewest:.0f}× as many)"
    by = {v: [f"{r['n_labels']:,}" for r in rows if r["verdict"] == v] for v in ("ahead", "within noise", "behind")}
    said = "; ".join(f"{v} at {', '.join(ns)} labels" for v, ns in by.items() if ns)
    return (f"**Reading the curve: {name}.** With {fewest:,} labelled reviews it scores {target:.1%}; {found}. "
            f"Howard & Ruder (2018, §5) found 10× with the labelled examples alone and 100× when stage (b) also read "
            f"IMDb's unlabelled reviews, as it does here. Against the random init at its own rate, {name} is {said} "
            "(beyond two standard errors of the difference, else within noise).")


ABLATION_NAMES = {
    "no_lm_finetuning": "without LM fine-tuning (stage b)", "no_discriminative": "without discriminative rates",
    "no_stlr": "without STLR (constant rate)", "no_gradual": "without gradual unfreezing",
    "neither": "without unfreezing or discriminative rates",
}


def ulmfit_ablation_imdb_reading(summary: Sequence[Mapping], n_test: int, max_len: int) -> str:
    """Each ablation against full ULMFiT at the label counts both were run with, in points ± one standard error
    of the difference (* beyond two), as in Howard & Ruder's tables 6 and 7."""
    lines = ["**Ablations** (variant minus full ULMFiT, accuracy points ± one standard error; * = beyond two):", ""]
    for variant, name in ABLATION_NAMES.items():
        cells = [f"{r['n_labels']:,} labels {100 * r['difference']:+.1f} ± {100 * r['se']:.1f}"
                 f"{'' if r['verdict'] == 'within noise' else '*'}"
                 for r in _minus(summary, n_test, max_len, variant, "ulmfit")]
        if cells:
            lines.append(f"- {name}: " + "; ".join(cells))
    return "\n".join(lines)


CHOSEN_ON_DEV = {"ulmfit": "ulmfit", "ulmfit_flat": "neither", "scratch": "scratch"}  # the script's ids -> variants


def stage_c_on_test(name: str = "ulmfit_stage_c_test", today: str = "gpu_transfer_ulmfit") -> dict:
    """bench_ulmfit_stage_c_test.py's result, refused unless it was measured on a shipped or staged checkpoint:
    ``summary`` (the test accuracies as :func:`against_scratch` reads them, the one-rate ablation as ``"neither"``),
    ``n_test``, ``max_len``, ``choices``, Markdown that says what each condition got on dev at each label count, and
    ``against_today``, each condition's mean at the most labels beside its five-epoch one in ``today`` (the transfer
    benchmark's result, refused unless measured on the same checkpoint), both over the seeds the two share."""
    from .results import load, measured_checkpoint

    result, five = load(name), load(today)
    measured_checkpoint(result["checkpoint"]["sha256"], name)
    if five["checkpoint"]["sha256"] != result["checkpoint"]["sha256"]:
        raise RuntimeError(f"{today}.json and {name}.json were measured on different checkpoints")
    max_len = result["settings"]["base"]["max_len"]
    lines = []
    for n, size in sorted(result["settings"]["sizes"].items(), key=lambda item: int(item[0])):
        epochs = {**{c: s["epochs"] for c, s in size.items()}, "scratch": result["scratch_epochs"][n]}
        lines.append(f"- {int(n):,} labels: " + "; ".join(
            f"{variant_name(CHOSEN_ON_DEV[c])}, {epochs[c]} epochs at η = {s['eta']:g}" for c, s in size.items()))
    most = max(s["n_labels"] for s in result["summary"])

    def means(rows: Sequence[Mapping], seeds: set) -> dict[str, float]:
        """Each condition's mean test accuracy over ``seeds`` at ``most`` labels."""
        accuracies: dict[str, list[float]] = {}
        for r in rows:
            if r["n_labels"] == most and r["seed"] in seeds and r.get("split", "test") == "test":
                accuracies.setdefault(r["condition"], []).append(r["accuracy"])
        return {c: statistics.mean(a) for c, a in accuracies.items()}

    seeds = {r["seed"] for r in five["rows"]} & {r["seed"] for r in result["rows"]}
    before, now = means(five["rows"], seeds), means(result["rows"], seeds)
    after = [f"{variant_name(CHOSEN_ON_DEV[c])} {before[c]:.3f} → {now[c]:.3f}" for c in CHOSEN_ON_DEV if c in before]
    return {"summary": [{**s, "variant": CHOSEN_ON_DEV[s["condition"]], "max_len": max_len} for s in result["summary"]],
            "n_test": result["settings"]["test_reviews"], "max_len": max_len, "choices": "\n".join(lines),
            "against_today": f"At {most:,} labels, five epochs → the dev-chosen length, over the seeds both ran "
                             f"({', '.join(map(str, sorted(seeds)))}): " + "; ".join(after) + "."}
