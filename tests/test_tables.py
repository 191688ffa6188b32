"""lmlib.course.tables: every table of the course, checked cell by cell (numbers right-aligned, mean beside standard
error) against the committed JSON and against differences worked out by hand."""

import copy
import math
import re

import pytest

from lmlib.course import results
from lmlib.course import tables as T


def test_mean_se_formats_mean_and_standard_error():
    assert T.mean_se(0.76633, 0.00884) == "0.766 ± 0.009"
    assert T.mean_se(0.7, None, seeds=1) == "0.700 (1 seed)"
    assert T.mean_se(None) == ""
    assert T.mean_se(12.345, 0.5, digits=1) == "12.3 ± 0.5"
    assert T.mean_se(0.0123, 0.009, signed=True) == "+0.012 ± 0.009"  # a difference shows its sign
    assert T.mean_se(-0.0123, None, seeds=1, signed=True) == "-0.012 (1 seed)"


def test_by_labels_lays_out_one_line_per_method_and_one_column_per_label_count():
    rows = [dict(method="A <pretrained>", n_labels=100, mean=0.7, se=0.01, seeds=3, tokens=243_600_000),
            dict(method="A <pretrained>", n_labels=1000, mean=0.8, se=0.02, seeds=3, tokens=243_600_000),
            dict(method="B", n_labels=1000, mean=0.6, se=None, seeds=1, tokens=None),
            dict(method="C", n_labels=100, mean=0.5, se=None, seeds=1, tokens=7_548_392)]
    page = T.by_labels(rows, extra=[("tokens", "tokens")]).data
    cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>.*?</t[dh]>", page)]
    assert cells == ["method", "tokens", "100 labels", "1,000 labels",
                     "A &lt;pretrained&gt;", "244M", "0.700 ± 0.010", "0.800 ± 0.020",
                     "B", "–", "", "0.600 (1 seed)",
                     "C", "7.5M", "0.500 (1 seed)", ""]  # below ten million with one decimal
    numbers = re.findall(r"<td style='[^']*text-align:(\w+)'>", page)
    assert numbers == ["left", "right", "right", "right"] * 3  # the method left, every number right


def test_html_table_refuses_rows_of_the_wrong_width():
    with pytest.raises(ValueError) as error:
        T.html_table(["a", "b"], [["x"]])
    assert "2 cells" in str(error.value)


def cells(table) -> list[list[str]]:
    """The table's rows (header first) as lists of cell texts."""
    return [[re.sub("<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>.*?</t[dh]>", row)]
            for row in re.findall(r"<tr>.*?</tr>", table.data)]


def test_memory_table_has_a_cell_per_model_and_evaluation_memory():
    result = results.load("transformer_xl")
    table = cells(T.memory_table(result))
    memories = sorted({r["mem_len"] for rows in result["summary"].values() for r in rows})
    assert table[0] == ["model", "train s", *(f"memory {m}" for m in memories)]
    assert [line[0] for line in table[1:]] == [T.XL_NAMES[v] for v in result["summary"]]
    for line, (variant, rows) in zip(table[1:], result["summary"].items()):
        runs = result["runs"][variant]
        assert line[1] == f"{sum(r['train_seconds'] for r in runs) / len(runs):.0f}"
        by_memory = {r["mem_len"]: r for r in rows}
        for m, shown in zip(memories, line[2:]):
            if m in by_memory:  # by hand: "mean ± se" to three decimals
                assert shown == f"{by_memory[m]['mean']:.3f} ± {by_memory[m]['se']:.3f}"
            else:
                assert shown == ""
    assert "" in table[3]  # the vanilla model was evaluated at two memories only


def test_transformer_xl_result_refuses_runs_of_another_config(monkeypatch):
    from lmlib.recipes import gpt as G

    vocab = len(G.shakespeare_chars()[0])
    assert results.transformer_xl_result(vocab)["runs"]
    stale = copy.deepcopy(results.load("transformer_xl"))
    stale["runs"]["xl"][0]["config"]["d_model"] += 1
    monkeypatch.setattr(results, "load", lambda name: stale)
    with pytest.raises(RuntimeError) as error:
        results.transformer_xl_result(vocab)
    assert "xl" in str(error.value)


def test_speed_and_scaling_tables_show_the_committed_numbers():
    txl, scaling = results.load("transformer_xl"), results.load("scaling")
    speed = cells(T.speed_table(txl))
    assert [line[0] for line in speed[1:]] == [f"{r['context']:,}" for r in txl["speed"]]
    assert [line[3] for line in speed[1:]] == [f"{r['speedup']:.1f}×" for r in txl["speed"]]
    fixed = scaling["fixed_tokens"]["runs"]
    table = cells(T.scaling_table(fixed))
    assert [line[-1] for line in table[1:]] == [f"{r['valid_loss']:.3f}" for r in fixed]
    matched, best = scaling["compute_matched"]["runs"], scaling["compute_matched"]["best_by_valid_loss"]
    marked = [line for line in cells(T.compute_matched_table(matched, best))[1:] if line[-1] == "lowest"]
    assert len(marked) == 1 and marked[0][3] == f"{min(r['valid_loss'] for r in matched):.3f}"


def test_loss_by_memory_table_lays_models_by_memories():
    table = cells(T.loss_by_memory_table({"a": {0: 2.5, 64: 2.25}, "b": {64: 2.0}}))
    assert table == [["model", "memory 0", "memory 64"], ["a", "2.500", "2.250"], ["b", "", "2.000"]]


