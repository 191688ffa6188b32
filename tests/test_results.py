"""lmlib.course.results: committed results read by name, each matching the checkpoint it names; rows that reproduce
the committed summaries; refusal of a result measured with another checkpoint; provenance read from pretrain.json."""

import copy
import hashlib
import json
import math
import shlex

import pytest

from lmlib.course import results

REPO = results.RESULTS_DIR.parents[1]


def serve(monkeypatch, name: str, change) -> None:
    """Make ``results.load(name)`` return the committed file with ``change(data)`` applied, as if measured elsewhere."""
    real = results.load

    def changed(asked):
        data = copy.deepcopy(real(asked))
        if asked == name:
            change(data)
        return data

    monkeypatch.setattr(results, "load", changed)


# -- every committed result against its checkpoint -----------------------------------------------------------------

def _known_checkpoints() -> list[dict]:
    """The sha256 of every file of every checkpoint a result may name: shipped, staged, a CPU run's milestone, and
    each one a shipped checkpoint replaced (kept as ``checkpoint_report`` in the archived result its ``replaced`` names)."""
    reports = [report for report, _ in [*results.shipped().values(), *results.staged().values(),
                                        *results.cpu_milestones().values()]]
    reports += [results.short_pretraining_report(name) for name, (report, _) in results.shipped().items()
                if "replaced" in report]
    return [report["sha256"] for report in reports]


@pytest.mark.parametrize("name", results.available())
def test_every_committed_result_loads_names_its_script_and_matches_its_checkpoint(name):
    data = results.load(name)
    script = next(word for word in shlex.split(data["command"]) if word.endswith(".py"))
    assert (REPO / script).is_file(), f"{name}.json names {script}, which does not exist"
    known = _known_checkpoints()
    files = {sha for shas in known for sha in shas.values()}
    for where in ("checkpoint_sha256", "pretrained.sha256", "checkpoint.imdb_sha256"):
        recorded = results.field(data, where)
        if isinstance(recorded, str):
            assert recorded in files, f"{name}.json's {where} is no file of a shipped, staged or replaced checkpoint"
    recorded = results.field(data, "checkpoint.sha256")
    if isinstance(recorded, dict):
        assert recorded in known, f"{name}.json measured a checkpoint that is neither shipped nor staged"
    if name.endswith("_short_pretraining"):  # an archived result: measured with the checkpoint that was replaced
        replaced = [shas for shas in (results.short_pretraining_report(c) for c, (r, _) in results.shipped().items()
                                      if name in r.get("replaced", {}).get("results", {}).values())]
        assert len(replaced) == 1 and data["checkpoint_sha256"] in replaced[0]["sha256"].values()


@pytest.mark.parametrize("folder", sorted(results.staged()) + sorted(results.cpu_milestones()))
def test_staged_weights_are_the_files_their_report_names(folder):
    report, where = {**results.staged(), **results.cpu_milestones()}[folder]
    for file, sha in report["sha256"].items():
        if (where / file).is_file():  # a staged checkpoint may keep its report only
            assert hashlib.sha256((where / file).read_bytes()).hexdigest() == sha


def test_a_shipped_checkpoint_names_what_it_replaced_and_staged_ones_what_they_are_measured_against():
    shipped = results.shipped()
    for name, (report, _) in shipped.items():
        if "replaced" in report:
            archived = results.short_pretraining_report(name)
            assert archived["sha256"] != report["sha256"]
            assert all(results.load(r) for r in report["replaced"]["results"].values())
    for folder, (report, _) in results.staged().items():
        assert report["candidate_for"] in shipped, folder
        assert results.field(report, report["held_out_metric"]["field"]) is not None, folder


# -- loading by name and refusing another checkpoint ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["attention.json", "../results/attention", "", "results/attention"])
def test_load_refuses_paths_and_file_names(name):
    with pytest.raises(ValueError) as error:
        results.load(name)
    assert repr(name) in str(error.value)


def test_a_missing_result_lists_what_exists():
    with pytest.raises(FileNotFoundError) as error:
        results.load("nope")
    assert "'nope'" in str(error.value) and "attention" in str(error.value)


def _write(tmp_path, monkeypatch, name, content):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    (tmp_path / f"{name}.json").write_text(json.dumps(content))


