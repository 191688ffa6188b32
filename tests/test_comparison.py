"""lmlib.course.comparison: rows that reproduce the committed JSON, refusal of results from another checkpoint, the
bag-of-words baseline's committed result (every run there, its summary recomputed from its rows) and its table rows,
and the direction-of-context check on models whose direction is known."""

import copy
import math
import statistics
from collections import Counter

import pytest
import torch

from lmlib.course import comparison, results
from lmlib.models.bert import Bert, BertConfig
from lmlib.models.gpt import GPT, GPTConfig
from lmlib.recipes import gpt as G

torch.set_num_threads(1)


def serve_stale(monkeypatch, name: str, change) -> None:
    """Make ``results.load(name)`` return the committed file with ``change(data)`` applied, as if measured elsewhere."""
    real = results.load

    def stale(asked):
        data = copy.deepcopy(real(asked))
        if asked == name:
            change(data)
        return data

    monkeypatch.setattr(results, "load", stale)


def test_transfer_rows_reproduce_the_committed_summaries():
    rows = comparison.transfer_rows()
    gpt = {(r["condition"], r["n_labels"]): r["mean"] for r in results.load("gpt_finetune")["summary"]}
    ours = {r["method"]: r for r in rows if r["source"] == "gpt_finetune" and r["n_labels"] == 1000}
    assert ours["GPT fine-tuned, λ = 0.5"]["mean"] == gpt[("gpt_aux", 1000)]
    assert ours["GPT architecture, random init"]["mean"] == gpt[("scratch", 1000)]
    assert {r["dataset"] for r in rows} == {"IMDb", "SST-2 dev"}
    ulmfit = {(s["variant"], s["n_labels"]): s for s in results.load("ulmfit_imdb")["summary"] if s["max_len"] == 128}
    imdb_ulmfit = {r["n_labels"]: r for r in rows if r["method"] == "ULMFiT (PTB LM fine-tuned on IMDb)"}
    assert {n: r["mean"] for n, r in imdb_ulmfit.items()} == {n: s["mean"] for (v, n), s in ulmfit.items() if v == "ulmfit"}
    assert all(r["dataset"] == "IMDb" and r["n_test"] == 2500 for r in imdb_ulmfit.values())
    assert all(0 < r["mean"] < 1 and (r["se"] is None) == (r["seeds"] == 1) for r in rows)


def test_a_result_from_another_checkpoint_is_refused(monkeypatch):
    serve_stale(monkeypatch, "gpt_finetune", lambda data: data.update(checkpoint_sha256="0" * 64))
    with pytest.raises(RuntimeError, match="gpt_finetune.json was measured with another checkpoint"):
        comparison.transfer_rows()
    with pytest.raises(ValueError, match="unknown checkpoint"):
        comparison.shipped_report("gpt3")


def test_the_ladder_is_sorted_and_carries_the_published_figures():
    ladder = comparison.ptb_ladder(awd_parameters=1, zaremba_parameters=2)
    assert [r["test_ppl"] for r in ladder] == sorted((r["test_ppl"] for r in ladder), reverse=True)
    kn = next(r for r in ladder if "Kneser-Ney" in r["model"])
    assert kn["published"][0] == 141.2
    assert {r["parameters"] for r in ladder if "AWD" in r["model"] or "Zaremba" in r["model"]} == {1, 2}


def test_context_directions_of_a_causal_and_a_bidirectional_model():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=30, block_size=16, num_layers=2, num_heads=2, d_model=16, dropout=0.0)).eval()
    bert = Bert(BertConfig(vocab_size=30, block_size=16, num_layers=2, num_heads=2, d_model=16, dropout=0.0)).eval()
    ids = torch.randint(0, 30, (1, 9))
    changed = ids.clone()
    changed[0, 4] = (ids[0, 4] + 1) % 30
    assert comparison.context_directions(lambda t: gpt.hidden_states(t)[0], ids, changed, 4) == {"earlier": False, "later": True}
    assert comparison.context_directions(lambda t: bert(t).hidden_states[-1], ids, changed, 4) == {"earlier": True, "later": True}
    with pytest.raises(ValueError, match="outside the 9 positions"):
        comparison.context_directions(lambda t: gpt.hidden_states(t)[0], ids, changed, 9)


