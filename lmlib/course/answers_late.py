"""Hidden references for the exercises of notebooks 09-12, so that no check cell shows an expression to run for the
answer.

Each exercise asks for a variation of what the notebook showed with ``show_source`` (min-p where the notebook showed
top-p, an ascending distance order where it showed the descending one, truncation where it showed none), so it tests
understanding rather than copying. A check cell names its exercise, ``check("09 min-p", my_min_p)``: the reference,
the cases it is called on and the tolerance live here; the worked answer is in the notebook's solution, which the
reader opens on purpose. The checks print ``PASS`` / ``NOT YET`` as :mod:`lmlib.course.exercises` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from . import exercises
from .exercises import Outcome


@dataclass(frozen=True)
class Exercise:
    """``kind`` "value": the reader's value against ``reference(*inputs)``. ``kind`` "function": the reader's
    function, passed through ``adapt``, against ``reference`` on each argument tuple of ``cases(*inputs)``."""

    kind: str
    reference: Callable
    cases: Callable[..., list[tuple]] = field(default=lambda *inputs: [])
    adapt: Callable[[Callable], Callable] = field(default=lambda fn: fn)
    rtol: float = 1e-4
    atol: float = 1e-6


# -- notebook 09 -------------------------------------------------------------------------------------------------

def multiple_choice_cut(context: Sequence[int], answers: Sequence[Sequence[int]], tokens, max_len: int) -> list[list[int]]:
    """Notebook 09, exercise 1: GPT-1's multiple-choice inputs ``[start] context [delim] a_k [extract]`` cut to at
    most ``max_len`` tokens each by dropping the *first* tokens of the context (the question sits at its end, and the
    answer is kept whole)."""
    out = []
    for a in answers:
        keep = min(len(context), max_len - 3 - len(a))
        out.append([tokens.start, *context[len(context) - keep:], tokens.delim, *a, tokens.extract])
    return out


def min_p_kept(probs: torch.Tensor, p_base: float) -> list[int]:
    """Notebook 09, exercise 2: min-p sampling's kept tokens (Nguyen et al. 2024), sorted: token i is kept when
    P(i) >= p_base · max_j P(j), a threshold that scales with the model's confidence."""
    return sorted(int(i) for i in (probs >= p_base * probs.max()).nonzero().flatten())


def l3_batch(cls_logits, y, lm_logits, targets, lengths, lam) -> float:
    """Notebook 09, exercise 3: L_3 = L_2 + λ·L_1 for a right-padded batch: L_2 the mean cross-entropy of the class
    logits ``(B, 2)``, L_1 the mean next-token NLL over the real text tokens of every row (``lengths``; padding
    ignored), ``lm_logits`` ``(B, n, V)``, ``targets`` ``(B, n)``."""
    real = torch.arange(targets.size(1))[None] < torch.as_tensor(lengths)[:, None]  # (B, n)
    l1 = F.cross_entropy(lm_logits.flatten(0, 1), targets.masked_fill(~real, -100).flatten(), ignore_index=-100)
    return float(F.cross_entropy(cls_logits, torch.as_tensor(y)) + lam * l1)


def _multiple_choice_cases(tokens, encode):
    return [([7, 8, 9, 10, 11], [[20], [21, 22]], tokens, 8), ([7, 8], [[20], [21]], tokens, 16),
            (encode("Karen was assigned a roommate. Who moved out?"), [encode("Karen"), encode("Her roommate")],
             tokens, 10)]


def _l3_cases():
    g = torch.Generator().manual_seed(3)
    cases = []
    for lam in (0.0, 0.5, 2.0):
        cases.append((torch.randn(2, 2, generator=g).round(decimals=1), [1, 0],
                      torch.randn(2, 3, 4, generator=g).round(decimals=1), torch.randint(0, 4, (2, 3), generator=g),
                      [3, 1], lam))
    return cases


# -- notebook 10 -------------------------------------------------------------------------------------------------

