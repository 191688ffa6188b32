"""Presets, seeding, plots, the source viewer, exercise checks, weight files and the PTB table."""

import random

import numpy as np
import pytest
import torch

import lmlib
from lmlib.course import exercises, leaderboard, presets, viz


def test_presets_follow_the_environment(monkeypatch):
    monkeypatch.delenv("LMLIB_PRESET", raising=False)
    assert presets.current() == "teach" and presets.choose(teach=1, full=13) == 1
    monkeypatch.setenv("LMLIB_PRESET", "FULL")
    assert presets.choose(teach=1, full=13) == 13
    monkeypatch.setenv("LMLIB_PRESET", "fast")
    with pytest.raises(ValueError, match="teach, full"):
        presets.current()


def test_seed_everything_reproduces_all_three_generators():
    def draw():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    lmlib.seed_everything(5)
    first = draw()
    lmlib.seed_everything(5)
    assert draw() == first
    with pytest.raises(ValueError):
        lmlib.seed_everything(-1)


def test_pick_device():
    assert lmlib.pick_device("cpu").type == "cpu"
    assert lmlib.pick_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA"):
            lmlib.pick_device("cuda")


def test_heatmap_keeps_matrix_orientation_and_checks_labels():
    z = torch.tensor([[0.1, 0.9], [0.7, 0.3], [0.5, 0.5]])
    fig = viz.heatmap(z, x=["a", "b"], y=["p", "q", "r"])
    assert np.allclose(fig.data[0].z, z.numpy())
    assert list(fig.layout.yaxis.ticktext) == ["p", "q", "r"] and list(fig.layout.yaxis.tickvals) == [0, 1, 2]
    assert fig.layout.yaxis.autorange == "reversed"
    # a repeated token keeps its own row and column ("the cat saw the dog" has two "the")
    words = "the cat saw the dog".split()
    repeated = viz.heatmap(torch.eye(5), x=words, y=words)
    assert list(repeated.layout.xaxis.ticktext) == words and len(repeated.data[0].z) == 5
    with pytest.raises(ValueError, match="3 column labels for 2 columns"):
        viz.heatmap(z, x=["a", "b", "c"])
    with pytest.raises(ValueError, match="2-D"):
        viz.heatmap(torch.zeros(2, 2, 2))


def test_line_and_bar_plots():
    fig = viz.line_plot({"a": [1, 2, 3], "b": ([0, 10], [5, 6])}, log_y=True)
    assert list(fig.data[1].x) == [0, 10] and fig.layout.yaxis.type == "log"
    with pytest.raises(ValueError, match="2 x values but 1"):
        viz.line_plot({"c": ([1, 2], [3])})
    assert list(viz.bar_plot({"x": 1.0, "y": 2.5}).data[0].text) == ["1.0", "2.5"]


def test_show_source_displays_the_real_code():
    assert viz.source(lmlib.Vocab.encode).lstrip().startswith("def encode")
    tail = viz.source(viz.heatmap, start="annotate =", lines=1)
    assert tail.strip().startswith("annotate =") and "\n" not in tail
    with pytest.raises(ValueError, match="does not occur"):
        viz.show_source(viz.heatmap, start="no such text")


def test_show_source_displays_wherever_it_is_called_and_returns_nothing(monkeypatch):
    # A returned display object shows only as the last expression of a cell: the listing must be displayed by
    # the call itself, and nothing returned (else a last-line call would show it twice).
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    assert viz.show_source(lmlib.Vocab.encode) is None
    assert viz.show_source(viz.heatmap, start="annotate =", lines=1) is None
    assert [type(o).__name__ for o in shown] == ["Code", "Code"]
    assert shown[0].data == viz.source(lmlib.Vocab.encode) and shown[1].data.strip().startswith("annotate =")


def test_exercise_checks_print_pass_or_not_yet_and_never_raise(capsys):
    assert bool(exercises.check_value("sum", 3.0, 3.0)) is True
    assert bool(exercises.check_value("sum", None, 3.0)) is False
    assert bool(exercises.check_value("vec", torch.ones(2), torch.ones(2))) is True
    assert bool(exercises.check_value("vec", torch.ones(3), torch.ones(2))) is False

    def unfinished(x):
        raise NotImplementedError

    def wrong(x):
        return x + 1

    def crashes(x):
        return x / "a"

    square = lambda x: x * x  # noqa: E731
    assert bool(exercises.check_function("sq", square, lambda x: x ** 2, [(2,), (3.5,)])) is True
    assert bool(exercises.check_function("sq", unfinished, square, [(2,)])) is False
    assert bool(exercises.check_function("sq", wrong, square, [(2,)])) is False
    assert bool(exercises.check_function("sq", crashes, square, [(2,)])) is False
    assert repr(exercises.check_value("x", 1, 1)) == "PASS"
    lines = capsys.readouterr().out.splitlines()[:-1]
    assert [line.split()[0] + " " + line.split()[1] for line in lines] == [
        "PASS sum", "NOT YET", "PASS vec", "NOT YET", "PASS sq", "NOT YET", "NOT YET", "NOT YET"]
    assert "expected 4" in lines[6] and "TypeError" in lines[7]