def test_the_committed_result_has_every_run_and_its_summary_agrees_with_its_rows():
    data = results.load("bow_baseline")
    assert data["settings"]["n_test"] == 1000 and data["settings"]["test_seed"] == 0
    assert data["settings"]["max_tokens"] == G.FINETUNE_RECIPE["max_len"] - 2 == 126
    assert data["settings"]["config"]["folds"] == 5 and data["settings"]["config"]["ngram_range"] == [1, 2]
    runs = Counter((r["truncation"], r["n_labels"]) for r in data["rows"])
    assert runs == {(t, n): seeds for t in ("full", "model_view") for n, seeds in ((100, 3), (1000, 3), (25000, 1))}
    assert {(r["truncation"], r["n_labels"], r["seed"]) for r in data["rows"] if r["n_labels"] < 25000} == {
        (t, n, s) for t in ("full", "model_view") for n in (100, 1000) for s in (0, 1, 2)}
    assert len(data["summary"]) == 6
    for s in data["summary"]:
        accs = [r["accuracy"] for r in data["rows"] if (r["truncation"], r["n_labels"]) == (s["truncation"], s["n_labels"])]
        assert s["seeds"] == len(accs) and s["mean"] == pytest.approx(statistics.mean(accs), abs=1e-12)
        if len(accs) == 1:
            assert s["se"] is None
        else:
            assert s["se"] == pytest.approx(statistics.stdev(accs) / math.sqrt(len(accs)), abs=1e-12)
    assert all(0.5 < r["accuracy"] < 1 and r["C"] in data["settings"]["config"]["Cs"] for r in data["rows"])


def test_the_courses_rows_are_the_committed_summary():
    data = results.load("bow_baseline")
    rows = comparison.bow_baseline_rows()
    assert [(r["truncation"], r["n_labels"]) for r in rows] == [
        (t, n) for t in ("full", "model_view") for n in (100, 1000, 25000)]
    summary = {(s["truncation"], s["n_labels"]): s for s in data["summary"]}
    for r in rows:
        s = summary[r["truncation"], r["n_labels"]]
        assert (r["mean"], r["se"], r["seeds"], r["n_test"]) == (s["mean"], s["se"], s["seeds"], 1000)
        assert r["dataset"] == "IMDb" and r["source"] == "bow_baseline"
        assert set(r) == set(comparison.transfer_rows()[0]) | {"truncation"}
    assert [r["truncation"] for r in comparison.bow_baseline_rows("full")] == ["full"] * 3
    with pytest.raises(ValueError, match="unknown truncation 'head'"):
        comparison.bow_baseline_rows("head")


def test_rows_cut_with_another_tokenizer_are_refused(monkeypatch):
    serve_stale(monkeypatch, "bow_baseline", lambda data: data.update(checkpoint_sha256="0" * 64))
    with pytest.raises(RuntimeError, match="cut its 'model_view' reviews with another GPT tokenizer"):
        comparison.bow_baseline_rows()
    assert len(comparison.bow_baseline_rows("full")) == 3  # the full reviews do not depend on the tokenizer


# -- the GPU-pretrained GPT, shipped, beside the CPU-pretrained GPT it replaced -----------------------------------

def test_the_gpu_transfer_result_agrees_with_its_rows_and_the_shipped_checkpoint():
    import hashlib

    data = results.load("gpu_transfer_gpt")
    assert comparison.gpu_shipped("gpt_imdb") and not (comparison.GPU_STAGED / "gpt_imdb").exists()
    for name, sha in data["checkpoint"]["sha256"].items():  # the files it was measured with are the shipped files
        assert hashlib.sha256((G.CHECKPOINT_DIR / name).read_bytes()).hexdigest() == sha
    groups = {}
    for r in data["rows"]:
        key = (r["condition"], r.get("init"), r.get("layer"), r["n_labels"])
        groups.setdefault(key, []).append(r["accuracy"])
    for s in data["summary"]:
        values = groups[(s.get("condition", "probe"), s.get("init"), s.get("layer"), s["n_labels"])]
        assert s["seeds"] == len(values) and s["mean"] == pytest.approx(statistics.mean(values))
        if len(values) > 1:
            assert s["se"] == pytest.approx(statistics.stdev(values) / math.sqrt(len(values)))