def test_load_checked_returns_a_result_measured_on_the_loaded_checkpoint(tmp_path, monkeypatch):
    _write(tmp_path, monkeypatch, "run", {"checkpoint_sha256": "ab" * 32, "settings": {"recipe": {"lr": 5e-4}}})
    assert results.load_checked("run", "ab" * 32, recipe={"lr": 5e-4})["settings"]["recipe"] == {"lr": 5e-4}


def test_load_checked_refuses_another_checkpoint_and_names_the_script(tmp_path, monkeypatch):
    _write(tmp_path, monkeypatch, "run", {"checkpoint_sha256": "ab" * 32, "command": "python bench_run.py"})
    with pytest.raises(RuntimeError) as error:
        results.load_checked("run", "cd" * 32)
    assert "python bench_run.py" in str(error.value)


def test_load_checked_reads_a_nested_field_and_refuses_a_missing_one_or_another_recipe(tmp_path, monkeypatch):
    _write(tmp_path, monkeypatch, "run", {"pretrained": {"sha256": "ab" * 32}, "settings": {"recipe": {"lr": 5e-4}}})
    assert results.load_checked("run", "ab" * 32, sha_field="pretrained.sha256")
    with pytest.raises(RuntimeError):
        results.load_checked("run", "cd" * 32, sha_field="pretrained.sha256")
    with pytest.raises(KeyError) as error:
        results.load_checked("run", "ab" * 32)
    assert "'checkpoint_sha256'" in str(error.value)
    with pytest.raises(RuntimeError):
        results.load_checked("run", "ab" * 32, sha_field="pretrained.sha256", recipe={"lr": 1e-3})


def test_load_for_shipped_checks_against_the_shipped_checkpoint():
    from lmlib.recipes import gpt

    assert results.shipped_sha256("gpt_imdb") == results.shipped_report("gpt_imdb")["sha256"]["gpt_imdb.safetensors"]
    assert results.load_for_shipped("gpt_finetune", "gpt_imdb", recipe=gpt.FINETUNE_RECIPE)["rows"]
    with pytest.raises(RuntimeError) as error:
        results.load_for_shipped("elmo_transfer", "gpt_imdb", sha_field="pretrained.sha256")
    assert "elmo_transfer" in str(error.value)
    with pytest.raises(ValueError) as error:
        results.shipped_sha256("gpt2")
    assert "'gpt2'" in str(error.value)


# -- the transfer rows of notebooks 07-12 --------------------------------------------------------------------------

def test_transfer_rows_reproduce_the_committed_summaries():
    rows = results.transfer_rows()
    gpt = {(r["condition"], r["n_labels"]): r["mean"] for r in results.load("gpt_finetune")["summary"]}
    ours = {r["method"]: r for r in rows if r["source"] == "gpt_finetune" and r["n_labels"] == 1000}
    assert ours["GPT fine-tuned, λ = 0.5"]["mean"] == gpt[("gpt_aux", 1000)]
    assert ours["GPT architecture, random init"]["mean"] == gpt[("scratch", 1000)]
    assert {r["dataset"] for r in rows} == {"IMDb", "SST-2 dev"}
    data = results.load("ulmfit_imdb")
    cut = data["settings"]["max_len"]
    ulmfit = {s["n_labels"]: s["mean"] for s in data["summary"] if s["max_len"] == cut and s["variant"] == "ulmfit"}
    shown = {r["n_labels"]: r for r in rows if r["method"] == "ULMFiT (PTB LM fine-tuned on IMDb)"}
    assert {n: r["mean"] for n, r in shown.items()} == ulmfit
    assert all(r["n_test"] == data["settings"]["test_reviews"] for r in shown.values())
    assert all(0 < r["mean"] < 1 and (r["se"] is None) == (r["seeds"] == 1) for r in rows)


def test_a_result_from_another_checkpoint_is_refused(monkeypatch):
    serve(monkeypatch, "gpt_finetune", lambda data: data.update(checkpoint_sha256="0" * 64))
    with pytest.raises(RuntimeError) as error:
        results.transfer_rows()
    assert "gpt_finetune" in str(error.value)


