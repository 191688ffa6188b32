import pytest

from lmlib.course.figures import lr_find_figure, stlr_figure, timeline_figure
from lmlib.training.schedules import LRFinderResult, stlr_cut, unfreezing_timeline


def test_stlr_figure_marks_the_cut_and_the_peak():
    fig = stlr_figure(200, 0.1, 32.0, 0.01)
    assert fig.layout.shapes[0].x0 == stlr_cut(200, 0.1) == 20
    assert fig.data[1].x == (20,) and fig.data[1].y[0] == pytest.approx(0.01)


def test_lr_find_figure_draws_both_curves_on_a_log_axis():
    result = LRFinderResult([1e-4, 1e-3, 1e-2], [3.0, 2.0, 5.0], [3.0, 2.5, 3.0], 1e-3, "steepest descent")
    fig = lr_find_figure(result)
    assert [trace.name for trace in fig.data] == ["loss", "smoothed loss"] and fig.layout.xaxis.type == "log"


def test_timeline_figure_is_the_table_top_group_first():
    fig = timeline_figure(3, 4, 0.01, 2.6, names=["embedding", "LSTM 1", "head"])
    table = unfreezing_timeline(3, 4, 0.01, 2.6)
    assert [list(row) for row in fig.data[0].z] == [list(row) for row in table.flip(0).tolist()]
    assert list(fig.layout.yaxis.ticktext) == ["head", "LSTM 1", "embedding"]


def test_label_curve_figure_draws_each_mean_with_its_error_bar_on_a_log_axis():
    from lmlib.course.figures import label_curve_figure

    fig = label_curve_figure({"a": ([100, 1000], [0.6, 0.8], [0.01, None]), "b": ([100], [0.5], [0.02])}, "t", "acc")
    assert [t.name for t in fig.data] == ["a", "b"]
    assert list(fig.data[0].y) == [0.6, 0.8] and list(fig.data[0].error_y.array) == [0.01, 0.0]
    assert fig.layout.xaxis.type == "log"
    with pytest.raises(ValueError, match="2 label counts, 2 means and 1 errors"):
        label_curve_figure({"a": ([1, 2], [0.5, 0.6], [0.1])}, "t", "acc")
