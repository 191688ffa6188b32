"""Views that take the student's own sentence: type, press Enter, see what the model does with it.

Each ``*_box`` returns one ipywidgets box: a ``Text`` to type into (CSS class :data:`TYPE_CLASS`, for the browser
test, which also types its ``placeholder``) above an ``Output`` redrawn when the text is submitted. Models are the
shipped checkpoints, loaded once on first use (:func:`shipped`), or the ones a notebook already holds, passed in.
The work behind each view is a plain function that the tests call without a browser.
"""

from __future__ import annotations

import html
import importlib
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import torch

from ..models.bert import check_inputs as check_bert_inputs

TYPE_CLASS = "lmlib-type-your-own"
MESSAGE = "⚠"   # starts what a view shows instead of a result (the browser test fails on it after typing an example)
MARK = re.compile(r"\*([^*\s]+)\*")   # the word a view is about, written *like this*


# -- models, loaded once --------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def shipped(name: str):
    """The shipped checkpoint ``name`` ("gpt", "bert" or "elmo"), loaded on first use and kept: ``(model,
    tokenizer)`` for GPT and BERT, ``(bilm, vocab)`` for ELMo."""
    if name not in ("gpt", "bert", "elmo"):
        raise ValueError(f"no shipped model {name!r}; choose 'gpt', 'bert' or 'elmo'")
    return tuple(importlib.import_module(f"lmlib.recipes.{name}").load_pretrained()[:2])


# -- the box every view shares ---------------------------------------------------------------------------------

def text_view(render: Callable[[str], object], value: str, placeholder: str, description: str,
              width: str = "44em"):
    """A ``VBox`` of a ``Text`` (class :data:`TYPE_CLASS`) and an ``Output`` showing ``render(text)``, redrawn on
    submit. ``render`` returns something to display (HTML, a figure, a widget) or raises ``ValueError`` with a
    message for the student; other errors show as tracebacks (the browser test fails on them)."""
    import ipywidgets as widgets
    from IPython.display import HTML

    box = widgets.Text(value=value, placeholder=placeholder, description=description, continuous_update=False,
                       style={"description_width": "initial"}, layout=widgets.Layout(width=width))
    box.add_class(TYPE_CLASS)
    out = widgets.Output()

    def shown():
        try:
            return render(box.value)
        except ValueError as err:
            return HTML(f"<p style='color:#b5400a'>{MESSAGE} {html.escape(str(err))}</p>")

    def typed(_change):  # run when the browser sends the new text, after the cell
        redraw(out, lambda: (shown(),))

    box.observe(typed, names="value")
    show(out, shown())  # the first drawing, during the cell: not captured (see show); an error is the cell's
    return widgets.VBox([box, out])


def show(output, *objects) -> None:
    """Make the ipywidgets ``Output`` show ``objects`` (anything ``display`` takes), in place of what it showed:
    a view's first drawing, while its cell runs, and every redraw.

    The outputs are set as the widget's state, not captured with ``with output: display(...)``. Under Voilà a
    capture during the cell can leave the cell's execute_reply unseen and the page stalled at "Executing N of M"
    (voila-dashboards/voila#1428); after the cell, a capture can bring a drawn figure back as a bare image (see
    :func:`redraw`)."""
    output.outputs = tuple({"output_type": "display_data", "data": data, "metadata": metadata}
                           for data, metadata in map(_formatted, objects))


def redraw(output, make: Callable[[], Sequence]) -> None:
    """Show the objects ``make()`` returns in ``output``, after the cell (a control moved, a text submitted).

    Only an error is captured (``with output``), so that its traceback shows under the view. A capture registers a
    hook in the browser that sends the Output's contents back to the kernel for each message the redraw causes,
    the new drawing's own state among them. What it sends is the drawing on the page, with the PNG plotly caches
    in a drawn figure; the kernel's echo of it can bring that drawing back as a bare image (no alt text, live only
    once the pointer enters it). A drawing is set as state (see :func:`show`)."""
    try:
        show(output, *make())
    except Exception:
        with output:   # in a kernel the Output shows the traceback and the error goes no further
            raise