ROWS = [dict(dataset="IMDb", method="P", n_labels=100, mean=0.72, se=0.03, seeds=3),
        dict(dataset="IMDb", method="S", n_labels=100, mean=0.60, se=0.04, seeds=3),
        dict(dataset="IMDb", method="P", n_labels=1000, mean=0.80, se=0.02, seeds=3),
        dict(dataset="IMDb", method="S", n_labels=1000, mean=0.835, se=0.01, seeds=3),
        dict(dataset="IMDb", method="P", n_labels=5000, mean=0.85, se=None, seeds=1),
        dict(dataset="IMDb", method="S", n_labels=5000, mean=0.80, se=None, seeds=1),
        dict(dataset="SST-2 dev", method="P", n_labels=100, mean=0.50, se=0.01, seeds=3)]


def test_pretraining_gains_are_the_differences_worked_out_by_hand():
    gains = T.pretraining_gains(ROWS, [("P", "S")])
    assert [(g["dataset"], g["n_labels"]) for g in gains] == [("IMDb", 100), ("IMDb", 1000), ("IMDb", 5000)]
    # 0.72 - 0.60 = +0.12 ± sqrt(0.03² + 0.04²) = 0.05: more than two standard errors, pretraining helps
    assert gains[0]["difference"] == pytest.approx(0.12) and gains[0]["se"] == pytest.approx(0.05)
    assert gains[0]["verdict"] == "pretraining helps"
    # 0.80 - 0.835 = -0.035 ± sqrt(0.02² + 0.01²) = 0.0224: beyond one standard error, within two
    assert gains[1]["difference"] == pytest.approx(-0.035) and gains[1]["se"] == pytest.approx(math.sqrt(5e-4))
    assert gains[1]["verdict"] == "within noise"
    assert gains[2]["se"] is None and gains[2]["verdict"] == "one seed"
    table = cells(T.pretraining_gains_table(ROWS, [("P", "S")]))
    assert table[1] == ["IMDb", "100", "P", "S", "+0.120 ± 0.050", "pretraining helps"]
    assert table[3][4] == "+0.050 (1 seed)"


def test_a_gain_that_hurts_beyond_noise_says_so():
    rows = [dict(dataset="d", method="P", n_labels=10, mean=0.5, se=0.01, seeds=3),
            dict(dataset="d", method="S", n_labels=10, mean=0.6, se=0.01, seeds=3)]
    assert T.pretraining_gains(rows, [("P", "S")])[0]["verdict"] == "pretraining hurts"


def test_a_random_init_row_named_after_its_rate_is_found_by_its_start():
    rows = [dict(dataset="d", method="P", n_labels=10, mean=0.7, se=0.01, seeds=3),
            dict(dataset="d", method="S, at P's rate", n_labels=10, mean=0.6, se=0.01, seeds=3)]
    assert [g["scratch"] for g in T.pretraining_gains(rows, [("P", "S")])] == ["S, at P's rate"]
    two = rows + [dict(rows[1], method="S, at its own rate")]
    assert T.pretraining_gains(two, [("P", "S")]) == []  # two candidates and none named exactly: no guess
    assert [g["scratch"] for g in T.pretraining_gains(two + [dict(rows[1], method="S")], [("P", "S")])] == ["S"]


def test_every_pretrained_model_of_the_course_gets_a_gain_from_the_committed_rows():
    gains = T.pretraining_gains(results.transfer_rows())
    assert {g["pretrained"] for g in gains} == {pretrained for pretrained, _ in T.PRETRAINED_VS_SCRATCH}


def test_transfer_table_keeps_one_dataset_and_refuses_an_unknown_one():
    table = cells(T.transfer_table(ROWS, "SST-2 dev"))
    assert table == [["method", "100 labels"], ["P", "0.500 ± 0.010"]]
    with pytest.raises(ValueError) as error:
        T.transfer_table(ROWS, "SST-2 test")
    assert "'SST-2 test'" in str(error.value)


def test_ladder_table_shows_the_distance_to_the_published_figure():
    ladder = [dict(model="LSTM", notebook="03", test_ppl=112.8, parameters=4_650_000, seconds=2430,
                   published=(114.5, "Zaremba")),
              dict(model="KN5", notebook="01", test_ppl=141.2, parameters=None, seconds=1, published=None),
              dict(model="KN5 again", notebook="01", test_ppl=141.19, parameters=None, seconds=1,
                   published=(141.2, "Mikolov"))]
    table = cells(T.ladder_table(ladder))
    assert table[1] == ["LSTM", "03", "112.8", "4.65M", "40.5", "114.5", "-1.7"]
    assert table[2][3:] == ["counts", "0.0", "–", "–"]
    assert table[3][-1] == "+0.0"  # level with the paper, not "-0.0"


def test_ladder_table_names_the_script_for_a_row_no_notebook_trains():
    ladder = [dict(model="Transformer-XL", notebook="11-12", source="ptb_transformers", test_ppl=151.2,
                   parameters=2_000_000, seconds=600, published=(54.5, "Dai")),
              dict(model="LSTM", notebook="03", source="zaremba_small", test_ppl=112.8, parameters=4_650_000,
                   seconds=2430, published=None)]
    table = cells(T.ladder_table(ladder))
    assert "bench_ptb_transformers.py" in table[1][1] and "11" not in table[1][1]
    assert table[2][1] == "03"
