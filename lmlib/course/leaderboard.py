"""The running table "model -> PTB test perplexity" that the course extends notebook by notebook.

Each notebook records what its own runs measured with :func:`record`; :func:`table` shows those rows
beside the published figures (with their source), so every new model is read against the old ones.
Measured rows live in a small JSON file of this machine's runs (``LMLIB_RESULTS_DIR``, else the
repository's ``data/results``, else ``~/.cache/lmlib/results``), not among the committed results of
:mod:`lmlib.course.results`: a notebook only sees the rows of notebooks that were run before it here.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..runtime import atomic_write

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; notebooks run one at a time there
    fcntl = None

PUBLISHED = [
    # (model, test perplexity, source)
    ("Kneser-Ney 5-gram", 141.2, "Mikolov et al. 2011, Empirical evaluation and combination of LM techniques"),
    ("Feed-forward NNLM", 140.2, "Mikolov 2012, PhD thesis, table 4.1 (the comparison of Mikolov et al. 2011)"),
    ("LSTM small, 2x200 (Zaremba)", 114.5, "Zaremba et al. 2014, Recurrent neural network regularization"),
    ("LSTM medium, 2x650, dropout (Zaremba)", 82.7, "Zaremba et al. 2014"),
    ("LSTM large, 2x1500, dropout (Zaremba)", 78.4, "Zaremba et al. 2014"),
    ("AWD-LSTM", 57.3, "Merity et al. 2018, Regularizing and optimizing LSTM language models"),
    ("AWD-LSTM + continuous cache", 52.8, "Merity et al. 2018"),
    ("Transformer-XL", 54.5, "Dai et al. 2019, Transformer-XL (PTB, without finetuning)"),
    ("GPT-2 1.5B, zero-shot", 35.76, "Radford et al. 2019, Language models are unsupervised multitask learners"),
]


def _path() -> Path:
    """``ptb_leaderboard.json`` in the folder of this machine's measured rows."""
    env = os.environ.get("LMLIB_RESULTS_DIR")
    if env:
        return Path(env).expanduser() / "ptb_leaderboard.json"
    repo_data = Path(__file__).resolve().parents[2] / "data"
    folder = repo_data / "results" if (repo_data / "README.md").is_file() else Path.home() / ".cache" / "lmlib" / "results"
    return folder / "ptb_leaderboard.json"


def measured() -> dict[str, dict]:
    path = _path()
    return json.loads(path.read_text()) if path.is_file() else {}


def record(model: str, test_ppl: float, notebook: str, preset: str, seconds: float | None = None) -> None:
    """Store (or replace) this notebook's measured PTB test perplexity for ``model``.

    Only a finite perplexity above 1 is a result to compare; anything else is refused, not stored.
    """
    try:
        test_ppl = float(test_ppl)
    except (TypeError, ValueError):
        raise TypeError(f"test_ppl must be a number, got {test_ppl!r}") from None
    if math.isnan(test_ppl):
        raise ValueError(f"the perplexity of {model!r} is NaN: the evaluation went wrong (a NaN loss?), "
                         "so there is nothing to record; fix the run first")
    if math.isinf(test_ppl):
        raise ValueError(f"the perplexity of {model!r} is infinite: some test token got probability 0 (an unsmoothed "
                         "model) or the loss overflowed; only a finite perplexity can be ranked, so smooth or "
                         "retrain the model first")
    if not test_ppl > 1:
        raise ValueError(f"a perplexity is greater than 1 (the exponential of a positive mean negative "
                         f"log-likelihood), got {test_ppl} for {model!r}; was a loss or a probability passed "
                         "instead of a perplexity?")
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Two notebooks may record at once (two kernels, or the tests on two workers): read, add and write under a lock
    # so that neither erases the other's row.
    with open(path.with_suffix(".lock"), "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        rows = measured()
        rows[model] = {"test_ppl": test_ppl, "notebook": notebook, "preset": preset, "seconds": seconds}
        atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(rows, indent=1)))


def table(include_published: bool = True) -> list[dict]:
    """Rows sorted by perplexity: measured ones (source "this course, <notebook>, <preset>") and published ones."""
    rows = [{"model": m, "test_ppl": r["test_ppl"], "source": f"measured: notebook {r['notebook']}, {r['preset']} preset"}
            for m, r in measured().items()]
    if include_published:
        rows += [{"model": m, "test_ppl": p, "source": f"published: {s}"} for m, p, s in PUBLISHED]
    return sorted(rows, key=lambda r: r["test_ppl"], reverse=True)


def show(include_published: bool = True):
    """The table as a plotly figure (a table trace), for notebooks."""
    import plotly.graph_objects as go

    rows = table(include_published)
    fig = go.Figure(go.Table(
        header=dict(values=["model", "PTB test perplexity", "source"], align="left"),
        cells=dict(values=[[r["model"] for r in rows], [f"{r['test_ppl']:.1f}" for r in rows],
                           [r["source"] for r in rows]], align="left"),
    ))
    fig.update_layout(margin=dict(l=10, r=10, t=30, b=10), height=60 + 28 * len(rows), title="PTB test perplexity")
    return fig
