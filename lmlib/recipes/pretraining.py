"""What every pretraining recipe shares: presets, resumable runs, data-parallel and bf16 training, GPU-sized runs.

``python -m lmlib pretrain {awd-lstm,ulmfit-imdb,elmo,gpt,bert}`` (:mod:`lmlib.__main__`) calls the recipe module's
``pretrain(out_dir, steps, preset, run, overrides)`` (``run`` a :class:`RunOptions`, ``overrides`` recipe values by
name), which returns the report it wrote (None on a rank other than 0 under torchrun). That function states *what* is
computed (data, model, optimizer, schedule), a :class:`PretrainRun` *how* it is carried out:

* **presets** (:func:`plan`): ``full`` is the recorded recipe (``PRETRAIN_RECIPE``/``PRETRAIN_CONFIG``); ``teach`` the
  same recipe on a sliver of the data with a tiny model (``PRETRAIN_TEACH``), to try the command in seconds; ``gpu``
  the recipe sized for one GPU (``PRETRAIN_GPU``), ``cpu`` the recipe planned for many evenings of a CPU
  (``PRETRAIN_CPU``: a sampled softmax, its schedule laid over the whole budget, resumed run after run); ``gpu``:
  wide batches built on the device, their rate by the square-root rule
  (:func:`~lmlib.training.schedules.scaled_lr`), bf16 where the model allows it (the LSTMs stay in float32), fused
  AdamW, and the loss read back every ``GPU_LOG_EVERY`` steps only, so the GPU never waits for the host.
* **a time budget** (``RunOptions.deadline``): :class:`~lmlib.training.callbacks.TimeBudget` fits the schedule to it.
* **milestones** (a recipe's ``milestones``): a checkpoint each time the tokens read pass one (:class:`Milestones`).
* **resume**: every ``checkpoint_every`` steps, every ``checkpoint_seconds`` of training and when the process is
  asked to stop (SIGTERM, or Ctrl-C's SIGINT) the Trainer's state and every global random generator go to
  ``<out>/resume.pt`` (atomically); a stop then ends the run as ``stop_after`` does. A resumed run rebuilds data and model with the same seeds, loads it, and the
  Trainer drops the batches already taken, so the final weights equal an uninterrupted run's bit for bit. The file is
  deleted once ``pretrain.json`` is written.
* **several processes** (torchrun): each global batch is split between the ranks
  (:func:`~lmlib.training.distributed.shard_batches`), each rank draws its own dropout masks, rank 0 alone writes
  files. A run resumed with another number of processes takes the same steps up to float rounding, not bit for bit;
  ``pretrain.json`` then lists the process counts in ``run``.
* **checked first**: the device, the output folder, what it already holds and ``stop_after`` are checked when
  :class:`RunOptions` and :class:`PretrainRun` are built, before any data is read; each failure is a
  :class:`PretrainError` that says what to do.
* **progress** (:meth:`PretrainRun.progress`): a bar (or plain lines off a terminal) on rank 0, then a summary line.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..data import load_imdb
from ..runtime import pick_device, seed_everything
from ..training.callbacks import StepProgress, TimeBudget
from ..training.distributed import is_distributed, is_main_process, shard_batches, world_size
from ..training.trainer import Callback, Trainer
from .shipping import REPORT

PRESETS = ("teach", "full", "gpu", "cpu")
RESUME = "resume.pt"
# what a run that resumes a resume.pt or a milestone written before stretches were recorded knows of its earlier ones
UNRECORDED_STRETCH = {"from_step": None, "world_size": None, "threads": None}
LAST_STOP = "last_stop"  # a milestone-format checkpoint written when a run with milestones is stopped
GPU_LOG_EVERY = 100  # steps between reads of the loss from the device in the gpu preset


class PretrainError(ValueError):
    """A run that cannot start as asked (a folder holding another run, nothing to resume); the message says why."""


class StopRequested(Exception):
    """Raised after the step ``RunOptions.stop_after`` asked for, as if the run had been interrupted there."""


@dataclass
class RunOptions:
    """How a run is carried out, apart from the recipe: ``device`` ("cpu", "cuda" or "auto"), ``bf16`` autocast,
    a resumable checkpoint every ``checkpoint_every`` steps (None: none), ``resume`` from it, and ``stop_after``
    a step (to try ``resume``: the run stops there as if interrupted, its last checkpoint left in place); ``deadline``:
    seconds of training the schedule is fitted to (:class:`~lmlib.training.callbacks.TimeBudget`);
    ``checkpoint_seconds``: a resumable checkpoint also after that many seconds since the last one (one process
    only: under torchrun the ranks would not agree on the moment); ``from_milestone``: a milestone folder the run wrote
    on the way, to go on from when its ``resume.pt`` is lost (:meth:`PretrainRun.fit`)."""

    device: str = "cpu"
    bf16: bool = False
    checkpoint_every: int | None = None
    checkpoint_seconds: float | None = None
    resume: bool = False
    stop_after: int | None = None
    deadline: float | None = None
    from_milestone: str | Path | None = None

    def __post_init__(self):
        if self.deadline is not None and not self.deadline > 0:
            raise PretrainError(f"--deadline must be a positive number of seconds, got {self.deadline}")
        if self.checkpoint_seconds is not None and not self.checkpoint_seconds > 0:
            raise PretrainError(f"--checkpoint-minutes must be a positive number, got {self.checkpoint_seconds / 60:g}")
        for field in ("checkpoint_every", "stop_after"):
            value = getattr(self, field)
            if value is not None and value < 1:
                raise PretrainError(f"--{field.replace('_', '-')} must be at least 1, got {value}")
        if self.from_milestone is not None and self.resume:
            raise PretrainError("--resume and --from-milestone exclude each other: --resume goes on from resume.pt, "
                                "--from-milestone from a milestone's weights when resume.pt is lost")
        if self.device not in ("auto", "cpu", "cuda"):
            raise PretrainError(f"unknown device {self.device!r}: use auto, cpu or cuda")
        if self.device == "cuda":
            if not torch.cuda.is_available():
                build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
                raise PretrainError(f"--device cuda, but PyTorch sees no CUDA GPU on this machine (torch "
                                    f"{torch.__version__}, {build}): use --device cpu, or install a CUDA build of "
                                    f"torch on a machine with an NVIDIA GPU")
            processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
            if processes > torch.cuda.device_count():
                raise PretrainError(f"--device cuda with {processes} processes on this machine, but it has "
                                    f"{torch.cuda.device_count()} GPU(s): one process per GPU, so start torchrun "
                                    f"with --nproc_per_node={torch.cuda.device_count()}")
        if self.bf16 and pick_device(self.device).type == "cuda" and not torch.cuda.is_bf16_supported():
            raise PretrainError(f"--bf16, but this GPU ({torch.cuda.get_device_name()}) cannot compute in bfloat16: "
                                f"leave out --bf16")


def plan(preset: str, steps: int | None, recipe: Mapping, config: Mapping, teach: Mapping,
         tokenizer: Mapping | None = None, gpu: Mapping | None = None,
         overrides: Mapping | None = None, cpu: Mapping | None = None) -> tuple[dict, dict, dict]:
    """``(recipe, config, tokenizer recipe)`` of ``preset``: the recorded ones for ``full``, with the ``"recipe"``,
    ``"config"`` and ``"tokenizer"`` overrides of ``teach``, ``gpu`` or ``cpu`` for those presets (and without the
    recipe keys in their ``"drop"``, values the preset does not use). ``overrides`` then replace recipe values by name
    (each must be a key of the recipe) and ``steps`` (if given) the step count."""
    if preset not in PRESETS:
        raise PretrainError(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}")
    if preset in ("gpu", "cpu") and {"gpu": gpu, "cpu": cpu}[preset] is None:
        raise PretrainError(f"this model has no {preset} preset")
    over = {"teach": teach, "gpu": gpu, "cpu": cpu}.get(preset) or {}
    recipe = {k: v for k, v in {**recipe, **over.get("recipe", {})}.items() if k not in over.get("drop", ())}
    unknown = sorted(set(overrides or ()) - set(recipe))
    if unknown:
        raise PretrainError(f"--set {unknown[0]}: not a value of this recipe; it has {', '.join(sorted(recipe))}")
    recipe.update(overrides or {})
    if steps is not None:
        if steps < 1:
            raise PretrainError(f"steps must be at least 1, got {steps}")
        recipe["steps"] = steps
    return recipe, {**config, **over.get("config", {})}, {**(tokenizer or {}), **over.get("tokenizer", {})}


def unsup_split(valid_reviews: int = 1000) -> tuple[list[str], list[str]]:
    """IMDb's 50,000 unlabelled reviews as (train, held-out): the last ``valid_reviews`` are held out."""
    texts = load_imdb("unsup").texts
    if not 0 < valid_reviews < len(texts):
        raise ValueError(f"valid_reviews must be in (0, {len(texts)}), got {valid_reviews}")
    return list(texts[:-valid_reviews]), list(texts[-valid_reviews:])