def test_the_ladder_is_sorted_and_carries_the_published_figures():
    ladder = results.ptb_ladder(awd_parameters=1, zaremba_parameters=2)
    assert [r["test_ppl"] for r in ladder] == sorted((r["test_ppl"] for r in ladder), reverse=True)
    assert next(r for r in ladder if "Kneser-Ney" in r["model"])["published"][0] == 141.2
    assert {r["parameters"] for r in ladder if "AWD" in r["model"] or "Zaremba" in r["model"]} == {1, 2}


def test_bow_rows_are_the_committed_summary_and_the_gpt_cut_needs_the_shipped_tokenizer(monkeypatch):
    data = results.load("bow_baseline")
    rows = results.bow_baseline_rows()
    summary = {(s["truncation"], s["n_labels"]): s for s in data["summary"]}
    assert [(r["truncation"], r["n_labels"]) for r in rows] == sorted(
        summary, key=lambda key: (list(results.BOW_METHODS).index(key[0]), key[1]))
    for r in rows:
        s = summary[r["truncation"], r["n_labels"]]
        assert (r["mean"], r["se"], r["seeds"], r["n_test"]) == (s["mean"], s["se"], s["seeds"], data["settings"]["n_test"])
    assert {r["truncation"] for r in results.bow_baseline_rows("full")} == {"full"}
    with pytest.raises(ValueError) as error:
        results.bow_baseline_rows("head")
    assert "'head'" in str(error.value)
    serve(monkeypatch, "bow_baseline", lambda data: data.update(checkpoint_sha256="0" * 64))
    with pytest.raises(RuntimeError):
        results.bow_baseline_rows()
    assert results.bow_baseline_rows("full")  # the full reviews do not depend on the tokenizer


# -- the GPU-pretrained checkpoints: provenance from pretrain.json ------------------------------------------------

GPU_RESULTS = {"gpt": "gpu_transfer_gpt", "bert": "gpu_transfer_bert", "elmo": "gpu_transfer_elmo",
               "ulmfit": "gpu_transfer_ulmfit", "bert-mlm": "gpu_transfer_bert_mlm"}


@pytest.mark.parametrize("model", ["gpt", "bert"])
def test_longer_pretraining_rows_are_the_summaries_of_the_shipped_and_the_replaced_checkpoint(model):
    rows = results.longer_pretraining_rows(model)
    by = {(r["method"], r["n_labels"]): r for r in rows}
    name = results.GPU_NAMES[model][0]
    report = results.shipped_report(f"{model}_imdb")
    replaced = report["replaced"]
    now = next(k for k, v in replaced["results"].items() if v == replaced["report"])

    def summary(file):
        return {(s["condition"], s["n_labels"]): s["mean"] for s in results.load(file)["summary"]
                if s.get("task", "imdb") == "imdb"}
    shipped, short = summary(now), summary(replaced["report"])
    for n in (100, 1000, 25000):
        assert by[(f"{name} architecture, random init", n)]["mean"] == shipped[("scratch", n)]
        assert by[(f"{name} fine-tuned, short CPU pretraining (shipped before)", n)]["mean"] == short[(model, n)]
        assert by[(f"{name} fine-tuned, GPU pretraining (shipped)", n)]["mean"] == shipped[(model, n)]
    assert by[(f"{name} fine-tuned, GPU pretraining (shipped)", 100)]["tokens"] == report["tokens_seen"]
    assert by[(f"{name} fine-tuned, short CPU pretraining (shipped before)", 100)]["tokens"] == \
        results.short_pretraining_report(f"{model}_imdb")["tokens_seen"]
    probes = [r for r in rows if r["method"].startswith("frozen")]
    best = max((s for s in results.load(GPU_RESULTS[model])["summary"]
                if s.get("init") == "pretrained" and s["n_labels"] == 1000), key=lambda s: s["mean"])
    assert by[(next(r["method"] for r in probes if "GPU" in r["method"]), 1000)]["mean"] == best["mean"]
    with pytest.raises(ValueError):  # the shipped ELMo replaced nothing
        results.longer_pretraining_rows("elmo")