def _formatted(obj) -> tuple[dict, dict]:
    """``obj``'s mime bundle and metadata, as ``display`` would send them, without displaying anything.

    A plotly figure displays itself (``_ipython_display_``) when IPython's formatter reaches it, which would put
    it in the cell's own output, above the widget, where no redraw replaces it; its ``_repr_mimebundle_`` is the
    same bundle, returned instead."""
    from IPython.core.interactiveshell import InteractiveShell

    if hasattr(obj, "_ipython_display_") and hasattr(obj, "_repr_mimebundle_"):
        bundle = obj._repr_mimebundle_()
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
    else:
        data, metadata = InteractiveShell.instance().display_formatter.format(obj)
    if not data:
        raise ValueError(f"{type(obj).__name__} has nothing to show in a view (no display representation)")
    return data, metadata or {}


def _table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    head = "".join(f"<th style='text-align:left'>{h}</th>" for h in header) if header else ""
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def _chip(text: str, background: str = "#eef2f7") -> str:
    shown = html.escape(text).replace(" ", "␣") or "∅"
    return (f"<span style='display:inline-block;margin:1px 2px;padding:0 4px;border-radius:3px;"
            f"background:{background};font-family:monospace'>{shown}</span>")


# -- BERT: fill in the blank ------------------------------------------------------------------------------------

def encode_with_masks(tokenizer, text: str) -> list[int]:
    """``[CLS] ... [SEP]`` ids of ``text``, each ``[MASK]`` typed in it kept as the mask token (WordPiece alone
    would cut it into "[", "mask", "]")."""
    ids = [tokenizer.token_to_id("[CLS]")]
    for k, part in enumerate(text.split("[MASK]")):
        if k:
            ids.append(tokenizer.token_to_id("[MASK]"))
        ids.extend(tokenizer.encode(part))
    return ids + [tokenizer.token_to_id("[SEP]")]


@torch.no_grad()
def fill_in(bert, tokenizer, text: str, k: int = 5) -> list[list[tuple[str, float]]]:
    """For each ``[MASK]`` in ``text``, the ``k`` most likely pieces under BERT's MLM head (Devlin et al. 2019,
    §3.1), ``(piece, p)``."""
    if "[MASK]" not in text:
        raise ValueError("write [MASK] (capitals, in brackets) where a word should be guessed")
    ids = torch.tensor([encode_with_masks(tokenizer, text)])
    check_bert_inputs(bert, ids)
    logits = bert(ids).mlm_logits[0]
    rows = []
    for position in (ids[0] == tokenizer.token_to_id("[MASK]")).nonzero().flatten().tolist():
        top = logits[position].softmax(-1).topk(k)
        rows.append([(tokenizer.vocab[i], p) for p, i in zip(top.values.tolist(), top.indices.tolist())])
    return rows


def fill_in_box(bert=None, tokenizer=None, k: int = 5,
                value: str = "The acting was [MASK], but the plot made no sense.",
                placeholder: str = "I watched this [MASK] last night and loved every [MASK] of it."):
    """Type a sentence with ``[MASK]`` in it: BERT's top ``k`` pieces per blank, with probabilities."""
    from IPython.display import HTML

    def render(text):
        model, tok = (bert, tokenizer) if bert is not None else shipped("bert")
        rows = [[f"[MASK] {n + 1}", " ".join(_chip(f"{piece} {p:.2f}") for piece, p in guesses)]
                for n, guesses in enumerate(fill_in(model, tok, text, k))]
        return HTML(_table(rows, ["blank", f"top {k} pieces, probability"]))

    return text_view(render, value, placeholder, "sentence with [MASK]:")


# -- GPT and BERT attention, side by side -----------------------------------------------------------------------

