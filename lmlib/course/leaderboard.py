"""The running table "model -> PTB test perplexity" that notebooks 01-06 extend, one model family each.

A notebook's table shows three kinds of row, each labelled with where its number comes from:

* what this notebook measured in this session (:func:`record`): kept in the kernel's memory only, never in a file,
  so a table shows no row of another notebook, whatever ran before on this machine;
* the committed script results of the notebooks up to this one (:data:`COMMITTED`: each a named file of
  ``lmlib/results`` or a shipped checkpoint's ``pretrain.json``, run once in the full preset): the running table;
* the published figures (:data:`PUBLISHED`, with their source).

A row recorded from a committed result names that result (``record(..., source="awd_ablation")``), so a benchmark's
number is never labelled as this notebook's measurement.
"""

from __future__ import annotations

import math

from . import results

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

# (notebook, model, where the number is) for the committed PTB results of notebooks 01-06. ``where`` is a result name
# of lmlib/results, or "pretrained:<checkpoint>" for a shipped checkpoint's pretrain.json.
COMMITTED = [
    ("01", "modified Kneser-Ney 5-gram, all of PTB (script)", "ngram"),
    ("02", "NNLM (Bengio 2003), 5-gram window, direct connections, last epoch (script)", "nnlm"),
    ("03", "LSTM 2x200, no dropout (Zaremba small, script)", "zaremba_small"),
    ("06", "AWD-LSTM (ULMFiT's general-domain LM, shipped)", "pretrained:awd_lstm_ptb"),
]

_measured: dict[str, dict] = {}  # model -> row, recorded in this kernel


def committed_ppl(where: str) -> float:
    """The test perplexity a committed result holds (see :data:`COMMITTED`)."""
    if where.startswith("pretrained:"):
        return float(results.shipped_report(where.removeprefix("pretrained:"))["test_ppl"])
    data = results.load(where)
    if where == "ngram":
        return float({r["model"]: r for r in data["full_ptb"]}["MKN5, all of PTB"]["test_perplexity"])
    return float(data["test_ppl"])


def committed_label(where: str, notebook: str) -> str:
    if where.startswith("pretrained:"):
        return f"committed: notebook {notebook}'s shipped checkpoint {where.removeprefix('pretrained:')} (pretrain.json)"
    return f"committed: notebook {notebook}'s script, lmlib/results/{where}.json"


def _check_ppl(model: str, test_ppl) -> float:
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
    return test_ppl


def record(model: str, test_ppl: float, notebook: str, preset: str, seconds: float | None = None,
           source: str | None = None) -> None:
    """Keep (or replace) a PTB test perplexity that notebook ``notebook`` shows for ``model``, in this kernel only.

    Without ``source`` it is what this notebook measured now, in ``preset``. With ``source``, the name of a committed
    result (``lmlib/results/<source>.json``), the number is that result's, and is labelled so. Only a finite
    perplexity above 1 is a result to compare; anything else is refused, not kept."""
    test_ppl = _check_ppl(model, test_ppl)
    if not (isinstance(notebook, str) and len(notebook) == 2 and notebook.isdigit()):
        raise ValueError(f"notebook must be its two-digit number such as '01', got {notebook!r}")
    if source is not None:
        results.load(source)  # refuses a name that is no committed result
    _measured[model] = {"test_ppl": test_ppl, "notebook": notebook, "preset": preset, "seconds": seconds,
                        "source": source}


def measured() -> dict[str, dict]:
    """The rows recorded in this kernel: model -> its row."""
    return dict(_measured)


def forget() -> None:
    """Drop the rows recorded in this kernel."""
    _measured.clear()


def table(include_published: bool = True, notebook: str | None = None) -> list[dict]:
    """Rows sorted by perplexity, worst first: the rows notebook ``notebook`` recorded in this kernel (by default the
    notebook that recorded last), the committed results of the notebooks up to it, and the published figures.
    Each row: ``model``, ``test_ppl``, ``source`` (its label)."""
    if notebook is None:
        notebook = next(reversed(_measured.values()))["notebook"] if _measured else None
    rows = []
    for model, r in _measured.items():
        if r["notebook"] != notebook:
            continue
        label = (f"committed: lmlib/results/{r['source']}.json, shown by notebook {r['notebook']}" if r["source"]
                 else f"measured: this notebook ({r['notebook']}), {r['preset']} preset, this run")
        rows.append({"model": model, "test_ppl": r["test_ppl"], "source": label})
    if notebook is not None:
        for at, model, where in COMMITTED:
            if at <= notebook and not any(r["source"] == where for r in _measured.values()):
                rows.append({"model": model, "test_ppl": committed_ppl(where), "source": committed_label(where, at)})
    if include_published:
        rows += [{"model": m, "test_ppl": p, "source": f"published: {s}"} for m, p, s in PUBLISHED]
    return sorted(rows, key=lambda r: r["test_ppl"], reverse=True)


def show(include_published: bool = True, notebook: str | None = None):
    """:func:`table` as a plotly figure (a table trace), for notebooks."""
    import plotly.graph_objects as go

    rows = table(include_published, notebook)
    fig = go.Figure(go.Table(
        header=dict(values=["model", "PTB test perplexity", "source"], align="left"),
        cells=dict(values=[[r["model"] for r in rows], [f"{r['test_ppl']:.1f}" for r in rows],
                           [r["source"] for r in rows]], align="left"),
    ))
    fig.update_layout(margin=dict(l=10, r=10, t=30, b=10), height=60 + 28 * len(rows), title="PTB test perplexity")
    return fig
