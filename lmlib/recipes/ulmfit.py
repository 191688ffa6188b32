"""ULMFiT's three stages as training runs: Howard & Ruder (2018), "Universal Language Model Fine-tuning
for Text Classification".

(a) **General-domain LM pretraining** — an AWD-LSTM language model (Merity et al. 2018) on a general
    corpus; here the Penn Treebank. :func:`pretrain` is the seeded recipe behind the small checkpoint
    shipped in ``lmlib/pretrained/`` (``python -m lmlib.recipes.ulmfit pretrain --out DIR``), and
    :func:`load_pretrained` verifies its sha256 before loading.
(b) **Target-task LM fine-tuning** — the same LM, on the target task's own text, with discriminative
    fine-tuning (one rate per layer, η^{l−1} = η^l / 2.6) and slanted triangular learning rates
    (:mod:`lmlib.training.schedules`); new words join the vocabulary through
    :func:`lmlib.models.ulmfit.extend_vocab` (:func:`finetune_lm`).
(c) **Classifier fine-tuning** — :class:`lmlib.models.ulmfit.ULMFiTClassifier`, trained with gradual
    unfreezing (:class:`lmlib.training.callbacks.GradualUnfreezing`), STLR and discriminative rates
    over the model's ``layer_groups()`` (:func:`train_classifier`).

Below them, the data of the labelled-examples experiment of notebook 07 (rt-polarity, SST-2).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from ..data import load_ptb, load_rt_polarity, load_sst2, sha256_of
from ..models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
from ..models.ulmfit import ULMFiTClassifier
from ..runtime import seed_everything
from ..text.batching import batchify, bptt_batches, classification_batches
from ..text.vocab import PAD, UNK, Vocab
from ..training.callbacks import GradientClipping, GradualUnfreezing, PrintEvery
from ..training.objectives import StatefulLMLoss, classification_loss
from ..training.schedules import STLR, discriminative_param_groups
from ..training.trainer import Trainer, evaluate

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"

# The checkpoint shipped in lmlib/pretrained/ (written by `python -m lmlib.recipes.ulmfit pretrain`).
PRETRAIN_CONFIG = dict(embed_size=200, hidden_size=256, num_layers=3,
                       embed_p=0.0, input_p=0.05, hidden_p=0.05, weight_p=0.05, output_p=0.05)
PRETRAIN_RECIPE = dict(seed=0, batch_size=32, bptt=70, steps=3000, eta_max=4e-3, cut_frac=0.1, ratio=32.0,
                       clip=0.5, betas=(0.8, 0.99))
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


def pretrain(out_dir: str | Path, steps: int | None = None) -> dict:
    """Stage (a): train the AWD-LSTM LM on PTB with the seeded recipe ``PRETRAIN_RECIPE``; write
    ``awd_lstm_ptb.safetensors`` (fp16), ``vocab.json`` and ``pretrain.json`` to ``out_dir``."""
    recipe = dict(PRETRAIN_RECIPE, steps=steps or PRETRAIN_RECIPE["steps"])
    seed_everything(recipe["seed"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = ptb_vocab()
    config = AWDLSTMConfig(vocab_size=len(vocab), pad_id=vocab[PAD], **PRETRAIN_CONFIG)
    model = AWDLSTMLanguageModel(config)
    streams = batchify(_ptb_ids(vocab, "train"), recipe["batch_size"])
    windows = list(bptt_batches(streams, recipe["bptt"]))
    # windows beyond one epoch wrap around to the start of the corpus
    batches = [windows[i % len(windows)] for i in range(recipe["steps"])]
    opt = torch.optim.Adam(model.parameters(), lr=recipe["eta_max"], betas=recipe["betas"])
    trainer = Trainer(model, opt, StatefulLMLoss(),
                      [STLR(recipe["steps"], recipe["cut_frac"], recipe["ratio"]), GradientClipping(recipe["clip"]),
                       PrintEvery(25)], device="cpu")
    start = time.perf_counter()
    trainer.fit(batches, epochs=1)
    train_seconds = time.perf_counter() - start
    valid_ppl, test_ppl = evaluate_lm(model, _ptb_ids(vocab, "valid")), evaluate_lm(model, _ptb_ids(vocab, "test"))
    report = {
        "model": "AWD-LSTM (lmlib.models.awd_lstm), PTB pretraining for ULMFiT",
        "config": config.__dict__, "recipe": recipe, "tokens_seen": recipe["steps"] * recipe["batch_size"] * recipe["bptt"],
        "train_tokens_per_epoch": int(streams.numel()),
        "final_train_loss": trainer.history[-1]["train_loss"],
        "valid_ppl": valid_ppl, "test_ppl": test_ppl, "train_seconds": train_seconds,
        "torch_threads": torch.get_num_threads(),
    }
    return save_pretrained(model, vocab, out_dir, report)


def save_pretrained(model: AWDLSTMLanguageModel, vocab: Vocab, out_dir: str | Path, report: dict) -> dict:
    """Write ``awd_lstm_ptb.safetensors`` (fp16, tied weight once), ``vocab.json`` and ``pretrain.json``
    (``report`` plus both files' sha256) to ``out_dir``."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()
               if not (model.config.tie_weights and k == "decoder.weight")}
    weights = out_dir / "awd_lstm_ptb.safetensors"
    save_file(tensors, str(weights), metadata={"config": json.dumps(model.config.__dict__)})
    vocab.save(out_dir / "vocab.json")
    report = {**report, "sha256": {"awd_lstm_ptb.safetensors": sha256_of(weights),
                                   "vocab.json": sha256_of(out_dir / "vocab.json")}}
    (out_dir / "pretrain.json").write_text(json.dumps(report, indent=2))
    return report