def last_losses(losses: list[float]) -> dict:
    """A report's last training loss and the mean of the last 100."""
    return {"final_train_loss": losses[-1], "mean_train_loss_last_100": sum(losses[-100:]) / len(losses[-100:])}


class _RunControl(Callback):
    """Writes the resume checkpoint every ``every`` steps, every ``checkpoint_seconds`` and when the process is asked
    to stop (``signalled``: set by :meth:`PretrainRun.fit`'s SIGTERM/SIGINT handler), and stops after ``stop_after``
    or such a signal, first writing the weights as a milestone into ``<out>/last_stop`` when the recipe has
    milestones (what ``--from-milestone`` goes on from if ``resume.pt`` is lost): one callback, always present, so a
    checkpoint's callback list matches whatever options the resuming run was given."""

    def __init__(self, run: PretrainRun):
        self.run = run
        self.signalled: str | None = None
        self.last_save = time.perf_counter()

    def on_batch_end(self, trainer: Trainer, loss) -> None:
        options = self.run.options
        every, stop, seconds = options.checkpoint_every, options.stop_after, options.checkpoint_seconds
        due = every is not None and trainer.step % every == 0
        if not is_distributed():  # the ranks would not agree on a moment or a signal: steps only there
            due = due or self.signalled is not None
            due = due or (seconds is not None and time.perf_counter() - self.last_save >= seconds)
        if due:
            trainer.save_checkpoint(self.run.resume_path, {"run": self.run.meta, "world_sizes": self.run.world_sizes,
                                                           "stretches": self.run.stretches,
                                                           "continued_from_milestone": self.run.continued_from})
            self.last_save = time.perf_counter()
        signalled = self.signalled is not None and not is_distributed()
        asked = stop is not None and trainer.step >= stop
        if (signalled or asked) and self.run._stop_save is not None and is_main_process():
            self.run._stop_save(trainer)  # the weights as a milestone: --from-milestone goes on from it without resume.pt
        if signalled:
            raise StopRequested(f"stopped by {self.signalled} after step {trainer.step}, {self.run.resume_path} "
                                f"written")
        if asked:
            raise StopRequested(f"stopped after step {trainer.step} as asked (--stop-after {stop})")


