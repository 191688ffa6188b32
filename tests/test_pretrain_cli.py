"""``python -m lmlib pretrain``: exact resume, the files it writes, bad input, bf16 and torchrun (teach preset, a few
steps, so every run takes seconds)."""

from __future__ import annotations

import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import torch
from benchmarks.common import child_env
from safetensors.torch import load_file

from lmlib import __main__ as cli
from lmlib.data import sha256_of
from lmlib.recipes import bert, elmo, gpt, ulmfit
from lmlib.recipes.pretraining import LAST_STOP, RESUME, PretrainError, PretrainRun, milestone_name, plan
from lmlib.recipes.shipping import PRETRAINED_DIR

NAMES = {"gpt": "gpt_imdb", "bert": "bert_imdb", "elmo": "elmo_imdb", "awd-lstm": "awd_lstm_ptb",
         "ulmfit-imdb": "ulmfit_imdb"}
STEPS, CRASH, EVERY = 12, 7, 4  # a crash after step 7 loses steps 5-7: the resumed run redoes them from step 4


@pytest.fixture(autouse=True)
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def pretrain(model: str, out: Path, *extra: str) -> int:
    return cli.main(["pretrain", model, "--preset", "teach", "--device", "cpu", "--out", str(out), *extra])


def without_timings(report: dict | Path) -> dict:
    """The report with every wall time (a key with "seconds", at any depth) left out."""
    report = json.loads(report.read_text()) if isinstance(report, Path) else report
    return {k: without_timings(v) if isinstance(v, dict) else v for k, v in report.items() if "seconds" not in k}