@torch.no_grad()
def attention_maps(text: str, gpt=None, bpe=None, bert=None, wordpiece=None):
    """``{"GPT": (maps, tokens), "BERT": (maps, tokens)}`` for ``text``: each model's attention, one
    ``(1, heads, T, T)`` tensor per layer, and its tokens (BERT's with ``[CLS]`` and ``[SEP]``)."""
    if not text.strip():
        raise ValueError("type a sentence")
    gpt, bpe = (gpt, bpe) if gpt is not None else shipped("gpt")
    bert, wordpiece = (bert, wordpiece) if bert is not None else shipped("bert")
    ids = bpe.encode(text)[-gpt.config.block_size:]
    _, gpt_maps = gpt(torch.tensor([ids]), return_attentions=True)
    ids_b = ([wordpiece.token_to_id("[CLS]")] + wordpiece.encode(text))[: bert.config.block_size - 1]
    ids_b.append(wordpiece.token_to_id("[SEP]"))
    bert_maps = bert(torch.tensor([ids_b]), return_attentions=True).attentions
    return {"GPT": (gpt_maps, [bpe.piece(i) for i in ids]),
            "BERT": (bert_maps, [wordpiece.vocab[i] for i in ids_b])}


def attention_pair_views(text: str, gpt=None, bpe=None, bert=None, wordpiece=None):
    """``[(caption, view)]`` for GPT and BERT on ``text``: a line of HTML saying how far each model reads, and its
    bertviz head view made with ``libraries="shared"`` (it draws with
    :func:`~lmlib.course.attention_views.library_script`'s copy of d3 and jQuery, shown once on the page)."""
    from IPython.display import HTML

    from lmlib.course.attention_views import head_view

    shown = []
    for name, (layers, tokens) in attention_maps(text, gpt, bpe, bert, wordpiece).items():
        where = "left only (causal mask)" if name == "GPT" else "both directions"
        future = sum(float(m[0].triu(1).sum()) for m in layers)
        shown.append((HTML(f"<b>{name}</b>: {len(tokens)} tokens, {where}; attention on later tokens, summed over "
                           f"layers and heads: {future:.1f}"), head_view(layers, tokens, libraries="shared")))
    return shown


def attention_pair_box(gpt=None, bpe=None, bert=None, wordpiece=None,
                       value: str = "The plot was thin, but the actors saved it.",
                       placeholder: str = "She said the film was bad, and she was right."):
    """Type a sentence: GPT's attention (causal: lines only go back) beside BERT's (both directions).

    Every drawing is kept in the notebook's widget state, so the views are light (``libraries="shared"``) and draw
    with the one copy of d3 and jQuery this call displays (:func:`~lmlib.course.attention_views.library_script`)."""
    import ipywidgets as widgets
    from IPython.display import display

    from lmlib.course.attention_views import library_script

    def render(text):
        columns = []
        for caption, view in attention_pair_views(text, gpt, bpe, bert, wordpiece):
            column = widgets.Output()
            show(column, caption, view)  # not `with column: display(...)`, which can stall Voilà (see show)
            columns.append(column)
        return widgets.HBox(columns)

    display(library_script())
    return text_view(render, value, placeholder, "your sentence:")


# -- four tokenizers -----------------------------------------------------------------------------------------

WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]")


def tokenizations(text: str, bpe=None, wordpiece=None) -> dict[str, list[str]]:
    """``text`` cut four ways: words (letter runs and punctuation), characters, byte-level BPE pieces (the
    shipped GPT's tokenizer) and WordPiece pieces (the shipped BERT's, lower-cased, ``##`` continues a word)."""
    if not text.strip():
        raise ValueError("type a sentence")
    bpe = bpe if bpe is not None else shipped("gpt")[1]
    wordpiece = wordpiece if wordpiece is not None else shipped("bert")[1]
    return {"word-level": WORD.findall(text),
            "character": list(text),
            "byte-level BPE (GPT)": [bpe.piece(i) for i in bpe.encode(text)],
            "WordPiece (BERT)": wordpiece.tokenize(text)}


def tokenizers_box(bpe=None, wordpiece=None,
                   value: str = "Schwarzenegger's unforgettable performance!!",
                   placeholder: str = "The screenplay was unwatchably long: 3½ hours."):
    """Type a sentence: how word-level, character, byte-level BPE and WordPiece tokenizers cut it, with counts."""
    from IPython.display import HTML

    def render(text):
        rows = [[name, str(len(pieces)), "".join(_chip(p) for p in pieces)]
                for name, pieces in tokenizations(text, bpe, wordpiece).items()]
        return HTML(_table(rows, ["tokenizer", "tokens", "pieces (␣ is a space)"]))

    return text_view(render, value, placeholder, "your sentence:")