def _catch_stop_signals(control: _RunControl) -> dict:
    """Make SIGTERM and SIGINT ask ``control`` to checkpoint and stop after the step in progress (instead of killing
    the process mid-step); returns the handlers it replaced. Signals reach only the main thread: elsewhere, nothing."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def ask_to_stop(signum, frame):
        control.signalled = signal.Signals(signum).name

    replaced = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        replaced[sig] = signal.signal(sig, ask_to_stop)
    return replaced


class Milestones(Callback):
    """``save(trainer, tokens)`` each time the tokens read, ``step × tokens_per_step``, pass one of ``milestones``
    (sorted; e.g. 4M, 16M, 64M), so how a model's transfer grows with its pretraining can be measured from one run.
    ``tokens_per_step`` may be an average (sentences of varying length): the milestones are then approximate, and
    the checkpoint records the step it was taken at."""

    main_process_only = True  # it writes files

    def __init__(self, tokens_per_step: float, milestones, save: Callable[[Trainer, int], None]):
        self.tokens_per_step, self.milestones, self.save = tokens_per_step, sorted(milestones), save
        self.passed = 0

    def on_batch_end(self, trainer: Trainer, loss) -> None:
        while self.passed < len(self.milestones) and trainer.step * self.tokens_per_step >= self.milestones[self.passed]:
            self.save(trainer, self.milestones[self.passed])
            self.passed += 1

    def on_continue(self, trainer: Trainer) -> None:
        self.passed = sum(trainer.step * self.tokens_per_step >= m for m in self.milestones)

    def state_dict(self) -> dict:
        return {"passed": self.passed}

    def load_state_dict(self, state: dict) -> None:
        self.passed = int(state["passed"])


def loss_curve(losses: list[float], every: int = 100) -> list[dict]:
    """The mean training loss over each ``every`` steps, as ``{"step": last step, "loss": mean}``."""
    return [{"step": i + len(chunk), "loss": sum(chunk) / len(chunk)}
            for i in range(0, len(losses), every) for chunk in [losses[i: i + every]]]


def milestone_name(tokens: int) -> str:
    """``tokens_4M`` for 4,000,000 (``tokens_2500`` for 2,500): the folder a milestone's checkpoint goes to, inside the
    output folder."""
    return f"tokens_{tokens // 10**6}M" if tokens % 10**6 == 0 else f"tokens_{tokens}"


class PretrainRun:
    """One run of a recipe writing to ``out_dir``. ``meta`` (the recipe, config and tokenizer recipe) identifies
    it: a folder whose ``pretrain.json`` or ``resume.pt`` records another model or other values is refused before any
    work starts, and so are a folder this process cannot write, ``resume`` with no ``resume.pt`` to resume from, and a
    ``stop_after`` that is not inside the steps still to take."""

    def __init__(self, name: str, out_dir: str | Path, meta: Mapping, options: RunOptions | None = None,
                 preset: str = "full", bf16: bool = False):
        self.name, self.out_dir, self.preset = name, Path(out_dir), preset
        self.options = options or RunOptions()
        self.device = pick_device(self.options.device)
        # the gpu preset's bf16 (for the models that allow it) applies on a GPU; --bf16 anywhere
        self.bf16 = self.options.bf16 or (bf16 and preset == "gpu" and self.device.type == "cuda")
        self.meta = json.loads(json.dumps({"model": name, **meta, "bf16": self.bf16, "world_size": world_size()}))
        self.resume_path = self.out_dir / RESUME
        self.world_sizes = [world_size()]  # one entry per stretch of the run; more than one after a resume elsewhere
        # each stretch of the run (its start, then each resume or continuation from a milestone): the step it began
        # after, its processes and threads; the earlier ones come from resume.pt or the milestone's pretrain.json
        self.stretches: list[dict] = []
        self._earlier_stretches: list[dict] = []
        self.resumed_from_world_size: int | None = None  # the process count that wrote the resume.pt being resumed
        self._progress: StepProgress | None = None
        self.train_seconds = 0.0  # of the last fit
        self._stop_save: Callable[[Trainer], None] | None = None  # writes <out>/last_stop (set by milestones())
        self.milestone: dict | None = None  # the milestone this process continues from (options.from_milestone)
        self.continued_from: dict | None = None  # that milestone, or the one an earlier stretch of the run went on from
        self._check_out_dir()
        if self.options.from_milestone is not None:
            self._check_milestone(Path(self.options.from_milestone))

    # -- the folder ------------------------------------------------------------------------------------------
    def _differences(self, recorded: Mapping, keys) -> list[str]:
        """``"recipe.steps: 40 there, 10 now"`` for each value that differs (one level into dicts)."""
        wrong = []
        for k in keys:
            there, now = recorded.get(k), self.meta.get(k)
            if isinstance(there, dict) and isinstance(now, dict):
                wrong += [f"{k}.{j}: {json.dumps(there.get(j))} there, {json.dumps(now.get(j))} now"
                          for j in sorted({*there, *now}) if there.get(j) != now.get(j)]
            elif there != now:
                wrong.append(f"{k}: {json.dumps(there)} there, {json.dumps(now)} now")
        return wrong

    def _compare(self, report: Mapping) -> tuple[list[str] | None, list[str]]:
        """A written ``pretrain.json`` against this run: ``(its weight files, [])`` when it is another model's, else
        ``(None, the recipe and config values that differ)``."""
        weights = [f for f in report.get("sha256", {}) if f.endswith(".safetensors")]
        if f"{self.name}.safetensors" not in weights:
            return weights, []
        config = report.get("config", {})
        recorded = {"recipe": report.get("recipe"), "config": {k: config.get(k) for k in self.meta["config"]}}
        return None, self._differences(recorded, ("recipe", "config"))

    def _check_writable(self) -> None:
        """The output folder is a folder, or can be created, and this process may write there: refused otherwise,
        before any work. The test creates an empty temporary folder beside where the files go and removes it."""
        out = self.out_dir
        if out.exists() and not out.is_dir():
            raise PretrainError(f"--out {out} is a file, not a folder: name a folder (it is created if missing)")
        place = next(p for p in (out.absolute(), *out.absolute().parents) if p.exists())
        if not place.is_dir():
            raise PretrainError(f"--out {out} cannot be created: {place} is a file, not a folder; choose another "
                                f"--out")
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".lmlib-write-test-", dir=place))
        except OSError as err:
            raise PretrainError(f"--out {out} is not writable ({place}: {err.strerror}): choose a folder you can "
                                f"write to") from None

    def _check_stop_after(self, resumed_at: int) -> None:
        stop, steps = self.options.stop_after, self.meta["recipe"]["steps"]
        if stop is None:
            return
        if stop >= steps:
            raise PretrainError(f"--stop-after {stop} is not before the run's last step ({steps}): the run would end "
                                f"normally; choose a step below {steps}")
        if stop <= resumed_at:
            raise PretrainError(f"--stop-after {stop}, but {self.resume_path} resumes after step {resumed_at}: choose "
                                f"a step above {resumed_at}, or leave out --stop-after")

    def _check_out_dir(self) -> None:
        self._check_writable()
        out, report_path = self.out_dir, self.out_dir / REPORT
        resumed_at = 0
        if report_path.is_file():
            weights, wrong = self._compare(json.loads(report_path.read_text()))
            if weights is not None:
                raise PretrainError(f"{out} holds the checkpoint of another model ({', '.join(weights) or 'unknown'}, "
                                    f"see its {REPORT}), not {self.name}: choose another --out folder")
            if wrong:
                raise PretrainError(f"{out} holds a checkpoint of {self.name} made with another config "
                                    f"({'; '.join(wrong)}): choose another --out folder, or delete it to start over")
        if self.resume_path.is_file():
            saved = torch.load(self.resume_path, map_location="cpu", weights_only=True)
            recorded = saved.get("run", {})
            if recorded.get("model") != self.name:
                raise PretrainError(f"{self.resume_path} is an unfinished run of another model "
                                    f"({recorded.get('model', 'unknown')}), not {self.name}: choose another --out folder")
            # the number of processes may change: the global batches, hence the steps, stay the same
            wrong = self._differences(recorded, [k for k in self.meta if k not in ("model", "world_size")])
            if wrong:
                raise PretrainError(f"{self.resume_path} is an unfinished {self.name} run with another config "
                                    f"({'; '.join(wrong)}): resume it with the same options, or delete it to start "
                                    f"over")
            if not self.options.resume:
                raise PretrainError(f"{self.resume_path} holds this run, unfinished at step {saved['step']}: pass "
                                    f"--resume to continue it, or delete the file to start over")
            resumed_at = int(saved["step"])
            self.continued_from = saved.get("continued_from_milestone")
            earlier = saved.get("world_sizes", [recorded["world_size"]])
            self.resumed_from_world_size = earlier[-1]
            self.world_sizes = earlier if earlier[-1] == world_size() else [*earlier, world_size()]
            self._earlier_stretches = saved.get("stretches") or [UNRECORDED_STRETCH]
        elif self.options.resume:
            finished = f" (the run there finished: {REPORT} is present)" if report_path.is_file() else ""
            raise PretrainError(f"nothing to resume: there is no {RESUME} in {out}{finished}. A run writes it every "
                                f"--checkpoint-every steps; start without --resume")
        self._check_stop_after(resumed_at)

    def _check_milestone(self, folder: Path) -> None:
        """A milestone of this very run (same model, recipe and config), before a step still to take, and no
        ``resume.pt`` in the output folder (that one would go on exactly: ``--resume``)."""
        if self.resume_path.is_file():
            raise PretrainError(f"{self.resume_path} holds this run's resume state: continue it with --resume (exact), "
                                f"not --from-milestone")
        report_path = folder / REPORT
        if not report_path.is_file():
            raise PretrainError(f"--from-milestone {folder}: no {REPORT} there; name a milestone folder this run wrote "
                                f"(e.g. <out>/tokens_16M)")
        report = json.loads(report_path.read_text())
        weights, wrong = self._compare(report)
        if weights is not None:
            raise PretrainError(f"--from-milestone {folder} holds a checkpoint of another model "
                                f"({', '.join(weights) or 'unknown'}), not {self.name}")
        if wrong:
            raise PretrainError(f"--from-milestone {folder} was written by a run with other options ({'; '.join(wrong)}): "
                                f"continue it with the options it was started with")
        steps = report.get("steps")
        if not isinstance(steps, int) or not 1 <= steps < self.meta["recipe"]["steps"]:
            raise PretrainError(f"--from-milestone {folder}: its {REPORT} records step {steps!r}, not a step inside "
                                f"this run's {self.meta['recipe']['steps']}")
        self._check_stop_after(steps)
        self.milestone = self.continued_from = {"folder": str(folder), "steps": steps,
                                                "tokens_seen": report.get("tokens_seen"),
                                                "sha256": report["sha256"][f"{self.name}.safetensors"]}
        self._earlier_stretches = (report.get("run") or {}).get("stretches") or [UNRECORDED_STRETCH]

    def _check_milestone_weights(self, model: torch.nn.Module) -> None:
        """The model about to train holds the milestone's weights (each saved tensor equal to the model's in fp16):
        a recipe that left its start's weights in place would otherwise train on from the wrong point unnoticed."""
        from safetensors.torch import load_file

        saved = load_file(str(Path(self.milestone["folder"]) / f"{self.name}.safetensors"))
        state = model.state_dict()
        wrong = [k for k, v in saved.items() if k not in state or not torch.equal(state[k].detach().cpu().to(v.dtype), v)]
        if wrong:
            raise PretrainError(f"the model does not hold the weights of --from-milestone {self.milestone['folder']} "
                                f"({len(wrong)} of {len(saved)} tensors differ, e.g. {wrong[0]})")

    @property
    def weights_from(self) -> Path | None:
        """The milestone folder whose weights the recipe loads in place of its start (``--from-milestone``), or None."""
        return Path(self.milestone["folder"]) if self.milestone else None

    # -- training --------------------------------------------------------------------------------------------
    def trainer_options(self) -> dict:
        """The Trainer's ``device``, ``autocast`` and ``log_every`` for this run."""
        return {"device": self.device, "autocast": torch.bfloat16 if self.bf16 else None,
                "log_every": GPU_LOG_EVERY if self.preset == "gpu" else 1}

    def adam(self, params, adamw: bool = True, **settings) -> torch.optim.Optimizer:
        """AdamW (or Adam) with ``settings``; on a GPU the fused kernel, one launch for all parameters."""
        cls = torch.optim.AdamW if adamw else torch.optim.Adam
        return cls(params, **settings, **({"fused": True} if self.device.type == "cuda" else {}))

    def milestones(self, tokens_per_step: float, save: Callable[[Path, Trainer, int], None]) -> list[Callback]:
        """A :class:`Milestones` callback when the recipe has ``milestones`` (else none): ``save(folder, trainer,
        tokens)`` writes a checkpoint into ``<out>/<milestone_name(tokens)>``."""
        marks = self.meta["recipe"].get("milestones")
        if not marks:
            return []
        self._stop_save = lambda trainer: save(self.out_dir / LAST_STOP, trainer, round(trainer.step * tokens_per_step))
        return [Milestones(tokens_per_step, marks,
                           lambda trainer, tokens: save(self.out_dir / milestone_name(tokens), trainer, tokens))]

    def progress(self, tokens: Callable[[Any], int]) -> StepProgress:
        """The run's progress display (a Trainer callback; :class:`~lmlib.training.callbacks.StepProgress`) over the
        recipe's steps; ``tokens(batch)`` counts one batch's tokens. :meth:`fit` prints its summary line."""
        self._progress = StepProgress(self.meta["recipe"]["steps"], tokens, desc=self.name)
        return self._progress

    def fit(self, trainer: Trainer, batches: Callable[[int], Any]) -> Trainer:
        """One epoch of ``batches`` (a function ``epoch -> batches``, each the global batch), split between the ranks
        under torchrun, with the periodic checkpoint; after loading ``resume.pt`` when resuming. Then, on rank 0, the
        summary line of :meth:`progress` (also when the run stops after ``stop_after``). Sets ``train_seconds``."""
        if self.options.deadline is not None:
            trainer.callbacks.append(TimeBudget(self.options.deadline, steps=self.meta["recipe"]["steps"]))
        control = _RunControl(self)
        trainer.callbacks.append(control)
        if self.milestone is not None:  # the recipe has loaded its weights (weights_from)
            self._check_milestone_weights(trainer.model)
            trainer.continue_at(self.milestone["steps"])
            seed_everything(self.meta["recipe"].get("seed", 0) + self.milestone["steps"])  # fresh dropout masks
            if is_main_process():
                print(f"continued {self.name} from the milestone {self.milestone['folder']} at step {trainer.step}: "
                      f"its weights, the schedule, data and milestones from that step, the optimizer's moments from "
                      f"zero", flush=True)
        if self.options.resume:
            trainer.load_checkpoint(self.resume_path)  # also restores every global random generator
            if is_main_process():
                print(f"resumed {self.name} from {self.resume_path} at step {trainer.step}", flush=True)
                if self.resumed_from_world_size != world_size():
                    print(f"note: written by {self.resumed_from_world_size} process(es), continued by {world_size()}: "
                          f"the same global batches, so the same steps up to float rounding (not bit for bit)",
                          flush=True)
        self.stretches = [*self._earlier_stretches,
                          {"from_step": trainer.step, "world_size": world_size(), "threads": torch.get_num_threads()}]
        start = time.perf_counter()
        handlers = _catch_stop_signals(control)
        try:
            trainer.fit(shard_batches(batches) if is_distributed() else batches, epochs=1)
        except BaseException as error:
            self._close_progress(summary=isinstance(error, StopRequested))
            raise
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        self.train_seconds = time.perf_counter() - start
        self._close_progress(summary=True)
        return trainer

    def _close_progress(self, summary: bool) -> None:
        if self._progress is not None:
            self._progress.close()
            if summary and self.writes:
                print(self._progress.summary(), flush=True)

    @property
    def writes(self) -> bool:
        """Whether this process writes the results (rank 0, or the only process)."""
        return is_main_process()

    def run_record(self) -> dict:
        """Where and how the run trains: device (and on a GPU its name and torch), bf16, processes; for a run that
        was stopped and went on, or that went on from a milestone, each stretch (``from_step``: the step it began
        after; ``world_size``; ``threads``; an entry whose values are None stands for stretches from before they
        were recorded)."""
        run = {"device": self.device.type, "bf16": self.bf16, "world_size": world_size()}
        if self.device.type == "cuda":
            run.update(device_name=torch.cuda.get_device_name(self.device), torch=torch.__version__)
        if len(self.world_sizes) > 1:
            run["world_sizes"] = self.world_sizes  # processes per stretch, in order, when a resume changed them
        if len(self.stretches) > 1:
            run["stretches"] = self.stretches
        return run

    def milestone_record(self) -> dict:
        """What a milestone's ``pretrain.json`` records of the run so far: :meth:`run_record` with every stretch, the
        current one included (a run that goes on from the milestone reads its earlier stretches there)."""
        return {"run": {**self.run_record(), "stretches": self.stretches}}

    def annotate(self, report: dict) -> dict:
        """``report`` plus the training time and threads, and how the run differed from the recorded single-process
        float32 CPU run in one stretch, if it did (:meth:`run_record`)."""
        report = {**report, "train_seconds": self.train_seconds, "torch_threads": torch.get_num_threads()}
        run = self.run_record()
        if self.continued_from is not None:
            report = {**report, "continued_from_milestone": self.continued_from}
        return report if run == {"device": "cpu", "bf16": False, "world_size": 1} else {**report, "run": run}

    def finish(self) -> None:
        """Delete ``resume.pt`` once the results are written."""
        if self.writes and self.resume_path.is_file():
            os.remove(self.resume_path)


__all__ = ["PRESETS", "RESUME", "LAST_STOP", "GPU_LOG_EVERY", "PretrainError", "StopRequested", "RunOptions", "plan",
           "Milestones", "milestone_name", "loss_curve", "last_losses", "unsup_split", "PretrainRun"]