def captured(model: str, out: Path, *extra: str) -> dict:
    """:func:`pretrain`'s exit code and what it printed: ``{"code", "out", "err"}`` (stderr is not a terminal here, so
    the progress comes as plain lines)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = pretrain(model, out, *extra)
    return {"code": code, "out": stdout.getvalue(), "err": stderr.getvalue()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """For gpt, bert and elmo: an uninterrupted run of STEPS steps, and one stopped after CRASH then resumed; with
    what each of the three commands printed (``printed[model]``)."""
    root, out = tmp_path_factory.mktemp("pretrain"), {}
    printed = {}
    for model in ("gpt", "bert", "elmo"):
        whole, resumed = root / f"{model}-whole", root / f"{model}-resumed"
        steps = ["--steps", str(STEPS), "--checkpoint-every", str(EVERY)]
        printed[model] = [captured(model, whole, *steps), captured(model, resumed, *steps, "--stop-after", str(CRASH))]
        interrupted = {"files": sorted(p.name for p in resumed.iterdir()),
                       "step": torch.load(resumed / RESUME, weights_only=True)["step"]}
        printed[model].append(captured(model, resumed, *steps, "--resume"))
        assert [run["code"] for run in printed[model]] == [0, 0, 0], printed[model]
        out[model] = (whole, resumed, interrupted)
    out["printed"] = printed
    return out


@pytest.mark.parametrize("model", ["gpt", "bert", "elmo"])
def test_a_resumed_run_ends_with_the_same_bytes_as_an_uninterrupted_one(runs, model):
    whole, resumed, interrupted = runs[model]
    assert interrupted == {"files": [RESUME], "step": 4}  # the crash left only the step-4 checkpoint
    weights = f"{NAMES[model]}.safetensors"
    assert (resumed / weights).read_bytes() == (whole / weights).read_bytes()
    # the report (step count, tokens seen, losses, held-out metrics, sha256) too, all but the wall times and the
    # record of the resumed run's two stretches: from the start, and after step 4, each with its processes and threads
    report = without_timings(resumed / "pretrain.json")
    assert report.pop("run") == {"device": "cpu", "bf16": False, "world_size": 1, "stretches": [
        {"from_step": 0, "world_size": 1, "threads": 1}, {"from_step": 4, "world_size": 1, "threads": 1}]}
    assert report == without_timings(whole / "pretrain.json")
    assert not (resumed / RESUME).exists() and not (whole / RESUME).exists()  # deleted once pretrain.json is written


@pytest.mark.parametrize("model", ["gpt", "bert", "elmo"])
def test_pretrain_json_records_the_recipe_and_every_files_sha256(runs, model):
    whole = runs[model][0]
    report = json.loads((whole / "pretrain.json").read_text())
    files = sorted(p.name for p in whole.iterdir() if p.name != "pretrain.json")
    assert sorted(report["sha256"]) == files and len(files) == 2
    assert report["sha256"] == {f: sha256_of(whole / f) for f in files}
    module = {"gpt": gpt, "bert": bert, "elmo": elmo}[model]
    assert report["recipe"]["steps"] == STEPS
    assert report["recipe"]["batch_size"] == module.PRETRAIN_TEACH["recipe"]["batch_size"]
    assert "run" not in report  # a one-process float32 CPU run, like the recorded ones


@pytest.mark.parametrize("module, directory, preset", [(gpt, None, "full"), (bert, None, "full"),
                                                      (elmo, elmo.CHECKPOINT_DIR, "cpu"), (ulmfit, None, "full")])
def test_the_preset_its_rebuild_names_is_the_recipe_recorded_in_the_shipped_pretrain_json(module, directory, preset,
                                                                                         tmp_path):
    if directory is None:  # the shipped GPT, BERT and stage (a) came from the GPU recipe: this one made the ones before
        from lmlib.course.results import short_pretraining_report

        directory = tmp_path / module.NAME
        directory.mkdir()
        (directory / "pretrain.json").write_text(json.dumps(short_pretraining_report(module.NAME)))
    else:  # the shipped ELMo is the stop its rebuild names, of the run its preset plans
        shipped = json.loads((directory / "pretrain.json").read_text())
        words = shipped["rebuild"].split()
        assert shipped["rebuild"] == module.REBUILD and words[words.index("--preset") + 1] == preset
        assert int(words[words.index("--stop-after") + 1]) == shipped["steps"]
    recipe, config, tokenizer = plan(preset, None, module.PRETRAIN_RECIPE, module.PRETRAIN_CONFIG,
                                     module.PRETRAIN_TEACH, getattr(module, "TOKENIZER_RECIPE", None),
                                     cpu=getattr(module, "PRETRAIN_CPU", None))
    shipped = json.loads((directory / "pretrain.json").read_text())
    assert json.loads(json.dumps(recipe)) == shipped["recipe"]
    assert {k: shipped["config"][k] for k in config} == json.loads(json.dumps(config))
    if tokenizer:
        assert {k: shipped["tokenizer"][k] for k in tokenizer} == tokenizer
    name = getattr(module, "NAME", "awd_lstm_ptb")
    PretrainRun(name, directory, {"recipe": recipe, "config": config})  # the folder check agrees; nothing is written
    teach, *_ = plan("teach", None, module.PRETRAIN_RECIPE, module.PRETRAIN_CONFIG, module.PRETRAIN_TEACH)
    wrong = (rf"checkpoint of {name} made with another config \(recipe\.batch_size: {recipe['batch_size']} there, "
             rf"{teach['batch_size']} now; .*recipe\.steps: {recipe['steps']} there, {teach['steps']} now")
    with pytest.raises(PretrainError, match=wrong):
        PretrainRun(name, directory, {"recipe": teach, "config": config})


# -- bad input -----------------------------------------------------------------------------------------------
def test_help_lists_the_five_models_and_every_option(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["pretrain", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "{awd-lstm,ulmfit-imdb,elmo,gpt,bert}" in text
    for option in ("--preset", "--out", "--resume", "--steps", "--threads", "--checkpoint-every", "--stop-after",
                   "--bf16", "--device", "--deadline", "--set", "deleted once pretrain.json", "LMLIB_PRESET"):
        assert option in text
    assert cli.TORCHRUN_EXAMPLE in text  # as the torchrun tests below launch it
    # which preset applies when none is given, and why
    assert ("Default: the LMLIB_PRESET environment variable if set, else teach, the same default as the notebooks, so a "
            "first try takes seconds" in " ".join(text.split()))


@pytest.mark.parametrize("argv, message", [
    (["pretrain", "gpt2"], "argument model: invalid choice: 'gpt2'"),
    (["pretrain", "gpt", "--preset", "huge"], "argument --preset: invalid choice: 'huge'"),
])
def test_an_unknown_model_or_preset_is_refused_by_name(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_an_out_folder_holding_another_models_or_another_configs_checkpoint_is_refused(runs, tmp_path, capsys):
    whole_gpt = runs["gpt"][0]
    before = {p.name: p.read_bytes() for p in whole_gpt.iterdir()}
    assert pretrain("bert", whole_gpt) == 2
    assert f"error: {whole_gpt} holds the checkpoint of another model (gpt_imdb.safetensors" in capsys.readouterr().err
    assert pretrain("gpt", whole_gpt, "--steps", "5") == 2
    err = capsys.readouterr().err
    assert "checkpoint of gpt_imdb made with another config (recipe.steps: 12 there, 5 now; recipe.warmup: 1 there, 0 now)" in err
    assert {p.name: p.read_bytes() for p in whole_gpt.iterdir()} == before  # nothing was touched

    unfinished = tmp_path / "unfinished"
    assert pretrain("bert", unfinished, "--steps", "4", "--checkpoint-every", "2", "--stop-after", "2") == 0
    capsys.readouterr()
    assert pretrain("gpt", unfinished) == 2
    assert f"{unfinished / RESUME} is an unfinished run of another model (bert_imdb)" in capsys.readouterr().err
    assert pretrain("bert", unfinished, "--steps", "6", "--resume") == 2
    assert "unfinished bert_imdb run with another config (recipe.steps: 4 there, 6 now)" in capsys.readouterr().err
    assert pretrain("bert", unfinished, "--steps", "4") == 2
    assert "unfinished at step 2: pass --resume to continue it" in capsys.readouterr().err


def test_resume_with_nothing_to_resume_is_refused(runs, tmp_path, capsys):
    assert pretrain("gpt", tmp_path / "empty", "--resume") == 2
    assert f"error: nothing to resume: there is no {RESUME} in {tmp_path / 'empty'}" in capsys.readouterr().err
    assert pretrain("gpt", runs["gpt"][0], "--steps", str(STEPS), "--resume") == 2
    assert "(the run there finished: pretrain.json is present)" in capsys.readouterr().err
    assert not (tmp_path / "empty").exists()


def test_the_shipped_folders_are_written_only_by_the_full_recipe_named_with_out(capsys, monkeypatch, tmp_path):
    # a shipped folder one whole run of this command's one-core recipe made, as ULMFiT's stage (b) was before its
    # CPU run shipped (the GPU-pretrained ones are refused outright, below; those shipped by `ship`, too)
    from lmlib.recipes import shipping

    monkeypatch.setattr(shipping, "PRETRAINED_DIR", tmp_path / "pretrained")
    folder = tmp_path / "pretrained" / "ulmfit_imdb"
    folder.mkdir(parents=True)
    (folder / "pretrain.json").write_text(json.dumps({"rebuild": ulmfit.IMDB_REBUILD, "sha256": {}}))
    before = {f.name: f.read_bytes() for f in folder.iterdir()}
    assert pretrain("ulmfit-imdb", folder) == 2
    assert "holds a shipped checkpoint: only its recorded recipe (--preset full" in capsys.readouterr().err
    monkeypatch.delenv("LMLIB_PRESET", raising=False)  # the default preset, teach, is refused there by name
    assert cli.main(["pretrain", "ulmfit-imdb", "--device", "cpu", "--out", str(folder)]) == 2
    assert ("this run has preset teach (the default, as in the notebooks); add --preset full or choose another --out"
            in capsys.readouterr().err)
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before
    assert cli.DEFAULT_OUT.resolve() != PRETRAINED_DIR.resolve() and not cli.DEFAULT_OUT.is_absolute()


@pytest.mark.parametrize("preset", ["cpu", "full", "teach"])
@pytest.mark.parametrize("model, folder, rebuild", [("elmo", elmo.CHECKPOINT_DIR, elmo.REBUILD),
                                                    ("ulmfit-imdb", ulmfit.IMDB_DIR, ulmfit.IMDB_CPU_REBUILD)])
def test_a_folder_shipped_from_a_run_takes_no_pretrain_run(preset, model, folder, rebuild, capsys):
    # no single run writes what `lmlib ship` put there, whatever its preset: the refusal names the rebuild
    before = {f.name: f.read_bytes() for f in folder.iterdir()}
    line = refused(capsys, ["pretrain", model, "--preset", preset, "--device", "cpu", "--out", str(folder)])
    assert rebuild in line and f"lmlib ship {model}" in rebuild
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before


@pytest.fixture
def stopped_elmo(tmp_path, capsys):
    """The ``last_stop/`` of a seconds-long ELMo cpu-preset trial stopped after step 2 of 3."""
    out = tmp_path / "elmo-run"
    assert cli.main(["pretrain", "elmo", "--preset", "cpu", "--device", "cpu", "--steps", "3", "--stop-after", "2",
                     "--out", str(out), *CPU_TRIAL["elmo"]]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return out / LAST_STOP


def test_ship_copies_the_checkpoint_a_run_wrote_on_its_way(stopped_elmo, tmp_path, monkeypatch, capsys):
    from lmlib.recipes import shipping

    monkeypatch.setattr(shipping, "PRETRAINED_DIR", tmp_path / "pretrained")
    assert cli.main(["ship", "elmo", str(stopped_elmo)]) == 0
    assert "step 2" in capsys.readouterr().out
    shipped_dir = tmp_path / "pretrained" / elmo.NAME
    source, shipped = (json.loads((d / "pretrain.json").read_text()) for d in (stopped_elmo, shipped_dir))
    assert shipped == {"rebuild": elmo.REBUILD, **source, "shipped_from": str(stopped_elmo)}
    for f in source["sha256"]:
        assert (shipped_dir / f).read_bytes() == (stopped_elmo / f).read_bytes()
    bilm, vocab, report = elmo.load_pretrained(shipped_dir)  # verified on load, as the shipped one is
    weights = load_file(stopped_elmo / f"{elmo.NAME}.safetensors")
    assert all(torch.equal(bilm.state_dict()[k], weights[k].float()) for k in weights)
    assert report["steps"] == 2 and bilm.config.vocab_size == len(vocab)


def test_ship_refuses_a_corrupt_or_foreign_checkpoint_before_writing(stopped_elmo, tmp_path, monkeypatch, capsys):
    from lmlib.recipes import shipping

    monkeypatch.setattr(shipping, "PRETRAINED_DIR", tmp_path / "pretrained")
    weights = stopped_elmo / f"{elmo.NAME}.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    assert "sha256" in refused(capsys, ["ship", "elmo", str(stopped_elmo)])
    weights.write_bytes(good)
    report = json.loads((stopped_elmo / "pretrain.json").read_text())
    weights.rename(stopped_elmo / "other.safetensors")  # another model's checkpoint, its files all as recorded
    report["sha256"] = {"other.safetensors" if k == weights.name else k: v for k, v in report["sha256"].items()}
    (stopped_elmo / "pretrain.json").write_text(json.dumps(report))
    assert f"holds no {weights.name}" in refused(capsys, ["ship", "elmo", str(stopped_elmo)])
    assert "not a folder" in refused(capsys, ["ship", "elmo", str(tmp_path / "missing")])
    assert not (tmp_path / "pretrained").exists()


@pytest.mark.parametrize("model", ["gpt", "bert"])
def test_a_shipped_folder_takes_only_the_preset_its_rebuild_names(model, capsys, no_work):
    # The shipped GPT and BERT were made by --preset gpu (their pretrain.json says so): another preset is refused
    # there in one line naming the one to use, before any data is read; the gpu preset's recipe is theirs.
    module = {"gpt": gpt, "bert": bert}[model]
    before = {f.name: f.read_bytes() for f in module.CHECKPOINT_DIR.iterdir()}
    shipped = json.loads((module.CHECKPOINT_DIR / "pretrain.json").read_text())
    assert shipped["rebuild"] == module.REBUILD and "--preset gpu" in module.REBUILD
    for preset in ("full", "teach"):
        line = refused(capsys, ["pretrain", model, "--preset", preset, "--device", "cpu",
                                "--out", str(module.CHECKPOINT_DIR)])
        assert f"preset {preset} (--preset)" in line and "add --preset gpu" in line
    recipe, config, _ = plan("gpu", None, module.PRETRAIN_RECIPE, module.PRETRAIN_CONFIG, module.PRETRAIN_TEACH,
                             gpu=module.PRETRAIN_GPU)
    assert json.loads(json.dumps(recipe)) == shipped["recipe"]
    PretrainRun(module.NAME, module.CHECKPOINT_DIR, {"recipe": recipe, "config": config})  # the folder check agrees
    assert {f.name: f.read_bytes() for f in module.CHECKPOINT_DIR.iterdir()} == before


@pytest.fixture
def small_data(monkeypatch):
    """GPT's and BERT's reviews cut to 60 training and 20 held-out, so their gpu preset runs a few steps in seconds
    (ELMo's and ULMFiT stage (b)'s gpu presets take ``--set train_reviews=N``)."""
    for module in (gpt, bert):
        split = module.unsup_split
        monkeypatch.setattr(module, "unsup_split", lambda valid_reviews, split=split: tuple(
            texts[:n] for texts, n in zip(split(valid_reviews), (60, 20))))


GPU_TRIAL = {  # model -> what makes its gpu preset a trial of seconds on the CPU
    "gpt": ["--set", "batch_size=4", "--set", "valid_windows=2"],
    "bert": ["--set", "batch_size=4", "--set", "valid_pairs=8"],
    "elmo": ["--set", "batch_size=4", "--set", "train_reviews=30", "--set", "valid_sentences=8",
             "--set", "milestones=[50]"],
    "awd-lstm": ["--set", "batch_size=4", "--set", "heldout_tokens=500"],
    "ulmfit-imdb": ["--set", "batch_size=4", "--set", "train_reviews=30", "--set", "heldout_tokens=500",
                    "--set", "max_new=300", "--set", "milestones=[200]"],
}


@pytest.mark.parametrize("model", list(GPU_TRIAL))
def test_the_gpu_preset_runs_a_few_steps_on_the_cpu_and_records_its_recipe(model, small_data, tmp_path, capsys):
    out = tmp_path / model
    assert cli.main(["pretrain", model, "--preset", "gpu", "--device", "cpu", "--steps", "3", "--out", str(out),
                     *GPU_TRIAL[model]]) == 0, capsys.readouterr().err
    report = json.loads((out / "pretrain.json").read_text())
    assert report["recipe"]["steps"] == 3 and report["recipe"]["batch_size"] == 4
    assert report["sha256"][f"{NAMES[model]}.safetensors"] == sha256_of(out / f"{NAMES[model]}.safetensors")
    assert not (out / RESUME).exists()
    milestones = report["recipe"].get("milestones")
    for tokens in milestones or ():  # each milestone's checkpoint, as it was when the run passed it
        folder = out / milestone_name(tokens)
        passed = json.loads((folder / "pretrain.json").read_text())
        assert 0 < passed["steps"] <= 3 and passed["tokens_seen"] >= tokens
        assert passed["sha256"][f"{NAMES[model]}.safetensors"] == sha256_of(folder / f"{NAMES[model]}.safetensors")


def test_a_deadline_fits_the_run_into_it(tmp_path, capsys, monkeypatch):
    from lmlib.training import callbacks

    clock = iter(range(0, 10_000, 10))  # every reading of the clock 10 s later: the run is far too slow
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: float(next(clock)))
    out = tmp_path / "awd"
    assert cli.main(["pretrain", "awd-lstm", "--preset", "teach", "--device", "cpu", "--steps", "20",
                     "--deadline", "100", "--out", str(out)]) == 0, capsys.readouterr().err
    report = json.loads((out / "pretrain.json").read_text())
    assert 1 < report["tokens_seen"] // (report["recipe"]["batch_size"] * report["recipe"]["bptt"]) < 20


# -- every option checked before any work ---------------------------------------------------------------------
@pytest.fixture
def no_work(monkeypatch):
    """Each recipe's first reading of data fails the test: a refused run must stop before it (and so before any
    tokenizer is trained)."""
    def work(*args, **kwargs):
        raise AssertionError("the run read data before refusing its options")

    for module, first in ((gpt, "unsup_split"), (bert, "unsup_split"), (elmo, "unsup_sentences"),
                          (ulmfit, "ptb_vocab"), (ulmfit, "imdb_lm_texts")):
        monkeypatch.setattr(module, first, work)


def refused(capsys, argv: list[str]) -> str:
    """Run ``python -m lmlib`` with ``argv``; it must exit with status 2 and one line on stderr, which is returned."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err.strip()