@pytest.mark.parametrize("model", ["gpt", "bert"])
def test_longer_pretraining_rows_are_the_committed_summaries(model):
    rows = comparison.longer_pretraining_rows(model)
    by = {(r["method"], r["n_labels"]): r for r in rows}
    checkpoint, result, condition, _, task = comparison.LONGER_PRETRAINING[model]
    name = comparison.GPU_MODELS[model][1]

    def summary(file):
        return {(s["condition"], s["n_labels"]): s["mean"] for s in results.load(file)["summary"]
                if s.get("task", task) == task}
    shipped, short = summary(result), summary(f"{result}_short_pretraining")
    gpu = {(s.get("condition"), s["n_labels"]): s["mean"] for s in results.load(f"gpu_transfer_{model}")["summary"]}
    for n in (100, 1000, 25000):
        assert by[(f"{name} architecture, random init", n)]["mean"] == shipped[("scratch", n)]
        assert by[(f"{name} fine-tuned, short CPU pretraining (shipped before)", n)]["mean"] == short[(condition, n)]
        assert by[(f"{name} fine-tuned, GPU pretraining (shipped)", n)]["mean"] == shipped[(condition, n)]
    if model == "gpt":
        for n in (100, 1000):
            assert by[("GPT fine-tuned, GPU pretraining, mean-pooled head", n)]["mean"] == gpu[("gpt_mean", n)]
    assert by[(f"{name} fine-tuned, GPU pretraining (shipped)", 100)]["tokens"] == \
        comparison.shipped_report(checkpoint)["tokens_seen"]
    assert by[(f"{name} fine-tuned, short CPU pretraining (shipped before)", 100)]["tokens"] == \
        {"gpt": 4_096_000, "bert": 7_548_392}[model]
    probes = [r for r in rows if r["method"].startswith("frozen")]
    assert {r["n_labels"] for r in probes} == {100, 1000} and len(probes) == 4
    best = max((s for s in results.load(f"gpu_transfer_{model}")["summary"]
                if s.get("init") == "pretrained" and s["n_labels"] == 1000), key=lambda s: s["mean"])
    assert by[(next(r["method"] for r in probes if "GPU" in r["method"]), 1000)]["mean"] == best["mean"]
    assert all(0 < r["mean"] < 1 and (r["se"] is None) == (r["seeds"] == 1) for r in rows)


def test_a_gpu_result_from_another_checkpoint_is_refused(monkeypatch):
    serve_stale(monkeypatch, "gpu_transfer_gpt",
                lambda data: data["checkpoint"]["sha256"].update({"gpt_imdb.safetensors": "0" * 64}))
    with pytest.raises(RuntimeError, match="another checkpoint than the GPU GPT"):
        comparison.longer_pretraining_rows()
    with pytest.raises(ValueError, match="no GPU-pretrained 'transformer_xl'"):
        comparison.staged_report("transformer_xl")


def test_the_archived_cpu_checkpoint_must_be_the_one_its_rows_were_measured_with(monkeypatch):
    report = comparison.short_pretraining_report("gpt_imdb")
    assert report["tokens_seen"] == 4_096_000 and "run" not in report  # the one-core recipe's checkpoint
    assert report["sha256"]["gpt_imdb.safetensors"] != comparison.shipped_sha256("gpt_imdb")
    serve_stale(monkeypatch, "gpt_finetune_short_pretraining", lambda data: data.update(checkpoint_sha256="0" * 64))
    with pytest.raises(RuntimeError, match="is not the checkpoint its rows were measured with"):
        comparison.short_pretraining_report("gpt_imdb")
    assert comparison.short_pretraining_report("bert_imdb")["tokens_seen"] == 7_548_392
    with pytest.raises(ValueError, match="'elmo_imdb' has not been replaced"):
        comparison.short_pretraining_report("elmo_imdb")


# -- every GPU-pretrained checkpoint: rows, the course's checks, the staged checkpoints ---------------------------

GPU_RESULTS = {"gpt": "gpu_transfer_gpt", "bert": "gpu_transfer_bert", "elmo": "gpu_transfer_elmo", "ulmfit": "gpu_transfer_ulmfit",
               "bert-mlm": "gpu_transfer_bert_mlm"}