def test_a_gpu_result_of_no_known_checkpoint_is_refused(monkeypatch):
    serve(monkeypatch, "gpu_transfer_bert",
          lambda data: data["checkpoint"]["sha256"].update({"bert_imdb.safetensors": "0" * 64}))
    with pytest.raises(RuntimeError) as error:
        results.gpu_transfer_rows("bert")
    assert "gpu_transfer_bert" in str(error.value)
    with pytest.raises(ValueError) as error:
        results.gpu_transfer_rows("gpt-2")
    assert "'gpt-2'" in str(error.value)


def test_the_replaced_report_must_be_the_checkpoint_its_rows_were_measured_with(monkeypatch):
    replaced = results.shipped_report("gpt_imdb")["replaced"]["report"]
    report = results.short_pretraining_report("gpt_imdb")
    assert report["sha256"]["gpt_imdb.safetensors"] == results.load(replaced)["checkpoint_sha256"]
    serve(monkeypatch, replaced, lambda data: data.update(checkpoint_sha256="0" * 64))
    with pytest.raises(RuntimeError) as error:
        results.short_pretraining_report("gpt_imdb")
    assert replaced in str(error.value)
    with pytest.raises(ValueError) as error:
        results.short_pretraining_report("elmo_imdb")
    assert "'elmo_imdb'" in str(error.value)


@pytest.mark.parametrize("model", sorted(GPU_RESULTS))
def test_gpu_transfer_rows_are_the_summaries_with_the_best_layer_picked_at_the_most_labels(model):
    summary = results.load(GPU_RESULTS[model])["summary"]
    rows = results.gpu_transfer_rows(model)
    for s in (s for s in summary if "condition" in s):  # every fine-tuning summary appears, once, with its mean
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
    rows = results.gpu_transfer_rows(model)
    checks = results.lesson_checks(model)
    assert checks, "every GPU result yields at least one check"
    name, architecture = results.GPU_NAMES[model]
    by = {(r["method"], r["n_labels"]): r for r in rows}
    for c in checks:
        beyond = c["se"] is not None and c["difference"] > 2 * c["se"]  # written out here, not through verdicts
        assert c["holds"] == (c["difference"] >= c["bar"] and beyond)
        if c["check"] == "fine-tuned − random init":
            a, b = by[(f"{name} fine-tuned", c["n_labels"])], by[(f"{architecture}, random init", c["n_labels"])]
            assert c["difference"] == pytest.approx(a["mean"] - b["mean"])
            assert c["se"] == pytest.approx(math.hypot(a["se"], b["se"]))
            assert c["bar"] == 0.05
    summary = results.load(GPU_RESULTS[model])["summary"]
    for c in checks:
        if c["check"].startswith("frozen − random init"):  # best pretrained layer minus best random layer, by hand
            feature = next(k for k, v in results.FEATURES.items() if c["check"].endswith(v))
            best = {init: max(s["mean"] for s in summary if s.get("init") == init and s["feature"] == feature
                              and s["n_labels"] == c["n_labels"]) for init in ("pretrained", "random")}
            assert c["difference"] == pytest.approx(best["pretrained"] - best["random"])


def test_staged_pretraining_rows_pair_each_gpu_checkpoint_with_the_one_its_report_names():
    from safetensors.torch import load_file

    rows = {r["checkpoint"]: r for r in results.staged_pretraining_rows()}
    assert [r["gpu_tokens"] for r in rows.values()] == sorted((r["gpu_tokens"] for r in rows.values()), reverse=True)
    gpt = results.shipped_report("gpt_imdb")  # shipped: beside the checkpoint it replaced
    assert rows["gpt_imdb"]["shipped"] == "GPU" and rows["gpt_imdb"]["device"] == gpt["run"]["device_name"]
    assert rows["gpt_imdb"]["gpu_value"] == gpt["valid_ppl"] and rows["gpt_imdb"]["gpu_tokens"] == gpt["tokens_seen"]
    assert rows["gpt_imdb"]["cpu_value"] == results.short_pretraining_report("gpt_imdb")["valid_ppl"]
    cpu_bert = results.short_pretraining_report("bert_imdb")["valid"]["mlm_accuracy"]
    # staged beside a shipped checkpoint that replaced another: compared with the replaced one, and neither ships
    mlm = results.staged()["bert_mlm_imdb"][0]
    assert rows["bert_mlm_imdb"]["shipped"].startswith("neither") and rows["bert_mlm_imdb"]["cpu_value"] == cpu_bert
    assert rows["bert_mlm_imdb"]["gpu_value"] == mlm["valid"]["mlm_accuracy"]
    for folder, (report, where) in results.staged().items():
        target = results.shipped_report(report["candidate_for"])
        if not results.gpu_made(target):  # staged beside the shipped CPU checkpoint (ULMFiT's: a run that went on from it)
            assert rows[folder]["shipped"] == "CPU" and rows[folder]["cpu_tokens"] == results.tokens_read(target)
            assert rows[folder]["cpu_value"] == results.field(target, report["held_out_metric"]["field"])
        if "parameters" not in report:  # counted from the weights
            weights = load_file(str(where / f"{folder}.safetensors"))
            assert rows[folder]["gpu_tokens_per_parameter"] == pytest.approx(
                report["tokens_seen"] / sum(t.numel() for t in weights.values()))


