"""ULMFiT: Howard & Ruder (2018), "Universal Language Model Fine-tuning for Text Classification".

Three stages, each a few lines on top of lmlib's Trainer:

(a) **General-domain LM pretraining** — an AWD-LSTM language model (Merity et al. 2018) on a general
    corpus; here the Penn Treebank. :func:`pretrain` is the seeded recipe behind the small checkpoint
    shipped in ``lmlib/pretrained/`` (``python -m lmlib.models.ulmfit pretrain --out DIR``), and
    :func:`load_pretrained` verifies its sha256 before loading.
(b) **Target-task LM fine-tuning** — the same LM, on the target task's own text, with discriminative
    fine-tuning (one rate per layer, η^{l−1} = η^l / 2.6) and slanted triangular learning rates
    (:mod:`lmlib.training.schedules`). Words of the target text that the general vocabulary lacks get new rows
    initialised with the mean embedding (:func:`extend_vocab`).
(c) **Classifier fine-tuning** — the fine-tuned encoder under a new head: concat pooling
    h_c = [h_T, maxpool(H), meanpool(H)] (:func:`concat_pool`), then
    BatchNorm → Dropout → Linear → ReLU → BatchNorm → Dropout → Linear (:class:`PoolingClassifierHead`),
    trained with gradual unfreezing (:class:`GradualUnfreezing`), STLR and discriminative rates.

The AWD-LSTM itself (Merity, Keskar & Socher 2018) is :mod:`lmlib.models.awd_lstm` (notebook 06).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime import eval_mode

from ..text.batching import batchify, bptt_batches
from ..training.callbacks import GradientClipping
from ..data import sha256_of
from ..training.objectives import StatefulLMLoss
from ..training.schedules import STLR, discriminative_lrs
from ..training.trainer import Callback, Trainer
from .awd_lstm import AWDLSTMConfig, AWDLSTMEncoder, AWDLSTMLanguageModel
from ..text.vocab import Vocab

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"
PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"

# The checkpoint shipped in lmlib/pretrained/ (written by `python -m lmlib.models.ulmfit pretrain`).
PRETRAIN_CONFIG = dict(emb_size=200, hidden_size=256, n_layers=3,
                       embed_p=0.0, input_p=0.05, hidden_p=0.05, weight_p=0.05, output_p=0.05)
PRETRAIN_RECIPE = dict(seed=0, batch_size=32, bptt=70, steps=3000, eta_max=4e-3, cut_frac=0.1, ratio=32.0,
                       clip=0.5, betas=(0.8, 0.99))


# -- (a) pretraining and the shipped checkpoint ---------------------------------------------------------

def ptb_vocab() -> Vocab:
    """The 10,000 PTB types (``<unk>`` included) plus ``<pad>`` at id 0 for classification batches."""
    from ..data import load_ptb

    return Vocab((tok for line in load_ptb("train") for tok in line), specials=(PAD,), unk=UNK)


def _ptb_ids(vocab: Vocab, split: str) -> torch.Tensor:
    from ..data import load_ptb

    return torch.tensor([vocab[t] for line in load_ptb(split) for t in line], dtype=torch.long)


def evaluate_lm(model: AWDLSTMLanguageModel, ids: torch.Tensor, batch_size: int = 10, bptt: int = 70) -> float:
    """Perplexity of ``model`` on the token stream ``ids`` (state carried across windows)."""
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.0), StatefulLMLoss(), device="cpu")
    return trainer.evaluate(list(bptt_batches(batchify(ids, batch_size), bptt))).perplexity


class _PrintEvery(Callback):
    """Progress for long command-line runs: step, loss and rate every ``n`` steps."""

    def __init__(self, n: int):
        self.n = n

    def on_batch_end(self, trainer: Trainer, loss: float) -> None:
        if trainer.step % self.n == 0:
            print(f"step {trainer.step}  loss {loss:.3f}  lr {trainer.lr:.2e}", flush=True)


def pretrain(out_dir: str | Path, steps: int | None = None) -> dict:
    """Stage (a): train the AWD-LSTM LM on PTB with the seeded recipe ``PRETRAIN_RECIPE``; write
    ``awd_lstm_ptb.safetensors`` (fp16), ``vocab.json`` and ``pretrain.json`` to ``out_dir``."""
    from safetensors.torch import save_file

    from ..runtime import seed_everything

    recipe = dict(PRETRAIN_RECIPE, steps=steps or PRETRAIN_RECIPE["steps"])
    seed_everything(recipe["seed"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = ptb_vocab()
    cfg = AWDLSTMConfig(vocab_size=len(vocab), pad_id=vocab[PAD], **PRETRAIN_CONFIG)
    model = AWDLSTMLanguageModel(cfg)
    streams = batchify(_ptb_ids(vocab, "train"), recipe["batch_size"])
    windows = list(bptt_batches(streams, recipe["bptt"]))
    # windows beyond one epoch wrap around to the start of the corpus
    batches = [windows[i % len(windows)] for i in range(recipe["steps"])]
    opt = torch.optim.Adam(model.parameters(), lr=recipe["eta_max"], betas=recipe["betas"])
    trainer = Trainer(model, opt, StatefulLMLoss(),
                      [STLR(recipe["steps"], recipe["cut_frac"], recipe["ratio"]), GradientClipping(recipe["clip"]),
                       _PrintEvery(25)], device="cpu")
    start = time.perf_counter()
    trainer.fit(batches, epochs=1)
    train_seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        valid_ppl, test_ppl = evaluate_lm(model, _ptb_ids(vocab, "valid")), evaluate_lm(model, _ptb_ids(vocab, "test"))
    report = {
        "model": "AWD-LSTM (lmlib.models.awd_lstm), PTB pretraining for ULMFiT",
        "config": cfg.__dict__, "recipe": recipe, "tokens_seen": recipe["steps"] * recipe["batch_size"] * recipe["bptt"],
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
               if not (model.cfg.tie_weights and k == "decoder.weight")}
    weights = out_dir / "awd_lstm_ptb.safetensors"
    save_file(tensors, str(weights), metadata={"config": json.dumps(model.cfg.__dict__)})
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
            raise FileNotFoundError(f"{name} is missing from {directory}; rerun `python -m lmlib.models.ulmfit pretrain`")
        actual = sha256_of(path) if verify else expected
        if actual != expected:
            raise ValueError(f"{name} has sha256 {actual}, expected {expected}: the file is corrupt "
                             f"or was replaced; restore it from git or rerun `python -m lmlib.models.ulmfit pretrain`")
    with safe_open(str(directory / "awd_lstm_ptb.safetensors"), framework="pt") as fh:
        cfg_dict = json.loads(fh.metadata()["config"])
        tensors = {k: fh.get_tensor(k).float() for k in fh.keys()}
    cfg = AWDLSTMConfig(**{**cfg_dict, **dropouts})
    model = AWDLSTMLanguageModel(cfg)
    if cfg.tie_weights:
        tensors["decoder.weight"] = tensors["encoder.embedding.weight"]
    model.load_state_dict(tensors)
    return model, Vocab.load(directory / "vocab.json")


# -- (b) target-task LM fine-tuning --------------------------------------------------------------------

def tokenize(text: str) -> list[str]:
    """Whitespace tokens, lower-cased, numbers written ``N`` as in Mikolov's PTB (the texts are pre-tokenized)."""
    return ["N" if tok.replace(".", "").replace(",", "").isdigit() else tok for tok in text.lower().split()]