@pytest.mark.parametrize("model", sorted(GPU_RESULTS))
def test_each_gpu_result_agrees_with_its_rows_and_its_staged_report(model):
    data = results.load(GPU_RESULTS[model])
    folder = comparison.GPU_MODELS[model][0]
    assert data["checkpoint"]["sha256"] == comparison.staged_report(folder)["sha256"]
    weights = comparison.GPU_STAGED / folder / f"{folder.replace('_mlm', '')}.safetensors"
    if comparison.gpu_shipped(folder):
        weights = comparison.CHECKPOINTS[folder][0] / weights.name
    if weights.is_file():  # kept weights are the files it was measured with
        import hashlib

        assert hashlib.sha256(weights.read_bytes()).hexdigest() == data["checkpoint"]["sha256"][weights.name]
    groups = {}
    for r in data["rows"]:
        groups.setdefault((r["condition"], r.get("init"), r.get("feature"), r.get("layer"), r["n_labels"]), []).append(r["accuracy"])
    for s in data["summary"]:
        values = groups[(s.get("condition", "probe"), s.get("init"), s.get("feature"), s.get("layer"), s["n_labels"])]
        assert s["seeds"] == len(values) and s["mean"] == pytest.approx(statistics.mean(values))


@pytest.mark.parametrize("model", sorted(GPU_RESULTS))
def test_gpu_transfer_rows_are_the_summaries_with_the_best_layer_picked_at_the_most_labels(model):
    data = results.load(GPU_RESULTS[model])
    rows = comparison.gpu_transfer_rows(model)
    summary = data["summary"]
    tuned = [s for s in summary if "condition" in s]
    for s in tuned:  # every fine-tuning summary appears, once, with its mean
        hits = [r for r in rows if r["source"] == GPU_RESULTS[model] and "feature" not in r
                and r["n_labels"] == s["n_labels"] and r["mean"] == s["mean"]]
        assert len(hits) == 1
    for init in ("pretrained", "random"):
        for feature in {s["feature"] for s in summary if s.get("init") == init}:
            probes = [s for s in summary if s.get("init") == init and s["feature"] == feature]
            most = max(s["n_labels"] for s in probes)
            best = max((s for s in probes if s["n_labels"] == most), key=lambda s: s["mean"])
            shown = [r for r in rows if r.get("feature") == feature and r.get("init") == init and r["n_labels"] == most]
            assert len(shown) == 1 and shown[0]["mean"] == best["mean"]
    assert any(r["source"] == "bow_baseline" for r in rows)  # the baseline beside every table


@pytest.mark.parametrize("model", sorted(GPU_RESULTS))
def test_lesson_checks_are_the_differences_of_the_rows(model):
    rows = comparison.gpu_transfer_rows(model)
    checks = comparison.lesson_checks(model)
    assert checks, "every GPU result yields at least one check"
    for c in checks:
        assert c["holds"] == (c["difference"] >= c["bar"])
        assert c["bar"] == comparison.LESSON_BARS[c["check"].split(":")[0].split(" (")[0]]
    by = {(r["method"], r["n_labels"]): r for r in rows}
    _, name, architecture = comparison.GPU_MODELS[model]
    for c in checks:
        if c["check"] == "fine-tuned − random init":
            a, b = by[(f"{name} fine-tuned", c["n_labels"])], by[(f"{architecture}, random init", c["n_labels"])]
            assert c["difference"] == pytest.approx(a["mean"] - b["mean"])
            assert c["se"] == pytest.approx(math.hypot(a["se"], b["se"]))
    summary = results.load(GPU_RESULTS[model])["summary"]
    for c in checks:
        if c["check"].startswith("frozen − random init"):  # best pretrained layer minus best random layer, by hand
            feature = next(k for k, v in comparison.FEATURES.items() if c["check"].endswith(v))
            best = {init: max(s["mean"] for s in summary if s.get("init") == init and s["feature"] == feature
                              and s["n_labels"] == c["n_labels"]) for init in ("pretrained", "random")}
            assert c["difference"] == pytest.approx(best["pretrained"] - best["random"])


def test_a_gpu_result_of_another_staged_checkpoint_is_refused(monkeypatch):
    serve_stale(monkeypatch, "gpu_transfer_bert",
                lambda data: data["checkpoint"]["sha256"].update({"bert_imdb.safetensors": "0" * 64}))
    with pytest.raises(RuntimeError, match="another checkpoint than the GPU-pretrained bert_imdb"):  # staged, or shipped
        comparison.gpu_transfer_rows("bert")
    with pytest.raises(ValueError, match="unknown model 'gpt-2'"):
        comparison.gpu_transfer_rows("gpt-2")