def test_check_prediction_compares_with_the_measured_value_and_shows_it_only_after_a_prediction(capsys):
    assert bool(exercises.check_prediction("loss", 0.5, 0.62, tolerance=0.15, why="it leaks")) is True
    assert bool(exercises.check_prediction("loss", 0.5, 0.66, tolerance=0.15)) is False
    assert bool(exercises.check_prediction("loss", 0.5, 0.34, tolerance=0.15)) is False
    assert bool(exercises.check_prediction("loss", None, 0.62, tolerance=0.15, why="it leaks", details="a table")) is False
    assert bool(exercises.check_prediction("loss", "a lot", 0.62, tolerance=0.15)) is False
    assert bool(exercises.check_prediction("best", " ULMFiT ", "ulmfit")) is True
    assert bool(exercises.check_prediction("best", "BERT", "ULMFiT", details="the table")) is False
    out = capsys.readouterr().out.splitlines()
    verdicts = [line.split()[0] for line in out if not line.startswith(("Why:", "the table"))]
    assert verdicts == ["RIGHT", "WRONG", "WRONG", "NO", "WRONG", "RIGHT", "WRONG"]
    assert out[0] == ("RIGHT loss: you predicted 0.5, the run measured 0.62 "
                      "(off by 0.12; within 0.15 counts as right).")
    assert out[1] == "Why: it leaks"
    assert out[4] == exercises.NO_PREDICTION.format(name="loss")  # no value, no why, no details
    assert "0.62" not in out[4] and out[5].startswith("WRONG") and "not a number" in out[5]
    assert out[-1] == "the table"
    with pytest.raises(ValueError):
        exercises.check_prediction("loss", 0.5, 0.6)


def test_check_names_its_exercise_and_hides_the_reference(capsys):
    tiny = [["a", "b", "a", "<eos>"], ["b", "a", "<eos>"]]
    assert bool(exercises.check("01 add-k bigram", None, tiny)) is False
    assert bool(exercises.check("01 add-k bigram", 0.5, tiny)) is True
    assert bool(exercises.check("01 add-k bigram", 0.4, tiny, hint="HINT-C")) is False

    def unfinished(X, H, C, cell):
        raise NotImplementedError

    assert bool(exercises.check("03 one coupled-gate LSTM step", unfinished)) is False

    def cifg(X, H, C, cell):  # written from Greff et al. (2017): the input gate is 1 - the forget gate
        f = torch.sigmoid(X @ cell.W_xf + H @ cell.W_hf + cell.b_f)
        o = torch.sigmoid(X @ cell.W_xo + H @ cell.W_ho + cell.b_o)
        c = f * C + (1 - f) * torch.tanh(X @ cell.W_xc + H @ cell.W_hc + cell.b_c)
        return o * torch.tanh(c), c

    def plain_lstm(X, H, C, cell):
        return cell(X, (H, C))

    assert bool(exercises.check("03 one coupled-gate LSTM step", cifg)) is True
    assert bool(exercises.check("03 one coupled-gate LSTM step", plain_lstm)) is False
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["NOT YET 01 add-k bigram: no answer yet.", "PASS 01 add-k bigram",
                       "NOT YET 01 add-k bigram: got 0.4. HINT-C"]
    assert out[3] == "NOT YET 03 one coupled-gate LSTM step: the function is not written yet."
    with pytest.raises(KeyError, match="no exercise named"):
        exercises.check("99 nothing", 1.0)


@pytest.mark.parametrize("measured, tolerance", [(0.0068, 0.01), (-0.3, 0.3), (2.0, 5.0)])
def test_a_prediction_that_zero_would_pass_is_refused(measured, tolerance):
    with pytest.raises(ValueError) as err:
        exercises.check_prediction("gap", 0.5, measured, tolerance=tolerance)
    assert repr(tolerance) in str(err.value)
    assert bool(exercises.check_prediction("gap", 0.0, measured, tolerance=abs(measured) / 2)) is False


def test_a_yes_no_prediction_is_refused_since_guessing_passes_half_the_time():
    with pytest.raises(ValueError):
        exercises.check_prediction("repeats more", True, True)