def extend_vocab(model: AWDLSTMLanguageModel, vocab: Vocab, texts: Sequence[Sequence[str]], min_freq: int = 2,
                 max_new: int | None = None) -> tuple[AWDLSTMLanguageModel, Vocab]:
    """Add the target texts' frequent new words to ``vocab`` and ``model`` (Howard & Ruder 2018, sec. 3.2).

    Known words keep their pretrained rows; each new word's embedding row is the mean of the pretrained
    rows (and its decoder bias the mean bias), so a new word starts as an "average word" rather than noise.
    Words seen fewer than ``min_freq`` times stay ``<unk>``; at most ``max_new`` (most frequent first) are added.
    Returns a new model and vocabulary; the inputs are not modified.
    """
    if min_freq < 1:
        raise ValueError(f"min_freq must be at least 1, got {min_freq}")
    counts = Counter(tok for text in texts for tok in text)
    new_words = sorted((w for w, c in counts.items() if c >= min_freq and w not in vocab), key=lambda w: (-counts[w], w))
    new_words = new_words[:max_new]
    new_vocab = Vocab.__new__(Vocab)
    new_vocab.itos = vocab.itos + new_words
    new_vocab.stoi = {t: i for i, t in enumerate(new_vocab.itos)}
    new_vocab.unk, new_vocab.counts = vocab.unk, Counter(vocab.counts) + Counter({w: counts[w] for w in new_words})
    cfg = AWDLSTMConfig(**{**model.cfg.__dict__, "vocab_size": len(new_vocab)})
    new_model = AWDLSTMLanguageModel(cfg)
    state = model.state_dict()
    old_emb, old_bias = state["encoder.embedding.weight"], state["decoder.bias"]
    keep = [i for i, t in enumerate(vocab.itos) if t != PAD] if PAD in vocab else list(range(len(vocab)))
    emb = torch.cat([old_emb, old_emb[keep].mean(0, keepdim=True).expand(len(new_words), -1)])
    bias = torch.cat([old_bias, old_bias[keep].mean().expand(len(new_words))])
    state = {**state, "encoder.embedding.weight": emb, "decoder.bias": bias}
    if cfg.tie_weights:
        state["decoder.weight"] = emb
    new_model.load_state_dict(state)
    return new_model, new_vocab