def exact_count_masking_report(fn) -> list:
    """Run the reader's ``fn(ids, maskable, mask_id, vocab_size, g)`` on 400 rows and measure: whether every row had
    exactly round(0.15 · its maskable positions) chosen, then the shares of [MASK], random and unchanged among the
    chosen (a ``NotImplementedError`` of an unwritten function goes through to the check)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (400, 128), generator=g)
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, 100:] = torch.arange(400)[:, None] % 2 == 0  # rows of 128 and of 100 maskable positions
    corrupted, chosen = fn(ids, maskable, 4, 1000, g)
    exact = bool((chosen.sum(1) == (0.15 * maskable.sum(1)).round()).all()) and not bool((chosen & ~maskable).any())
    n = int(chosen.sum())
    return [exact, int((corrupted[chosen] == 4).sum()) / n,
            int(((corrupted != ids) & (corrupted != 4))[chosen].sum()) / n, int((corrupted == ids)[chosen].sum()) / n]


def _exact_masking_expected() -> list:
    # the random 10% may draw the original id back: 1 in 995 of them, counted as unchanged
    return [True, 0.8, 0.1 * 994 / 995, 0.1 + 0.1 / 995]


def truncated_segments(len_a: int, len_b: int, max_len: int) -> list[int]:
    """Notebook 10, exercise 2: the segment ids of ``[CLS] A [SEP] B [SEP]`` after cutting the pair to ``max_len``
    positions, the longer sentence (B on a tie) losing its last token first, one at a time."""
    from ..text.bert_data import truncate_pair

    a, b = truncate_pair([0] * len_a, [0] * len_b, max_len)
    return [0] * (len(a) + 2) + [1] * (len(b) + 1)


def right_to_left_pieces(word: str, vocab, prefix: str = "##", unk: str = "[UNK]") -> list[str]:
    """Notebook 10, exercise 3: greedy longest match from the *end* of the word: take the longest vocabulary piece
    that ends the rest of the word (a piece that does not start the word carries ``##``), then continue to its left;
    ``[UNK]`` when some position has no match."""
    pieces, end = [], len(word)
    while end > 0:
        for start in range(end):
            piece = word[start:end] if start == 0 else prefix + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk]
        pieces.insert(0, piece)
        end = start
    return pieces


# -- notebook 11 -------------------------------------------------------------------------------------------------

def rel_shift_ascending(x: torch.Tensor) -> torch.Tensor:
    """Notebook 11, exercise 1: ``x`` (T, K) whose column c holds distance c (ascending, the reverse of the order
    ``rel_shift`` reads) re-indexed so that entry (i, j) holds distance M + i − j (M = K − T), 0 for j > M + i."""
    T, K = x.shape
    M = K - T
    out = torch.zeros_like(x)
    for i in range(T):
        for j in range(M + i + 1):
            out[i, j] = x[i, M + i - j]
    return out


def _masked_on_allowed(fn):
    from ..models.transformer_xl import future_mask

    def run(x):
        T, K = x.shape
        return fn(x).masked_fill(future_mask(T, K - T), 0)
    return run


def memory_after(segments: int) -> tuple[tuple[int, int, int], int]:
    """Notebook 11, exercise 2: (shape of one layer's memory, number of memory tensors) of a 6-layer Transformer-XL
    (d_model 256, mem_len 100) that read ``segments`` segments of 40 tokens, batch 8, measured on the model."""
    from ..models.transformer_xl import TransformerXL, TransformerXLConfig

    model = TransformerXL(TransformerXLConfig(vocab_size=11, num_layers=6, num_heads=4, d_model=256, segment_len=40,
                                              mem_len=100)).eval()
    mems = None
    with torch.no_grad():
        for _ in range(segments):
            _, mems = model(torch.zeros(8, 40, dtype=torch.long), mems)
    return tuple(mems[0].shape), len(mems)


def size_for_loss_above_floor(law, above: float = 0.05) -> float:
    """Notebook 11, exercise 3: the N at which the fitted L(N) = a·N^(−α) + c comes within ``above`` nats of its
    floor c: a·N^(−α) = above, so N = (a / above)^(1/α)."""
    return (law.a / above) ** (1 / law.alpha)


# -- notebook 12 -------------------------------------------------------------------------------------------------

def tied_with_best(rows: Sequence[Mapping], dataset: str, n_labels: int) -> list[str]:
    """Notebook 12, exercise 3: the methods of ``dataset`` at ``n_labels`` whose mean is within two standard errors
    of the best row's (the standard error of a difference of independent means, √(se_a² + se_b²); a row with one
    seed counts its se as 0), the best included, sorted by name."""
    at = [r for r in rows if r["dataset"] == dataset and r["n_labels"] == n_labels]
    best = max(at, key=lambda r: r["mean"])
    return sorted(r["method"] for r in at
                  if best["mean"] - r["mean"] <= 2 * math.hypot(best["se"] or 0.0, r["se"] or 0.0))


def _tied_cases(rows):
    sizes = sorted({(r["dataset"], r["n_labels"]) for r in rows})
    picked = [s for s in sizes if s in {("IMDb", 100), ("IMDb", 1000), ("SST-2 dev", 1000)}] or sizes[:3]
    return [(rows, d, n) for d, n in picked]


EXERCISES: dict[str, Exercise] = {
    "09 multiple choice, cut": Exercise("function", multiple_choice_cut, cases=_multiple_choice_cases),
    "09 min-p": Exercise("function", min_p_kept, cases=lambda: [
        (torch.tensor([0.5, 0.2, 0.2, 0.06, 0.04]), 0.3), (torch.tensor([0.1, 0.6, 0.3]), 0.5),
        (torch.tensor([0.25, 0.25, 0.25, 0.25]), 0.9), (torch.tensor([0.05, 0.15, 0.8]), 0.05)],
        adapt=lambda fn: lambda probs, p: sorted(int(i) for i in fn(probs, p))),
    "09 L3 on a padded batch": Exercise("function", l3_batch, cases=_l3_cases,
                                        adapt=lambda fn: lambda *a: float(fn(*a)), rtol=1e-4, atol=1e-5),
    "10 exactly 15% per row": Exercise("function", lambda: _exact_masking_expected(), cases=lambda: [()],
                                       adapt=lambda fn: lambda: exact_count_masking_report(fn), atol=0.01),
    "10 segment ids after truncation": Exercise("function", truncated_segments, cases=lambda: [
        (1, 1, 512), (3, 2, 512), (7, 11, 12), (10, 3, 9), (4, 4, 8)]),
    "10 WordPiece from the right": Exercise("function", right_to_left_pieces, cases=lambda vocab: [
        (w, vocab) for w in ("unaffable", "playing", "plays", "unable", "xyz", "ua")],
        adapt=lambda fn: lambda w, v: fn(w, set(v))),
    "11 relative shift, ascending": Exercise("function", _masked_on_allowed(rel_shift_ascending), cases=lambda: [
        (torch.randn(3, 5, generator=torch.Generator().manual_seed(0)),),
        (torch.randn(4, 4, generator=torch.Generator().manual_seed(1)),),
        (torch.randn(2, 7, generator=torch.Generator().manual_seed(2)),)], adapt=_masked_on_allowed),
    "11 memory shape": Exercise("value", lambda: memory_after(2)[0]),
    "11 memory count": Exercise("value", lambda: memory_after(2)[1]),
    "11 size for a loss near the floor": Exercise("value", size_for_loss_above_floor, rtol=1e-3),
    "12 perplexity": Exercise("value", lambda: math.exp(400_000 / 82_430)),
    "12 z of a difference": Exercise("function", lambda a, se_a, b, se_b: (a - b) / math.hypot(se_a, se_b),
                                     cases=lambda: [(0.732, 0.011, 0.708, 0.006), (0.6, 0.02, 0.62, 0.01),
                                                    (0.5, 0.1, 0.5, 0.1)]),
    "12 tied with the best": Exercise("function", tied_with_best, cases=_tied_cases,
                                      adapt=lambda fn: lambda *a: sorted(fn(*a))),
}


def check(exercise: str, answer: Any, *inputs: Any, hint: str = "") -> Outcome:
    """Check the reader's ``answer`` to ``exercise`` (a key of :data:`EXERCISES`) against its hidden reference;
    ``inputs`` are the notebook's own objects the cases or the reference are built from. Prints PASS / NOT YET
    (the hint only after a wrong attempt) and returns whether it passed; an unknown name is refused."""
    if exercise not in EXERCISES:
        raise KeyError(f"no exercise {exercise!r}; known: {', '.join(sorted(EXERCISES))}")
    spec = EXERCISES[exercise]
    if spec.kind == "value":
        if answer is None or answer is Ellipsis:
            print(f"NOT YET {exercise}: no answer yet.")
            return Outcome(False)
        return exercises.check_value(exercise, answer, spec.reference(*inputs), spec.rtol, spec.atol, hint)
    if not callable(answer):
        print(f"NOT YET {exercise}: the function is not written yet.")
        return Outcome(False)
    return exercises.check_function(exercise, spec.adapt(answer), spec.reference, spec.cases(*inputs), spec.rtol,
                                    spec.atol, hint)