# -- ELMo: nearest contextual neighbours ---------------------------------------------------------------------

def marked_word(text: str, tokenize: Callable[[str], list[str]]) -> tuple[list[str], int]:
    """The tokens of ``text`` without the ``*`` marks, and the position of the word written ``*like this*``."""
    marks = MARK.findall(text)
    if len(marks) != 1:
        raise ValueError("mark exactly one word with stars, like *this*")
    before = tokenize(text[: MARK.search(text).start()])
    return tokenize(MARK.sub(r"\1", text)), len(before)


@torch.no_grad()
def contextual_neighbours(bilm, text: str, pool: Sequence[Sequence[str]], layer: int = 2, k: int = 5,
                          max_occurrences: int = 200):
    """The ``k`` occurrences of the ``*marked*`` word of ``text`` in ``pool`` (tokenised sentences; the first
    ``max_occurrences`` that hold the word, matched without case) nearest to it by cosine similarity of ELMo's
    layer ``layer`` (Peters et al. 2018): ``(word, occurrences found, [(similarity, sentence, position)])``."""
    from lmlib.recipes import elmo as R

    tokens, at = marked_word(text, R.tokenize)
    word = tokens[at]
    found = []
    for sentence in pool:
        hits = [i for i, w in enumerate(sentence) if w.lower() == word.lower()]
        if hits:
            found.append((list(sentence), hits[0]))
            if len(found) >= max_occurrences:
                break
    if not found:
        raise ValueError(f"'{word}' does not occur in the {len(pool):,} review sentences searched; try another word")
    sentences = [tokens] + [s for s, _ in found]
    features = R.token_features(bilm, sentences)[:, layer]  # (n_words, 2d)
    starts = torch.tensor([0] + [len(s) for s in sentences[:-1]]).cumsum(0)
    vectors = features[starts + torch.tensor([at] + [i for _, i in found])]
    sims = torch.nn.functional.cosine_similarity(vectors[1:], vectors[:1], dim=-1)
    top = sims.topk(min(k, len(found)))
    return word, len(found), [(s, found[i][0], found[i][1]) for s, i in zip(top.values.tolist(), top.indices.tolist())]


def elmo_neighbours_box(pool: Sequence[Sequence[str]], bilm=None, layer: int = 2, k: int = 5,
                        value: str = "I gave it one *star* because the acting was awful .",
                        placeholder: str = "She was the *star* of the show and everyone loved her ."):
    """Type a sentence with one word in stars: its nearest occurrences in ``pool`` by ELMo's layer ``layer``."""
    from IPython.display import HTML

    def render(text):
        model = bilm if bilm is not None else shipped("elmo")[0]
        word, n, hits = contextual_neighbours(model, text, pool, layer, k)
        rows = []
        for sim, sentence, i in hits:
            lo = max(0, i - 7)
            context = html.escape(" ".join(sentence[lo:i])) + f" <b>{html.escape(sentence[i])}</b> " + \
                html.escape(" ".join(sentence[i + 1: i + 8]))
            rows.append([f"{sim:.2f}", f"{'… ' if lo else ''}{context} …"])
        return HTML(f"<p>'{html.escape(word)}': {n} occurrences searched; the {len(hits)} nearest at layer {layer}:</p>"
                    + _table(rows, ["cosine", "occurrence"]))

    return text_view(render, value, placeholder, "sentence, one *word* in stars:", width="48em")


# -- which positions move when one word changes ----------------------------------------------------------------

REPLACEMENTS = ("awful", "great", "boring", "good", "bad", "fine", "dull", "nice")


@torch.no_grad()
def moved_positions(states: Callable[[list[str]], torch.Tensor], tokens_of: Callable[[list[str]], list[str]],
                    words: list[str], at: int):
    """Replace ``words[at]`` by the first word of :data:`REPLACEMENTS` that keeps the token count and is not the
    word itself; ``(tokens, changed position, moved)``: ``moved[t]`` is whether position t's top-layer state
    (``states(words)``, ``(T, d)``) changed. Raises ``ValueError`` when no replacement keeps the length."""
    base = tokens_of(words)
    for other in REPLACEMENTS:
        if other == words[at].lower():
            continue
        swapped = words[:at] + [other] + words[at + 1:]
        changed = tokens_of(swapped)
        if len(changed) == len(base):
            break
    else:
        raise ValueError(f"no replacement for '{words[at]}' keeps the number of tokens; mark another word")
    pos = next((t for t in range(len(base)) if base[t] != changed[t]), None)
    if pos is None:
        raise ValueError("the replacement did not change any token")
    return base, pos, _moved(states(swapped), states(words)).tolist(), other


