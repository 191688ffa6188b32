"""Reading a fine-tuning comparison against its noise: a difference of two means over seeds, its standard error,
and a verdict (notebook 10's fine-tuning section).

For two methods measured on the same test reviews with their own label samples (one per seed), the difference of
their means ``d = mean_a − mean_b`` has the standard error ``se = sqrt(se_a² + se_b²)`` (the two sides' seeds are
independent). A difference counts as *beyond noise* when ``|d| > 2 se`` (:func:`beyond_noise`, the one noise rule
every verdict of the course uses); with one seed on either side there is no standard error and no verdict. A from-scratch run that ends at chance in every seed did not train at all: a
difference taken against it measures the failed run, not pretraining, so it is named as such instead of read.

Every number comes from a committed result file (``bert_finetune``) and rows built from it; nothing here trains.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from IPython.display import HTML

from .results import difference
from .tables import html_table, mean_se
from .transfer_gains import CHANCE  # accuracy at or below which a run is treated as one that did not train

TASK_NAMES = {"imdb": "IMDb", "sst2": "SST-2"}


def beyond_noise(d: float, se: float | None) -> bool:
    """Whether a difference ``d`` with standard error ``se`` is more than two standard errors from zero, ``|d| > 2 se``:
    the course's one rule for calling a difference real (for a normal estimate, a difference this large arises from
    noise alone about 5% of the time). Without a standard error (one seed) nothing is beyond noise."""
    if se is None:
        return False
    if not se >= 0:
        raise ValueError(f"a standard error is a number >= 0, got {se!r}")
    return abs(d) > 2 * se


def reading(d: float, se: float | None) -> str:
    """``"beyond noise"`` when :func:`beyond_noise`, ``"within noise"`` otherwise, ``"one seed: no verdict"`` without
    a standard error."""
    if se is None:
        return "one seed: no verdict"
    return "beyond noise" if beyond_noise(d, se) else "within noise"


def failed_runs(runs: Sequence[Mapping], condition: str = "scratch") -> tuple[list[dict], set[tuple[str, int]]]:
    """The ``condition``'s runs at chance (accuracy <= :data:`CHANCE`), and the ``(task, n_labels)`` where every
    seed of it is at chance (the run did not train there)."""
    at_chance = [dict(r) for r in runs if r["condition"] == condition and r["accuracy"] <= CHANCE]
    failed = {(r["task"], r["n_labels"]) for r in at_chance
              if all(x["accuracy"] <= CHANCE for x in runs if x["condition"] == condition
                     and (x["task"], x["n_labels"]) == (r["task"], r["n_labels"]))}
    return at_chance, failed


def differences_table(rows_by_task: Mapping[str, Sequence[Mapping]], pairs: Sequence[tuple[str, str, str]],
                      failed: set[tuple[str, int]] = frozenset(), failed_method: str | None = None) -> HTML:
    """One line per task, pair ``(what, a, b)`` and number of labels measured for both: ``a − b ± se``, the
    difference in standard errors, and :func:`reading`; a difference against ``failed_method`` where it ended at
    chance (``failed``) is named instead of read."""
    lines = []
    for task, rows in rows_by_task.items():
        for what, a, b in pairs:
            for n in sorted({r["n_labels"] for r in rows}):
                try:
                    d, se = difference(rows, a, b, n)
                except ValueError:  # not measured for this task and number of labels
                    continue
                if (task, n) in failed and failed_method in (a, b):
                    verdict = "the random init ended at chance: no verdict"
                else:
                    verdict = reading(d, se)
                lines.append([TASK_NAMES.get(task, task), what, f"{n:,}",
                              mean_se(d, se, signed=True),
                              f"{d / se:+.1f}" if se else "", verdict])
    return html_table(["task", "difference", "labels", "accuracy", "in standard errors", "reading"], lines,
                      numeric=[False, False, True, True, True, False])


def chance_notes(result: Mapping, recipe_lr: float, condition: str = "scratch",
                 fallback: str = "scratch_at_recipe_rate") -> list[str]:
    """Sentences about the from-scratch rates and the runs that ended at chance, from a ``bert_finetune`` result
    (its ``rows`` and ``scratch_rates``): which rate the dev split chose for each task and label count, which runs
    ended at chance, and for a size where every seed did, why (a rate chosen on a shorter run) and what the run at
    the recipe's rate ``recipe_lr`` reached instead."""
    runs = result["rows"]
    at_chance, failed = failed_runs(runs, condition)
    chosen = ", ".join(f"{float(lr):.0e} for {TASK_NAMES.get(key.split(':')[0], key)} with "
                       f"{int(key.split(':')[1]):,} labels"
                       for key, lr in result["scratch_rates"].items() if int(key.split(":")[1]) <= 1000)
    notes = [f"The random init's own rate, chosen on the dev split: {chosen} (BERT's recipe: {recipe_lr:.0e}).",
             "Random-init runs at chance (accuracy ≤ {:.2f}): {}.".format(CHANCE, ", ".join(
                 f"{TASK_NAMES.get(r['task'], r['task'])} {r['n_labels']:,} labels seed {r['seed']} "
                 f"({r['accuracy']:.3f})" for r in at_chance) or "none")]
    for task, n in sorted(failed):
        run = next(r for r in at_chance if (r["task"], r["n_labels"]) == (task, n))
        shorter = [r for r in runs if r["task"] == task and r["condition"] == condition and r["n_labels"] < n]
        recipe = [r for r in runs if (r["task"], r["condition"], r["n_labels"]) == (task, fallback, n)]
        why = (f"Why {TASK_NAMES.get(task, task)} with {n:,} labels ended at chance ({run['accuracy']:.3f}): its rate "
               f"{run['lr']:.0e} was chosen on the dev split")
        if shorter:
            why += (f" with {max(r['n_labels'] for r in shorter):,} labels, where a run is "
                    f"{max(r['steps'] for r in shorter):,} steps; here it runs {run['steps']:,}")
        why += ", and a randomly initialised BERT held at that rate that long most likely diverged"
        if recipe:
            why += f" (at BERT's rate {recipe[0]['lr']:.0e} the same run reaches {recipe[0]['accuracy']:.3f})"
        notes.append(why + ". A fair row needs the rate chosen on a dev split at this size, so read the 'BERT's "
                           "rate' row here.")
    return notes