def unwritable(tmp_path: Path) -> Path:
    """A folder name where this process may not create anything."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        return locked / "out"
    if not Path("/sys/kernel").is_dir():  # root writes wherever permissions allow; sysfs refuses new folders
        pytest.skip("running as root on a system without sysfs: no unwritable folder to try")
    return Path("/sys/kernel/lmlib-pretrain-test")


BAD = {  # case -> (extra arguments, the message, in part); {out} is the --out given
    "cuda without CUDA": (["--device", "cuda"], "error: --device cuda, but PyTorch sees no CUDA GPU on this machine"),
    "--out is a file": ([], "error: --out {out} is a file, not a folder: name a folder"),
    "--out under a file": ([], "error: --out {out} cannot be created: {file} is a file, not a folder"),
    "--out unwritable": ([], "error: --out {out} is not writable"),
    "--stop-after at the last step": (["--steps", "6", "--stop-after", "6"],
                                      "error: --stop-after 6 is not before the run's last step (6)"),
    "--stop-after 0": (["--stop-after", "0"], "error: --stop-after must be at least 1, got 0"),
    "--checkpoint-every 0": (["--checkpoint-every", "0"], "error: --checkpoint-every must be at least 1, got 0"),
    "--steps 0": (["--steps", "0"], "error: steps must be at least 1, got 0"),
    "--threads 0": (["--threads", "0"], "error: --threads must be at least 1, got 0"),
    "--set an unknown value": (["--set", "nope=1"], "error: --set nope: not a value of this recipe"),
    "--set without =": (["--set", "steps"], "error: --set steps: write KEY=VALUE"),
    "--deadline 0": (["--deadline", "0"], "error: --deadline must be a positive number of seconds, got 0"),
}


@pytest.mark.parametrize("model", list(NAMES))
@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_option_is_refused_in_one_line_before_any_work_and_nothing_is_written(no_work, monkeypatch, tmp_path,
                                                                                     capsys, model, case):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without CUDA (also on one with)
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    out = {"--out is a file": file, "--out under a file": file / "out",
           "--out unwritable": unwritable(tmp_path) if case == "--out unwritable" else None}.get(case, tmp_path / "out")
    before = {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")}
    extra, message = BAD[case]
    line = refused(capsys, ["pretrain", model, "--preset", "teach", "--device", "cpu", "--out", str(out), *extra])
    assert message.format(out=out, file=file) in line
    assert {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")} == before  # nothing written
    assert not out.exists() or out == file


def test_a_bad_lmlib_preset_is_refused_by_name(no_work, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("LMLIB_PRESET", "huge")
    line = refused(capsys, ["pretrain", "gpt", "--device", "cpu", "--out", str(tmp_path / "out")])
    assert line == "error: LMLIB_PRESET='huge' is not a preset; use one of teach, full, or pass --preset"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("variable, preset, said", [
    (None, "teach", "preset teach (the default, as in the notebooks; --preset full trains the recorded recipe)"),
    ("teach", "teach", "preset teach (from LMLIB_PRESET; --preset full trains the recorded recipe)"),
    (" Full", "full", "preset full (from LMLIB_PRESET; --preset full trains the recorded recipe)"),
])
def test_without_preset_the_notebooks_preset_applies(monkeypatch, capsys, variable, preset, said):
    calls = []
    monkeypatch.setattr(gpt, "pretrain", lambda out, steps, preset, run, overrides: calls.append((out, preset)))
    if variable is None:
        monkeypatch.delenv("LMLIB_PRESET", raising=False)
    else:
        monkeypatch.setenv("LMLIB_PRESET", variable)
    assert cli.main(["pretrain", "gpt", "--device", "cpu"]) == 0
    folder = "gpt_imdb" if preset == "full" else "gpt_imdb-teach"  # a teach run does not take the full run's folder
    assert calls == [(cli.DEFAULT_OUT / folder, preset)]
    assert capsys.readouterr().out.splitlines() == [said]
    assert cli.main(["pretrain", "gpt", "--device", "cpu", "--preset", "teach"]) == 0  # --preset wins, said by itself
    assert calls[-1] == (cli.DEFAULT_OUT / "gpt_imdb-teach", "teach") and capsys.readouterr().out == ""


def test_stop_after_is_a_step_of_the_whole_run_also_when_resuming(runs, tmp_path, capsys):
    out, steps = tmp_path / "run", ("--steps", str(STEPS), "--checkpoint-every", "2")
    assert pretrain("gpt", out, *steps, "--stop-after", "3") == 0
    assert "stopped after step 3 as asked" in capsys.readouterr().err
    assert torch.load(out / RESUME, weights_only=True)["step"] == 2
    assert pretrain("gpt", out, *steps, "--resume", "--stop-after", "7") == 0  # steps 3 to 7, not 3 to 9
    shown = capsys.readouterr()
    assert "stopped after step 7 as asked" in shown.err
    assert "gpt_imdb: 5 steps (3-7 of 12)" in shown.out
    assert torch.load(out / RESUME, weights_only=True)["step"] == 6
    # a step the resumed run has already passed is refused, and resume.pt is left as it was
    before = (out / RESUME).read_bytes()
    line = refused(capsys, ["pretrain", "gpt", "--preset", "teach", "--device", "cpu", "--out", str(out), *steps,
                            "--resume", "--stop-after", "6"])
    assert line == (f"error: --stop-after 6, but {out / RESUME} resumes after step 6: choose a step above 6, or leave "
                    f"out --stop-after")
    assert (out / RESUME).read_bytes() == before
    assert pretrain("gpt", out, *steps, "--resume") == 0  # stopped twice, the same bytes as in one go
    weights = "gpt_imdb.safetensors"
    assert (out / weights).read_bytes() == (runs["gpt"][0] / weights).read_bytes()


# -- progress -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["gpt", "bert", "elmo"])
def test_progress_shows_every_tenth_with_tokens_per_second_and_eta_then_one_summary_line(runs, model):
    whole, stopped, resumed = runs["printed"][model]
    name, tokens = NAMES[model], json.loads((runs[model][0] / "pretrain.json").read_text())["tokens_seen"]
    # not a terminal: plain lines (no carriage returns), a tenth of 12 steps being one step
    lines = [line for line in whole["err"].splitlines() if line.startswith(f"{name}: step ")]
    assert "\r" not in whole["err"] and len(lines) == STEPS
    for step, line in enumerate(lines, 1):
        assert re.fullmatch(rf"{name}: step {step}/{STEPS} \(\d+%\)  loss \d+\.\d{{3}}  [\d,]+ tokens/s  "
                            rf"\d+:\d\d elapsed, ETA \d+:\d\d", line), line
    # the summary counts the tokens the report counts
    summary = rf"{name}: {STEPS} steps \(1-{STEPS} of {STEPS}\), {tokens:,} tokens in [\d.]+ s, [\d,]+ tokens/s; " \
              rf"loss at the last step \d+\.\d{{3}}"
    assert len([line for line in whole["out"].splitlines() if re.fullmatch(summary, line)]) == 1, whole["out"]
    # a run stopped after step CRASH sums up its steps; resumed from the checkpoint at EVERY, its own stretch
    assert f"{name}: {CRASH} steps (1-{CRASH} of {STEPS}), " in stopped["out"]
    assert f"{name}: {STEPS - EVERY} steps ({EVERY + 1}-{STEPS} of {STEPS}), " in resumed["out"]
    assert f"{name}: step {EVERY + 1}/{STEPS}" in resumed["err"] and f"step {EVERY}/{STEPS}" not in resumed["err"]


# -- bf16 ----------------------------------------------------------------------------------------------------
BF16_TOLERANCE = 0.05  # nats: bf16 keeps 8 bits of mantissa, so a loss near 6 moves by a few hundredths at most


def test_bf16_autocast_keeps_a_tiny_runs_losses_within_tolerance_of_float32(runs, tmp_path):
    assert pretrain("gpt", tmp_path / "bf16", "--steps", str(STEPS), "--bf16") == 0
    fp32 = json.loads((runs["gpt"][0] / "pretrain.json").read_text())
    bf16 = json.loads((tmp_path / "bf16" / "pretrain.json").read_text())
    assert bf16["run"] == {"device": "cpu", "bf16": True, "world_size": 1}
    for key in ("final_train_loss", "mean_train_loss_last_100", "valid_nll"):
        assert abs(bf16[key] - fp32[key]) < BF16_TOLERANCE, (key, bf16[key], fp32[key])
    assert bf16["sha256"]["gpt_imdb.safetensors"] != fp32["sha256"]["gpt_imdb.safetensors"]  # it did change the math


# -- several processes ---------------------------------------------------------------------------------------
def torchrun(out: Path, *extra: str, model: str = "gpt") -> subprocess.CompletedProcess:
    """``python -m lmlib pretrain MODEL`` (teach, ``STEPS`` steps) in two processes, launched as the torchrun line of
    ``pretrain --help`` (:data:`~lmlib.__main__.TORCHRUN_EXAMPLE`) is written, with this virtual environment's
    ``torchrun``: only the model and the options after it differ."""
    words = shlex.split(cli.TORCHRUN_EXAMPLE)
    at = words.index("pretrain") + 1  # the model follows, then the example's options
    assert words[0] == "torchrun" and words[at] == "gpt"
    cmd = [str(Path(sys.executable).with_name("torchrun")), *words[1:at], model, *words[at + 1:], "--device", "cpu",
           "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--out", str(out), *extra]
    run = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=120, cwd=out.parent)
    assert run.returncode == 0, f"torchrun failed:\n{run.stdout}\n{run.stderr[-4000:]}"
    return run


def assert_same_weights(one: Path, two: Path, model: str = "gpt") -> None:
    """Each rank's half batch with gradients averaged takes the same steps as one process with the whole batch, up
    to float rounding (and the fp16 of the file)."""
    file = f"{NAMES[model]}.safetensors"
    a, b = load_file(one / file), load_file(two / file)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key].float(), a[key].float(), rtol=0, atol=2e-3, msg=key)


def test_two_processes_under_torchrun_train_the_same_gpt_as_one(runs, tmp_path):
    out = tmp_path / "ddp"
    run = torchrun(out)
    assert run.stdout.count(f"wrote {out}") == 1  # rank 0 alone wrote and reported
    # and alone printed: the data line, the progress (plain lines: not a terminal) and the summary, with tokens of
    # both processes' shares
    assert run.stdout.count("tokenizer: ") == 1
    assert run.stderr.count(f"gpt_imdb: step {STEPS}/{STEPS} (100%)") == 1
    tokens = json.loads((out / "pretrain.json").read_text())["tokens_seen"]
    assert run.stdout.count(f"gpt_imdb: {STEPS} steps (1-{STEPS} of {STEPS}), {tokens:,} tokens in ") == 1
    single, double = runs["gpt"][0], out
    report = json.loads((double / "pretrain.json").read_text())
    assert report["run"] == {"device": "cpu", "bf16": False, "world_size": 2}
    assert report["recipe"] == json.loads((single / "pretrain.json").read_text())["recipe"]
    assert_same_weights(single, double)
    assert sorted(p.name for p in double.iterdir()) == ["gpt_imdb.safetensors", "pretrain.json", "tokenizer.json"]
    shutil.rmtree(out)


def test_bert_under_torchrun_trains_as_in_one_process_though_the_shares_hold_different_numbers_of_masked_tokens(
        runs, tmp_path):
    out = tmp_path / "bert"
    run = torchrun(out, model="bert")
    assert run.stdout.count(f"wrote {out}") == 1
    single, double = (json.loads((d / "pretrain.json").read_text()) for d in (runs["bert"][0], out))
    assert double["run"]["world_size"] == 2
    assert double["final_train_loss"] == pytest.approx(single["final_train_loss"], abs=1e-4, rel=0)
    assert double["valid"]["mlm_loss"] == pytest.approx(single["valid"]["mlm_loss"], abs=1e-4, rel=0)
    assert_same_weights(runs["bert"][0], out, model="bert")


@pytest.fixture(scope="module")
def awd_stopped_under_torchrun(tmp_path_factory):
    """The AWD-LSTM's teach run stopped after CRASH steps under torchrun: two tests go on from copies of it."""
    out = tmp_path_factory.mktemp("awd-torchrun") / "stopped"
    torchrun(out, "--stop-after", str(CRASH), model="awd-lstm")
    return out


