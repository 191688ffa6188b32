"""lmlib.course.transfer_gains: the points of notebook 12's gain-against-tokens figure, checked against the result
files they are read from, and refused when a file belongs to another checkpoint or model."""

import copy
import math

import pytest

from lmlib.course import results, transfer_gains
from lmlib.course.transfer_gains import gains_figure, gains_table
from lmlib.course.transfer_gains import transfer_gains as gains


def _summary(name, n_labels, **match):
    rows = [r for r in results.load(name)["summary"] if r["n_labels"] == n_labels
            and all(r.get(k) == v for k, v in match.items())]
    assert len(rows) == 1, (name, match)
    return rows[0]


def _pick(points, model, budget, kind, source=None):
    hits = [p for p in points if (p["model"], p["budget"], p["kind"]) == (model, budget, kind)
            and source in (None, p["source"])]
    assert len(hits) == 1, (model, budget, kind, hits)
    return hits[0]


@pytest.fixture(scope="module")
def points():
    return gains(1000)


def test_every_checkpoint_measured_is_a_point(points):
    seen = {(p["model"], p["budget"]) for p in points}
    assert seen == {(m, b) for m in ("GPT", "BERT", "ELMo", "ULMFiT") for b in ("CPU", "GPU")}
    assert {(p["model"], p["budget"]) for p in points if p["kind"] == "frozen"} >= {("ELMo", "CPU"), ("ELMo", "GPU")}
    tokens = {(p["model"], p["budget"]): p["tokens"] for p in points if p["source"] not in ("ulmfit_cpu_milestones",
              "ulmfit_imdb") and not p["source"].startswith("ulmfit_stage_c_")}  # the checkpoints first shipped, GPU runs
    assert tokens[("GPT", "GPU")] == results.load("gpu_transfer_gpt")["checkpoint"]["tokens_seen"]
    assert tokens[("GPT", "CPU")] == results.load("gpt_finetune_short_pretraining")["checkpoint_report"]["tokens_seen"]
    assert tokens[("ULMFiT", "GPU")] == results.load("gpu_transfer_ulmfit")["checkpoint"]["tokens_seen"]
    assert tokens[("ELMo", "GPU")] == results.load("gpu_transfer_elmo")["checkpoint"]["tokens_seen"]
    assert tokens[("ULMFiT", "CPU")] < tokens[("ULMFiT", "GPU")] and tokens[("BERT", "CPU")] < tokens[("BERT", "GPU")]


def test_fine_tuned_gains_are_the_files_differences(points):
    for model, budget, name, condition, match in (
            ("GPT", "GPU", "gpt_finetune", "gpt", {}), ("GPT", "CPU", "gpt_finetune_short_pretraining", "gpt", {}),
            ("BERT", "GPU", "bert_finetune", "bert", {"task": "imdb"}),
            ("BERT", "CPU", "bert_finetune_short_pretraining", "bert", {"task": "imdb"}),
            ("ULMFiT", "GPU", "gpu_transfer_ulmfit", "ulmfit", {})):
        a, b = _summary(name, 1000, condition=condition, **match), _summary(name, 1000, condition="scratch", **match)
        p = _pick(points, model, budget, "fine-tuned")
        assert p["gain"] == pytest.approx(a["mean"] - b["mean"]) and p["source"] == name
        assert p["se"] == pytest.approx(math.hypot(a["se"], b["se"]))
    for name in ("ulmfit_imdb", "ulmfit_imdb_short_pretraining"):  # the shipped stage (b) and the one it replaced
        a = _summary(name, 1000, variant="ulmfit", max_len=128)
        b = _summary(name, 1000, variant="scratch", max_len=128)
        assert _pick(points, "ULMFiT", "CPU", "fine-tuned", name)["gain"] == pytest.approx(a["mean"] - b["mean"])
    shipped, replaced = (_pick(points, "ULMFiT", "CPU", "fine-tuned", name)["tokens"]
                         for name in ("ulmfit_imdb", "ulmfit_imdb_short_pretraining"))
    assert shipped == results.tokens_read(results.shipped_report("ulmfit_imdb")) > 50 * replaced
    assert replaced == results.load("ulmfit_imdb_short_pretraining")["checkpoint_report"]["tokens_seen"]


def test_frozen_gain_is_best_layer_minus_random_best(points):
    probes = [r for r in results.load("gpu_transfer_elmo")["summary"] if r["n_labels"] == 1000]
    best = {i: max(r["mean"] for r in probes if r["init"] == i) for i in ("pretrained", "random")}
    assert _pick(points, "ELMo", "GPU", "frozen")["gain"] == pytest.approx(best["pretrained"] - best["random"])
    bert_cpu = _pick(points, "BERT", "CPU", "frozen")
    assert bert_cpu["se"] is None and bert_cpu["seeds"] == 1  # one seed: no error bar


