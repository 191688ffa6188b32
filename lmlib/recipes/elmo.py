"""An ELMo biLM pretrained on IMDb reviews: the tokenizer, the sentence data, the seeded recipe behind the checkpoint
shipped in ``lmlib/pretrained/elmo_imdb/`` (:data:`REBUILD`), its loader, and the features and probes built on it.

Peters et al. (2018) train their biLM on the 1B Word Benchmark (about 800M words, 10 epochs) with 4096-cell LSTMs
and a 2048-filter character CNN. This recipe trains the same objective (the §3.1 objective: forward plus backward NLL,
shared character encoder and softmax) at a size one CPU core finishes in about twenty minutes: IMDb's 50,000
unlabelled reviews cut into sentences of at most 40 words, a character CNN of 256 filters with two highway layers,
two LSTM layers of 512 cells projected to 128, and a word-level softmax over the 10,000 most frequent lower-cased words.

The **inputs keep their case** and are read character by character, so every word, however rare, gets its own
vector; the **softmax predicts the lower-cased word**, and a word outside the 10,000 kept types is predicted as
``<unk>`` (a target only: it is never an input). Perplexities are therefore over this capped vocabulary, ``<unk>``
included, and are reported for each direction separately.

``--preset gpu`` is the recipe sized for one GPU: 1,024 sentences a step, held on the device as word-type ids
(:func:`device_batches`), in float32 (the LSTMs), with checkpoints at token milestones on the way.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..models.elmo import (  # noqa: F401 (notebook 08 and the benchmarks read the task models here)
    BagOfEmbeddings,
    BagWithELMo,
    BiLM,
    BiLMConfig,
    FeatureProbe,
    elmo_representations,
    encode_sentences,
    encode_word_ids,
    encode_words,
)
from ..runtime import eval_mode, seed_everything
from ..text.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab
from ..training.callbacks import GradientClipping
from ..training.distributed import mean_over_ranks
from ..training.sampled_softmax import SampledSoftmax, unigram_proposal
from ..training.schedules import WarmupCosine
from ..training.trainer import Trainer
from .pretraining import PretrainError, PretrainRun, RunOptions, last_losses, loss_curve, plan, unsup_split
from .shipping import PRETRAINED_DIR, load_shipped, save_shipped

NAME = "elmo_imdb"
CHECKPOINT_DIR = PRETRAINED_DIR / NAME
REBUILD = ("python -m lmlib pretrain elmo --preset cpu --threads 2 --stop-after 14977 --out pretrained-runs/cpu/elmo "
           "(the same with --resume after any stop), then python -m lmlib ship elmo pretrained-runs/cpu/elmo/last_stop")

PRETRAIN_CONFIG = dict(embed_size=128, hidden_size=512, num_layers=2, dropout=0.1, char_embed_size=16,
                       filters=((1, 32), (2, 32), (3, 64), (4, 64), (5, 64)), num_highway=2, max_chars=20)
PRETRAIN_RECIPE = dict(seed=0, vocab_size=10000, max_words=40, min_words=3, batch_size=32, steps=1200, lr=3e-3,
                       warmup=100, min_ratio=0.05, clip=1.0, valid_reviews=1000, valid_sentences=2000)
# `--preset teach`: the same recipe on 300 reviews with a tiny biLM, a few seconds on one core
PRETRAIN_TEACH = dict(recipe=dict(steps=30, vocab_size=1000, batch_size=8, train_reviews=300, valid_reviews=50,
                                  valid_sentences=100),
                      config=dict(embed_size=32, hidden_size=64, filters=((1, 8), (2, 8), (3, 16)), num_highway=1))
# `--preset gpu`: 1,024 sentences (about 22k predicted tokens) a step at the same rate; 7,000 steps read about 150M
# tokens, with a checkpoint at 4M, 16M and 64M on the way; train_reviews (None: all) shortens a trial
PRETRAIN_GPU = dict(recipe=dict(batch_size=1024, steps=7000, warmup=200, train_reviews=None,
                                milestones=[4_000_000, 16_000_000, 64_000_000]))

# `--preset cpu`: about 150M tokens on a CPU, run over several sessions (--resume): 128 sentences a step (an LSTM on a
# CPU reads wide batches faster per token) at the same rate as the 1,024-sentence GPU run, the softmax sampled (1,024
# shared negatives from the smoothed unigram of the training words) while training and exact when measuring.
PRETRAIN_CPU = dict(recipe=dict(batch_size=128, steps=55_000, warmup=500, train_reviews=None, sampled=1024,
                                proposal_power=0.75,
                                milestones=[4_000_000, 16_000_000, 32_000_000, 64_000_000, 100_000_000]))

_TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*|\d+(?:[.,]\d+)*|[^\w\s]|_")
_SENTENCE_END = {".", "!", "?"}


def tokenize(text: str) -> list[str]:
    """Tokens of ``text``: letter runs (inner apostrophes kept: ``don't``, ``Spielberg's``), numbers (``3.5``,
    ``1,000``), and each other non-space character alone (``.``, ``(``, ``-``). Case is kept."""
    return _TOKEN.findall(text)


def sentences_of(text: str, max_words: int = PRETRAIN_RECIPE["max_words"],
                 min_words: int = PRETRAIN_RECIPE["min_words"]) -> list[list[str]]:
    """A review as sentences: a sentence ends after ``.``, ``!`` or ``?`` or at a line break; one longer than
    ``max_words`` is cut into pieces of ``max_words`` (the last piece kept if it has ``min_words``); sentences
    of fewer than ``min_words`` tokens are dropped."""
    out: list[list[str]] = []
    for line in text.split("\n"):
        tokens = tokenize(line)
        ends = [k + 1 for k, tok in enumerate(tokens) if tok in _SENTENCE_END]
        out += [tokens[a:b] for a, b in zip([0, *ends], [*ends, len(tokens)]) if a < b]
    pieces = [s[i: i + max_words] for s in out for i in range(0, len(s), max_words)]
    return [p for p in pieces if len(p) >= min_words]


def target_vocab(sentences: Sequence[Sequence[str]], size: int = PRETRAIN_RECIPE["vocab_size"]) -> Vocab:
    """The softmax's vocabulary: ``<pad> <unk> <bos> <eos>`` then the most frequent lower-cased words, ``size``
    types in all."""
    counts = Counter(w.lower() for s in sentences for w in s)
    return Vocab(counts, max_size=size, specials=SPECIALS, unk=UNK)


def encode_batch(sentences: Sequence[Sequence[str]], vocab: Vocab,
                 max_chars: int = PRETRAIN_CONFIG["max_chars"]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(char_ids (B, T, max_chars), word_ids (B, T))`` of ``<bos> sentence <eos>``: characters of the cased
    words, softmax ids of the lower-cased ones."""
    return (encode_sentences(sentences, max_chars),
            encode_word_ids([[w.lower() for w in s] for s in sentences], vocab))


def unsup_sentences(valid_reviews: int = PRETRAIN_RECIPE["valid_reviews"],
                    train_reviews: int | None = None) -> tuple[list[list[str]], list[list[str]]]:
    """IMDb's 50,000 unlabelled reviews as sentences, (train, held-out): the last ``valid_reviews`` reviews are
    held out; training uses the first ``train_reviews`` of the others (default: all)."""
    train, held_out = unsup_split(valid_reviews)
    return [s for t in train[:train_reviews] for s in sentences_of(t)], [s for t in held_out for s in sentences_of(t)]


def held_out_sentences(valid_reviews: int = PRETRAIN_RECIPE["valid_reviews"]) -> list[list[str]]:
    """The sentences of the last ``valid_reviews`` unlabelled reviews, never trained on (the second half of
    :func:`unsup_sentences`)."""
    return [s for t in unsup_split(valid_reviews)[1] for s in sentences_of(t)]


class random_batches(Iterator[tuple[torch.Tensor, torch.Tensor]]):  # lower-case: called as the function it replaced
    """``steps`` batches of ``batch_size`` sentences drawn at seeded random, each as :func:`encode_batch`.

    An iterator with :meth:`skip`, which a resumed run uses to reach its step (``Trainer.fit``): the same draws,
    without encoding the batches it passes over."""

    def __init__(self, sentences: Sequence[Sequence[str]], vocab: Vocab, batch_size: int, steps: int, seed: int,
                 max_chars: int = PRETRAIN_CONFIG["max_chars"]):
        self.sentences, self.vocab, self.batch_size, self.max_chars = sentences, vocab, batch_size, max_chars
        self.left, self.g = steps, torch.Generator().manual_seed(seed)

    def _draw(self) -> list[int] | None:
        if self.left <= 0:
            return None
        self.left -= 1
        return torch.randint(0, len(self.sentences), (self.batch_size,), generator=self.g).tolist()

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self._draw()
        if idx is None:
            raise StopIteration
        return encode_batch([self.sentences[i] for i in idx], self.vocab, self.max_chars)

    def skip(self, n: int) -> int:
        """Pass over the next ``n`` batches (fewer if the stream ends first), leaving the generator where drawing
        them would; returns the words they hold, ``<bos>`` and ``<eos>`` included (their non-padding word ids)."""
        words = 0
        for _ in range(n):
            idx = self._draw()
            if idx is None:
                break
            words += sum(len(self.sentences[i]) + 2 for i in idx)
        return words


class _CountedBatches(Iterator[tuple[torch.Tensor, torch.Tensor]]):
    """The batches of ``source`` with a running count of their word ids that are not padding, those of the batches
    skipped on a resume included: the ``tokens_seen`` a run reports."""

    def __init__(self, source: Iterator[tuple[torch.Tensor, torch.Tensor]], pad: int):
        self.source, self.pad, self.tokens = source, pad, 0

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        chars, ids = next(self.source)
        self.tokens = self.tokens + (ids != self.pad).sum()  # a tensor (on the run's device): read once, at the end
        return chars, ids

    def skip(self, n: int) -> None:
        if hasattr(self.source, "skip"):
            self.tokens = self.tokens + self.source.skip(n)
        else:  # drawn and counted, then dropped
            for _ in zip(range(n), self):
                pass


def sentence_type_ids(sentences: Sequence[Sequence[str]], width: int) -> tuple[torch.Tensor, list[str]]:
    """``(ids (N, width) int32, types)``: each sentence as ``<bos> words <eos>`` ids into ``types`` (the distinct
    cased words, with ``<pad>`` = 0, ``<bos>``, ``<eos>`` first), padded with 0."""
    types = [PAD, BOS, EOS]
    index = {t: i for i, t in enumerate(types)}
    ids = torch.zeros((len(sentences), width), dtype=torch.int32)
    for row, sentence in enumerate(sentences):
        seq = [1, *(index.setdefault(w, len(index)) for w in sentence), 2]
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
    return ids, list(index)


def device_batches(sentences: Sequence[Sequence[str]], vocab: Vocab, batch_size: int, steps: int, seed: int,
                   max_chars: int, device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` batches of ``batch_size`` sentences drawn at seeded random, as :func:`encode_batch` gives them but
    built on ``device``: the sentences are held there as word-type ids (:func:`sentence_type_ids`), and each type's
    characters and softmax id are looked up there, so nothing crosses from the host per step. Every batch is as wide
    as the longest sentence (``<bos>`` and ``<eos>`` included)."""
    ids, types = sentence_type_ids(sentences, max(len(s) for s in sentences) + 2)
    chars = encode_words(types, max_chars).to(device)  # (types, max_chars)
    softmax = torch.tensor(vocab.encode([t if t in SPECIALS else t.lower() for t in types]), device=device)
    softmax[0] = vocab.stoi[PAD]
    ids = ids.to(device)
    g = torch.Generator(device=device).manual_seed(seed)
    for _ in range(steps):
        rows = torch.randint(0, ids.size(0), (batch_size,), generator=g, device=device)
        t = ids[rows].long()  # (B, width) type ids
        yield chars[t], softmax[t]


def bilm_objective(sampled=None):
    """The Trainer's loss: the §3.1 joint objective, forward plus backward mean NLL (:meth:`BiLM.loss`). It calls
    ``model(char_ids)`` itself, the call DDP averages gradients through; under torchrun the mean is taken over every
    rank's predicted words (the shares' sentences differ in length). ``sampled`` (a
    :class:`~lmlib.training.sampled_softmax.SampledSoftmax`) stands in for the exact softmax while the model trains."""

    def loss_fn(model: BiLM, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        char_ids, word_ids = batch
        out = model(char_ids)
        forward, backward = model.nll(char_ids, word_ids, out, sampled if model.training else None)
        predicted_words = (out.mask.sum(dim=1) - 1).clamp(min=0).sum()  # each sentence predicts all but one word
        return mean_over_ranks(forward + backward, predicted_words)

    return loss_fn


bilm_loss = bilm_objective()  # with the exact softmax


def evaluate_bilm(model: BiLM, sentences: Sequence[Sequence[str]], vocab: Vocab, batch_size: int = 64) -> dict:
    """Forward and backward perplexity over ``sentences`` (every predicted word counts once; ``<bos>``/``<eos>``
    targets included, as in training), and the number of predicted words; on the model's device."""
    totals, n_words = [0.0, 0.0], 0
    device = next(model.parameters()).device
    with eval_mode(model), torch.no_grad():
        for i in range(0, len(sentences), batch_size):
            chunk = sentences[i: i + batch_size]
            chars, ids = (t.to(device) for t in encode_batch(chunk, vocab, model.config.max_chars))
            n = sum(len(s) + 1 for s in chunk)  # <bos> w_1..w_N <eos>: N + 1 predictions per direction
            for d, nll in enumerate(model.nll(chars, ids)):
                totals[d] += nll.item() * n
            n_words += n
    fwd, bwd = (t / n_words for t in totals)
    return {"forward_nll": fwd, "backward_nll": bwd, "forward_ppl": math.exp(fwd), "backward_ppl": math.exp(bwd),
            "predicted_words": n_words}


def pretrain(out_dir: str | Path, steps: int | None = None, preset: str = "full",
             run: RunOptions | None = None, overrides: dict | None = None) -> dict | None:
    """Train the biLM with ``preset``'s recipe and write the checkpoint to ``out_dir``; arguments and result as in
    :mod:`lmlib.recipes.pretraining`."""
    recipe, model_config, _ = plan(preset, steps, PRETRAIN_RECIPE, PRETRAIN_CONFIG, PRETRAIN_TEACH, gpu=PRETRAIN_GPU,
                                   overrides=overrides, cpu=PRETRAIN_CPU)
    recipe["warmup"] = min(recipe["warmup"], recipe["steps"] // 10)
    if recipe.get("sampled") is not None and not (isinstance(recipe["sampled"], int) and recipe["sampled"] >= 1):
        raise PretrainError(f"sampled (negatives of the sampled softmax) must be a whole number >= 1, got "
                            f"{recipe['sampled']!r}")
    job = PretrainRun(NAME, out_dir, {"recipe": recipe, "config": model_config}, run, preset)
    seed_everything(recipe["seed"])
    start = time.perf_counter()
    train, valid = unsup_sentences(recipe["valid_reviews"], recipe.get("train_reviews"))
    vocab = target_vocab(train, recipe["vocab_size"])
    valid = valid[: recipe["valid_sentences"]]
    n_words = sum(len(s) for s in train)
    counts = Counter(w.lower() for s in train for w in s)
    coverage = sum(counts[w] for w in vocab.itos if w in counts) / n_words
    if job.writes:  # rank 0 alone under torchrun
        print(f"data: {len(train):,} train sentences ({n_words:,} words), {len(valid):,} held-out; vocabulary "
              f"{len(vocab):,} covers {coverage:.1%} of train words; {time.perf_counter() - start:.0f} s", flush=True)

    config = BiLMConfig(vocab_size=len(vocab), **model_config)
    model = BiLM(config)
    if job.weights_from is not None:  # this run's own milestone (--from-milestone)
        model.load_state_dict(load_shipped(job.weights_from, NAME, REBUILD)[1])
    opt = job.adam(model.parameters(), adamw=False, lr=recipe["lr"])
    pad = vocab.stoi[SPECIALS[0]]
    tokens_per_step = recipe["batch_size"] * (n_words + 2 * len(train)) / len(train)  # on average: <bos> and <eos> too

    about = {"model": "ELMo biLM (lmlib.models.elmo), pretrained on IMDb's unlabelled reviews",
             "config": config.__dict__, "recipe": recipe}
    data_facts = {"parameters": sum(p.numel() for p in model.parameters()), "train_sentences": len(train),
                  "train_words": n_words, "vocab_coverage": coverage, "valid_sentences": len(valid)}

    def save(folder: str | Path, report: dict) -> dict:
        return save_shipped(folder, NAME, model.state_dict(), config.__dict__, report, side_files={"vocab.json": vocab.save})

    def milestone(folder: Path, trainer: Trainer, tokens: int) -> None:
        # held-out perplexities with the exact softmax: evaluation draws no dropout mask, so the run goes on unchanged
        held_out = {f"valid_{k}": v for k, v in evaluate_bilm(model, valid, vocab).items()}
        save(folder, {**about, **data_facts, "tokens_seen": round(trainer.step * tokens_per_step), "steps": trainer.step,
                      **held_out, "train_loss_curve": loss_curve(trainer.batch_losses), **job.milestone_record()})

    sampled = None
    if recipe.get("sampled"):  # Q from the training words' counts; <bos> and <eos> once a sentence each
        n_covered = sum(counts[w] for w in vocab.itos if w in counts)
        freq = [counts.get(w, 0) for w in vocab.itos]
        freq[vocab.stoi[UNK]] += n_words - n_covered
        freq[vocab.stoi[BOS]] = freq[vocab.stoi[EOS]] = len(train)
        sampled = SampledSoftmax(unigram_proposal(torch.tensor(freq), recipe["proposal_power"]), recipe["sampled"])
        about["train_loss"] = (f"sampled softmax, {recipe['sampled']} negatives: an estimate, not the exact cross-entropy; "
                               f"the perplexities are exact")
    trainer = Trainer(model, opt, bilm_objective(sampled),
                      [WarmupCosine(recipe["steps"], recipe["warmup"], recipe["min_ratio"]),
                       GradientClipping(recipe["clip"]), job.progress(lambda batch: (batch[1] != pad).sum()),
                       *job.milestones(tokens_per_step, milestone)],
                      **job.trainer_options())
    stream: list[_CountedBatches] = []

    def batches(epoch):
        make = device_batches if preset == "gpu" else random_batches
        more = {"device": job.device} if preset == "gpu" else {}
        stream[:] = [_CountedBatches(iter(make(train, vocab, recipe["batch_size"], recipe["steps"], recipe["seed"],
                                               config.max_chars, **more)), pad)]
        return stream[0]

    job.fit(trainer, batches)  # a resumed run counts the tokens of the batches it skips, too
    if not job.writes:
        return None
    model.cpu()
    metrics = evaluate_bilm(model, valid, vocab)
    print(f"held-out: forward perplexity {metrics['forward_ppl']:.1f}, backward {metrics['backward_ppl']:.1f}",
          flush=True)
    report = {
        **about, **data_facts, "tokens_seen": int(stream[0].tokens), "steps": trainer.step,
        **last_losses(trainer.batch_losses), **{f"valid_{k}": v for k, v in metrics.items()},
    }
    if preset != "full":
        report["train_loss_curve"] = loss_curve(trainer.batch_losses)
    report = save(out_dir, job.annotate(report))
    job.finish()
    return report


def load_pretrained(directory: str | Path = CHECKPOINT_DIR) -> tuple[BiLM, Vocab, dict]:
    """``(bilm, vocab, report)`` of the shipped IMDb biLM, after checking every file's sha256; eval mode."""
    config, tensors, report = load_shipped(directory, NAME, REBUILD)
    config["filters"] = tuple(tuple(f) for f in config["filters"])
    model = BiLM(BiLMConfig(**config))
    model.load_state_dict(tensors)
    return model.eval(), Vocab.load(Path(directory) / "vocab.json"), report


# -- features: every layer at every word, and reviews pooled ------------------------------------------------

def token_features(bilm: BiLM, sentences: Sequence[Sequence[str]], batch_size: int = 128) -> torch.Tensor:
    """``(n_words, L + 1, 2d)``: ELMo's L + 1 layers at every word of ``sentences``, in sentence and word order.

    Each sentence is read alone, wrapped in ``<bos> ... <eos>`` as in pretraining (:func:`elmo_representations`);
    batches group sentences of similar length so little time goes to padding. An empty sentence adds no rows."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    per_sentence: dict[int, torch.Tensor] = {}
    for start in range(0, len(order), batch_size):
        idx = [i for i in order[start: start + batch_size] if sentences[i]]
        if not idx:
            continue
        layers, _ = elmo_representations(bilm, [list(sentences[i]) for i in idx], "all")  # (L + 1, B, T, 2d)
        for b, i in enumerate(idx):
            per_sentence[i] = layers[:, b, : len(sentences[i])].transpose(0, 1)  # (n_i, L + 1, 2d)
    width = (bilm.config.num_layers + 1, 2 * bilm.config.embed_size)
    rows = [per_sentence[i] for i in range(len(sentences)) if i in per_sentence]
    return torch.cat(rows) if rows else torch.zeros(0, *width)


def review_sentences(text: str, max_tokens: int) -> list[list[str]]:
    """The truncation rule for a review: its sentences (:func:`sentences_of`, pieces of at most 40 words, none
    dropped for shortness) taken in order until ``max_tokens`` tokens are read, the last one cut to fit."""
    out, left = [], max_tokens
    for sentence in sentences_of(text, min_words=1):
        if left <= 0:
            break
        out.append(sentence[:left])
        left -= len(out[-1])
    return out


def pooled_features(bilm: BiLM, texts: Sequence[str], max_tokens: int, batch_size: int = 128) -> torch.Tensor:
    """``(n_texts, L + 1, 2d)``: every layer averaged over the words of each text's first ``max_tokens`` tokens
    (:func:`review_sentences`); a text with no tokens gets zeros. Mean pooling is linear, so the scalar mix of
    these averages equals the average of the per-word mixes."""
    return mean_over_words(bilm, [review_sentences(text, max_tokens) for text in texts], batch_size)


def mean_over_words(bilm: BiLM, texts: Sequence[Sequence[Sequence[str]]], batch_size: int = 128) -> torch.Tensor:
    """``(n_texts, L + 1, 2d)``: every layer averaged over the words of each text, given as its pieces (sentences,
    each read alone by :func:`token_features`); a text with no words gets zeros."""
    pieces = [piece for text in texts for piece in text]
    words = token_features(bilm, pieces, batch_size).cpu()  # (n_words, L + 1, 2d), from the biLM's device
    index = torch.tensor([t for t, text in enumerate(texts) for piece in text for _ in piece], dtype=torch.long)
    sums = torch.zeros(len(texts), *words.shape[1:]).index_add_(0, index, words)
    counts = torch.zeros(len(texts)).index_add_(0, index, torch.ones(len(index)))
    return sums / counts.clamp(min=1).view(-1, 1, 1)


# -- probes: a classifier on frozen features of one layer or of the scalar mix -------------------------------

def standardize(train: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    """Each feature of ``(n, L + 1, D)`` features shifted and scaled by its mean and standard deviation on
    ``train``; the same shift and scale applied to ``others``."""
    mu, sd = train.mean(0, keepdim=True), train.std(0, keepdim=True).clamp(min=1e-6)
    return [(x - mu) / sd for x in (train, *others)]


def _xent(model: nn.Module, batch: tuple) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(*x), y)


def train_head(model: nn.Module, x: torch.Tensor | tuple[torch.Tensor, ...], y: torch.Tensor, steps: int = 300,
               lr: float = 0.01, weight_decay: float = 1e-4, batch_size: int = 512, seed: int = 0) -> nn.Module:
    """``model`` trained by the :class:`Trainer` with Adam for ``steps`` steps, each on ``batch_size`` rows of
    ``(x, y)`` drawn at seeded random (every row when there are no more than ``batch_size``); eval mode. ``x`` may
    be a tuple of tensors with one row per example (the model is then called with all of them)."""
    g = torch.Generator().manual_seed(seed)
    xs = x if isinstance(x, tuple) else (x,)

    def batches(epoch):
        for _ in range(steps):
            idx = torch.randperm(len(y), generator=g)[:batch_size]
            yield tuple(t[idx] for t in xs), y[idx]

    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    Trainer(model, opt, _xent, device="cpu").fit(batches, epochs=1)
    return model.eval()


def fit_probe(train_x: torch.Tensor, train_y: torch.Tensor, layer: int | None, num_classes: int, seed: int = 0,
              steps: int = 300, lr: float = 0.01, weight_decay: float = 1e-4, hidden: int = 0,
              dropout: float = 0.0, batch_size: int = 512) -> FeatureProbe:
    """A :class:`FeatureProbe` on ``(n, L + 1, D)`` standardized features, trained by :func:`train_head`."""
    torch.manual_seed(seed)
    probe = FeatureProbe(train_x.size(1), train_x.size(2), num_classes, layer, hidden, dropout)
    return train_head(probe, train_x, train_y, steps, lr, weight_decay, batch_size, seed)


def probe_accuracy(probe: nn.Module, x: torch.Tensor | tuple[torch.Tensor, ...], y: torch.Tensor) -> float:
    """The share of rows of ``x`` (a tensor, or a tuple of tensors the model takes together) whose predicted
    class is ``y``."""
    with torch.no_grad(), eval_mode(probe):
        logits = probe(*x) if isinstance(x, tuple) else probe(x)
        return float((logits.argmax(-1) == y).float().mean())
