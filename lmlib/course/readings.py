"""What a run shows, in sentences: the readings notebooks print under their experiments.

Each function takes the numbers a notebook just measured (or read from a committed result) and returns
Markdown, so the prose under an experiment states measured numbers and the notebook cell stays one call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..models.transformer import AttentionMaps

Scores = Mapping[str, tuple[float, float]]  # model -> (BLEU, chrF)


def lead(scores: Scores, metric: int) -> tuple[str, float]:
    """(leading model, margin in points) for metric 0 (BLEU) or 1 (chrF) of two models' scores."""
    first, second = sorted(scores, key=lambda name: -scores[name][metric])
    return first, scores[first][metric] - scores[second][metric]


def leads_sentence(scores: Scores) -> str:
    """Who is ahead on BLEU and chrF, and by how much (or how the two metrics split)."""
    (bleu_leader, bleu_margin), (chrf_leader, chrf_margin) = lead(scores, 0), lead(scores, 1)
    if bleu_leader == chrf_leader:
        return f"the {bleu_leader} is ahead on both, by {bleu_margin:.1f} BLEU and {chrf_margin:.1f} chrF points"
    return (f"the metrics split: the {bleu_leader} is ahead on BLEU by {bleu_margin:.1f} points, the {chrf_leader} "
            f"on chrF by {chrf_margin:.1f}")


def loss_at(seconds: float, curve: Sequence[float], t: float) -> float:
    """The loss after the last step done by time t, the run's steps spread evenly over its ``seconds``."""
    return curve[min(len(curve) - 1, max(0, int(t / seconds * len(curve)) - 1))]


def curves_sentence(curves: Mapping[str, tuple[float, Sequence[float]]], points: int = 200) -> str:
    """Whether two training-loss curves ``{model: (seconds, losses)}`` cross over their common time window
    (checked at ``points`` evenly spaced times), and which is lower at its end."""
    (a, (seconds_a, curve_a)), (b, (seconds_b, curve_b)) = curves.items()
    window = min(seconds_a, seconds_b)
    grid = [window * k / points for k in range(1, points + 1)]
    lower = [a if loss_at(seconds_a, curve_a, t) < loss_at(seconds_b, curve_b, t) else b for t in grid]
    crossings = [t for t, x, y in zip(grid[1:], lower, lower[1:]) if x != y]
    if crossings:
        return (f"the training-loss curves cross {len(crossings)} time(s), last at about {crossings[-1]:.0f} s; "
                f"after that the {lower[-1]} has the lower loss")
    return f"the training-loss curves do not cross: the {lower[-1]} has the lower loss throughout"


def race_reading(seconds: float, threads: int, steps: Mapping[str, int],
                 curves: Mapping[str, tuple[float, Sequence[float]]], scores: Scores, beam_sentences: int,
                 beam_gain: tuple[float, float], committed: Mapping) -> str:
    """The Transformer and the RNN with attention trained for the same ``seconds`` (notebook 05): their steps,
    loss curves and test scores in this run, what beam search changed, and whether the committed longer run
    (the ``translation_budget`` result) agrees on the leader. ``steps``, ``curves`` and ``scores`` are keyed
    "Transformer" and "RNN + attention"."""
    more = max(steps, key=steps.get)
    ratio = steps[more] / min(steps.values())
    committed_scores = {name: (row["bleu"], row["chrf"]) for name, row in committed["models"].items()}
    committed_more = max(committed["models"], key=lambda name: committed["models"][name]["steps"])
    same = lead(scores, 0)[0] == lead(committed_scores, 0)[0]
    return "\n".join([
        f"**This run**, {seconds} s of training each on {threads} thread(s): the {more} took "
        f"{ratio:.2f}× as many steps ({steps['Transformer']} for the Transformer, {steps['RNN + attention']} for the "
        f"RNN); {curves_sentence(curves)}. On the test set, "
        f"{leads_sentence(scores)}.",
        "",
        f"Beam search on the first {beam_sentences} test sentences changed the Transformer's scores by "
        f"{beam_gain[0]:+.1f} BLEU and {beam_gain[1]:+.1f} chrF points against greedy decoding of the same sentences.",
        "",
        f"**The committed run**, {committed['seconds_per_model']:g} s each: the {committed_more} took more steps, and "
        f"{leads_sentence(committed_scores)}. On BLEU, the committed run and this one "
        + ("agree on the leader." if same else "disagree on the leader."),
    ])


def _code(text: str) -> str:
    return f"`{text}`"  # a code span keeps <unk> and <eos> visible in Markdown