def load_pretrained(directory: str | Path = PRETRAINED_DIR, verify: bool = True, **dropouts) -> tuple[AWDLSTMLanguageModel, Vocab]:
    """The shipped PTB language model and its vocabulary, after checking both files' sha256.

    ``dropouts`` (e.g. ``output_p=0.4``) override the pretraining dropouts for fine-tuning.
    """
    from safetensors import safe_open

    directory = Path(directory)
    report = json.loads((directory / "pretrain.json").read_text())
    for name, expected in report["sha256"].items():
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(f"{name} is missing from {directory}; rerun `python -m lmlib.recipes.ulmfit pretrain`")
        actual = sha256_of(path) if verify else expected
        if actual != expected:
            raise ValueError(f"{name} has sha256 {actual}, expected {expected}: the file is corrupt "
                             f"or was replaced; restore it from git or rerun `python -m lmlib.recipes.ulmfit pretrain`")
    with safe_open(str(directory / "awd_lstm_ptb.safetensors"), framework="pt") as fh:
        saved = json.loads(fh.metadata()["config"])
        tensors = {k: fh.get_tensor(k).float() for k in fh.keys()}
    saved = {_RENAMED_CONFIG_FIELDS.get(k, k): v for k, v in saved.items()}
    config = AWDLSTMConfig(**{**saved, **dropouts})
    model = AWDLSTMLanguageModel(config)
    if config.tie_weights:
        tensors["decoder.weight"] = tensors["encoder.embedding.weight"]
    model.load_state_dict(tensors)
    return model, Vocab.load(directory / "vocab.json")


# -- (b) target-task LM fine-tuning --------------------------------------------------------------------

def tokenize(text: str) -> list[str]:
    """Whitespace tokens, lower-cased, numbers written ``N`` as in Mikolov's PTB (the texts are pre-tokenized)."""
    return ["N" if tok.replace(".", "").replace(",", "").isdigit() else tok for tok in text.lower().split()]


def finetune_lm(model: AWDLSTMLanguageModel, ids: torch.Tensor, epochs: int = 1, eta_max: float = 4e-3,
                batch_size: int = 32, bptt: int = 70, max_steps: int | None = None, callbacks=()) -> Trainer:
    """Stage (b): fine-tune the LM on the target text ``ids`` with discriminative rates and STLR."""
    windows = list(bptt_batches(batchify(ids, batch_size), bptt))
    if max_steps is not None:
        windows = windows[:max_steps]
    opt = torch.optim.Adam(discriminative_param_groups(model.layer_groups(), eta_max), betas=(0.8, 0.99))
    trainer = Trainer(model, opt, StatefulLMLoss(),
                      [STLR(epochs * len(windows)), GradientClipping(0.5), *callbacks], device="cpu")
    trainer.fit(windows, epochs=epochs)
    return trainer


# -- (c) the classifier ---------------------------------------------------------------------------------

def train_classifier(model: ULMFiTClassifier, seqs: Sequence[Sequence[int]], labels: Sequence[int],
                     epochs: int, eta_top: float = 0.01, gradual: bool = True, factor: float = 2.6,
                     batch_size: int = 32, max_len: int = 60, min_steps_per_epoch: int = 10,
                     seed: int = 0, callbacks=()) -> Trainer:
    """Stage (c): Adam(β = (0.7, 0.99)) with STLR over all steps, discriminative rates (``factor``; use 1
    for one rate everywhere) and, with ``gradual``, gradual unfreezing of ``model.layer_groups()``.

    An epoch is one shuffled pass, repeated until it has at least ``min_steps_per_epoch`` steps, so a
    100-example set still gets enough updates per unfreezing stage.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    pad_id = model.encoder.config.pad_id
    if pad_id is None:
        raise ValueError("the encoder has no pad_id; build its AWDLSTMConfig with pad_id set")
    n_batches = math.ceil(len(seqs) / batch_size)
    repeats = max(1, math.ceil(min_steps_per_epoch / n_batches))

    def epoch_batches(epoch: int):
        return [b for r in range(repeats) for b in classification_batches(
            seqs, labels, batch_size, pad_id, shuffle=True, seed=seed + 1000 * epoch + r, max_len=max_len, truncate=True)]

    groups = model.layer_groups()
    opt = torch.optim.Adam(discriminative_param_groups(groups, eta_top, factor), betas=(0.7, 0.99))
    cbs = [STLR(epochs * repeats * n_batches), GradientClipping(1.0), *callbacks]
    if gradual:
        cbs.insert(0, GradualUnfreezing(groups))
    trainer = Trainer(model, opt, classification_loss, cbs, device="cpu")
    trainer.fit(epoch_batches, epochs=epochs)
    return trainer


def accuracy(model: ULMFiTClassifier, seqs: Sequence[Sequence[int]], labels: Sequence[int],
             batch_size: int = 256, max_len: int = 60) -> float:
    """The share of ``seqs`` whose predicted class is their label (texts cut to ``max_len`` tokens)."""
    batches = classification_batches(seqs, labels, batch_size, model.encoder.config.pad_id, shuffle=False,
                                     max_len=max_len, truncate=True)
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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lmlib.recipes.ulmfit")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pretrain", help="stage (a): pretrain the AWD-LSTM LM on PTB (seeded)")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.command == "pretrain":
        print(json.dumps(pretrain(args.out, args.steps), indent=2))


if __name__ == "__main__":
    main()
