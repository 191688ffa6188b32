"""What the translation experiments of notebooks 04 and 05 show, as a table and the sentences its numbers carry.

Each function takes what a notebook just measured (or read from a committed result) and returns Markdown to display:
one table of the numbers, then only the statements they support. A difference is called a difference only when
it is more than two standard errors from zero; where a result has no standard error (BLEU pools its counts over
the corpus; a committed run of one seed keeps no sentence scores) its numbers are shown and no verdict is drawn.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from IPython.display import Markdown

from ..eval.metrics import sentence_chrf
from ..models.transformer import AttentionMaps
from .verdicts import beyond_noise

Tokens = Sequence[str]
Scores = Mapping[str, tuple[float, float]]  # model -> (BLEU, chrF)


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Mean of a - b over paired items and its standard error."""
    diffs = [x - y for x, y in zip(a, b)]
    return statistics.fmean(diffs), statistics.stdev(diffs) / math.sqrt(len(diffs))


_beyond = beyond_noise  # the course's one noise rule (lmlib.course.verdicts)


def sentence_chrf_points(hyps: Sequence[Tokens], refs: Sequence[Sequence[Tokens]]) -> list[float]:
    """Each sentence's chrF against its best reference, in points: a corpus's chrF is the mean of these."""
    return [100 * max(sentence_chrf(h, r) for r in rs) for h, rs in zip(hyps, refs)]