@pytest.mark.parametrize("model", ["elmo", "awd-lstm"])
def test_the_models_with_dropout_train_under_torchrun(runs, tmp_path, model, request):
    """Their recipes use dropout, and each rank draws its own masks, so two processes take other (equally valid)
    steps than one: the run must complete, write once, and land near the one-process loss."""
    single = runs[model][0] if model in runs else tmp_path / "one"
    if model not in runs:
        assert pretrain(model, single, "--steps", str(STEPS)) == 0
    out = tmp_path / "two"
    run = torchrun(out, model=model)
    assert run.stdout.count(f"wrote {out}") == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in single.iterdir() if p.name != RESUME)
    one, two = (json.loads((d / "pretrain.json").read_text()) for d in (single, out))
    assert two["run"]["world_size"] == 2 and two["recipe"] == one["recipe"]
    assert two["final_train_loss"] == pytest.approx(one["final_train_loss"], abs=0.2, rel=0)
    if model != "awd-lstm":
        return
    # stopped and resumed with two processes again, each rank takes up its own dropout stream and its own streams'
    # hidden state (the AWD-LSTM has both, so this one case covers the dropout models): the same bytes as the
    # uninterrupted two-process run
    resumed = tmp_path / "two_resumed"
    shutil.copytree(request.getfixturevalue("awd_stopped_under_torchrun"), resumed)
    torchrun(resumed, "--resume", model=model)
    again = json.loads((resumed / "pretrain.json").read_text())
    assert again["sha256"] == two["sha256"]