def test_a_hint_is_shown_only_after_a_wrong_attempt(capsys):
    def unfinished(x):
        raise NotImplementedError

    exercises.check_value("sum", None, 3.0, hint="HINT-A")
    exercises.check_function("sq", unfinished, lambda x: x * x, [(2,)], hint="HINT-B")
    assert "HINT" not in capsys.readouterr().out
    exercises.check_value("sum", 4.0, 3.0, hint="HINT-A")
    exercises.check_function("sq", lambda x: x + 1, lambda x: x * x, [(2,)], hint="HINT-B")
    out = capsys.readouterr().out
    assert "HINT-A" in out and "HINT-B" in out


@pytest.fixture
def fresh_leaderboard():
    leaderboard.forget()
    yield leaderboard
    leaderboard.forget()


def test_leaderboard_records_measured_rows_beside_committed_and_published_ones(fresh_leaderboard):
    leaderboard.record("my KN5", 150.0, "01", "teach")
    leaderboard.record("my KN5", 145.0, "01", "teach")
    rows = leaderboard.table()
    mine = [r for r in rows if r["model"] == "my KN5"]
    assert len(mine) == 1 and mine[0]["test_ppl"] == 145.0 and "this notebook (01)" in mine[0]["source"]
    assert [r["test_ppl"] for r in rows] == sorted((r["test_ppl"] for r in rows), reverse=True)
    assert any(r["source"].startswith("published") and r["test_ppl"] == 141.2 for r in rows)
    committed = [r for r in rows if r["source"].startswith("committed")]
    assert [r["source"] for r in committed] == ["committed: notebook 01's script, lmlib/results/ngram.json"]
    assert len(leaderboard.show().data[0].cells.values[0]) == len(rows)
    with pytest.raises(ValueError, match="greater than 1"):
        leaderboard.record("bad", 0.5, "01", "teach")


def test_leaderboard_shows_only_this_notebook_and_the_committed_results_up_to_it(fresh_leaderboard):
    """A row another notebook recorded earlier in the same process never shows, and a committed result is labelled
    as one, with its own number."""
    leaderboard.record("an LSTM of notebook 03", 200.0, "03", "teach")
    leaderboard.record("a bigram of notebook 01", 400.0, "01", "teach")
    rows = leaderboard.table()
    assert "an LSTM of notebook 03" not in {r["model"] for r in rows}
    assert not any("zaremba_small" in r["source"] or "nnlm" in r["source"] for r in rows)  # notebooks 02, 03
    three = leaderboard.table(notebook="03")
    assert {r["model"] for r in three if "this notebook" in r["source"]} == {"an LSTM of notebook 03"}
    assert {r["source"].split("lmlib/results/")[-1] for r in three if r["source"].startswith("committed")} == {
        "ngram.json", "nnlm.json", "zaremba_small.json"}
    zaremba = next(r for r in three if "zaremba_small" in r["source"])
    from lmlib.course import results

    assert zaremba["test_ppl"] == results.load("zaremba_small")["test_ppl"]
    leaderboard.record("AWD-LSTM, the ablation script", 772.4, "06", "teach", source="awd_ablation")
    [row] = [r for r in leaderboard.table(notebook="06") if r["model"] == "AWD-LSTM, the ablation script"]
    assert row["source"].startswith("committed: lmlib/results/awd_ablation.json")
    with pytest.raises(FileNotFoundError):
        leaderboard.record("x", 100.0, "06", "teach", source="no_such_result")
    with pytest.raises(ValueError, match="two-digit"):
        leaderboard.record("x", 100.0, "6", "teach")


@pytest.mark.parametrize("value,message", [
    (float("inf"), "infinite"), (float("nan"), "NaN"), (0.0, "greater than 1"), (-3.0, "greater than 1"),
    (1.0, "greater than 1"), ("a lot", "must be a number"),
])
def test_leaderboard_refuses_what_is_not_a_perplexity(fresh_leaderboard, value, message):
    leaderboard.record("fine", 150.0, "01", "teach")
    with pytest.raises((ValueError, TypeError), match=message):
        leaderboard.record("bad", value, "01", "teach")
    assert list(leaderboard.measured()) == ["fine"]  # nothing half-written


def test_leaderboard_accepts_numpy_and_torch_scalars(fresh_leaderboard):
    leaderboard.record("numpy", np.float64(150.5), "01", "teach")
    leaderboard.record("torch", torch.tensor(120.25), "02", "teach")
    assert {m: r["test_ppl"] for m, r in leaderboard.measured().items()} == {"numpy": 150.5, "torch": 120.25}