def attention_reading(maps: AttentionMaps, src_tokens: Sequence[str], out_tokens: Sequence[str]) -> str:
    """What a Transformer's attention maps show for one sentence (batch of one): the source token each output
    word reads most in the last layer's cross-attention, the head that puts most weight on the source's
    last token (``<eos>``), and the sharpest and most spread-out encoder heads. ``out_tokens`` are the
    rows of the decoder maps (the output words and ``<eos>``)."""
    last = len(maps.cross) - 1
    cross = maps.cross[last][0].mean(0)  # (decoder position, source), mean of heads
    aligned = [f"{_code(out)} ← {_code(src_tokens[int(row.argmax())])} ({row.max():.2f})"
               for out, row in zip(out_tokens, cross)]
    on_eos = {(kind, layer + 1, head + 1): w[0, head, :, -1].mean().item()
              for kind, layers in (("encoder", maps.encoder_self), ("cross", maps.cross))
              for layer, w in enumerate(layers) for head in range(w.size(1))}
    (eos_kind, eos_layer, eos_head), eos_share = max(on_eos.items(), key=lambda item: item[1])
    sharpness = {(layer + 1, head + 1): w[0, head].max(-1).values.mean().item()
                 for layer, w in enumerate(maps.encoder_self) for head in range(w.size(1))}
    (sharp_layer, sharp_head), sharp = max(sharpness.items(), key=lambda item: item[1])
    (flat_layer, flat_head), flat = min(sharpness.items(), key=lambda item: item[1])
    return "\n".join([
        f"- **Cross-attention, layer {last + 1}, mean of heads**: each output word and the source token it reads "
        "most: " + ", ".join(aligned) + ".",
        f"- **Weight on `<eos>`**: the head that puts the most on the source's `<eos>` is {eos_kind} layer {eos_layer}, "
        f"head {eos_head}, with {eos_share:.0%} of each query's weight on average (uniform over the "
        f"{len(src_tokens)} source tokens would be {1 / len(src_tokens):.0%}).",
        f"- **Sharp or spread** (encoder): the mean of each query's largest weight is {sharp:.2f} for layer "
        f"{sharp_layer}, head {sharp_head} (the sharpest) and {flat:.2f} for layer {flat_layer}, head {flat_head} "
        "(the most spread out); 1.00 would be one token per query.",
    ])


def _spread(entry: Mapping, n_test: int) -> float:
    """The standard error of a summary entry's mean: over seeds, or, with one seed, the test set's binomial one."""
    if entry["se"] is not None:
        return entry["se"]
    return math.sqrt(entry["mean"] * (1 - entry["mean"]) / n_test)


def _summary_table(summary: Sequence[Mapping], max_len: int) -> dict[tuple[str, int], Mapping]:
    return {(s["variant"], s["n_labels"]): s for s in summary if s["max_len"] == max_len}


ABLATION_NAMES = {
    "no_lm_finetuning": "without LM fine-tuning (stage b)", "no_discriminative": "without discriminative rates",
    "no_stlr": "without STLR (constant rate)", "no_gradual": "without gradual unfreezing",
    "neither": "without unfreezing or discriminative rates",
}


def ulmfit_imdb_reading(summary: Sequence[Mapping], n_test: int, max_len: int, variant: str = "ulmfit",
                        name: str = "ULMFiT") -> str:
    """The IMDb curve read the paper's way (Howard & Ruder 2018, fig. 3): how many labels training from scratch
    needs to match ``variant`` (called ``name``) with the fewest, and ``variant`` minus scratch at every label
    count with its standard error (* beyond two). ``summary``: entries with variant, n_labels, max_len, seeds,
    mean, se."""
    table = _summary_table(summary, max_len)
    sizes = sorted(n for v, n in table if v == variant and ("scratch", n) in table)
    if not sizes:
        raise ValueError(f"no label count has both {variant!r} and 'scratch' at max_len {max_len}")
    fewest = sizes[0]
    ulm = table[variant, fewest]
    reach = next((n for n in sizes if table["scratch", n]["mean"] >= ulm["mean"]), None)
    if reach is None:
        verdict = f"from scratch never reaches it, not even with all {sizes[-1]:,} labels"
    elif reach <= fewest:
        verdict = f"from scratch matches it with the same {reach:,} labels, so pretraining bought nothing there"
    else:
        verdict = f"from scratch first reaches it with {reach:,} labels ({reach / fewest:.0f}x as many)"
    lines = [f"**Reading the curve: {name}.** With {fewest:,} labelled reviews it scores {ulm['mean']:.1%}; {verdict} "
             "(Howard & Ruder report 10x on IMDb).", "",
             f"{name} minus from scratch, in accuracy points ± one standard error of the difference "
             "(* = beyond two):", ""]
    cells, ahead = [], 0
    for n in sizes:
        a, b = table[variant, n], table["scratch", n]
        gap, se = a["mean"] - b["mean"], math.hypot(_spread(a, n_test), _spread(b, n_test))
        ahead += gap >= -2 * se
        seeds = min(a["seeds"], b["seeds"])
        cells.append(f"{n:,}: {100 * gap:+.1f} ± {100 * se:.1f}{'*' if abs(gap) > 2 * se else ''}"
                     f"{' (one seed)' if seeds == 1 else ''}")
    lines += ["- " + "; ".join(cells) + ".", "",
              f"{name} is at least level with training from scratch (not behind by more than two standard errors) at "
              f"{ahead} of {len(sizes)} label counts."]
    return "\n".join(lines)


def ulmfit_ablation_imdb_reading(summary: Sequence[Mapping], n_test: int, max_len: int) -> str:
    """Each ablation against full ULMFiT at the label counts both were run with, in points ± one standard error
    of the difference (* beyond two), as in Howard & Ruder's tables 6 and 7."""
    table = _summary_table(summary, max_len)
    lines = ["**Ablations** (variant minus full ULMFiT, accuracy points ± one standard error; * = beyond two):", ""]
    for variant, name in ABLATION_NAMES.items():
        cells = []
        for n in sorted(n for v, n in table if v == variant and ("ulmfit", n) in table):
            a, b = table[variant, n], table["ulmfit", n]
            gap, se = a["mean"] - b["mean"], math.hypot(_spread(a, n_test), _spread(b, n_test))
            cells.append(f"{n:,} labels {100 * gap:+.1f} ± {100 * se:.1f}{'*' if abs(gap) > 2 * se else ''}")
        if cells:
            lines.append(f"- {name}: " + "; ".join(cells))
    return "\n".join(lines)