def test_the_awd_lstms_carried_state_moves_between_process_counts_on_resume(awd_stopped_under_torchrun, tmp_path,
                                                                              capsys):
    """Each rank carries the hidden state of its own streams; resumed with another number of processes, the
    ranks' rows are stacked and cut again (StatefulLMLoss.regroup_state), instead of a shape error at the next step."""
    steps = ("--steps", str(STEPS), "--checkpoint-every", str(EVERY))
    two_then_one, one_then_two = tmp_path / "two_then_one", tmp_path / "one_then_two"
    shutil.copytree(awd_stopped_under_torchrun, two_then_one)
    saved = torch.load(two_then_one / RESUME, weights_only=True)
    assert [tuple(s["loss_fn"]["state"][0][0].shape)[1] for s in saved["by_rank"]] == [4, 4]  # teach: 8 streams, halved
    assert pretrain("awd-lstm", two_then_one, *steps, "--resume") == 0
    assert "written by 2 process(es), continued by 1" in capsys.readouterr().out
    assert pretrain("awd-lstm", one_then_two, *steps, "--stop-after", str(CRASH)) == 0
    torchrun(one_then_two, "--resume", model="awd-lstm")
    for out, sizes in ((two_then_one, [2, 1]), (one_then_two, [1, 2])):
        report = json.loads((out / "pretrain.json").read_text())
        assert report["run"]["world_sizes"] == sizes and not (out / RESUME).exists()
        assert math.isfinite(report["final_train_loss"])