def test_bag_of_words_gap_reads_the_same_text(points):
    gpt = _pick(points, "GPT", "GPU", "fine-tuned")
    bow = _summary("bow_baseline", 1000, truncation="model_view")
    assert gpt["bow_gap"] == pytest.approx(bow["mean"] - gpt["baseline"]) and gpt["bow_source"] == "bow_baseline"
    assert _pick(points, "ULMFiT", "CPU", "fine-tuned", "ulmfit_imdb")["bow_source"] == "bow_ulmfit_imdb"
    assert _pick(points, "BERT", "GPU", "fine-tuned")["bow_gap"] is None  # BERT reads other tokens than the GPT's cut


def _swap(monkeypatch, name, replace):
    load = results.load

    def fake(asked):
        data = copy.deepcopy(load(asked))
        return replace(data) if asked == name else data
    monkeypatch.setattr(results, "load", fake)


def test_a_file_of_another_model_is_refused(monkeypatch):
    _swap(monkeypatch, "gpu_transfer_ulmfit", lambda data: results.load("gpu_transfer_elmo"))
    with pytest.raises(RuntimeError, match="elmo"):
        gains(1000)


def _wrong_gpt(data):
    data["checkpoint_sha256"] = "0" * 64
    return data


def _wrong_ulmfit(data):
    data["checkpoint"]["imdb_sha256"] = "0" * 64
    return data


def _wrong_elmo(data):
    data["checkpoint"]["sha256"]["elmo_imdb.safetensors"] = "0" * 64
    return data


@pytest.mark.parametrize("name, replace", [("gpt_finetune", _wrong_gpt), ("ulmfit_imdb", _wrong_ulmfit),
                                           ("gpu_transfer_elmo", _wrong_elmo)])
def test_a_file_of_another_checkpoint_is_refused(monkeypatch, name, replace):
    _swap(monkeypatch, name, replace)
    with pytest.raises(RuntimeError, match="another checkpoint"):
        gains(1000)


def test_a_baseline_at_chance_leaves_its_point_out(monkeypatch):
    def at_chance(data):
        for r in data["summary"]:
            if r["condition"] == "scratch" and r["n_labels"] == 1000:
                r["mean"] = 0.5
        return data
    _swap(monkeypatch, "gpu_transfer_ulmfit", at_chance)
    assert not [p for p in gains(1000) if (p["model"], p["budget"], p["kind"]) == ("ULMFiT", "GPU", "fine-tuned")]


def test_figure_has_two_log_panels_error_bars_and_bow_lines(points):
    fig = gains_figure(points)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    markers = [t for t in fig.data if t.mode == "lines+markers"]
    drawn = sorted((t.name, len(t.x)) for t in markers)
    assert sum(n for _, n in drawn) == len(points)
    assert all(t.error_y.array is not None for t in markers)
    dashed = [t for t in fig.data if t.mode == "lines"]
    assert len(dashed) == sum(p["bow_gap"] is not None for p in points)
    assert all(t.line.dash == "dash" for t in dashed)
    with pytest.raises(ValueError):
        gains_figure([])


def test_table_has_a_row_per_point(points):
    html = gains_table(points).data if hasattr(gains_table(points), "data") else str(gains_table(points))
    assert html.count("<tr") == len(points) + 1
    assert transfer_gains.CHANCE < 0.6


def test_the_shipped_elmo_probe_is_best_layer_minus_random_best(points):
    data = results.load("elmo_sentiment_128")
    (ckpt,) = data["checkpoints"]
    layers = [r for r in ckpt["summary"] if r["n_labels"] == 1000 and str(r["feature"]).isdigit()]
    best = {i: max(r["mean"] for r in layers if r["init"] == i) for i in ("pretrained", "random")}
    cpu = _pick(points, "ELMo", "CPU", "frozen", "elmo_sentiment_128")
    assert cpu["gain"] == pytest.approx(best["pretrained"] - best["random"]) and cpu["tokens"] == ckpt["tokens_seen"]
    bow = next(r for r in data["bow"]["elmo"]["summary"] if r["n_labels"] == 1000)
    assert cpu["bow_gap"] == pytest.approx(bow["mean"] - best["random"])


def test_the_cpu_elmo_run_is_a_point_per_milestone_at_its_tokens(points):
    data = results.load("elmo_cpu_milestones")
    frozen = [p for p in points if p["source"] == "elmo_cpu_milestones"]
    assert len(frozen) == len(data["checkpoints"]) >= 2
    for p, ckpt in zip(frozen, data["checkpoints"]):
        rows = [r for r in ckpt["summary"] if r["n_labels"] == 1000 and str(r["feature"]).isdigit()]
        best = {i: max(r["mean"] for r in rows if r["init"] == i) for i in ("pretrained", "random")}
        assert p["gain"] == pytest.approx(best["pretrained"] - best["random"]) and p["budget"] == "CPU"
        assert p["tokens"] == ckpt["tokens_seen"]
    shipped = _pick(points, "ELMo", "CPU", "frozen", "elmo_sentiment_128")
    assert max(p["tokens"] for p in frozen) < shipped["tokens"]  # the run went on past its last milestone