def test_pretraining_loss_curves_are_the_two_reports_curves_against_tokens():
    curves = results.pretraining_loss_curves("bert_imdb")
    (cpu_label, (cpu_x, cpu_y)), (gpu_label, (gpu_x, gpu_y)) = curves.items()
    gpu, cpu = results.shipped_report("bert_imdb"), results.short_pretraining_report("bert_imdb")
    assert gpu_y == [r["loss"] for r in gpu["train_loss_curve"]] and gpu_x[-1] == gpu["tokens_seen"] / 1e6
    assert cpu_y == cpu["train_loss_per_100_steps"] and cpu_x[-1] == pytest.approx(cpu["tokens_seen"] / 1e6)
    assert all(a < b for a, b in zip(cpu_x, cpu_x[1:])) and len(cpu_x) == cpu["recipe"]["steps"] // 100
    assert gpu["run"]["device_name"] in gpu_label
    with pytest.raises(ValueError) as error:  # the archived GPT report keeps no curve
        results.pretraining_loss_curves("gpt_imdb")
    assert "'gpt_imdb'" in str(error.value)


@pytest.mark.parametrize("d, se, bar, holds", [
    (0.091, 0.054, 0.05, False),   # ULMFiT one rate: above the bar but 1.7 standard errors from zero
    (0.009, 0.006, 0.0, False),    # BERT − bag of words: 1.5 standard errors
    (0.034, 0.015, 0.05, False),   # ELMo: 2.3 standard errors but under the bar
    (0.12, 0.05, 0.05, True),      # 2.4 standard errors and over the bar
    (0.02, 0.009, 0.0, True),      # bar 0, 2.2 standard errors
    (0.02, 0.01, 0.0, False),      # exactly two standard errors is not beyond them
    (0.3, None, 0.05, False),      # one seed: no standard error, no verdict
    (-0.2, 0.01, 0.0, False),      # far beyond noise, but the wrong way
])
def test_a_lesson_check_holds_only_over_its_bar_and_beyond_two_standard_errors(d, se, bar, holds):
    assert results.lesson_holds(d, se, bar) is holds


def test_lesson_checks_use_the_noise_rule_of_every_verdict(monkeypatch):
    """lesson_checks decides through verdicts.beyond_noise: the one rule, changed there, changes every check."""
    from lmlib.course import verdicts

    model = sorted(GPU_RESULTS)[0]
    monkeypatch.setattr(verdicts, "beyond_noise", lambda d, se: False)
    assert not any(c["holds"] for c in results.lesson_checks(model))


def test_a_gpu_transfer_names_its_checkpoint_shipped_only_when_lmlib_ships_those_files():
    for model in ("gpt", "elmo"):
        tokens, shipped = results.gpu_transfer_checkpoint(model)
        source, data, report = results._gpu_transfer(model)
        assert tokens == report["tokens_seen"]
        weights = next(f for f in data["checkpoint"]["sha256"] if f.endswith(".safetensors"))
        ships = results.shipped_sha256(weights.removesuffix(".safetensors"))
        assert shipped == (data["checkpoint"]["sha256"][weights] == ships)
    assert results.gpu_transfer_checkpoint("gpt")[1] and not results.gpu_transfer_checkpoint("elmo")[1]
