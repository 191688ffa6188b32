"""Course plotting helpers: labelled reference lines on linear and log axes, slider values for people."""

import math

import pytest

from lmlib.course.viz import line_plot, on_step, reference_line


def test_reference_line_label_sits_in_log10_units_on_a_log_axis():
    # plotly reads annotation positions on a log axis as log10: a label at y = 141.2 would stretch the
    # axis to 10^141. The line itself (a shape) stays in data units.
    fig = line_plot({"kn": ([1, 2, 3], [600.0, 200.0, 150.0])}, log_y=True)
    reference_line(fig, 141.2, "KN5: 141.2")
    (shape,), (label,) = fig.layout.shapes, fig.layout.annotations
    assert shape.y0 == shape.y1 == 141.2
    assert label.y == pytest.approx(math.log10(141.2)) and label.yref == "y" and label.text == "KN5: 141.2"


def test_reference_line_on_linear_axes_and_vertical_lines():
    fig = reference_line(line_plot({"a": [3.0, 2.0, 1.0]}), 2.5, "two and a half")
    assert fig.layout.shapes[0].y0 == 2.5 and fig.layout.annotations[0].y == 2.5
    fig = line_plot({"a": ([1e-4, 1e-2, 1.0], [3.0, 2.0, 5.0])})
    fig.update_xaxes(type="log")
    reference_line(fig, 1e-3, "suggested", axis="x")
    assert fig.layout.shapes[0].x0 == 1e-3 and fig.layout.annotations[0].x == pytest.approx(-3)
    with pytest.raises(ValueError, match="log axis"):
        reference_line(line_plot({"a": [1.0, 2.0]}, log_y=True), 0.0, "zero")
    with pytest.raises(ValueError, match="axis"):
        reference_line(fig, 1.0, "z", axis="z")


@pytest.mark.parametrize("value,step,expected", [(0.09999999999999999, 0.01, 0.1), (2.0000000000000004, 0.25, 2.0),
                                                 (5.000000000000001, 0.5, 5.0), (0.35000000000000003, 0.05, 0.35),
                                                 (7.0, 1, 7.0), (30.000000000000004, 10, 30.0)])
def test_on_step_removes_float_noise(value, step, expected):
    assert on_step(value, step) == expected
    assert f"{on_step(value, step):g}" == f"{expected:g}"
