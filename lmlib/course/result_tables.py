"""The tables of notebooks 11 and 12, one call each: committed results (and live measurements) as HTML tables with
the numbers right-aligned and each mean beside its standard error (:mod:`lmlib.course.tables`).

Notebook 11: :func:`transformer_xl_result` (the committed memory study, refused unless every run was built with
today's recipe), :func:`memory_table`, :func:`speed_table`, :func:`loss_by_memory_table` (the live runs),
:func:`scaling_table`, :func:`compute_matched_table`. Notebook 12: :func:`ladder_table`, :func:`transfer_table`,
:func:`pretraining_gains` and :func:`pretraining_gains_table`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from . import results
from .tables import html_table, mean_se

# -- notebook 11 ----------------------------------------------------------------------------------------------

XL_NAMES = {"xl": "Transformer-XL (memory 64)", "relative_no_memory": "relative positions, no memory",
            "vanilla": "vanilla (absolute positions)"}


def transformer_xl_result(vocab_size: int) -> dict:
    """``tests/benchmarks/results/transformer_xl.json``, refused unless each run's model config is the one
    :func:`lmlib.recipes.transformer_xl.build` makes today for ``vocab_size`` (the rows describe today's recipe)."""
    from lmlib.recipes import transformer_xl as X

    result = results.load("transformer_xl")
    for variant, runs in result["runs"].items():
        today = json.loads(json.dumps(X.build(variant, vocab_size).config.__dict__))
        if any(run["config"] != today for run in runs):
            raise RuntimeError(f"transformer_xl.json's {variant} model was built with another config than "
                               "lmlib.recipes.transformer_xl's; rerun tests/benchmarks/bench_transformer_xl.py")
    return result


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


# -- notebook 12 ----------------------------------------------------------------------------------------------

def ladder_table(ladder: Sequence[Mapping]):
    """The PTB perplexity ladder (:func:`lmlib.course.comparison.ptb_ladder`): test perplexity, parameters, CPU
    minutes, the published figure and the distance to it."""
    lines = []
    for r in ladder:
        published = r["published"][0] if r["published"] else None
        lines.append([r["model"], r["notebook"], f"{r['test_ppl']:.1f}",
                      f"{r['parameters'] / 1e6:.2f}M" if r["parameters"] else "counts", f"{r['seconds'] / 60:.1f}",
                      "–" if published is None else f"{published:.1f}",
                      "–" if published is None else f"{round(r['test_ppl'] - published, 1) + 0.0:+.1f}"])  # no -0.0
    return html_table(["model", "notebook", "test perplexity", "parameters", "CPU minutes", "published",
                       "here − published"], lines, numeric=[False, False, True, True, True, True, True],
                      caption="PTB test perplexity, lower is better (82,430 test tokens)")


def transfer_table(rows: Sequence[Mapping], dataset: str):
    """The transfer rows of one dataset: a row per method, a column per number of labels, accuracy as mean ±
    standard error (one seed: no error)."""
    from .tables import by_labels

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
    method named exactly, or else the one method whose name starts with it): ``dataset``,
    ``n_labels``, ``pretrained``, ``scratch``, ``difference``, ``se`` (None when either side has one seed) and
    ``verdict`` (within noise when |difference| ≤ 2 se)."""
    gains = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        methods = list(dict.fromkeys(r["method"] for r in rows if r["dataset"] == dataset))
        for pretrained, scratch in pairs:
            scratch = _one_named(methods, scratch)
            a = {r["n_labels"]: r for r in rows if r["dataset"] == dataset and r["method"] == pretrained}
            b = {r["n_labels"]: r for r in rows if r["dataset"] == dataset and r["method"] == scratch}
            for n in sorted(set(a) & set(b)):
                d = a[n]["mean"] - b[n]["mean"]
                se = math.hypot(a[n]["se"], b[n]["se"]) if a[n]["se"] is not None and b[n]["se"] is not None else None
                verdict = ("one seed" if se is None else "within noise" if abs(d) <= 2 * se
                           else "pretraining helps" if d > 0 else "pretraining hurts")
                gains.append(dict(dataset=dataset, n_labels=n, pretrained=pretrained, scratch=scratch, difference=d,
                                  se=se, verdict=verdict))
    return gains


def _one_named(methods: Sequence[str], name: str) -> str | None:
    """``name`` if a method is called so, else the one method whose name starts with it (e.g. a random-init row
    named after the rate it ran at), else None."""
    if name in methods:
        return name
    starting = [m for m in methods if m.startswith(name)]
    return starting[0] if len(starting) == 1 else None


def pretraining_gains_table(rows: Sequence[Mapping], pairs: Sequence[tuple[str, str]] = PRETRAINED_VS_SCRATCH):
    """:func:`pretraining_gains` as an HTML table."""
    return html_table(
        ["dataset", "labels", "pretrained", "minus", "difference", "verdict"],
        [[g["dataset"], f"{g['n_labels']:,}", g["pretrained"], g["scratch"],
          f"{g['difference']:+.3f}" + (f" ± {g['se']:.3f}" if g["se"] is not None else " (1 seed)"), g["verdict"]]
         for g in pretraining_gains(rows, pairs)],
        numeric=[False, True, False, False, True, False],
        caption="pretrained minus the same architecture from random weights (± standard error; within noise: "
                "|difference| ≤ 2 standard errors)")