def test_a_run_stopped_under_torchrun_finishes_in_one_process_and_the_other_way_round(runs, tmp_path, capsys):
    steps = ("--steps", str(STEPS), "--checkpoint-every", str(EVERY))
    two_then_one, one_then_two = tmp_path / "two_then_one", tmp_path / "one_then_two"

    torchrun(two_then_one, "--stop-after", str(CRASH))
    assert torch.load(two_then_one / RESUME, weights_only=True)["world_sizes"] == [2]
    assert pretrain("gpt", two_then_one, *steps, "--resume") == 0
    assert "written by 2 process(es), continued by 1" in capsys.readouterr().out

    assert pretrain("gpt", one_then_two, *steps, "--stop-after", str(CRASH)) == 0
    run = torchrun(one_then_two, "--resume")
    assert run.stdout.count("written by 1 process(es), continued by 2") == 1  # said once, by rank 0

    for out, sizes in ((two_then_one, [2, 1]), (one_then_two, [1, 2])):
        assert_same_weights(runs["gpt"][0], out)
        assert json.loads((out / "pretrain.json").read_text())["run"]["world_sizes"] == sizes
        assert not (out / RESUME).exists()


@pytest.mark.parametrize("preset, tokens", [("teach", 10_000), ("full", None)])
def test_the_awd_lstms_perplexities_read_the_first_heldout_tokens_in_teach_and_the_whole_splits_in_full(
        preset, tokens, monkeypatch, tmp_path):
    from lmlib.data import load_ptb

    seen = []
    monkeypatch.setattr(ulmfit, "evaluate_lm", lambda model, ids: seen.append(ids) or 100.0)
    report = ulmfit.pretrain(tmp_path / "awd", steps=1, preset=preset)
    whole = [sum(len(line) for line in load_ptb(split)) for split in ("valid", "test")]
    assert [len(ids) for ids in seen] == [n if tokens is None else tokens for n in whole]
    ids = ulmfit._ptb_ids(ulmfit.ptb_vocab(), "valid")
    assert torch.equal(seen[0], ids[:len(seen[0])])  # the first tokens, in order
    assert report["recipe"].get("heldout_tokens") == tokens and report["valid_ppl"] == 100.0