def _wrong_elmo_probe(data):
    data["checkpoints"][0]["sha256"]["elmo_imdb.safetensors"] = "0" * 64
    return data


def _ulmfit_probe(data):
    data["checkpoints"][0]["kind"] = "ulmfit"
    return data


def test_a_probe_of_another_checkpoint_or_model_is_refused(monkeypatch):
    with monkeypatch.context() as m:
        _swap(m, "elmo_sentiment_128", _wrong_elmo_probe)
        with pytest.raises(RuntimeError, match="another checkpoint"):
            gains(1000)
    _swap(monkeypatch, "elmo_sentiment_128", _ulmfit_probe)
    with pytest.raises(RuntimeError, match="ulmfit"):
        gains(1000)


def test_probe_table_has_every_feature_of_both_inits_and_the_bag_of_words():
    data = results.load("elmo_sentiment_128")
    html = transfer_gains.probe_table("ELMo")
    html = getattr(html, "data", str(html))
    features = {r["feature"] for r in data["checkpoints"][0]["summary"]}
    assert html.count("<tr") == 1 + 2 * len(features) + 1
    assert "bag of words" in html and "random init" in html


def test_the_long_cpu_ulmfit_run_is_a_point_per_milestone_with_its_start_tokens(points):
    data = results.load("ulmfit_cpu_milestones")
    start = {report["sha256"]["ulmfit_imdb.safetensors"]: report["start"]["tokens_seen"]
             for name, (report, _) in results.cpu_milestones().items() if name.startswith("ulmfit_imdb/")}
    frozen = [p for p in points if p["source"] == "ulmfit_cpu_milestones"]
    assert len(frozen) == len(data["checkpoints"]) >= 2
    for p, ckpt in zip(frozen, data["checkpoints"]):
        assert p["tokens"] == ckpt["tokens_seen"] + start[ckpt["sha256"]["ulmfit_imdb.safetensors"]] > ckpt["tokens_seen"]
        rows = [r for r in ckpt["summary"] if r["n_labels"] == 1000]
        best = {i: max(r["mean"] for r in rows if r["init"] == i) for i in ("pretrained", "random")}
        assert p["gain"] == pytest.approx(best["pretrained"] - best["random"]) and p["kind"] == "frozen"
    bow = next(r for r in data["bow"]["ulmfit"]["summary"] if r["n_labels"] == 1000)
    assert frozen[-1]["bow_gap"] == pytest.approx(bow["mean"] - frozen[-1]["baseline"])


def test_stage_c_on_the_long_cpu_run_is_the_files_difference(points):
    from lmlib.course.ulmfit_cpu import FINAL, stage_c

    data = stage_c(FINAL)
    p = _pick(points, "ULMFiT", "CPU", "fine-tuned", f"ulmfit_stage_c_{data['checkpoint_sha256'][:12]}")
    by = {s["condition"]: s for s in data["summary"] if s["n_labels"] == 1000}
    assert p["gain"] == pytest.approx(by["ulmfit"]["mean"] - by["scratch"]["mean"])
    assert p["bow_gap"] == pytest.approx(by[f"bow_{by['ulmfit']['max_len']}"]["mean"] - by["scratch"]["mean"])
    report, _ = results.cpu_milestones()[FINAL]
    assert p["tokens"] == report["tokens_seen"] + report["start"]["tokens_seen"]


def _gain(model, tokens, gain, se, kind="frozen"):
    return dict(model=model, tokens=tokens, gain=gain, se=se, kind=kind, seeds=3 if se is not None else 1)


def test_matched_budgets_pair_two_models_within_the_factor_in_one_panel():
    pts = [_gain("ULMFiT", 160e6, 0.08, 0.009), _gain("BERT", 170e6, 0.12, 0.011), _gain("GPT", 400e6, 0.17, 0.016),
           _gain("ULMFiT", 100e6, 0.07, 0.009), _gain("BERT", 150e6, 0.05, None, kind="fine-tuned")]
    pairs = transfer_gains.matched_budgets(pts)
    seen = {(p["a"]["model"], p["a"]["tokens"], p["b"]["model"], p["b"]["tokens"]) for p in pairs}
    assert seen == {("ULMFiT", 160e6, "BERT", 170e6), ("ULMFiT", 100e6, "BERT", 170e6)}  # GPT is 2.5x away
    (close,) = [p for p in pairs if p["a"]["tokens"] == 160e6]
    assert close["difference"] == pytest.approx(-0.04) and close["se"] == pytest.approx(math.hypot(0.009, 0.011))
    assert close["beyond_noise"]  # 0.04 > 2 x 0.0142
    assert len(transfer_gains.matched_budgets(pts, within=3)) == 4  # GPT now pairs with BERT and ULMFiT at 160M
    with pytest.raises(ValueError, match="at least 1"):
        transfer_gains.matched_budgets(pts, within=0.5)
