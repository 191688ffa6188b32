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


def _labels_to_match(rows: Sequence[Mapping], target: float) -> int | None:
    """The fewest labels with which the ``rows`` (one method, one dataset) reach ``target`` accuracy."""
    return next((r["n_labels"] for r in sorted(rows, key=lambda r: r["n_labels"]) if r["accuracy"] >= target), None)


_CURVE_DATASETS = (("rt-polarity", "held-out rt-polarity"), ("sst2", "SST-2 dev"))


def _match_line(rows: Sequence[Mapping], dataset: str, name: str, fewest: int) -> str:
    """How many labels from scratch needs to reach ULMFiT's accuracy with the ``fewest`` on ``dataset``."""
    scratch_rows = [r for r in rows if r["method"] == "from scratch" and r["dataset"] == dataset]
    ulm = next(r for r in rows if r["method"] == "ULMFiT" and r["dataset"] == dataset and r["n_labels"] == fewest)
    needed = _labels_to_match(scratch_rows, ulm["accuracy"])
    most = max(r["n_labels"] for r in scratch_rows)
    if needed is None:
        verdict = f"from scratch never reaches it, not even with all {most:,} labels"
    elif needed <= fewest:
        verdict = f"from scratch matches it with the same {needed:,} labels, so pretraining bought nothing here"
    else:
        verdict = f"from scratch needs {needed:,} labels ({needed / fewest:.0f}× as many) to match it"
    return f"- {name}: ULMFiT with {fewest} labels scores {ulm['accuracy']:.1%}; {verdict}."


def _gap_line(ulmfit: Sequence[Mapping], scratch: Mapping, dataset: str, name: str) -> str:
    """ULMFiT minus from scratch at each label count, * where the gap exceeds two standard errors."""
    cells = []
    for r in sorted((r for r in ulmfit if r["dataset"] == dataset), key=lambda r: r["n_labels"]):
        gap = r["accuracy"] - scratch[dataset, r["n_labels"]]
        cells.append(f"{r['n_labels']:,}: {100 * gap:+.1f}{'*' if abs(gap) > 2 * math.sqrt(0.5 / r['n_test']) else ''}")
    return f"- {name}: " + ", ".join(cells)


def ulmfit_curve_reading(rows: Sequence[Mapping], pretrained: Mapping, unigram_test_ppl: float) -> str:
    """The labelled-examples curve of notebook 07 read the paper's way (Howard & Ruder 2018, fig. 3): how many
    labels training from scratch needs to match ULMFiT with the fewest, the gap at every label count (marked
    where it exceeds two standard errors), and what the result rests on. ``rows`` are the committed curve's
    results (method, dataset, n_labels, accuracy, n_test), ``pretrained`` its record of the LM checkpoint."""
    scratch = {(r["dataset"], r["n_labels"]): r["accuracy"] for r in rows if r["method"] == "from scratch"}
    ulmfit = [r for r in rows if r["method"] == "ULMFiT"]
    fewest = min(r["n_labels"] for r in ulmfit)
    lines = ["**Reading the curve.** Howard & Ruder (2018, fig. 3) report that ULMFiT with 100 labelled examples "
             "matches training from scratch with 10 to 20 times more. In these runs:", ""]
    lines += [_match_line(rows, dataset, name, fewest) for dataset, name in _CURVE_DATASETS]
    lines += ["", "Label count by label count (ULMFiT minus from scratch, in accuracy points; * = more than two "
              "standard errors):", ""]
    lines += [_gap_line(ulmfit, scratch, dataset, name) for dataset, name in _CURVE_DATASETS]
    everything = max(r["n_labels"] for r in ulmfit)
    # "clearly behind": by more than two standard errors of the smaller test set, SST-2 dev's 872 sentences
    behind = [d for d, _ in _CURVE_DATASETS if scratch[d, everything] - next(
        r["accuracy"] for r in ulmfit if r["dataset"] == d and r["n_labels"] == everything) > 2 * math.sqrt(0.5 / 872)]
    if behind:
        lines += ["", f"With all {everything:,} labels ULMFiT ends clearly behind. One likely reason, not tested here: "
                  "in five epochs gradual unfreezing trains the lowest groups (among them the 4,000 new word vectors) "
                  "for one or two epochs at rates divided by 2.6 per layer, while the from-scratch model trains every "
                  "layer at the full rate for all five."]
    lines += ["", f"All of this rests on a small LM (PTB test perplexity {pretrained['test_ppl']:.0f} after "
              f"{pretrained['steps']:,} steps; the unigram model above scores {unigram_test_ppl:.0f}) pretrained on "
              "0.9 M tokens of newswire, where the paper used 103 M tokens of Wikipedia; and on one seed, so "
              "differences within about two standard errors (printed above) are noise. The recipe protects what "
              "pretraining learned; it cannot create it."]
    return "\n".join(lines)