def encoder_groups(encoder: AWDLSTMEncoder) -> list[nn.Module]:
    """ULMFiT's layer groups of the encoder, lowest first: the embedding, then each LSTM layer."""
    return [encoder.embedding, *encoder.layers]


def discriminative_param_groups(groups: Sequence[nn.Module], eta_top: float, factor: float = 2.6) -> list[dict]:
    """Optimizer parameter groups with η^l = η^L / factor^(L−l), lowest group first (each parameter once)."""
    lrs = discriminative_lrs(eta_top, len(groups), factor)
    seen: set[int] = set()
    out = []
    for module, lr in zip(groups, lrs):
        params = [p for p in module.parameters() if id(p) not in seen]
        seen.update(id(p) for p in params)
        out.append({"params": params, "lr": lr})
    return out


def lm_param_groups(model: AWDLSTMLanguageModel, eta_top: float, factor: float = 2.6) -> list[dict]:
    """Discriminative groups of an LM: embedding (tied decoder weight), LSTM 1..L, and the decoder bias
    with the top LSTM layer."""
    groups = discriminative_param_groups(encoder_groups(model.encoder), eta_top, factor)
    groups[-1]["params"].append(model.decoder.bias)
    return groups


def finetune_lm(model: AWDLSTMLanguageModel, ids: torch.Tensor, epochs: int = 1, eta_max: float = 4e-3,
                batch_size: int = 32, bptt: int = 70, max_steps: int | None = None, callbacks=()) -> Trainer:
    """Stage (b): fine-tune the LM on the target text ``ids`` with discriminative rates and STLR."""
    windows = list(bptt_batches(batchify(ids, batch_size), bptt))
    if max_steps is not None:
        windows = windows[:max_steps]
    opt = torch.optim.Adam(lm_param_groups(model, eta_max), betas=(0.8, 0.99))
    trainer = Trainer(model, opt, StatefulLMLoss(),
                      [STLR(epochs * len(windows)), GradientClipping(0.5), *callbacks], device="cpu")
    trainer.fit(windows, epochs=epochs)
    return trainer


# -- (c) the classifier ---------------------------------------------------------------------------------

