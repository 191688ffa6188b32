"""Result tables a person can read: HTML with the numbers right-aligned and each mean beside its standard error.

A notebook turns result rows (dicts with ``mean``, ``se`` and ``seeds``, as :mod:`lmlib.course.comparison` gives
them) into one table with one call, e.g. ``by_labels(rows)``: a row per method, a column per number of labels.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from IPython.display import HTML

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
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = []
    for method in methods:
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