def test_sigterm_writes_the_resume_checkpoint_and_stops_and_the_resumed_run_ends_as_one_uninterrupted(
        tmp_path, monkeypatch, capsys):
    """A stop asked for by SIGTERM (what a session's end or `kill` sends) is taken after the step in progress: the
    checkpoint of that step is written, and --resume ends with the bytes of the run that was never stopped."""
    import signal
    import threading

    from lmlib.training.trainer import Trainer

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")
    step = Trainer.train_step

    def sigterm_after_step_5(self, batch):
        step(self, batch)
        if self.step == 5:
            signal.raise_signal(signal.SIGTERM)

    out, steps = tmp_path / "awd", ("--steps", str(STEPS), "--checkpoint-every", "100")
    with monkeypatch.context() as patched:
        patched.setattr(Trainer, "train_step", sigterm_after_step_5)
        assert pretrain("awd-lstm", out, *steps) == 0
    assert "stopped by SIGTERM after step" in capsys.readouterr().err
    assert torch.load(out / RESUME, weights_only=True)["step"] in (5, 6)  # that step, or the next: no later
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back
    assert pretrain("awd-lstm", out, *steps, "--resume") == 0
    whole = tmp_path / "whole"
    assert pretrain("awd-lstm", whole, *steps) == 0
    assert (out / "awd_lstm_ptb.safetensors").read_bytes() == (whole / "awd_lstm_ptb.safetensors").read_bytes()


def test_a_checkpoint_is_written_every_checkpoint_minutes_of_training(tmp_path, monkeypatch):
    from lmlib.recipes import pretraining

    clock = iter(range(0, 100_000, 40))  # every reading of the clock 40 s later
    monkeypatch.setattr(pretraining.time, "perf_counter", lambda: float(next(clock)))
    out = tmp_path / "awd"
    assert pretrain("awd-lstm", out, "--steps", "10", "--checkpoint-every", "100", "--checkpoint-minutes", "1",
                    "--stop-after", "5") == 0
    assert torch.load(out / RESUME, weights_only=True)["step"] == 5  # written at least once a minute: step 5's
    assert pretrain("awd-lstm", tmp_path / "never", "--steps", "10", "--checkpoint-every", "100",
                    "--checkpoint-minutes", "1000", "--stop-after", "5") == 0
    assert not (tmp_path / "never" / RESUME).exists()


CPU_TRIAL = {  # model -> what makes its cpu preset a trial of seconds
    "elmo": ["--set", "batch_size=4", "--set", "train_reviews=30", "--set", "valid_sentences=8", "--set", "sampled=16",
             "--set", "milestones=[50]"],
    "ulmfit-imdb": ["--set", "batch_size=4", "--set", "bptt=10", "--set", "train_reviews=30",
                    "--set", "heldout_tokens=300", "--set", "sampled=16", "--set", "milestones=[50]"],
}


@pytest.mark.parametrize("model", list(CPU_TRIAL))
def test_the_cpu_preset_trains_with_a_sampled_softmax_and_records_exact_perplexities(model, tmp_path, capsys):
    out = tmp_path / model
    assert cli.main(["pretrain", model, "--preset", "cpu", "--device", "cpu", "--steps", "3", "--out", str(out),
                     *CPU_TRIAL[model]]) == 0, capsys.readouterr().err
    report = json.loads((out / "pretrain.json").read_text())
    assert report["recipe"]["sampled"] == 16 and "sampled softmax" in report["train_loss"]
    milestone = json.loads((out / milestone_name(50) / "pretrain.json").read_text())
    metric = "imdb_held_out_ppl" if model == "ulmfit-imdb" else "valid_forward_ppl"
    assert math.isfinite(milestone[metric]) and milestone[metric] > 1
    if model == "ulmfit-imdb":  # it goes on from the start folder's LM, whose vocabulary it keeps
        start = json.loads((ulmfit._repo_path(report["recipe"]["start"]) / "pretrain.json").read_text())
        assert report["start"]["sha256"] == start["sha256"]["ulmfit_imdb.safetensors"]
        assert report["vocab_size"] == start["vocab_size"]


