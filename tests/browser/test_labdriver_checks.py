"""The browser test's own judgements (float noise, axis ranges, changes on open), checked without a browser."""

import pytest
from labdriver import (
    _check_axis,
    _noise,
    changes_on_open,
    check_images,
    check_listings,
    expected_images,
    expected_listings,
)


@pytest.mark.parametrize("text", ["cut_frac=0.09999999999999999", "p = 1.9999999999999998", "5.000000000000001 s",
                                  "shift=+0.30000000000000004"])
def test_float_noise_is_found(text):
    assert _noise(text)


@pytest.mark.parametrize("text", ["cut_frac=0.1", "perplexity 141.2", "1.0000000000", "lr 1e-05", "0.99",
                                  "seed 1000000000", "100000000000 tokens"])
def test_plain_numbers_are_not_noise(text):
    assert _noise(text) is None


def axis(kind, lo, hi, r0, r1, min_pos=None):
    return {"name": "yaxis", "type": kind, "range": [r0, r1],
            "data": {"min": lo, "max": hi, "minPos": min_pos if min_pos is not None else lo}}


def test_log_axis_within_two_decades_passes():
    assert _check_axis(axis("log", 1e-3, 10, -3.2, 1.3)) is None


def test_log_axis_stretched_by_an_annotation_fails():
    assert "decades beyond" in _check_axis(axis("log", 1e-3, 10, -3.2, 6.0))


def test_axis_that_cuts_off_data_fails():
    assert "cuts off" in _check_axis(axis("linear", 0, 100, 0, 50))
    assert "cuts off" in _check_axis(axis("log", 1e-3, 10, -1, 1.1))


def test_linear_axis_from_zero_passes_and_a_far_stretch_fails():
    assert _check_axis(axis("linear", 100, 101, 0, 110)) is None
    assert "exceeds" in _check_axis(axis("linear", 0.1, 1.0, 0, 1e4))


def test_reversed_and_category_axes():
    assert _check_axis(axis("linear", 0, 9, 9.5, -0.5)) is None
    assert _check_axis({"name": "xaxis", "type": "category", "range": [-0.5, 3.5], "data": None}) is None


def test_changes_on_open_ignores_what_lab_writes_itself():
    disk = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3"}},
            "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": ["x = 1\n", "x"],
                       "outputs": [{"output_type": "display_data", "metadata": {},
                                    "data": {"application/vnd.plotly.v1+json": {"data": [], "layout": {}}}}],
                       "execution_count": 1}]}
    model = {"nbformat": 4, "nbformat_minor": 5,
             "metadata": {"kernelspec": {"name": "python3"}, "language_info": {"name": "python"}},
             "cells": [{"id": "a", "cell_type": "code", "metadata": {"trusted": True}, "source": "x = 1\nx",
                        "outputs": [{"output_type": "display_data", "metadata": {},
                                     "data": {"application/vnd.plotly.v1+json": {"data": [], "layout": {}},
                                              "image/png": "iVBOR"}}],
                        "execution_count": 1}]}
    assert changes_on_open(disk, model) == []
    model["metadata"]["kernelspec"] = {"name": "python2"}
    assert changes_on_open(disk, model) == ['metadata.kernelspec {"name": "python3"} -> {"name": "python2"}']


def test_every_show_source_call_must_show_one_listing():
    notebook = {"cells": [
        {"cell_type": "markdown", "source": ["show_source(f) in prose is not a call"]},
        {"cell_type": "code", "source": ["show_source(f)\n", "show_source(g)\n", "x = 1  # show_source(h)"]},
        {"cell_type": "code", "source": ["%time y = 2\n", "show_source(h, start='def')"]},
        {"cell_type": "code", "source": ["print('no listing')"]},
    ]}
    expected = expected_listings(notebook)
    assert expected == {1: 2, 2: 1}
    assert check_listings(expected, [0, 2, 1, 0]) == []
    # A display object returned by the first of two calls shows nothing; a listing shown twice is wrong too.
    assert [cell for cell, _ in check_listings(expected, [0, 1, 1, 0])] == [1]
    assert [cell for cell, _ in check_listings(expected, [0, 2, 2])] == [2]
    assert "showed 0 source listing" in check_listings(expected, [0, 2])[0][1]


def test_images_referenced_in_markdown_are_found():
    notebook = {"cells": [{"cell_type": "markdown", "source": ["# Title\n", "![a diagram](figures/a.svg)\n"]},
                          {"cell_type": "code", "source": ["x = '![not](b.svg)'"]},
                          {"cell_type": "markdown", "source": ['<img src="figures/c.svg" width="300">']}]}
    assert expected_images(notebook) == {0: ["figures/a.svg"], 2: ["figures/c.svg"]}


def test_an_image_that_did_not_render_is_a_problem():
    expected = {1: ["figures/a.svg"]}
    drawn = [[], [{"src": "/files/notebooks/figures/a.svg?_xsrf=1", "natural": 780, "width": 780, "height": 410}]]
    assert check_images(expected, drawn) == []
    missing = [[], [{"src": "/files/notebooks/figures/a.svg", "natural": 0, "width": 16, "height": 16}]]
    assert "did not render" in check_images(expected, missing)[0][1]
    assert "no <img>" in check_images(expected, [[], []])[0][1]
    hidden = [[], [{"src": "figures/a.svg", "natural": 780, "width": 0, "height": 0}]]
    assert "not visible" in check_images(expected, hidden)[0][1]
