"""Notebook 08's part-of-speech transfer table, read from ``lmlib/results/elmo_pos.json``
(``tests/benchmarks/bench_elmo_pos.py``), refused unless it was measured with the biLM shipped today."""

from __future__ import annotations

import math

from . import results

RESULT = "elmo_pos"


def pos_result(name: str = RESULT) -> dict:
    """The committed POS result, refused when its checkpoint's files are not the shipped ``elmo_imdb``'s."""
    data = results.load(name)
    shipped = results.shipped_report("elmo_imdb")["sha256"]
    if data["checkpoint"]["sha256"] != shipped:
        raise RuntimeError(f"{name}.json was measured with another biLM ({data['checkpoint']['folder']}) than the "
                           f"shipped lmlib/pretrained/elmo_imdb; rerun {data['command']}")
    return data


def pos_transfer_rows(name: str = RESULT) -> list[dict]:
    """One row per (method, labelled sentences): ``method``, ``n_labels``, ``mean`` accuracy over every test word,
    its standard error over seeds ``se`` and ``seeds``, in the result's order (for
    :func:`lmlib.course.tables.by_labels`)."""
    return [{k: s[k] for k in ("method", "n_labels", "mean", "se", "seeds")} for s in pos_result(name)["summary"]]


def pos_checks(name: str = RESULT) -> list[dict]:
    """The result's paired differences (scalar mix minus character-CNN layer, minus random-init biLM) at each
    size: ``check``, ``n_labels``, ``difference``, ``se``, ``bar``, ``holds`` (at least the bar and more than two
    standard errors above zero)."""
    return [dict(d) for d in pos_result(name)["differences"]]


def pos_reading(name: str = RESULT) -> str:
    """A few sentences that read the table, every number taken from the result."""
    data = pos_result(name)
    at = {(s["method"], s["n_labels"]): s for s in data["summary"]}
    sizes = sorted({s["n_labels"] for s in data["summary"]})
    methods = list(dict.fromkeys(s["method"] for s in data["summary"]))
    layer1, layer2 = (next(m for m in methods if f"LSTM layer {j} alone" in m) for j in (1, 2))
    lines = []
    for check in pos_checks(name):
        verdict = "holds" if check["holds"] else "falls short"
        lines.append(f"- {check['check']}, {check['n_labels']:,} labelled sentences: "
                     f"{check['difference']:+.3f} ± {check['se']:.3f} (bar +{check['bar']:.2f}, beyond two standard "
                     f"errors): {verdict}.")
    for n in sizes:
        a, b = at[layer1, n], at[layer2, n]
        d, se = paired_difference(data["rows"], layer1, layer2, n)
        lines.append(f"- LSTM layer 1 against layer 2 alone at {n:,} sentences: {a['mean']:.3f} vs {b['mean']:.3f} "
                     f"({d:+.3f} ± {se:.3f}, paired by seed); Peters et al. (2018, Table 5) found layer 1 the better "
                     f"tagger (97.3% against 96.8% on the Penn Treebank).")
    return "\n".join(lines)


def paired_difference(rows: list[dict], a: str, b: str, n_labels: int) -> tuple[float, float]:
    """Mean over seeds of method ``a``'s accuracy minus ``b``'s on the same labelled sentences, and its standard
    error (s / sqrt(n), n − 1 in s)."""
    mine = {r["seed"]: r["accuracy"] for r in rows if r["method"] == a and r["n_labels"] == n_labels}
    diffs = [mine[r["seed"]] - r["accuracy"] for r in rows if r["method"] == b and r["n_labels"] == n_labels]
    if len(diffs) < 2:
        raise ValueError(f"{len(diffs)} seeds measured both {a!r} and {b!r} at {n_labels} sentences; need two")
    mean = sum(diffs) / len(diffs)
    return mean, math.sqrt(sum((x - mean) ** 2 for x in diffs) / (len(diffs) - 1) / len(diffs))