def test_a_bad_sample_count_is_refused_before_any_work(tmp_path, capsys):
    assert cli.main(["pretrain", "elmo", "--preset", "cpu", "--device", "cpu", "--out", str(tmp_path / "e"),
                     "--set", "sampled=0"]) == 2
    assert "sampled" in capsys.readouterr().err and not (tmp_path / "e").exists()


def test_continue_at_takes_up_the_schedule_data_and_milestones_at_the_step_given():
    """A run continued at step 3 from its weights there (its resume state lost) sees the batches, rates and milestone
    saves an uninterrupted run saw from step 3 on; only the optimizer's moments start again."""
    from lmlib.recipes.pretraining import Milestones
    from lmlib.training.schedules import STLR
    from lmlib.training.trainer import Callback, Trainer

    batches = [(torch.full((2, 3), float(i)), torch.zeros(2, 1)) for i in range(8)]

    class Seen(Callback):
        def __init__(self):
            self.batches, self.lrs = [], []

        def on_batch_begin(self, trainer, batch):
            self.batches.append(int(batch[0][0, 0]))

        def on_batch_end(self, trainer, loss):
            self.lrs.append(trainer.lr)

    def run(continue_at=None, state=None):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        if state is not None:
            model.load_state_dict(state)
        saved, seen = [], Seen()
        trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-2),
                          lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]),
                          [STLR(8), Milestones(6, [12, 30, 42], lambda t, tokens: saved.append((t.step, tokens))), seen])
        snapshots = {}
        trainer.callbacks.append(type("Snap", (Callback,), {"on_batch_end": lambda self, t, loss: snapshots.setdefault(
            t.step, {k: v.clone() for k, v in t.model.state_dict().items()})})())
        if continue_at is not None:
            trainer.continue_at(continue_at)
        trainer.fit(batches)
        return trainer, saved, seen, snapshots

    whole, saved_whole, seen_whole, snapshots = run()
    part, saved_part, seen_part, _ = run(continue_at=3, state=snapshots[3])
    assert seen_part.batches == seen_whole.batches[3:] == [3, 4, 5, 6, 7]
    assert seen_part.lrs == pytest.approx(seen_whole.lrs[3:], rel=1e-12)  # the triangle from the run's first step
    assert saved_whole == [(2, 12), (5, 30), (7, 42)] and saved_part == [(5, 30), (7, 42)]
    assert part.step == whole.step == 8
    with pytest.raises(ValueError, match="fresh trainer"):
        part.continue_at(3)


def test_a_run_whose_resume_state_is_lost_goes_on_from_its_milestone(tmp_path, capsys):
    """Stopped after step 5 with a milestone at step 3 and its resume.pt then lost, the run goes on from the
    milestone with --from-milestone: it writes only the milestones still ahead, ends at the planned step with the
    tokens of the whole run, records where it went on from, keeps that through a later --resume, and is refused
    with a resume.pt present or another recipe."""
    trial = [a if a != "milestones=[50]" else "milestones=[120,240]" for a in CPU_TRIAL["ulmfit-imdb"]]
    args = ["pretrain", "ulmfit-imdb", "--preset", "cpu", "--device", "cpu", "--steps", "8", *trial]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert cli.main([*args, "--out", str(whole)]) == 0, capsys.readouterr().err
    assert cli.main([*args, "--out", str(part), "--stop-after", "5", "--checkpoint-every", "1"]) == 0
    milestone = part / milestone_name(120)
    written = json.loads((milestone / "pretrain.json").read_text())
    assert written["steps"] == 3
    # where and how the run had trained when the milestone was written: the one stretch so far, from the start
    assert written["run"] == {"device": "cpu", "bf16": False, "world_size": 1,
                              "stretches": [{"from_step": 0, "world_size": 1, "threads": 1}]}
    stopped = json.loads((part / LAST_STOP / "pretrain.json").read_text())  # the stop also wrote its weights
    assert (stopped["steps"], stopped["tokens_seen"]) == (5, 5 * 4 * 10)
    first_240 = (part / milestone_name(240)).exists()
    (part / RESUME).unlink()                             # lost with the work tree
    shutil.copytree(milestone, tmp_path / "kept")        # the committed copy
    shutil.rmtree(part / milestone_name(120))
    capsys.readouterr()
    code = cli.main([*args, "--out", str(part), "--from-milestone", str(tmp_path / "kept"), "--stop-after", "6",
                     "--checkpoint-every", "1", "--threads", "2"])
    assert code == 0 and "continued ulmfit_imdb from the milestone" in capsys.readouterr().out
    assert not first_240 and (part / milestone_name(240)).is_dir() and not (part / milestone_name(120)).exists()
    # its resume.pt is there again: that one goes on exactly, so the milestone is refused
    assert cli.main([*args, "--out", str(part), "--from-milestone", str(tmp_path / "kept")]) == 2
    assert cli.main([*args, "--out", str(part), "--resume"]) == 0, capsys.readouterr().err
    done, reference = json.loads((part / "pretrain.json").read_text()), json.loads((whole / "pretrain.json").read_text())
    assert done["tokens_seen"] == reference["tokens_seen"] == 8 * 4 * 10
    assert done["continued_from_milestone"]["steps"] == 3 and "continued_from_milestone" not in reference
    assert done["before"] == reference["before"]  # the run's start, not the milestone it went on from
    # its stretches: the milestone's (steps 1-3; the lost steps 4-5 are not among them), the one that went on from
    # it on two threads, and the one resumed after step 6
    assert done["run"]["stretches"] == [{"from_step": 0, "world_size": 1, "threads": 1},
                                        {"from_step": 3, "world_size": 1, "threads": 2},
                                        {"from_step": 6, "world_size": 1, "threads": 1}]
    assert "run" not in reference  # one stretch, one process, float32 on the CPU: nothing to add
    capsys.readouterr()
    assert cli.main([*args, "--out", str(tmp_path / "other"), "--set", "eta_max=0.001",
                     "--from-milestone", str(tmp_path / "kept")]) == 2  # another recipe's milestone
    assert not (tmp_path / "other").exists()
