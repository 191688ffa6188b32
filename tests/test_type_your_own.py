"""lmlib.course.type_your_own: what each type-your-own view computes from the student's sentence, on the shipped
checkpoints. (That each view reacts to typed text in the browser is checked by tests/browser.)"""

import pytest
import torch

from lmlib.course import type_your_own as Y
from lmlib.recipes import elmo as R


@pytest.fixture(scope="module")
def bert():
    return Y.shipped("bert")


@pytest.fixture(scope="module")
def gpt():
    return Y.shipped("gpt")


def test_fill_in_is_the_mlm_softmax_at_each_mask(bert):
    model, tok = bert
    rows = Y.fill_in(model, tok, "The acting was [MASK], but the [MASK] made no sense.", k=4)
    assert len(rows) == 2 and all(len(r) == 4 for r in rows)
    ids = Y.encode_with_masks(tok, "The acting was [MASK], but the [MASK] made no sense.")
    assert ids[0] == tok.token_to_id("[CLS]") and ids[-1] == tok.token_to_id("[SEP]")
    assert ids.count(tok.token_to_id("[MASK]")) == 2
    with torch.no_grad():
        logits = model(torch.tensor([ids])).mlm_logits[0]
    for row, position in zip(rows, [i for i, t in enumerate(ids) if t == tok.token_to_id("[MASK]")]):
        probs = logits[position].softmax(-1)
        assert [p for _, p in row] == sorted((p for _, p in row), reverse=True)
        for piece, p in row:
            assert p == pytest.approx(float(probs[tok.token_to_id(piece)]), abs=1e-6)
        assert row[0][1] == pytest.approx(float(probs.max()), abs=1e-6)
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        Y.fill_in(model, tok, "no blank here")


def test_four_tokenizations_cut_the_same_text(gpt, bert):
    text = "Schwarzenegger's unforgettable performance!!"
    cuts = Y.tokenizations(text, gpt[1], bert[1])
    assert list(cuts) == ["word-level", "character", "byte-level BPE (GPT)", "WordPiece (BERT)"]
    assert cuts["word-level"] == ["Schwarzenegger's", "unforgettable", "performance", "!", "!"]
    assert "".join(cuts["character"]) == text and len(cuts["character"]) == len(text)
    assert "".join(cuts["byte-level BPE (GPT)"]) == text          # byte-level BPE loses nothing
    assert len(cuts["byte-level BPE (GPT)"]) == len(gpt[1].encode(text))
    assert cuts["WordPiece (BERT)"] == bert[1].tokenize(text)
    assert any(p.startswith("##") for p in cuts["WordPiece (BERT)"])
    with pytest.raises(ValueError):
        Y.tokenizations("   ", gpt[1], bert[1])


def test_attention_gpt_is_causal_and_bert_reads_both_sides(gpt, bert):
    maps = Y.attention_maps("The plot was thin, but the actors saved it.", *gpt, *bert)
    gpt_maps, gpt_tokens = maps["GPT"]
    bert_maps, bert_tokens = maps["BERT"]
    assert "".join(gpt_tokens) == "The plot was thin, but the actors saved it."
    assert bert_tokens[0] == "[CLS]" and bert_tokens[-1] == "[SEP]"
    for layers, tokens in ((gpt_maps, gpt_tokens), (bert_maps, bert_tokens)):
        assert all(m.shape[-2:] == (len(tokens), len(tokens)) for m in layers)
        assert all(torch.allclose(m.sum(-1), torch.ones(())) for m in layers)
    assert len(gpt_maps) == gpt[0].config.num_layers and len(bert_maps) == bert[0].config.num_layers
    assert all(float(m[0].triu(1).abs().sum()) == 0 for m in gpt_maps)
    assert all(float(m[0].triu(1).sum()) > 0.1 for m in bert_maps)


def test_marked_word():
    assert Y.marked_word("She was the *star* of the show .", R.tokenize) == (
        ["She", "was", "the", "star", "of", "the", "show", "."], 3)
    for bad in ("no mark", "*two* *marks*"):
        with pytest.raises(ValueError, match="stars"):
            Y.marked_word(bad, R.tokenize)


def test_elmo_neighbours_are_occurrences_of_the_word_nearest_first():
    from lmlib.data import load_imdb

    bilm = Y.shipped("elmo")[0]
    pool = [s for text in load_imdb("test").texts[:600] for s in R.sentences_of(text)]
    word, n, hits = Y.contextual_neighbours(bilm, "I gave it one *star* because the acting was awful .", pool, k=5)
    assert word == "star" and n == sum(any(w.lower() == "star" for w in s) for s in pool) and len(hits) == 5
    sims = [s for s, _, _ in hits]
    assert sims == sorted(sims, reverse=True) and all(-1 <= s <= 1 for s in sims)
    assert all(sentence[i].lower() == "star" for _, sentence, i in hits)
    # the nearest occurrence, recomputed alone: its vector at layer 2 against the query's
    sim, sentence, i = hits[0]
    query = R.token_features(bilm, [R.tokenize("I gave it one star because the acting was awful .")])[4, 2]
    other = R.token_features(bilm, [sentence])[i, 2]
    assert float(torch.nn.functional.cosine_similarity(query, other, dim=0)) == pytest.approx(sim, abs=1e-4)
    with pytest.raises(ValueError, match="does not occur"):
        Y.contextual_neighbours(bilm, "a *zzqxj* word", pool)


