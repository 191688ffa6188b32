"""The course's live views as one call each, for the instructor's demo page (``notebooks/demos.ipynb``, served
with Voilà so that no code shows; see the README, "Demo mode for instructors"). The type-your-own views are in
:mod:`lmlib.course.type_your_own`.
"""

from __future__ import annotations

import html

import torch


def _redrawn(controls: dict, draw, layout):
    """``layout(controls, output)``, where ``output`` shows ``draw(**values)`` (a tuple of things to display),
    redrawn whenever a control changes."""
    import ipywidgets as widgets

    from lmlib.course.type_your_own import redraw, show

    output = widgets.Output()  # Lab does not redraw a plotly figure sent as a display update: redraw into an Output

    def drawn():
        return draw(**{name: w.value for name, w in controls.items()})

    def moved(_change):  # after the cell, when the browser moves a control
        redraw(output, drawn)  # an error in the redraw shows as its traceback under the controls

    for control in controls.values():
        control.observe(moved, names="value")
    show(output, *drawn())  # the first drawing, during the cell: not captured, which stalls Voilà (see show)
    return layout(controls, output)


def stlr_widget():
    """Notebook 07's STLR view: T, cut_frac, ratio and η_max as sliders, the schedule redrawn (Howard & Ruder 2018,
    eq. 3)."""
    import ipywidgets as widgets
    from IPython.display import HTML

    from lmlib.course.figures import stlr_figure
    from lmlib.course.viz import on_step
    from lmlib.training.schedules import stlr, stlr_cut

    label = {"description_width": "initial"}
    controls = dict(T=widgets.IntSlider(1000, 10, 5000, 10, description="T", style=label),
                    cut_frac=widgets.FloatSlider(0.1, min=0.01, max=0.9, step=0.01, description="cut_frac", style=label),
                    ratio=widgets.FloatSlider(32, min=1, max=100, step=1, description="ratio", style=label),
                    eta_max=widgets.FloatLogSlider(0.01, base=10, min=-4, max=-1, description="η_max", style=label))

    def draw(T, cut_frac, ratio, eta_max):
        cut_frac, ratio, eta_max = on_step(cut_frac, 0.01), on_step(ratio, 1), float(f"{eta_max:.3g}")
        cut = stlr_cut(T, cut_frac)
        rates = [stlr(t, T, cut_frac, ratio, eta_max) for t in (0, min(cut, T - 1), T - 1)]
        return (stlr_figure(T, cut_frac, ratio, eta_max),
                HTML(f"cut = ⌊{T}·{cut_frac:g}⌋ = {cut}; η_0 = {rates[0]:.2e}; η_cut = {rates[1]:.2e}; "
                     f"η_(T-1) = {rates[2]:.2e}"))

    return _redrawn(controls, draw, lambda c, out: widgets.VBox([widgets.HBox(
        [widgets.VBox([c["T"], c["cut_frac"]]), widgets.VBox([c["ratio"], c["eta_max"]])]), out]))


def sampling_widget(model=None, tokenizer=None):
    """Notebook 09's sampling view: the next-token distribution after a prompt before and after temperature,
    top-k and top-p, and a continuation sampled with those settings (the shipped IMDb GPT by default)."""
    import ipywidgets as widgets
    import plotly.graph_objects as go
    from IPython.display import HTML

    from lmlib.course.type_your_own import shipped
    from lmlib.course.viz import LAYOUT, on_step
    from lmlib.models.gpt import apply_temperature, generate, top_k_filter, top_p_filter

    label = {"description_width": "initial"}
    controls = dict(prompt=widgets.Text("The acting was", description="prompt", continuous_update=False, style=label,
                                        layout=widgets.Layout(width="24em")),
                    temperature=widgets.FloatSlider(1.0, min=0.1, max=2.0, step=0.1, description="temperature τ",
                                                    style=label),
                    top_k=widgets.IntSlider(0, 0, 50, description="top-k (0 = off)", style=label),
                    top_p=widgets.FloatSlider(0.9, min=0.05, max=1.0, step=0.05, description="top-p", style=label),
                    seed=widgets.IntSlider(0, 0, 20, description="seed", style=label))

    @torch.no_grad()
    def draw(prompt, temperature, top_k, top_p, seed):
        gpt, bpe = (model, tokenizer) if model is not None else shipped("gpt")
        temperature, top_p = on_step(temperature, 0.1), on_step(top_p, 0.05)
        ids = torch.tensor([bpe.encode(prompt) or [bpe.token_to_id("<|endoftext|>")]])[:, -gpt.config.block_size:]
        z = gpt(ids)[0, -1]
        before = torch.softmax(z, -1)
        filtered = apply_temperature(z, temperature)
        if top_k:
            filtered = top_k_filter(filtered, top_k)
        filtered = top_p_filter(filtered, top_p)
        after = torch.softmax(filtered, -1)
        show = torch.topk(torch.maximum(before, after), 15).indices.flip(0)
        labels = [repr(bpe.piece(i)) for i in show.tolist()]
        fig = go.Figure([go.Bar(y=labels, x=before[show].tolist(), orientation="h", name="model (τ = 1, nothing cut)",
                                marker_color="lightgrey"),
                         go.Bar(y=labels, x=after[show].tolist(), orientation="h", name="after τ, top-k, top-p",
                                marker_color="steelblue")])
        kept = int((filtered > float("-inf")).sum())
        fig.update_layout(**{**LAYOUT, "height": 460}, barmode="group", xaxis_title="probability",
                          title=f"next token after {prompt!r}: τ = {temperature:g}, top-k = {top_k or 'off'}, "
                                f"top-p = {top_p:g} ({kept:,} of {len(bpe):,} tokens kept)")
        sample = generate(gpt, ids, 30, temperature=temperature, top_k=top_k or None, top_p=top_p, seed=seed)
        text = bpe.decode(sample[0, ids.size(1):].tolist())
        return fig, HTML(f"<b>seed {seed}:</b> <i>{html.escape(prompt)}</i>{html.escape(text)}")

    return _redrawn(controls, draw, lambda c, out: widgets.VBox([widgets.HBox(
        [widgets.VBox([c["prompt"], c["temperature"], c["seed"]]), widgets.VBox([c["top_k"], c["top_p"]])]), out]))


@torch.no_grad()
def gpt_attention_view(sentence: str = "The film was long, but the ending made it worth every minute.", model=None,
                       tokenizer=None):
    """Notebook 09's bertviz head view of the shipped IMDb GPT's attention on ``sentence`` (drawn offline)."""
    from lmlib.course.attention_views import head_view
    from lmlib.course.type_your_own import shipped
    from lmlib.models.gpt import check_inputs

    gpt, bpe = (model, tokenizer) if model is not None else shipped("gpt")
    ids = torch.tensor([bpe.encode(sentence)])
    check_inputs(gpt, ids)
    _, maps = gpt(ids, return_attentions=True)
    return head_view(maps, [bpe.piece(i) for i in ids[0].tolist()])


def review_sentences(n_reviews: int = 2000) -> list[list[str]]:
    """The first ``n_reviews`` IMDb test reviews cut into tokenised sentences (ELMo's tokenizer): the pool that
    :func:`lmlib.course.type_your_own.elmo_neighbours_box` searches, as notebook 08 builds it."""
    from lmlib.data import load_imdb
    from lmlib.recipes import elmo as R

    return [s for text in load_imdb("test").texts[:n_reviews] for s in R.sentences_of(text)]
