"""ULMFiT's three stages as training runs: Howard & Ruder (2018), "Universal Language Model Fine-tuning
for Text Classification".

(a) **General-domain LM pretraining** — an AWD-LSTM language model (Merity et al. 2018) on a general
    corpus; here the Penn Treebank. :func:`pretrain` is the seeded recipe behind the small checkpoint
    shipped in ``lmlib/pretrained/`` (``python -m lmlib pretrain awd-lstm --preset gpu``), and
    :func:`load_pretrained` verifies its sha256 before loading.
(b) **Target-task LM fine-tuning** — the same LM, on the target task's own text, with discriminative
    fine-tuning (one rate per layer, η^{l−1} = η^l / 2.6) and slanted triangular learning rates
    (:mod:`lmlib.training.schedules`); new words join the vocabulary through
    :func:`lmlib.models.ulmfit.extend_vocab` (:func:`finetune_lm`; on IMDb :func:`finetune_imdb`, ``python -m lmlib
    pretrain ulmfit-imdb``).
(c) **Classifier fine-tuning** — :class:`lmlib.models.ulmfit.ULMFiTClassifier`, trained with gradual
    unfreezing (:class:`lmlib.training.callbacks.GradualUnfreezing`), STLR and discriminative rates
    over the model's ``layer_groups()`` (:func:`train_classifier`).

Below them, the data of the labelled-examples experiment of notebook 07 (rt-polarity, SST-2).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path

import torch

from ..data import load_ptb, load_rt_polarity, load_sst2
from ..models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
from ..models.ulmfit import ULMFiTClassifier, check_inputs, extend_vocab
from ..runtime import seed_everything
from ..text.batching import batchify, bptt_batches, classification_batches
from ..text.truncation import head_and_tail  # noqa: F401 (notebook 07 and the benchmarks read it here)
from ..text.vocab import PAD, UNK, Vocab
from ..training.callbacks import EarlyStopping, GradientClipping, GradualUnfreezing, LRSchedule
from ..training.objectives import StatefulLMLoss, classification_loss
from ..training.sampled_softmax import SampledSoftmax, unigram_proposal
from ..training.schedules import STLR, discriminative_param_groups, scaled_lr, stlr
from ..training.trainer import Trainer, evaluate
from .pretraining import PretrainError, PretrainRun, loss_curve, plan
from .shipping import PRETRAINED_DIR, REPORT, load_shipped, save_shipped

# stage (a)'s checkpoint: its weights file's stem and folder (the other recipes' NAME and CHECKPOINT_DIR)
NAME = "awd_lstm_ptb"
CHECKPOINT_DIR = PRETRAINED_DIR

# `--preset full`: the recorded one-core recipe (6.7M tokens, dropouts 0.05), which made the stage (a) shipped until
# 2026-12-01 (its pretrain.json is archived in lmlib/results/ulmfit_curve_ulmfit_short_pretraining.json). The one
# shipped in lmlib/pretrained/ now is the gpu preset's (PRETRAIN_GPU below; its pretrain.json says so).
PRETRAIN_CONFIG = dict(embed_size=200, hidden_size=256, num_layers=3,
                       embed_p=0.0, input_p=0.05, hidden_p=0.05, weight_p=0.05, output_p=0.05)
PRETRAIN_RECIPE = dict(seed=0, batch_size=32, bptt=70, steps=3000, eta_max=4e-3, cut_frac=0.1, ratio=32.0,
                       clip=0.5, betas=(0.8, 0.99))
# `--preset teach`: the same recipe with a tiny LM and a few steps, its perplexities measured on the first 10,000
# tokens of PTB's validation and test text (the whole splits would take most of the run)
PRETRAIN_TEACH = dict(recipe=dict(steps=30, batch_size=8, bptt=20, heldout_tokens=10_000),
                      config=dict(embed_size=32, hidden_size=64, num_layers=2))
# `--preset gpu`: 128 streams a step for ~80 epochs of PTB, with the dropouts of a long run (Merity et al. 2018 use
# 0.4/0.25/0.4/0.1/0.5 for a 24M-parameter model; this one has 3.4M, so a little less)
PRETRAIN_GPU = dict(recipe=dict(batch_size=128, steps=8000, heldout_tokens=None),
                    config=dict(embed_p=0.1, input_p=0.3, hidden_p=0.2, weight_p=0.3, output_p=0.3))
# The shipped weights were written before AWDLSTMConfig's fields got their course-wide names; their
# metadata (covered by the sha256) keeps the names it was written with.
_RENAMED_CONFIG_FIELDS = {"emb_size": "embed_size", "n_layers": "num_layers"}


# -- (a) pretraining and the shipped checkpoint ---------------------------------------------------------

def ptb_vocab() -> Vocab:
    """The 10,000 PTB types (``<unk>`` included) plus ``<pad>`` at id 0 for classification batches."""
    return Vocab((tok for line in load_ptb("train") for tok in line), specials=(PAD,), unk=UNK)


def _ptb_ids(vocab: Vocab, split: str) -> torch.Tensor:
    return torch.tensor([vocab[t] for line in load_ptb(split) for t in line], dtype=torch.long)


def evaluate_lm(model: AWDLSTMLanguageModel, ids: torch.Tensor, batch_size: int = 10, bptt: int = 70) -> float:
    """Perplexity of ``model`` on the token stream ``ids`` (state carried across windows)."""
    device = next(model.parameters()).device
    return evaluate(model, StatefulLMLoss(), bptt_batches(batchify(ids, batch_size), bptt), device).perplexity


def pretrain(out_dir: str | Path, steps: int | None = None, preset: str = "full", run=None,
             overrides: dict | None = None) -> dict | None:
    """Stage (a): train the AWD-LSTM LM on PTB with ``preset``'s recipe and write it with :func:`save_pretrained`
    to ``out_dir``; arguments and result as in :mod:`lmlib.recipes.pretraining` (a resume checkpoint includes the
    LSTM's carried state)."""
    recipe, model_config, _ = plan(preset, steps, PRETRAIN_RECIPE, PRETRAIN_CONFIG, PRETRAIN_TEACH, gpu=PRETRAIN_GPU,
                                   overrides=overrides)
    job = PretrainRun(NAME, out_dir, {"recipe": recipe, "config": model_config}, run, preset)
    seed_everything(recipe["seed"])
    vocab = ptb_vocab()
    config = AWDLSTMConfig(vocab_size=len(vocab), pad_id=vocab[PAD], **model_config)
    model = AWDLSTMLanguageModel(config)
    streams = batchify(_ptb_ids(vocab, "train").to(job.device), recipe["batch_size"])
    windows = list(bptt_batches(streams, recipe["bptt"]))
    # windows beyond one epoch wrap around to the start of the corpus
    batches = [windows[i % len(windows)] for i in range(recipe["steps"])]
    opt = job.adam(model.parameters(), adamw=False, lr=recipe["eta_max"], betas=recipe["betas"])
    trainer = Trainer(model, opt, StatefulLMLoss(state_batch_dim=1),
                      [STLR(recipe["steps"], recipe["cut_frac"], recipe["ratio"]), GradientClipping(recipe["clip"]),
                       job.progress(lambda batch: batch.x.numel())], **job.trainer_options())
    job.fit(trainer, lambda epoch: batches)
    if not job.writes:
        return None
    heldout = recipe.get("heldout_tokens")  # None (the full recipe): the whole split
    valid_ppl, test_ppl = (evaluate_lm(model, _ptb_ids(vocab, split)[:heldout]) for split in ("valid", "test"))
    report = {
        "model": "AWD-LSTM (lmlib.models.awd_lstm), PTB pretraining for ULMFiT",
        "config": config.__dict__, "recipe": recipe, "tokens_seen": trainer.step * recipe["batch_size"] * recipe["bptt"],
        "train_tokens_per_epoch": int(streams.numel()),
        "final_train_loss": trainer.history[-1]["train_loss"],
        "valid_ppl": valid_ppl, "test_ppl": test_ppl,
    }
    report = save_pretrained(model, vocab, out_dir, job.annotate(report))
    job.finish()
    return report


def save_pretrained(model: AWDLSTMLanguageModel, vocab: Vocab, out_dir: str | Path, report: dict,
                    stem: str = NAME) -> dict:
    """Write ``<stem>.safetensors`` (fp16, tied weight once), ``vocab.json`` and ``pretrain.json``
    (``report`` plus both files' sha256) to ``out_dir`` (:func:`~lmlib.recipes.shipping.save_shipped`)."""
    return save_shipped(out_dir, stem, model.state_dict(), model.config.__dict__, report,
                        side_files={"vocab.json": vocab.save}, skip=("decoder.weight",) if model.config.tie_weights else ())


def load_pretrained(directory: str | Path = PRETRAINED_DIR, **dropouts) -> tuple[AWDLSTMLanguageModel, Vocab]:
    """An AWD-LSTM language model written by :func:`save_pretrained` and its vocabulary, after checking
    both files' sha256: by default the shipped PTB model of stage (a); ``IMDB_DIR`` holds stage (b)'s.

    ``dropouts`` (e.g. ``output_p=0.4``) override the pretraining dropouts for fine-tuning.
    """
    report = json.loads((Path(directory) / REPORT).read_text())
    weights = next(name for name in report["sha256"] if name.endswith(".safetensors"))
    saved, tensors, _ = load_shipped(directory, weights.removesuffix(".safetensors"),
                                     report.get("rebuild", "python -m lmlib pretrain awd-lstm --preset full"))
    saved = {_RENAMED_CONFIG_FIELDS.get(k, k): v for k, v in saved.items()}
    config = AWDLSTMConfig(**{**saved, **dropouts})
    model = AWDLSTMLanguageModel(config)
    if config.tie_weights:
        tensors["decoder.weight"] = tensors["encoder.embedding.weight"]
    model.load_state_dict(tensors)
    return model, Vocab.load(Path(directory) / "vocab.json")


# -- (b) target-task LM fine-tuning --------------------------------------------------------------------

def tokenize(text: str) -> list[str]:
    """Whitespace tokens, lower-cased, numbers written ``N`` as in Mikolov's PTB (the texts are pre-tokenized)."""
    return ["N" if tok.replace(".", "").replace(",", "").isdigit() else tok for tok in text.lower().split()]


def finetune_lm(model: AWDLSTMLanguageModel, ids: torch.Tensor, epochs: int = 1, eta_max: float = 4e-3,
                batch_size: int = 32, bptt: int = 70, max_steps: int | None = None, callbacks=(),
                factor: float = 2.6, device: str = "cpu") -> Trainer:
    """Stage (b): fine-tune the LM on the target text ``ids`` with discriminative rates (η/``factor`` per
    layer group down) and STLR."""
    windows = list(bptt_batches(batchify(ids, batch_size), bptt))[:max_steps]
    opt = torch.optim.Adam(discriminative_param_groups(model.layer_groups(), eta_max, factor), betas=(0.8, 0.99))
    trainer = Trainer(model, opt, StatefulLMLoss(state_batch_dim=1),
                      [STLR(epochs * len(windows)), GradientClipping(0.5), *callbacks], device=device)
    trainer.fit(windows, epochs=epochs)
    return trainer


# -- (b) on IMDb: the fine-tuned LM shipped in lmlib/pretrained/ulmfit_imdb/ -----------------------------

IMDB_DIR = PRETRAINED_DIR / "ulmfit_imdb"
IMDB_NAME = "ulmfit_imdb"
IMDB_REBUILD = "python -m lmlib pretrain ulmfit-imdb --preset full --device cpu --out lmlib/pretrained/ulmfit_imdb"
# what remakes the shipped stage (b): the cpu preset's whole run, over as many sessions as it takes, then `ship`
IMDB_CPU_REBUILD = ("python -m lmlib pretrain ulmfit-imdb --preset cpu --out pretrained-runs/cpu/ulmfit_imdb (the same "
                    "with --resume after any stop), then python -m lmlib ship ulmfit-imdb pretrained-runs/cpu/ulmfit_imdb")
# Dropouts for stages (b) and (c): the pretraining ones were tuned for 6.7M PTB tokens; fine-tuning on less
# text with a bigger vocabulary needs more.
FINETUNE_DROPOUTS = dict(embed_p=0.05, input_p=0.25, hidden_p=0.15, weight_p=0.2, output_p=0.25)
# max_new keeps the fp16 checkpoint under 10 MB (16,001 words x 200 dims dominate its 4.9M parameters).
IMDB_RECIPE = dict(seed=0, held_out_reviews=1000, min_freq=2, max_new=6000, steps=1000, batch_size=32, bptt=70,
                   eta_max=4e-3, factor=2.6, dropouts=FINETUNE_DROPOUTS)
# `--preset teach`: a few reviews, a few steps, the perplexities on the first held-out tokens
IMDB_TEACH = dict(recipe=dict(steps=6, batch_size=4, bptt=20, max_new=300, train_reviews=200, heldout_tokens=3000))
# `--preset gpu`: 256 streams a step (the rate by the square-root rule from the 64 x 70 batches measured at 4e-3),
# 8,400 steps = 150M tokens, about seven passes over the 74,000 reviews; a vocabulary of 30,001 words so that
# sentiment words are not <unk> (--set max_new=50000 for 60,001); a checkpoint at 4M, 16M and 64M tokens on the way.
IMDB_GPU = dict(recipe=dict(batch_size=256, steps=8400, eta_max=scaled_lr(4e-3, 64, 256), max_new=20_000,
                            train_reviews=None, heldout_tokens=None, stage_a=None,
                            milestones=[4_000_000, 16_000_000, 64_000_000]))
# `--preset cpu`: 150M tokens on a CPU, run over several sessions (--resume), from the GPU-staged stage (b) LM (13.5M
# IMDb tokens, its 16,001-word vocabulary kept, so the fp16 file stays under 10 MB); the softmax sampled (1,024 shared
# negatives from the smoothed unigram of the training text) while training, exact when measuring; checkpoints at the
# milestones the transfer probes read.
IMDB_CPU = dict(recipe=dict(steps=67_000, train_reviews=None, heldout_tokens=None, stage_a=None,
                            start="lmlib/results/gpu_pretraining/ulmfit_imdb", sampled=1024, proposal_power=0.75,
                            milestones=[4_000_000, 16_000_000, 32_000_000, 64_000_000, 100_000_000]))
_CLITICS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")


def _repo_path(path: str) -> Path:
    """``path`` as given when it exists, else read from the checkout's root (the folder above ``lmlib``), so a
    recipe can name a committed folder (``lmlib/results/...``) whatever the working directory."""
    given = Path(path)
    return given if given.exists() or given.is_absolute() else PRETRAINED_DIR.parent.parent / given


def review_tokens(text: str) -> list[str]:
    """An IMDb review as PTB-style tokens, so the PTB vocabulary covers as much of it as it can: lower case,
    numbers written ``N``, punctuation split off (:func:`lmlib.recipes.elmo.tokenize`) and clitics too
    (``don't`` -> ``do n't``, ``film's`` -> ``film 's``), as the Penn Treebank writes them."""
    from .elmo import tokenize as word_tokens

    out: list[str] = []
    for tok in word_tokens(text.lower()):
        if tok[0].isdigit():
            out.append("N")
            continue
        clitic = next((c for c in _CLITICS if tok.endswith(c) and len(tok) > len(c)), None)
        out.extend((tok[: -len(clitic)], clitic) if clitic else (tok,))
    return out


def _split_unsup(unsup: Sequence[str], held_out_reviews: int, seed: int) -> tuple[list[str], list[str]]:
    """``(held out, the rest)`` of the unlabelled reviews: the first ``held_out_reviews`` of a seeded shuffle."""
    order = torch.randperm(len(unsup), generator=torch.Generator().manual_seed(seed)).tolist()
    return [unsup[i] for i in order[:held_out_reviews]], [unsup[i] for i in order[held_out_reviews:]]


def imdb_held_out(held_out_reviews: int = IMDB_RECIPE["held_out_reviews"], seed: int = IMDB_RECIPE["seed"]) -> list[list[str]]:
    """The unlabelled reviews stage (b) never trains on (the first ``held_out_reviews`` of a seeded shuffle),
    as token lists: where its perplexity is measured."""
    from ..data import load_imdb

    held_out, _ = _split_unsup(load_imdb("unsup").texts, held_out_reviews, seed)
    return [review_tokens(text) for text in held_out]


def imdb_lm_texts(held_out_reviews: int = IMDB_RECIPE["held_out_reviews"], seed: int = IMDB_RECIPE["seed"],
                  train_reviews: int | None = None):
    """Stage (b)'s text as token lists, ``(train, held_out)``: IMDb's 50,000 unlabelled reviews and its 25,000
    training reviews without their labels (as Howard & Ruder do), shuffled (seeded), less the
    :func:`imdb_held_out` reviews; the first ``train_reviews`` of them (default all). The test reviews are never
    used."""
    from ..data import load_imdb

    unsup, train = load_imdb("unsup").texts, load_imdb("train").texts  # sha256-checked: all 50,000 and 25,000
    held_out, rest = _split_unsup(unsup, held_out_reviews, seed)
    rest += train
    order = torch.randperm(len(rest), generator=torch.Generator().manual_seed(seed + 1)).tolist()[:train_reviews]
    return [review_tokens(rest[i]) for i in order], [review_tokens(text) for text in held_out]


def review_stream(vocab: Vocab, texts: Sequence[Sequence[str]]) -> torch.Tensor:
    """The reviews as one token stream, ``<eos>`` after each (PTB's sentence end)."""
    return torch.tensor([i for text in texts for i in vocab.encode([*text, "<eos>"])], dtype=torch.long)


def imdb_vocab_and_lm(lm_texts: Sequence[Sequence[str]], pretrained: bool = True,
                      recipe: dict = IMDB_RECIPE) -> tuple[AWDLSTMLanguageModel, Vocab]:
    """The PTB vocabulary extended with the ``max_new`` most frequent new words of ``lm_texts``, and the
    stage (a) LM (the shipped one, or the folder ``recipe["stage_a"]``) grown to match (``pretrained=False``: the
    same architecture and vocabulary, random init)."""
    if pretrained:
        lm, vocab = load_pretrained(recipe.get("stage_a") or PRETRAINED_DIR, **recipe["dropouts"])
    else:
        vocab = ptb_vocab()
        lm = AWDLSTMLanguageModel(AWDLSTMConfig(vocab_size=len(vocab), pad_id=vocab[PAD],
                                                **{**PRETRAIN_CONFIG, **recipe["dropouts"]}))
    lm, vocab = extend_vocab(lm, vocab, lm_texts, recipe["min_freq"], recipe["max_new"])
    if not pretrained:  # every row random, the new words' too (extend_vocab gave them all one mean row)
        lm = AWDLSTMLanguageModel(lm.config)
    return lm, vocab


def finetune_imdb(out_dir: str | Path, steps: int | None = None, preset: str = "full", run=None,
                  overrides: dict | None = None) -> dict | None:
    """Stage (b) on IMDb with the seeded ``IMDB_RECIPE`` (``preset="teach"``: ``IMDB_TEACH``, ``"gpu"``:
    ``IMDB_GPU``): extend the stage (a) LM's vocabulary, fine-tune it on windows of the reviews with discriminative
    rates and STLR (the reviews read again when the steps outlast them), and write it with :func:`save_pretrained`.
    Perplexity on held-out reviews (and on PTB test, to see what the general domain loses) is measured before and
    after. ``run`` and ``overrides`` as for :func:`pretrain`. Returns the report (None on a rank other than 0)."""
    recipe, _, _ = plan(preset, steps, IMDB_RECIPE, {}, IMDB_TEACH, gpu=IMDB_GPU, overrides=overrides, cpu=IMDB_CPU)
    start_dir = _repo_path(recipe["start"]) if recipe.get("start") else None
    stage_a_dir = Path(recipe.get("stage_a") or PRETRAINED_DIR)
    if start_dir is not None and not (start_dir / REPORT).is_file():
        raise PretrainError(f"start {start_dir} holds no stage (b) checkpoint (pretrain.json)")
    if start_dir is None and not (stage_a_dir / REPORT).is_file():
        raise PretrainError(f"stage_a {stage_a_dir} holds no stage (a) checkpoint (pretrain.json)")
    if recipe.get("sampled") is not None and not (isinstance(recipe["sampled"], int) and recipe["sampled"] >= 1):
        raise PretrainError(f"sampled (negatives of the sampled softmax) must be a whole number >= 1, got "
                            f"{recipe['sampled']!r}")
    job = PretrainRun(IMDB_NAME, out_dir, {"recipe": recipe, "config": {}}, run, preset)
    seed_everything(recipe["seed"])
    lm_texts, held_out = imdb_lm_texts(recipe["held_out_reviews"], recipe["seed"], recipe.get("train_reviews"))
    if start_dir is not None:  # go on training a stage (b) LM, its vocabulary as it is
        lm, vocab = load_pretrained(start_dir, **recipe["dropouts"])
    else:
        lm, vocab = imdb_vocab_and_lm(lm_texts, recipe=recipe)
    need = recipe["batch_size"] * (recipe["steps"] * recipe["bptt"] + 1)
    read = itertools.accumulate(len(t) + 1 for t in lm_texts)  # tokens, <eos> included, up to each review
    used = next((k + 1 for k, n in enumerate(read) if n >= need), len(lm_texts))
    heldout = recipe.get("heldout_tokens")  # None: every held-out token
    train_ids, held_ids = review_stream(vocab, lm_texts[:used]), review_stream(vocab, held_out)[:heldout]
    ptb_test = _ptb_ids(vocab, "test")[:heldout]
    lm = lm.to(job.device)

    def perplexities():
        return {"imdb_held_out_ppl": evaluate_lm(lm, held_ids), "ptb_test_ppl": evaluate_lm(lm, ptb_test)}

    before = perplexities()  # of the run's start, also when it goes on from a milestone
    if job.writes:
        print(json.dumps({"before": before}), flush=True)
    if job.weights_from is not None:  # this run's own milestone (--from-milestone): its weights, the same vocabulary
        lm.load_state_dict(load_pretrained(job.weights_from, **recipe["dropouts"])[0].state_dict())
    about = {"model": "AWD-LSTM (lmlib.models.awd_lstm): ULMFiT stage (b), the PTB LM fine-tuned on IMDb reviews",
             "rebuild": IMDB_REBUILD if preset == "full" else None, "recipe": recipe,
             "vocab_size": len(vocab), "new_words": len(vocab) - len(ptb_vocab()), "reviews_available": len(lm_texts),
             "reviews_used": used}
    if start_dir is not None:
        start = json.loads((start_dir / REPORT).read_text())
        about["stage_a"] = start["stage_a"]
        about["start"] = {"sha256": start["sha256"][f"{IMDB_NAME}.safetensors"], "tokens_seen": start["tokens_seen"]}
    else:
        stage_a = json.loads((stage_a_dir / REPORT).read_text())
        about["stage_a"] = {"sha256": stage_a["sha256"]["awd_lstm_ptb.safetensors"],
                            "tokens_seen": stage_a["tokens_seen"], "ptb_test_ppl": stage_a["test_ppl"]}
    seed_everything(recipe["seed"])
    windows = list(bptt_batches(batchify(train_ids.to(job.device), recipe["batch_size"]), recipe["bptt"]))
    batches = [windows[i % len(windows)] for i in range(recipe["steps"])]  # the reviews again after the last
    opt = job.adam(discriminative_param_groups(lm.layer_groups(), recipe["eta_max"], recipe["factor"]), adamw=False,
                   betas=(0.8, 0.99))
    tokens_per_step = recipe["batch_size"] * recipe["bptt"]
    sampled = None
    if recipe.get("sampled"):  # Q from the training text's word counts
        counts = torch.bincount(train_ids, minlength=len(vocab))
        sampled = SampledSoftmax(unigram_proposal(counts, recipe["proposal_power"]), recipe["sampled"])

    if sampled is not None:
        about["train_loss"] = (f"sampled softmax, {recipe['sampled']} negatives: an estimate, not the exact cross-entropy; "
                               f"the perplexities are exact")

    def milestone(folder: Path, trainer: Trainer, tokens: int) -> None:
        # the held-out perplexity, exact: evaluate's eval mode draws no dropout mask, so the run goes on unchanged
        save_pretrained(lm, vocab, folder, {**about, "config": lm.config.__dict__, "tokens_seen": trainer.step * tokens_per_step,
                                            "steps": trainer.step, "imdb_held_out_ppl": evaluate_lm(lm, held_ids),
                                            "train_loss_curve": loss_curve(trainer.batch_losses),
                                            **job.milestone_record()},
                        stem=IMDB_NAME)

    trainer = Trainer(lm, opt, StatefulLMLoss(state_batch_dim=1, sampled=sampled),
                      [STLR(recipe["steps"]), GradientClipping(0.5), job.progress(lambda batch: batch.x.numel()),
                       *job.milestones(tokens_per_step, milestone)], **job.trainer_options())
    job.fit(trainer, lambda epoch: batches)
    if not job.writes:
        return None
    after = perplexities()
    report = {
        **{k: v for k, v in about.items() if v is not None}, "config": lm.config.__dict__,
        "tokens_seen": trainer.step * tokens_per_step, "held_out_reviews": len(held_out),
        "held_out_tokens": int(held_ids.numel()), "held_out_unk_rate": (held_ids == vocab.unk_id).float().mean().item(),
        "before": before, "after": after, "final_train_loss": trainer.history[-1]["train_loss"],
    }
    if preset != "full":
        report.update(steps=trainer.step, train_loss_curve=loss_curve(trainer.batch_losses))
    report = save_pretrained(lm.cpu(), vocab, out_dir, job.annotate(report), stem=IMDB_NAME)
    job.finish()
    return report


# -- (c) the classifier ---------------------------------------------------------------------------------

def stage_stlr(t: int, stages: Sequence[int], cut_frac: float = 0.1, ratio: float = 32.0) -> float:
    """The rate factor at step ``t`` when each stage of training (``stages``: their lengths in steps, in order) has
    a slanted triangle of its own: :func:`~lmlib.training.schedules.stlr` at ``t`` minus the stage's first step, over
    the stage's length. Howard & Ruder's classifier script (fastai's ``imdb_scripts/train_clas.py``) runs each
    unfreezing stage as one ``fit`` with its own triangle, so a group unfrozen late still meets a peak rate."""
    start = 0
    for length in stages:
        if t < start + length:
            return stlr(t - start, length, cut_frac, ratio, eta_max=1.0)
        start += length
    raise ValueError(f"step {t} is past the last stage (the stages have {start} steps in all)")


def unfreezing_stages(epochs: int, n_groups: int, steps_per_epoch: int, gradual: bool = True) -> list[int]:
    """The stages (in steps) of a stage (c) run of ``epochs`` epochs: with ``gradual``, epochs 1 .. G−1 each train one
    more of the ``n_groups`` = G layer groups (one epoch each, Howard & Ruder 2018, sec. 3.3), and the epochs from G on
    train all groups together as one stage ("until convergence"); without it the whole run is one stage."""
    if not gradual:
        return [epochs * steps_per_epoch]
    partial = min(epochs, n_groups - 1)
    rest = epochs - partial
    return [steps_per_epoch] * partial + ([rest * steps_per_epoch] if rest else [])


def _sortish(lengths: Sequence[int], batch_size: int, seed: int) -> list[list[int]]:
    """Batches (index lists) of similar lengths: a seeded shuffle, sorted by length within runs of 8 batches, the
    batches then shuffled, so a batch of whole reviews holds little padding and each pass still differs."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(lengths), generator=g).tolist()
    run = 8 * batch_size
    order = [i for s in range(0, len(order), run) for i in sorted(order[s:s + run], key=lambda i: -lengths[i])]
    batches = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    return [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]


def train_classifier(model: ULMFiTClassifier, seqs: Sequence[Sequence[int]], labels: Sequence[int],
                     epochs: int, eta_top: float = 0.01, gradual: bool = True, factor: float = 2.6,
                     batch_size: int = 32, max_len: int | None = 60, min_steps_per_epoch: int = 10,
                     max_steps_per_epoch: int | None = None, schedule: str = "stlr",
                     seed: int = 0, callbacks=(), device: str = "cpu",
                     valid: tuple[Sequence[Sequence[int]], Sequence[int]] | None = None, patience: int = 2,
                     watch_from: int | None = None, sortish: bool = False) -> Trainer:
    """Stage (c): Adam(β = (0.7, 0.99)) with discriminative rates η^l = η_top / factor^(L−l) over
    ``model.layer_groups()`` (``factor`` 1: one rate everywhere) and slanted triangular rates.

    With ``gradual`` (Howard & Ruder 2018, sec. 3.3) epoch k = 1 .. G−1 trains the top k of the G groups
    (:class:`~lmlib.training.callbacks.GradualUnfreezing`), each epoch under its own slanted triangle, and the epochs
    from G on train every group under one more triangle (:func:`unfreezing_stages`, :func:`stage_stlr`). Without it
    every group trains from the first step under one triangle. ``schedule="constant"``: η_top throughout.

    ``valid`` = ``(seqs, labels)`` of held-out training examples: the paper trains all layers "until convergence", so
    after each epoch in which every group trains, the accuracy on ``valid`` is measured, training stops after
    ``patience`` epochs without a better one, and the weights of the best epoch are restored (``epochs`` is then
    the most the run may take; ``trainer.early_stopping`` holds the scores and ``best_epoch``). ``watch_from``: the
    epochs (counted from 0) before which ``valid`` is not watched; by default G − 1 with ``gradual`` (its partial
    stages), else 0. Giving a run without gradual unfreezing the same G − 1 keeps a random init, which often sits at
    chance for its first epochs, from being stopped before it learns.

    An epoch is one shuffled pass, repeated until it has at least ``min_steps_per_epoch`` steps, so a 100-example
    set still gets enough updates per unfreezing stage, and cut after ``max_steps_per_epoch`` steps. Texts longer than
    ``max_len`` keep their first ``max_len`` tokens (shorten them first with :func:`head_and_tail` to keep the ending
    too); ``max_len=None`` keeps whole texts (read through BPT3C when the model has ``bptt``), and ``sortish``
    batches texts of similar lengths (:func:`_sortish`) so that they carry little padding.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    if schedule not in ("stlr", "constant"):
        raise ValueError(f"schedule must be 'stlr' or 'constant', got {schedule!r}")
    if max_steps_per_epoch is not None and max_steps_per_epoch < 1:
        raise ValueError(f"max_steps_per_epoch must be at least 1 (or None for no cap), got {max_steps_per_epoch}")
    if patience < 1:
        raise ValueError(f"patience must be at least 1, got {patience}")
    if valid is not None and (len(valid) != 2 or len(valid[0]) != len(valid[1]) or not valid[0]):
        raise ValueError("valid must be (seqs, labels) with one label per text and at least one text")
    pad_id = model.encoder.config.pad_id
    if pad_id is None:
        raise ValueError("the encoder has no pad_id; build its AWDLSTMConfig with pad_id set")
    check_inputs(model, *classification_batches(seqs, labels, len(seqs), pad_id, False, max_len=max_len, truncate=True)[0][:2])
    n_batches = math.ceil(len(seqs) / batch_size)
    repeats = max(1, math.ceil(min_steps_per_epoch / n_batches))
    steps_per_epoch = min(repeats * n_batches, max_steps_per_epoch or repeats * n_batches)
    lengths = [min(len(s), max_len or len(s)) for s in seqs]

    def one_pass(pass_seed: int):
        if not sortish:
            return classification_batches(seqs, labels, batch_size, pad_id, shuffle=True, seed=pass_seed,
                                          max_len=max_len, truncate=True)
        return [classification_batches([seqs[i] for i in idx], [labels[i] for i in idx], len(idx), pad_id,
                                        shuffle=False, max_len=max_len, truncate=True)[0]
                for idx in _sortish(lengths, batch_size, pass_seed)]

    def epoch_batches(epoch: int):
        return [b for r in range(repeats) for b in one_pass(seed + 1000 * epoch + r)][:steps_per_epoch]

    groups = model.layer_groups()
    opt = torch.optim.Adam(discriminative_param_groups(groups, eta_top, factor), betas=(0.7, 0.99))
    cbs = [GradientClipping(1.0), *callbacks]
    if schedule == "stlr":
        stages = unfreezing_stages(epochs, len(groups), steps_per_epoch, gradual)
        cbs.insert(0, LRSchedule(lambda t: stage_stlr(t, stages)))
    if gradual:
        cbs.insert(0, GradualUnfreezing(groups))
    stopper = None
    if valid is not None:
        if watch_from is None:
            watch_from = len(groups) - 1 if gradual else 0
        stopper = EarlyStopping(patience, score=lambda trainer: accuracy(model, *valid, max_len=max_len),
                                from_epoch=watch_from)
        cbs.append(stopper)
    trainer = Trainer(model, opt, classification_loss, cbs, device=device)
    trainer.early_stopping = stopper
    trainer.fit(epoch_batches, epochs=epochs)
    return trainer


def accuracy(model: ULMFiTClassifier, seqs: Sequence[Sequence[int]], labels: Sequence[int],
             batch_size: int = 256, max_len: int | None = 60) -> float:
    """The share of ``seqs`` whose predicted class is their label (texts cut to ``max_len`` tokens; None: whole,
    read as the model reads them). Texts are batched by length, so whole texts carry little padding (the mask keeps
    padding out of every prediction, so the order changes nothing)."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    batches = classification_batches([seqs[i] for i in order], [labels[i] for i in order], batch_size,
                                     model.encoder.config.pad_id, shuffle=False, max_len=max_len, truncate=True)
    return evaluate(model, classification_loss, batches, next(model.parameters()).device).accuracy


def encode_texts(vocab: Vocab, texts: Sequence[Sequence[str]]) -> list[list[int]]:
    """Token lists -> id lists; empty texts become a single ``<unk>`` so no row is empty."""
    return [vocab.encode(t) if t else [vocab.unk_id] for t in texts]


# -- the labelled-examples experiment ------------------------------------------------------------------

def _letters(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalpha())


def rt_polarity_split(test_frac: float = 0.2, seed: int = 0):
    """rt-polarity tokenized and split (seeded) into ``(train_texts, train_labels, test_texts, test_labels)``."""
    if not 0 < test_frac < 1:
        raise ValueError(f"test_frac must be in (0, 1), got {test_frac}")
    data = load_rt_polarity()
    order = torch.randperm(len(data.texts), generator=torch.Generator().manual_seed(seed)).tolist()
    n_test = int(len(order) * test_frac)
    pick = lambda idx: ([tokenize(data.texts[i]) for i in idx], [data.labels[i] for i in idx])  # noqa: E731
    return (*pick(order[n_test:]), *pick(order[:n_test]))


def sst2_data(min_train_tokens: int = 8):
    """SST-2 tokenized: ``(train_texts, train_labels, dev_texts, dev_labels)``. GLUE's train split also
    holds short phrases; only entries of at least ``min_train_tokens`` tokens are kept, closer to sentences."""
    train, dev = load_sst2("train"), load_sst2("dev")
    kept = [(tokenize(t), y) for t, y in zip(train.texts, train.labels) if len(t.split()) >= min_train_tokens]
    return [t for t, _ in kept], [y for _, y in kept], [tokenize(t) for t in dev.texts], list(dev.labels)


def overlap_free_indices(texts: Sequence[Sequence[str]], held_out: Sequence[Sequence[str]]) -> list[int]:
    """Indices of the ``texts`` whose letters equal no held-out text's letters (SST is built from the same
    Rotten Tomatoes snippets as rt-polarity, so text trained on must not contain the evaluation text)."""
    banned = {_letters(" ".join(t)) for t in held_out}
    return [i for i, t in enumerate(texts) if _letters(" ".join(t)) not in banned]


def sample_balanced(texts: Sequence, labels: Sequence[int], n: int, seed: int = 0) -> tuple[list, list[int]]:
    """``n`` labelled examples drawn without replacement (seeded), half from each class."""
    g = torch.Generator().manual_seed(seed)
    classes = sorted(set(labels))
    picked: list[int] = []
    for k, c in enumerate(classes):
        idx = [i for i, y in enumerate(labels) if y == c]
        want = n // len(classes) + (1 if k < n % len(classes) else 0)
        if want > len(idx):
            raise ValueError(f"asked for {n} examples but class {c} has only {len(idx)}")
        picked += [idx[i] for i in torch.randperm(len(idx), generator=g)[:want].tolist()]
    picked = [picked[i] for i in torch.randperm(len(picked), generator=g).tolist()]
    return [texts[i] for i in picked], [labels[i] for i in picked]