def test_changing_one_word_moves_later_positions_left_to_right_and_both_sides_in_bert(gpt, bert):
    words, at = Y.marked_word("the film was slow at first but the *ending* made it worth every minute", R.tokenize)
    models = Y.direction_models(*gpt, *bert, Y.shipped("elmo")[0])
    expected = {"GPT (left to right)": (False, True), "BERT (both sides)": (True, True),
                "ELMo, forward LSTM": (False, True), "ELMo, backward LSTM": (True, False)}
    assert list(models) == list(expected)
    for name, (states, tokens_of) in models.items():
        tokens, pos, moved, other = Y.moved_positions(states, tokens_of, words, at)
        assert tokens[pos].strip() == "ending" and other != "ending" and moved[pos], name
        assert (any(moved[:pos]), any(moved[pos + 1:])) == expected[name], name
        if expected[name] == (True, True):
            assert all(moved), name


LIBRARY_MARK = "d3js.org v5.16.0"   # the first line of the vendored d3 (lmlib/course/vendor/d3.min.js)


def test_the_attention_box_stores_light_views(gpt, bert, monkeypatch):
    """Every drawing of the GPT/BERT attention box is kept in the notebook's widget state: its two views must not
    carry d3 and jQuery (~335 KB each time); the box shows the one copy in the cell's output instead."""
    import IPython.display

    views = Y.attention_pair_views("The plot was thin, but the actors saved it.", *gpt, *bert)
    stored = "".join(caption.data + view.data for caption, view in views)
    assert stored.count('<div id="bertviz-') == 2 and LIBRARY_MARK not in stored
    assert len(stored) < 150_000, f"one drawing of the box stores {len(stored):,} characters"
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    Y.attention_pair_box(*gpt, *bert)
    assert sum(LIBRARY_MARK in getattr(o, "data", "") for o in shown) == 1  # the libraries, once, outside the box


def test_no_notebook_stores_the_view_libraries_in_its_widget_state():
    """What notebook 10's box used to store (830 KB: two views with d3 and jQuery inlined in two Output widgets)."""
    import json
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        widgets = json.loads(path.read_text())["metadata"].get("widgets", {})
        state = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        for model_id, model in state.items():
            size = len(json.dumps(model))
            assert LIBRARY_MARK not in json.dumps(model), f"{path.name}: widget {model_id} stores d3"
            assert size < 150_000, f"{path.name}: widget {model_id} ({model['model_name']}) stores {size:,} characters"


def test_a_views_first_drawing_puts_a_plotly_figure_inside_its_output_not_in_the_cells(monkeypatch):
    """A plotly figure displays itself when IPython formats it: the first drawing of a view must take its bundle
    instead, or the figure lands above the widget, where no redraw replaces it (two figures after a slider moves)."""
    import ipywidgets as widgets
    import plotly.graph_objects as go
    import plotly.io as pio
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import HTML
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    monkeypatch.setattr(pio.renderers, "default", "plotly_mimetype")  # as in a kernel
    out = widgets.Output()
    with capture_output() as cell:
        Y.show(out, go.Figure(go.Scatter(y=[1, 3, 2])), HTML("<b>caption</b>"))
    assert not cell.outputs, "the figure went to the cell's output"
    figure, caption = out.outputs
    assert figure["data"]["application/vnd.plotly.v1+json"]["data"][0]["y"] == [1, 3, 2]
    assert caption["data"]["text/html"] == "<b>caption</b>"
    monkeypatch.setattr(pio.renderers, "default", "")  # no renderer (a plain script): refused, not shown empty
    with pytest.raises(ValueError, match="nothing to show"):
        Y.show(out, go.Figure())


class _Kernel:
    """Enough of IPython in a kernel for an ipywidgets ``Output`` to capture: a parent message, a traceback shown."""

    kernel = object()

    def __init__(self):
        self.tracebacks = []

    def get_parent(self):
        return {"header": {"msg_id": "the-slider-move"}}

    def set_parent(self, parent):
        pass

    def showtraceback(self, exc_tuple, tb_offset=0):
        self.tracebacks.append(exc_tuple[0].__name__)


def test_a_redraw_sets_the_drawing_as_state_and_captures_only_an_error(monkeypatch):
    """A capture (``with output``) makes the browser send the Output's contents back with the redraw's
    messages, and their echo can bring a figure back as an image: a redraw must not capture, an error must
    (its traceback shows under the view)."""
    import ipywidgets as widgets
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import HTML
    from ipywidgets.widgets import widget_output

    from lmlib.course import demos

    InteractiveShell.instance()
    kernel = _Kernel()
    monkeypatch.setattr(widget_output, "get_ipython", lambda: kernel)
    view = demos.stlr_widget()
    out = view.children[-1]
    assert isinstance(out, widgets.Output)
    captured = []
    out.observe(lambda change: captured.append(change["new"]), names="msg_id")
    before = out.outputs
    view.children[0].children[0].children[0].value = 2000   # T moves
    assert out.outputs != before and "cut = ⌊2000" in out.outputs[-1]["data"]["text/html"]
    assert captured == [], "the redraw captured the Output (with output:)"

    def broken(text):
        if text == "boom":
            raise RuntimeError(text)
        return HTML(text)

    box = Y.text_view(broken, "fine", "type", "text")
    out = box.children[1]
    out.observe(lambda change: captured.append(change["new"]), names="msg_id")
    box.children[0].value = "also fine"
    assert captured == [] and out.outputs[0]["data"]["text/html"] == "also fine"
    box.children[0].value = "boom"   # shown as a traceback under the box, raised no further
    assert kernel.tracebacks == ["RuntimeError"] and captured == ["the-slider-move", ""]
