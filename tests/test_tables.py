"""lmlib.course.tables: readable result tables (numbers right-aligned, mean beside standard error)."""

import re

import pytest

from lmlib.course import tables


def test_mean_se_formats_mean_and_standard_error():
    assert tables.mean_se(0.76633, 0.00884) == "0.766 ± 0.009"
    assert tables.mean_se(0.7, None, seeds=1) == "0.700 (1 seed)"
    assert tables.mean_se(None) == ""
    assert tables.mean_se(12.345, 0.5, digits=1) == "12.3 ± 0.5"
    assert tables.mean_se(0.0123, 0.009, signed=True) == "+0.012 ± 0.009"  # a difference shows its sign
    assert tables.mean_se(-0.0123, None, seeds=1, signed=True) == "-0.012 (1 seed)"


def test_by_labels_lays_out_one_line_per_method_and_one_column_per_label_count():
    rows = [dict(method="A <pretrained>", n_labels=100, mean=0.7, se=0.01, seeds=3, tokens=243_600_000),
            dict(method="A <pretrained>", n_labels=1000, mean=0.8, se=0.02, seeds=3, tokens=243_600_000),
            dict(method="B", n_labels=1000, mean=0.6, se=None, seeds=1, tokens=None),
            dict(method="C", n_labels=100, mean=0.5, se=None, seeds=1, tokens=7_548_392)]
    page = tables.by_labels(rows, extra=[("tokens", "tokens")]).data
    cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>.*?</t[dh]>", page)]
    assert cells == ["method", "tokens", "100 labels", "1,000 labels",
                     "A &lt;pretrained&gt;", "244M", "0.700 ± 0.010", "0.800 ± 0.020",
                     "B", "–", "", "0.600 (1 seed)",
                     "C", "7.5M", "0.500 (1 seed)", ""]  # below ten million with one decimal
    numbers = re.findall(r"<td style='[^']*text-align:(\w+)'>", page)
    assert numbers == ["left", "right", "right", "right"] * 3  # the method left, every number right


def test_html_table_refuses_rows_of_the_wrong_width():
    with pytest.raises(ValueError, match="need 2 cells"):
        tables.html_table(["a", "b"], [["x"]])
