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


# -- nbval's checks on the browser test's own run (nbval_checks) ------------------------------------------------

def _tiny_notebook(cells):
    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    for source, tags, outputs in cells:
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": tags} if tags else {})
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text) for text in outputs]
        cell.execution_count = 1 if outputs else None
        nb.cells.append(cell)
    return nb


def test_nbval_checks_agree_with_nbval_itself(tmp_path):
    # The reference: nbval run by pytest on a notebook whose checked cells' stored outputs are right (up to a
    # sanitized timing), wrong, or unchecked; the same notebook executed by nbconvert and judged by nbval_problems.
    import copy
    import subprocess
    import sys

    import nbformat
    from nbval_checks import SANITIZE_FILE, nbval_problems
    from notebook_client import notebook_client

    nb = _tiny_notebook([('print("took 1.5 s")', ["nbval-check-output"], ["took 2.0 s\n"]),   # sanitized: same
                         ("print(1 + 1)", ["nbval-check-output"], ["3\n"]),                  # wrong
                         ("print(2 + 2)", [], ["5\n"]),                                      # not checked
                         ("print(3 + 3)", ["nbval-ignore-output"], ["7\n"])])                # ignored
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "-o", "addopts=", "--nbval-lax", "--nbval-sanitize-with", str(SANITIZE_FILE), str(path)],
                         capture_output=True, text=True, cwd=tmp_path)
    failed = sorted(int(m) for m in __import__("re").findall(r"FAILED \S+::Cell (\d+)", run.stdout))
    assert failed == [1], run.stdout[-2000:]
    executed = copy.deepcopy(nb)
    notebook_client(executed, kernel_name="python3", timeout=60).execute()
    problems = nbval_problems(nb, executed)
    assert [cell for cell, _ in problems] == failed
    assert "stored '3\\n', this run '2\\n'" in problems[0][1]


def test_nbval_checks_find_errors_unrun_cells_and_stale_references_and_read_labs_json():
    import copy

    from nbval_checks import covered, nbval_problems

    stored = _tiny_notebook([("print(1)", ["nbval-check-output"], ["1\n"]), ("x = 1", [], [])])
    run = copy.deepcopy(stored)
    run.cells[0].outputs[0].text = ["1", "\n"]   # JupyterLab's model may keep multi-line strings as lists
    run.cells[1].execution_count = 2
    assert nbval_problems(stored, run) == []
    broken = copy.deepcopy(run)
    broken.cells[1].outputs = [{"output_type": "error", "ename": "NameError", "evalue": "y", "traceback": []}]
    assert nbval_problems(stored, broken) == [(1, "nbval: cell execution caused an exception: NameError: y")]
    unrun = copy.deepcopy(run)
    unrun.cells[1].execution_count = None
    assert nbval_problems(stored, unrun) == [(1, "nbval: the cell did not run")]
    stale = copy.deepcopy(stored)
    stale.cells[1].outputs = run.cells[0].outputs
    assert nbval_problems(stale, run) == [(1, "nbval: unrun reference cell has outputs")]
    assert covered(stored)
    skipping = copy.deepcopy(stored)
    skipping.cells[1].metadata["tags"] = ["nbval-skip"]
    assert not covered(skipping)   # nbval itself runs a notebook that skips or expects exceptions


def test_a_wait_for_a_kernel_message_is_taken_in_slices_up_to_the_same_deadline():
    """A message that a long poll missed is found by the next one-second slice; no message still times out."""
    import asyncio
    from queue import Empty

    from notebook_client import sliced

    asked = []

    async def arrives_on_the_third_ask(timeout=None):
        asked.append(timeout)
        if len(asked) < 3:
            await asyncio.sleep(timeout / 100)   # a poll that misses the wake-up, shortened for the test
            raise Empty
        return {"msg": "reply"}

    assert asyncio.run(sliced(arrives_on_the_third_ask)(timeout=600)) == {"msg": "reply"}
    assert asked == [1.0, 1.0, 1.0]
    asked.clear()
    assert asyncio.run(sliced(arrives_on_the_third_ask)(timeout=None)) == {"msg": "reply"}
    assert asked == [1.0, 1.0, 1.0]

    async def never(timeout=None):
        asked.append(timeout)
        await asyncio.sleep(timeout)
        raise Empty

    asked.clear()
    with pytest.raises(Empty):
        asyncio.run(sliced(never, slice_s=0.05)(timeout=0.12))
    assert 3 <= len(asked) <= 4 and max(asked) == 0.05 and min(asked) < 0.05
