"""The PTB leaderboard each notebook stores (lmlib.course.leaderboard) shows only what that notebook measured or a
named committed result holds, each labelled truthfully.

Read from the committed notebooks' stored outputs, never executed: every row of a stored "PTB test perplexity"
table is a published figure of ``PUBLISHED``, a committed result of ``COMMITTED`` up to this notebook with the
number that result holds, a committed result the notebook named (``record(..., source=...)``) holding that number,
or a row this notebook measured and recorded itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lmlib.course import leaderboard, results

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PLOTLY = "application/vnd.plotly.v1+json"


def stored_leaderboards(path: Path) -> list[tuple[int, list[tuple[str, str, str]]]]:
    """(cell, [(model, perplexity as shown, source)]) of every stored leaderboard figure of the notebook."""
    found = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        for out in cell.get("outputs", []):
            fig = out.get("data", {}).get(PLOTLY)
            if not fig:
                continue
            title = fig.get("layout", {}).get("title", {})
            title = title.get("text") if isinstance(title, dict) else title
            if title != "PTB test perplexity":
                continue
            for trace in fig["data"]:
                if trace.get("type") == "table":
                    found.append((i, list(zip(*trace["cells"]["values"]))))
    return found


def _numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def row_problems(notebook: str, source_text: str, rows: list[tuple[str, str, str]]) -> list[str]:
    published = {(m, f"{p:.1f}") for m, p, _ in leaderboard.PUBLISHED}
    committed = {where: (at, model) for at, model, where in leaderboard.COMMITTED}
    problems = []
    for model, shown, source in rows:
        row = f"{model!r} {shown} ({source!r})"
        if source.startswith("published: "):
            if (model, shown) not in published:
                problems.append(f"{row}: no published figure of lmlib.course.leaderboard.PUBLISHED")
        elif m := re.fullmatch(r"committed: notebook (\d\d)'s (?:script, lmlib/results/(\w+)\.json|shipped checkpoint "
                               r"(\w+) \(pretrain\.json\))", source):
            at, where = m[1], m[2] or f"pretrained:{m[3]}"
            if where not in committed or committed[where][0] != at or at > notebook:
                problems.append(f"{row}: not a committed result of notebook {at} up to notebook {notebook}")
            elif f"{leaderboard.committed_ppl(where):.1f}" != shown:
                problems.append(f"{row}: {where} holds {leaderboard.committed_ppl(where):.1f}")
        elif m := re.fullmatch(r"committed: lmlib/results/(\w+)\.json, shown by notebook (\d\d)", source):
            if m[2] != notebook:
                problems.append(f"{row}: recorded by notebook {m[2]}, shown in notebook {notebook}")
            elif m[1] not in results.available():
                problems.append(f"{row}: no committed result {m[1]}")
            elif shown not in {f"{x:.1f}" for x in _numbers(results.load(m[1]))}:
                problems.append(f"{row}: {m[1]}.json holds no such number")
        elif m := re.fullmatch(r"measured: this notebook \((\d\d)\), \w+ preset, this run", source):
            if m[1] != notebook or "leaderboard.record(" not in source_text:
                problems.append(f"{row}: measured by notebook {m[1]}, which is not this one ({notebook}), or this "
                                "notebook records nothing")
        else:
            problems.append(f"{row}: a source the leaderboard does not write, so nobody can say who measured it")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_stored_leaderboard_shows_only_what_its_notebook_or_a_named_result_measured(path):
    source_text = "".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
    problems = [f"{path.name} cell {cell}: {p}" for cell, rows in stored_leaderboards(path)
                for p in row_problems(path.name[:2], source_text, rows)]
    assert not problems, "\n".join(["", *problems])


def test_the_leaderboard_check_finds_rows_of_other_notebooks_and_false_labels():
    """The rows 01's stored table held before: other notebooks' measurements, a benchmark labelled as a notebook's."""
    ngram = leaderboard.committed_ppl("ngram")
    good = [("modified Kneser-Ney 5-gram, all of PTB (script)", f"{ngram:.1f}",
             "committed: notebook 01's script, lmlib/results/ngram.json"),
            ("Kneser-Ney 5-gram", "141.2", "published: Mikolov et al. 2011, Empirical evaluation and combination of "
                                           "LM techniques"),
            ("KN5 (lmlib)", "639.3", "measured: this notebook (01), teach preset, this run")]
    record = "leaderboard.record(...)"
    assert row_problems("01", record, good) == []
    bad = [("AWD-LSTM 64/128 (bench script)", "772.4", "measured: notebook 06, teach preset"),
           ("NNLM", "300.0", "measured: this notebook (02), teach preset, this run"),
           ("LSTM 2x200 (script)", "112.8", "committed: notebook 03's script, lmlib/results/zaremba_small.json"),
           ("MKN5", "140.0", "committed: notebook 01's script, lmlib/results/ngram.json"),
           ("AWD", "772.4", "committed: lmlib/results/awd_ablation.json, shown by notebook 06"),
           ("Kneser-Ney 5-gram", "120.0", "published: Mikolov et al. 2011")]
    problems = row_problems("01", record, bad)
    assert len(problems) == len(bad), problems
    assert row_problems("01", "", good[2:]) != []  # a notebook that records nothing measured nothing