def concat_pool(H: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Concat pooling (Howard & Ruder 2018, sec. 3.3) of hidden states H ``(batch, time, d)``:

        h_c = [h_T, maxpool(H), meanpool(H)]   -> ``(batch, 3d)``

    padding-aware: ``mask`` ``(batch, time)`` is True at real tokens; h_T is each sequence's last real
    token, and padded positions take part in neither the max nor the mean.
    """
    if H.dim() != 3:
        raise ValueError(f"H must be (batch, time, d), got shape {tuple(H.shape)}")
    if mask.shape != H.shape[:2]:
        raise ValueError(f"mask must be (batch, time) = {tuple(H.shape[:2])}, got {tuple(mask.shape)}")
    mask = mask.bool()
    lengths = mask.sum(1)
    if (lengths == 0).any():
        raise ValueError("a sequence in the batch has no real tokens; drop empty texts before batching")
    # index of the last True per row (right padding is not assumed)
    positions = torch.arange(H.size(1), device=H.device).expand_as(mask)
    last = torch.where(mask, positions, -1).max(1).values
    h_last = H[torch.arange(H.size(0), device=H.device), last]
    h_max = H.masked_fill(~mask[..., None], float("-inf")).max(1).values
    h_mean = (H * mask[..., None]).sum(1) / lengths[:, None].to(H.dtype)
    return torch.cat([h_last, h_max, h_mean], dim=1)


class PoolingClassifierHead(nn.Module):
    """BatchNorm → Dropout → Linear → ReLU → BatchNorm → Dropout → Linear on h_c ``(batch, 3d)`` -> logits.

    The paper's two blocks (sec. 3.3); ``p1``/``p2`` are the two dropout probabilities, ``hidden`` the
    width of the intermediate layer (50 in the paper).
    """

    def __init__(self, in_features: int, n_classes: int, hidden: int = 50, p1: float = 0.2, p2: float = 0.1):
        super().__init__()
        for name, p in (("p1", p1), ("p2", p2)):
            if not 0 <= p < 1:
                raise ValueError(f"{name} is a dropout probability and must be in [0, 1), got {p}")
        if min(in_features, n_classes, hidden) < 1:
            raise ValueError(f"in_features, n_classes and hidden must be positive, got {in_features}, {n_classes}, {hidden}")
        self.layers = nn.Sequential(
            nn.BatchNorm1d(in_features), nn.Dropout(p1), nn.Linear(in_features, hidden), nn.ReLU(),
            nn.BatchNorm1d(hidden), nn.Dropout(p2), nn.Linear(hidden, n_classes),
        )

    def forward(self, h_c: torch.Tensor) -> torch.Tensor:
        return self.layers(h_c)


class ULMFiTClassifier(nn.Module):
    """AWD-LSTM encoder + concat pooling + head: ``model(ids, mask) -> logits (batch, n_classes)``."""

    def __init__(self, encoder: AWDLSTMEncoder, n_classes: int, hidden: int = 50, p1: float = 0.2, p2: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.head = PoolingClassifierHead(3 * encoder.cfg.layer_sizes()[-1][1], n_classes, hidden, p1, p2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if ids.shape != mask.shape:
            raise ValueError(f"ids {tuple(ids.shape)} and mask {tuple(mask.shape)} must both be (batch, time)")
        outputs, _, _ = self.encoder(ids)  # outputs[-1]: last layer after output dropout
        return self.head(concat_pool(outputs[-1], mask))

    def layer_groups(self) -> list[nn.Module]:
        """Lowest first: embedding, LSTM 1..L, head — the units of discriminative rates and unfreezing."""
        return [*encoder_groups(self.encoder), self.head]


class GradualUnfreezing(Callback):
    """Gradual unfreezing (Howard & Ruder 2018, sec. 3.3) as a Trainer callback.

    ``groups`` lowest first. In the first epoch of ``fit`` only the last group trains; each later epoch
    unfreezes the next lower group, until all train. Frozen parameters get ``requires_grad=False``, so
    they get no gradient and the optimizer leaves them untouched. ``schedule`` records, per epoch, the
    indices of the groups that trained.
    """

    def __init__(self, groups: Sequence[nn.Module]):
        if len(groups) < 1:
            raise ValueError("GradualUnfreezing needs at least one layer group")
        self.groups = list(groups)
        self.start_epoch: int | None = None
        self.schedule: list[list[int]] = []

    def n_trainable(self, epoch_in_fit: int) -> int:
        return min(epoch_in_fit + 1, len(self.groups))

    def on_fit_begin(self, trainer: Trainer) -> None:
        if self.start_epoch is None:
            self.start_epoch = trainer.epoch

    def on_epoch_begin(self, trainer: Trainer) -> None:
        k = self.n_trainable(trainer.epoch - self.start_epoch)
        for i, group in enumerate(self.groups):
            for p in group.parameters():
                p.requires_grad_(i >= len(self.groups) - k)
        self.schedule.append(list(range(len(self.groups) - k, len(self.groups))))

    def state_dict(self) -> dict:
        return {"start_epoch": self.start_epoch, "schedule": self.schedule}

    def load_state_dict(self, state: dict) -> None:
        self.start_epoch, self.schedule = state["start_epoch"], [list(s) for s in state["schedule"]]


def unfreezing_timeline(n_groups: int, epochs: int, eta_top: float, factor: float = 2.6,
                        gradual: bool = True) -> torch.Tensor:
    """``(n_groups, epochs)`` peak learning rate of each group in each epoch (0 where it is frozen)."""
    lrs = discriminative_lrs(eta_top, n_groups, factor)
    table = torch.zeros(n_groups, epochs)
    for e in range(epochs):
        k = min(e + 1, n_groups) if gradual else n_groups
        for g in range(n_groups - k, n_groups):
            table[g, e] = lrs[g]
    return table


def timeline_figure(n_groups: int = 5, epochs: int = 6, eta_top: float = 0.01, factor: float = 2.6,
                    gradual: bool = True, names: Sequence[str] | None = None):
    """Heatmap of :func:`unfreezing_timeline`: which group trains at which peak rate in each epoch."""
    from ..course.viz import heatmap

    names = list(names) if names is not None else ["embedding", *[f"LSTM {i + 1}" for i in range(n_groups - 2)], "head"][:n_groups]
    table = unfreezing_timeline(n_groups, epochs, eta_top, factor, gradual)
    fig = heatmap(table.flip(0), x=[f"epoch {e + 1}" for e in range(epochs)], y=names[::-1],
                  title=f"peak learning rate per layer group (0 = frozen); η^(l-1) = η^l / {factor:g}",
                  colorscale="Blues", text_format=".1e")
    return fig


# -- the labelled-examples experiment ------------------------------------------------------------------

def _letters(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalpha())


def rt_polarity_split(test_frac: float = 0.2, seed: int = 0):
    """rt-polarity tokenized and split (seeded) into ``(train_texts, train_labels, test_texts, test_labels)``."""
    from ..data import load_rt_polarity

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
    from ..data import load_sst2

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


def train_classifier(model: ULMFiTClassifier, seqs: Sequence[Sequence[int]], labels: Sequence[int],
                     epochs: int, eta_top: float = 0.01, gradual: bool = True, factor: float = 2.6,
                     batch_size: int = 32, max_len: int = 60, min_steps_per_epoch: int = 10,
                     seed: int = 0, callbacks=()) -> Trainer:
    """Stage (c): Adam(β = (0.7, 0.99)) with STLR over all steps, discriminative rates (``factor``; use 1
    for one rate everywhere) and, with ``gradual``, gradual unfreezing of ``model.layer_groups()``.

    An epoch is one shuffled pass, repeated until it has at least ``min_steps_per_epoch`` steps, so a
    100-example set still gets enough updates per unfreezing stage.
    """
    from ..text.batching import classification_batches

    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    pad_id = model.encoder.cfg.pad_id
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
    from ..training.objectives import classification_loss

    trainer = Trainer(model, opt, classification_loss, cbs, device="cpu")
    trainer.fit(epoch_batches, epochs=epochs)
    return trainer


@torch.no_grad()
def accuracy(model: ULMFiTClassifier, seqs: Sequence[Sequence[int]], labels: Sequence[int],
             batch_size: int = 256, max_len: int = 60) -> float:
    from ..text.batching import classification_batches

    with eval_mode(model):
        correct = 0
        for b in classification_batches(seqs, labels, batch_size, model.encoder.cfg.pad_id, shuffle=False,
                                        max_len=max_len, truncate=True):
            correct += int((model(b.ids, b.mask).argmax(-1) == b.labels).sum())
    return correct / len(seqs)


def encode_texts(vocab: Vocab, texts: Sequence[Sequence[str]]) -> list[list[int]]:
    """Token lists -> id lists; empty texts become a single ``<unk>`` so no row is empty."""
    return [vocab.encode(t) if t else [vocab.unk_id] for t in texts]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lmlib.models.ulmfit")
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