def test_staged_pretraining_rows_read_each_report_and_count_ulmfits_parameters():
    from safetensors.torch import load_file

    rows = {r["checkpoint"]: r for r in comparison.staged_pretraining_rows()}
    assert {"gpt_imdb", "bert_imdb", "elmo_imdb", "awd_lstm_ptb", "ulmfit_imdb"} <= set(rows)
    gpt = comparison.shipped_report("gpt_imdb")  # shipped: beside the CPU checkpoint shipped before it
    assert rows["gpt_imdb"]["shipped"] == "GPU" and rows["gpt_imdb"]["device"] == gpt["run"]["device_name"]
    assert rows["gpt_imdb"]["gpu_value"] == gpt["valid_ppl"] and rows["gpt_imdb"]["gpu_tokens"] == gpt["tokens_seen"]
    assert rows["gpt_imdb"]["cpu_value"] == comparison.short_pretraining_report("gpt_imdb")["valid_ppl"]
    bert = comparison.shipped_report("bert_imdb")  # shipped too
    assert rows["bert_imdb"]["shipped"] == "GPU" and rows["bert_imdb"]["gpu_tokens"] == bert["tokens_seen"]
    cpu_bert = comparison.short_pretraining_report("bert_imdb")["valid"]["mlm_accuracy"]
    assert rows["bert_imdb"]["cpu_value"] == cpu_bert
    # staged beside a GPU checkpoint that ships: the CPU column is still the CPU checkpoint, and neither one ships
    mlm = comparison.staged_report("bert_mlm_imdb")
    assert rows["bert_mlm_imdb"]["shipped"].startswith("neither") and rows["bert_mlm_imdb"]["cpu_value"] == cpu_bert
    assert rows["bert_mlm_imdb"]["gpu_value"] == mlm["valid"]["mlm_accuracy"]
    elmo = comparison.staged_report("elmo_imdb")  # staged: beside the shipped CPU checkpoint
    assert rows["elmo_imdb"]["shipped"] == "CPU" and rows["elmo_imdb"]["gpu_tokens"] == elmo["tokens_seen"]
    assert rows["elmo_imdb"]["cpu_value"] == comparison.shipped_report("elmo_imdb")["valid_forward_ppl"]
    ulm = comparison.staged_report("ulmfit_imdb")
    weights = load_file(str(comparison.GPU_STAGED / "ulmfit_imdb" / "ulmfit_imdb.safetensors"))
    assert rows["ulmfit_imdb"]["gpu_tokens_per_parameter"] == pytest.approx(
        ulm["tokens_seen"] / sum(t.numel() for t in weights.values()))


def test_load_for_shipped_checks_against_the_shipped_checkpoint():
    from lmlib.course import comparison
    from lmlib.recipes import gpt

    assert comparison.shipped_sha256("gpt_imdb") == comparison.shipped_report("gpt_imdb")["sha256"]["gpt_imdb.safetensors"]
    assert comparison.load_for_shipped("gpt_finetune", "gpt_imdb", recipe=gpt.FINETUNE_RECIPE)["rows"]
    with pytest.raises(RuntimeError, match="elmo_transfer.json was measured with another checkpoint"):
        comparison.load_for_shipped("elmo_transfer", "gpt_imdb", sha_field="pretrained.sha256")
    with pytest.raises(ValueError, match="unknown checkpoint"):
        comparison.shipped_sha256("gpt2")


def test_pretraining_loss_curves_are_the_two_reports_curves_against_tokens():
    curves = comparison.pretraining_loss_curves("bert_imdb")
    (cpu_label, (cpu_x, cpu_y)), (gpu_label, (gpu_x, gpu_y)) = curves.items()
    gpu, cpu = comparison.shipped_report("bert_imdb"), comparison.short_pretraining_report("bert_imdb")
    assert gpu_y == [r["loss"] for r in gpu["train_loss_curve"]] and gpu_x[-1] == gpu["tokens_seen"] / 1e6
    assert cpu_y == cpu["train_loss_per_100_steps"] and cpu_x[-1] == pytest.approx(cpu["tokens_seen"] / 1e6)
    assert all(a < b for a, b in zip(cpu_x, cpu_x[1:])) and len(cpu_x) == cpu["recipe"]["steps"] // 100
    assert "CPU" in cpu_label and gpu["run"]["device_name"] in gpu_label
    with pytest.raises(ValueError, match="keeps no training curve"):  # the archived GPT report has none
        comparison.pretraining_loss_curves("gpt_imdb")