def finetune_verdicts(result: Mapping, rows_by_task: Mapping[str, Sequence[Mapping]],
                      pairs: Sequence[tuple[str, str, str]], scratch_method: str, recipe_lr: float) -> HTML:
    """The differences table (:func:`differences_table`) with :func:`chance_notes` under it, as one display
    object for a notebook cell's last line."""
    _, failed = failed_runs(result["rows"])
    table = differences_table(rows_by_task, pairs, failed, scratch_method)
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in chance_notes(result, recipe_lr))
    return HTML(table.data + notes)


def per_seed_table(groups: Sequence[tuple[str, Sequence[Mapping]]], caption: str | None = None) -> HTML:
    """Each seed's accuracy and the spread over seeds (largest − smallest), one line per method and number of labels:
    ``groups`` is ``[(method, runs)]`` with runs carrying ``n_labels``, ``seed`` and ``accuracy``. A mean ± standard
    error over three seeds hides how the seeds fell; this shows them."""
    lines = []
    for method, runs in groups:
        for n in sorted({r["n_labels"] for r in runs}):
            at = sorted((r for r in runs if r["n_labels"] == n), key=lambda r: r["seed"])
            accs = [r["accuracy"] for r in at]
            lines.append([method, f"{n:,}", " / ".join(f"{a:.3f}" for a in accs),
                          f"{max(accs) - min(accs):.3f}" if len(accs) > 1 else ""])
    return html_table(["method", "labels", "accuracy, seeds 0 / 1 / 2", "spread (largest − smallest)"], lines,
                      numeric=[False, True, True, True], caption=caption)