def length_reading(results: Mapping[str, Mapping], refs: Sequence[Sequence[Tokens]], lengths: Sequence[int],
                   base: str = "fixed context", model: str = "attention") -> Markdown:
    """Notebook 04, section 4: how ``base`` and ``model`` score from the shortest length bucket to the longest, on
    the same test sentences. ``results[name]`` holds ``hyps``, ``bleu``, ``chrf`` (0-1) and ``buckets`` (from
    :func:`lmlib.eval.metrics.scores_by_length`); ``lengths`` are the source lengths the buckets were cut by.

    chrF is a mean of sentence scores, so the paired differences of the two models' sentence scores give standard
    errors: of the whole test set's difference and of the difference between the two models' drops (shortest
    bucket minus longest)."""
    points = {name: sentence_chrf_points(results[name]["hyps"], refs) for name in (base, model)}
    first, last = results[model]["buckets"][0], results[model]["buckets"][-1]

    def paired(label: str) -> tuple[float, float]:  # the model minus the base over a bucket's sentences
        lo, _, hi = label.partition("-")
        at = [i for i, n in enumerate(lengths) if int(lo) <= n <= int(hi or lo)]
        return _paired([points[model][i] for i in at], [points[base][i] for i in at])

    whole, whole_se = _paired(points[model], points[base])
    (d_short, se_short), (d_long, se_long) = paired(first["label"]), paired(last["label"])
    gap, gap_se = d_short - d_long, math.hypot(se_short, se_long)  # the model's drop minus the base's, in chrF

    def drop(name: str, metric: str) -> float:
        buckets = results[name]["buckets"]
        return 100 * (buckets[-1][metric] - buckets[0][metric])

    rows = ["| | BLEU, " + first["label"] + " words | BLEU, " + last["label"] + " words | change "
            "| chrF, " + first["label"] + " words | chrF, " + last["label"] + " words | change |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name in (base, model):
        b = results[name]["buckets"]
        rows.append(f"| {name} | {100 * b[0]['bleu']:.1f} | {100 * b[-1]['bleu']:.1f} | {drop(name, 'bleu'):+.1f} "
                    f"| {100 * b[0]['chrf']:.1f} | {100 * b[-1]['chrf']:.1f} | {drop(name, 'chrf'):+.1f} |")
    rows.append(f"| {model} minus {base} | | | {drop(model, 'bleu') - drop(base, 'bleu'):+.1f} | | | "
                f"{-gap:+.1f} ± {gap_se:.1f} |")

    ahead = "ahead of" if whole > 0 else "behind"
    overall = (f"Over all {len(points[model])} test sentences the {model} model's chrF is {whole:+.1f} ± {whole_se:.1f} "
               f"points against the {base} model's (BLEU {100 * results[model]['bleu']:.1f} against "
               f"{100 * results[base]['bleu']:.1f}): ")
    overall += (f"{ahead} it by more than two standard errors." if _beyond(whole, whole_se) else
                "within two standard errors, so this run does not tell the two apart.")
    if _beyond(gap, gap_se):
        shape = (f"From the shortest bucket ({first['n']} sentences) to the longest ({last['n']}), the {model} model's "
                 f"chrF falls {'less' if gap < 0 else 'more'} than the {base} model's, by {abs(gap):.1f} ± {gap_se:.1f} "
                 "points: beyond two standard errors.")
    else:
        shape = (f"Whether the {model} model's curve is flatter, this run cannot say: the difference between the two "
                 f"models' chrF changes, {-gap:+.1f} points, is within two standard errors ({gap_se:.1f}), the longest "
                 f"bucket holding {last['n']} sentences. BLEU pools its counts over a bucket and has no standard error "
                 "here, so its change carries no verdict either.")
    return Markdown("\n".join(rows + ["", overall, "", shape]))


def uniform_attention_why(attention_points: Sequence[float], uniform_points: Sequence[float],
                           fixed_chrf: float) -> str:
    """Notebook 04, exercise 4: what replacing the attention model's alignments by uniform weights did, from the two
    runs' sentence chrF points (:func:`sentence_chrf_points`, the same sentences) and the fixed-context model's
    chrF; the change is called one only beyond two standard errors of the paired differences."""
    drop, se = _paired(attention_points, uniform_points)
    trained, uniform = statistics.fmean(attention_points), statistics.fmean(uniform_points)
    change = f"{trained:.1f} → {uniform:.1f}, {-drop:+.1f} ± {se:.1f} points over the same sentences"
    if drop > 0 and beyond_noise(drop, se):
        return ("the decoder was trained on contexts that point at the source words it is translating; with uniform "
                "weights every step gets the same blurred average, a context it never saw in training, and chrF falls "
                f"({change}), {'below' if uniform < fixed_chrf else 'to about'} the fixed-context model's "
                f"{fixed_chrf:.1f}, a decoder trained to read one summary. What attention buys here is where it looks.")
    if beyond_noise(drop, se):
        return (f"uniform weights do better than this run's alignments ({change}): the model has not yet learnt where "
                "to look, and its alignments cost more than an average of the source.")
    return (f"chrF barely moves ({change}, within two standard errors): this run's model has not yet learnt to rely on "
            "where it looks, so an average of the source serves it as well; a model trained longer comes to depend "
            "on its alignments.")


def offline_length_reading(offline: Mapping[str, Mapping], live: Mapping[str, Mapping] | None = None) -> Markdown:
    """Notebook 04, section 4b: the committed by-length runs (``attention_by_length_<model>`` results, keyed by
    model), their training (steps, epochs seen), the share of the shortest bucket's score each keeps on the longest,
    and, against this notebook's ``live`` results (``{name: {"bleu": 0-1, ...}}``), where they stand. One run of each
    model, bucket scores only: no standard error, so no verdict on the shape of the curves."""
    rows = ["| model | steps | epochs seen | test BLEU | test chrF | BLEU kept, longest / shortest "
            "| chrF kept, longest / shortest |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in offline.values():
        kept = {m: r["buckets"][-1][m] / r["buckets"][0][m] for m in ("bleu", "chrf")}
        rows.append(f"| {r['model']} | {r['steps']:,} | {r['epochs_seen']:.2f} | {r['bleu']:.1f} | {r['chrf']:.1f} "
                    f"| {kept['bleu']:.0%} | {kept['chrf']:.0%} |")
    runs = list(offline.values())
    training = (f"Neither model finished one pass over its training pairs (at most "
                f"{max(r['epochs_seen'] for r in runs):.2f} of an epoch): the budget bought longer sentences and "
                "larger models, not longer training.")
    if live:
        live_bleu = [100 * v["bleu"] for v in live.values()]
        if all(r["bleu"] < min(live_bleu) for r in runs):
            training += (" Both score below this notebook's live runs (BLEU "
                         + " and ".join(f"{r['bleu']:.1f}" for r in runs) + " against "
                         + " and ".join(f"{b:.1f}" for b in live_bleu) + "), whose smaller models had an easier "
                         "task: shorter sentences from one domain, a smaller vocabulary.")
        else:
            training += " Their scores do not compare with the live runs': another test set, with longer sentences."
    ahead = all(a["bleu"] > f["bleu"] and a["chrf"] > f["chrf"] for f, a in zip(runs[0]["buckets"], runs[-1]["buckets"]))
    verdict = ("Each model ran once, and the stored results keep bucket scores, not sentence scores: these differences "
               "have no standard error, so they carry no verdict on whether attention's curve is flatter"
               + (f". They show one run with the {runs[-1]['model']} ahead in every bucket, on both metrics." if ahead
                  else "."))
    return Markdown("\n".join(rows + ["", training, "", verdict]))


def _code(text: str) -> str:
    return f"`{text}`"  # a code span keeps <unk> and <eos> visible in Markdown


# "tired" is said of the animal (masculine: il), "wide" of the street (la rue, feminine: elle)
EXPECTED = {"tired": ("animal", "il"), "wide": ("street", "elle")}


def pronoun_reading(readings: Mapping[str, Mapping], train_pairs: Sequence[tuple[Tokens, Tokens]],
                    seconds: float) -> Markdown:
    """Notebook 05, section 11: what the Transformer did with "The animal didn't cross the street because it was
    too tired / wide." ``readings[adjective]`` holds the sentence's ``tokens``, its ``labels`` (``*`` on words outside
    the vocabulary), the translation ``output`` and the encoder's self-attention ``maps`` (a list per layer of
    ``(1, heads, S, S)``); ``train_pairs`` the training (source, target) pairs; ``seconds`` the training time.

    The attention test is the contrast "weight on animal minus weight on street" between the two sentences, per
    head of the last layer: expected positive (more on the animal when tired, more on the street when wide). It is
    called a preference only when its mean over heads is more than two standard errors from zero."""
    table = ["| sentence | layer | head | strongest key from 'it' | weight on 'animal' | weight on 'street' |",
             "|---|---|---|---|---|---|"]
    contrasts, margins, got, lines = {}, {}, {}, []
    for adjective, r in readings.items():
        tokens = list(r["tokens"])
        it, animal, street = tokens.index("it"), tokens.index("animal"), tokens.index("street")
        for layer, weights in enumerate(r["maps"], start=1):
            from_it = weights[0, :, it]  # (heads, source positions): where "it" looks in this layer
            for head, w in [(f"head {h + 1}", w) for h, w in enumerate(from_it)] + [("mean", from_it.mean(0))]:
                top = int(w.argmax())
                table.append(f"| …too {adjective} | {layer} | {head} | {_code(r['labels'][top])} ({w[top]:.2f}) "
                             f"| {w[animal]:.3f} | {w[street]:.3f} |")
        last = r["maps"][-1][0, :, it]  # (heads, source) in the last layer
        contrasts[adjective] = (last[:, animal] - last[:, street]).tolist()
        mean = last.mean(0)
        margins[adjective] = (mean[animal] - mean[street]).item()
        got[adjective] = [w for w in r["output"] if w in ("il", "elle", "ils", "elles")]
        lines.append(f"- *…too {adjective}*: {_code(' '.join(r['output']))}; French pronoun: "
                     f"{', '.join(got[adjective]) or 'none'}; last layer, mean of heads: 'it' puts {mean[animal]:.3f} on "
                     f"'animal' and {mean[street]:.3f} on 'street' ({mean[animal] - mean[street]:+.3f})")
    unknown = [w for w in ("animal", "street") if any(label == w + "*" for r in readings.values() for label in r["labels"])]
    heads = len(contrasts["tired"])
    per_head = [t - w for t, w in zip(contrasts["tired"], contrasts["wide"])]
    shift = statistics.fmean(per_head)
    shift_se = statistics.stdev(per_head) / math.sqrt(heads)
    if _beyond(shift, shift_se):
        attention = (f"Between the two sentences the last layer's heads move 'it' {'towards' if shift > 0 else 'away from'} "
                     f"the expected noun: the contrast (animal minus street, tired minus wide) is {shift:+.4f} ± "
                     f"{shift_se:.4f} over its {heads} heads ({shift / shift_se:+.1f} standard errors), beyond two standard errors"
                     + ("." if shift > 0 else ", the wrong way round."))
    else:
        attention = (f"The attention carries no verdict: the contrast (animal minus street, tired minus wide) is "
                     f"{shift:+.4f} ± {shift_se:.4f} over the last layer's {heads} heads, "
                     f"{shift / shift_se if shift_se else 0.0:+.1f} standard errors: within two standard errors of "
                     "zero, the heads disagree with each other more than the two sentences differ.")
        if max(abs(m) for m in margins.values()) < 0.01:
            attention += (" The mean-of-heads margins in the list above are below 0.01 of a weight: at two decimals "
                          "the two nouns get equal weight.")
    expected = {adj: EXPECTED[adj][1] for adj in readings}
    it_sources = sum("it" in src for src, _ in train_pairs)
    it_first = sum(bool(src) and src[0] == "it" for src, _ in train_pairs)
    nouns = (f"{' and '.join(repr(w) for w in unknown)} {'reach' if len(unknown) > 1 else 'reaches'} the model as "
             f"{_code('<unk>')}, "
             "so nothing in its input carries a gender; " if unknown else "")
    subject = ("every training sentence opens with I, you, he, she, we or they, so it has met 'it' only after the "
               "verb (as *le*, *ça*) and never learnt what 'it' becomes as a subject" if it_first == 0 else
               f"{it_first} of them open with it")
    context = (f"{nouns}of its {len(train_pairs):,} training pairs {it_sources} contain 'it', {it_first} as the first "
               f"word: {subject}. After {seconds:.0f} s of training, the French pronoun is a guess steered by the words "
               "around it.")
    context = context[0].upper() + context[1:]
    if all(got[adj] == [expected[adj]] for adj in readings):
        pronoun = ("The French pronouns are the expected ones (*il* for the tired animal, *elle* for the wide street). "
                   + context.replace("is a guess", "is still a guess") + " Another run may well swap them.")
    elif got.get("tired") == [expected.get("wide")] and got.get("wide") == [expected.get("tired")]:
        pronoun = ("The French pronouns are reversed: " + " and ".join(
            f"*{', '.join(got[adj])}* for the {EXPECTED[adj][0]} that is {adj} (expected *{expected[adj]}*)"
            for adj in readings) + ". A small model trained briefly might well do this. " + context)
    else:
        pronoun = ("The French pronouns: " + "; ".join(
            f"*{', '.join(got[adj]) or 'none'}* for the {EXPECTED[adj][0]} that is {adj} (expected *{expected[adj]}*)"
            for adj in readings) + ". " + context)
    return Markdown("\n".join(lines + ["", attention, "", pronoun, ""] + table))


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