def _moved(after: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """Whether each position's state changed: ``(..., T, d)`` -> ``(..., T)``."""
    return (after - before).abs().amax(dim=-1) > 1e-5


@torch.no_grad()
def context_directions(states: Callable[[object], torch.Tensor], original, changed, position: int) -> dict[str, bool]:
    """Which positions' representations move when the token at ``position`` is replaced: ``{"earlier": ...,
    "later": ...}``. ``states(x)`` maps an input to ``(1, T, d)`` representations; ``changed`` is ``original`` with
    the token at ``position`` replaced. A left-to-right model moves only later positions, a bidirectional one both."""
    moved = _moved(states(changed), states(original))[0]  # (T,)
    if moved.numel() <= position:
        raise ValueError(f"position {position} is outside the {moved.numel()} positions of the input")
    return {"earlier": bool(moved[:position].any()), "later": bool(moved[position + 1:].any())}


def direction_models(gpt=None, bpe=None, bert=None, wordpiece=None, bilm=None):
    """``{name: (states, tokens_of)}`` for GPT, BERT and ELMo's two LSTMs, as :func:`moved_positions` takes them:
    ``states(words)`` is the top layer at each token ``(T, d)``, ``tokens_of(words)`` the tokens it reads."""
    from lmlib.models.elmo import encode_sentences

    g, b = (gpt, bpe) if gpt is not None else shipped("gpt")
    m, w = (bert, wordpiece) if bert is not None else shipped("bert")
    e = bilm if bilm is not None else shipped("elmo")[0]

    def elmo(direction):
        def states(words):
            out = e(encode_sentences([words], e.config.max_chars))
            return getattr(out, direction)[-1][0, 1:-1]  # drop <bos>, <eos>
        return states, lambda words: list(words)

    return {
        "GPT (left to right)": (lambda ws: g.hidden_states(torch.tensor([b.encode(" ".join(ws))]))[0][0],
                                lambda ws: [b.decode([i]) for i in b.encode(" ".join(ws))]),
        "BERT (both sides)": (lambda ws: m(torch.tensor([w.encode(" ".join(ws))])).hidden_states[-1][0],
                              lambda ws: w.tokenize(" ".join(ws))),
        "ELMo, forward LSTM": elmo("forward"),
        "ELMo, backward LSTM": elmo("backward"),
    }


def context_direction_box(gpt=None, bpe=None, bert=None, wordpiece=None, bilm=None,
                          value: str = "the film was slow at first but the *ending* made it worth every minute",
                          placeholder: str = "my friends said the *music* was the best part of the movie"):
    """Type a sentence with one word in stars: it is replaced by another word, and each model's row shows which
    positions' top-layer states moved (red), around the changed one (yellow). A left-to-right model moves only
    the positions after it; a bidirectional one moves both sides."""
    from IPython.display import HTML

    from lmlib.recipes import elmo as R

    def render(text):
        words, at = marked_word(text, R.tokenize)
        rows = []
        for name, (states, tokens_of) in direction_models(gpt, bpe, bert, wordpiece, bilm).items():
            tokens, pos, moved, other = moved_positions(states, tokens_of, words, at)
            sides = " and ".join(side for side, hit in (("earlier", any(moved[:pos])), ("later", any(moved[pos + 1:])))
                                 if hit) or "no"
            chips = "".join(_chip(t, "#ffe066" if i == pos else "#ffa8a8" if moved[i] else "#eef2f7")
                            for i, t in enumerate(tokens))
            rows.append([name, f"'{html.escape(words[at])}' → '{other}' moves the {sides} positions", chips])
        return HTML(_table(rows, ["model", "verdict", "positions (yellow: changed, red: moved)"]))

    return text_view(render, value, placeholder, "sentence, one *word* in stars:", width="48em")
