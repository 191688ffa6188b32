"""A small BERT pretrained on IMDb reviews: the WordPiece vocabulary, the seeded recipe, the loader of the checkpoint
shipped in ``lmlib/pretrained/bert_imdb/``, and [CLS] fine-tuning for classification.

Devlin et al. (2019) pretrain BERT-base (L=12, H=768) on BooksCorpus and English Wikipedia (3.3B words) for
1,000,000 steps of 256 sequences of up to 512 tokens with two objectives, masked LM and next sentence prediction
(§3.1, Appendix A.2). This is the same pair of objectives at a course's scale:

* text: IMDb's 50,000 unlabelled reviews (Maas et al. 2011), the last ``valid_reviews`` held out;
* vocabulary: lmlib's WordPiece trainer (:meth:`lmlib.text.tokenizers.WordPiece.train`) on the training reviews;
* documents = reviews, sentences split by :func:`split_sentences`; pairs from
  :func:`lmlib.text.bert_data.sentence_pairs` (50% IsNext), masking by :func:`lmlib.text.bert_data.mask_tokens`
  (15%, 80/10/10);
* model: a 4-layer BERT with d_model 128; no dropout while pretraining, because the run sees each sentence pair only
  a few times (BERT's 0.1 regularises 40 epochs); fine-tuning puts dropout 0.1 back (:func:`classifier`);
* optimizer as in Appendix A.2: Adam(β₁=0.9, β₂=0.999), weight decay 0.01, linear warm-up then linear decay.

``--preset gpu`` made the shipped checkpoint (:data:`REBUILD`) with the WordPiece shipped before it: segments filled
to 128 tokens with spans of consecutive sentences as the paper does (:func:`~lmlib.text.bert_data.packed_instances`),
256 a step, masked on the device, bf16. The validation metrics (MLM and NSP loss and accuracy) are measured on pairs
from the held-out reviews with a fixed masking seed, after the weights are rounded to fp16 as shipped.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from ..models.bert import Bert, BertClassifier, BertConfig, check_inputs
from ..runtime import eval_mode, seed_everything
from ..text.batching import classification_batches as padded_batches
from ..text.bert_data import (
    IGNORE_INDEX,
    PretrainingBatch,
    SentencePair,
    SpecialIds,
    instance_tensors,
    mask_tokens,
    packed_instances,
    pretraining_batch,
    sentence_pairs,
)
from ..text.tokenizers import WordPiece
from ..text.truncation import head_and_tail
from ..training.callbacks import GradientClipping, LRSchedule
from ..training.distributed import mean_over_ranks
from ..training.schedules import weight_decay_groups
from ..training.trainer import BatchResult, Callback, Trainer, to_device
from .finetuning import finetune_plan
from .pretraining import PretrainRun, RunOptions, last_losses, loss_curve, plan, unsup_split
from .shipping import PRETRAINED_DIR, load_shipped, round_to_fp16, save_shipped, verify_shipped

NAME = "bert_imdb"
CHECKPOINT_DIR = PRETRAINED_DIR / NAME
REBUILD = "python -m lmlib pretrain bert --preset gpu --device cuda --out lmlib/pretrained/bert_imdb"

TOKENIZER_RECIPE = dict(vocab_size=8192, min_frequency=2, score="frequency")
PRETRAIN_CONFIG = dict(block_size=128, num_layers=4, num_heads=4, d_model=128, d_ff=512, dropout=0.0,
                       attention_dropout=0.0)
PRETRAIN_RECIPE = dict(seed=0, batch_size=32, steps=4500, lr=1e-3, warmup_frac=0.1, weight_decay=0.01,
                       betas=(0.9, 0.999), clip=1.0, mask_rate=0.15, max_len=128, valid_reviews=1000,
                       valid_pairs=2000, valid_seed=1, curve_every=100)
# `--preset teach`: the same recipe on 300 reviews with a tiny model, a few seconds on one core
PRETRAIN_TEACH = dict(recipe=dict(steps=30, batch_size=8, max_len=64, train_reviews=300, valid_reviews=50,
                                  valid_pairs=64, curve_every=10),
                      config=dict(block_size=64, num_layers=2, num_heads=2, d_model=32, d_ff=64),
                      tokenizer=dict(vocab_size=512))
# `--preset gpu` (the shipped checkpoint's recipe): 256 packed 128-token instances a step at the same rate, warm-up
# then linear decay, 5 passes of other cuts and pairings over the reviews, masked anew at every step (as RoBERTa
# does); `--set nsp=false` trains the MLM alone
PRETRAIN_GPU = dict(recipe=dict(batch_size=256, steps=7200, warmup=300, min_ratio=0.0, short_seq_prob=0.1, dupe_factor=5,
                                nsp=True), drop=("warmup_frac", "curve_every"), bf16=True)

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


# -- text -> documents of sentences ------------------------------------------------------------------------

def split_sentences(text: str) -> list[str]:
    """The sentences of a review by a simple rule: a break after ``.``, ``!`` or ``?`` (and any closing quote or
    bracket right after it) followed by white space, and at every line break (IMDb's ``<br />`` paragraph
    breaks). Empty pieces are dropped. Abbreviations are not recognised ("Mr. Smith" becomes two sentences);
    for pretraining pairs this only moves some boundaries. The closing quotes and brackets are part of the break,
    so they are dropped with it: ``'He said "no." Then'`` gives ``['He said "no.', 'Then']``.

    >>> split_sentences("Great film. Loved it!\\n\\nThe end")
    ['Great film.', 'Loved it!', 'The end']
    """
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def encode_documents(tokenizer: WordPiece, texts: Sequence[str]) -> list[list[list[int]]]:
    """Each text as a document: a list of sentences (:func:`split_sentences`), each a list of WordPiece ids;
    sentences that give no token are dropped."""
    return [[ids for ids in map(tokenizer.encode, split_sentences(text)) if ids] for text in texts]


# -- the pretraining objective -------------------------------------------------------------------------------

def warmup_linear(t: int, T: int, warmup: int) -> float:
    """BERT's rate factor at step t of T (Appendix A.2: "learning rate warmup over the first 10,000 steps, and
    linear decay of the learning rate"): (t + 1) / warmup while t < warmup, then (T − t) / (T − warmup)."""
    if not 0 <= warmup < T:
        raise ValueError(f"warmup must be in [0, T) = [0, {T}), got {warmup}")
    if not 0 <= t < T:
        raise ValueError(f"step t={t} is outside the schedule's {T} steps")
    return (t + 1) / warmup if t < warmup else (T - t) / (T - warmup)


class WarmupLinear(LRSchedule):
    """Trainer callback: each parameter group's rate is its base rate times :func:`warmup_linear` of the step."""

    def __init__(self, T: int, warmup: int):
        warmup_linear(0, T, warmup)  # checks the arguments now
        self.T, self.warmup = T, warmup
        super().__init__(lambda t: warmup_linear(t, self.T, self.warmup))

    def retarget(self, total: int) -> None:
        """Lay the schedule over a run cut to ``total`` steps (:class:`~lmlib.training.callbacks.TimeBudget`)."""
        self.T = max(total, self.warmup + 1)


def pretraining_loss(model: Bert, batch: PretrainingBatch, nsp: bool = True) -> BatchResult:
    """L = L_MLM + L_NSP: the mean cross-entropy of the original tokens at the chosen positions plus the mean
    cross-entropy of IsNext/NotNext (§3.1, Appendix A.2: "the sum of the mean masked LM likelihood and the mean
    next sentence prediction likelihood"); L_MLM alone with ``nsp=False``. ``n`` counts the sequences. Under
    torchrun the MLM mean is taken over every rank's masked tokens
    (:func:`~lmlib.training.distributed.mean_over_ranks`)."""
    chosen = batch.mlm_labels != IGNORE_INDEX
    out = model(batch.input_ids, batch.segment_ids, batch.attention_mask, masked_positions=chosen)
    mlm = F.cross_entropy(out.mlm_logits, batch.mlm_labels[chosen])
    loss = mean_over_ranks(mlm, chosen.sum())
    if nsp:
        loss = loss + F.cross_entropy(out.nsp_logits, batch.nsp_labels)
    return BatchResult(loss, n=batch.nsp_labels.numel())


def packed_batches(ids: torch.Tensor, segments: torch.Tensor, labels: torch.Tensor, specials: SpecialIds,
                   vocab_size: int, batch_size: int, steps: int, seed: int,
                   mask_rate: float = 0.15) -> Iterator[PretrainingBatch]:
    """``steps`` batches of ``batch_size`` rows of :func:`~lmlib.text.bert_data.instance_tensors`, walked in a
    seeded shuffled order (wrapping round) and masked anew each time, all on the device the tensors are on."""
    device, n = ids.device, ids.size(0)
    g = torch.Generator(device=device).manual_seed(seed)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(device)
    for step in range(steps):
        k = (step * batch_size) % max(1, n - batch_size + 1)
        rows = order[k: k + batch_size]
        x = ids[rows].long()
        attention = (x != specials.pad).long()
        masked = mask_tokens(x, specials, vocab_size, attention, mask_rate, g)
        yield PretrainingBatch(masked.input_ids, segments[rows].long(), attention, masked.labels, labels[rows],
                               masked.how)


def pair_batches(pairs: Sequence[SentencePair], specials: SpecialIds, vocab_size: int, batch_size: int,
                 steps: int, seed: int, max_len: int, mask_rate: float = 0.15) -> Iterator[PretrainingBatch]:
    """``steps`` batches of ``batch_size`` pairs drawn in a seeded shuffled order (passes repeat when the pairs
    run out), each encoded, padded and masked by :func:`~lmlib.text.bert_data.pretraining_batch`."""
    g = torch.Generator().manual_seed(seed)
    order: list[int] = []
    for _ in range(steps):
        if len(order) < batch_size:
            order += torch.randperm(len(pairs), generator=g).tolist()
        rows, order = order[:batch_size], order[batch_size:]
        yield pretraining_batch([pairs[i] for i in rows], specials, vocab_size, max_len, mask_rate, g)


@torch.no_grad()
def evaluate_pretraining(model: Bert, pairs: Sequence[SentencePair], specials: SpecialIds, max_len: int = 128,
                         mask_rate: float = 0.15, seed: int = 1, batch_size: int = 128) -> dict:
    """MLM loss and accuracy (over all chosen positions) and NSP loss and accuracy (over pairs) on ``pairs``,
    masked with a generator seeded by ``seed``, so the same pairs and seed give the same numbers."""
    g = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    mlm_sum = mlm_right = n_chosen = nsp_sum = nsp_right = 0.0
    with eval_mode(model):
        for i in range(0, len(pairs), batch_size):
            b = pretraining_batch(pairs[i: i + batch_size], specials, model.config.vocab_size, max_len, mask_rate, g)
            b = to_device(b, device)
            chosen = b.mlm_labels != IGNORE_INDEX
            out = model(b.input_ids, b.segment_ids, b.attention_mask, masked_positions=chosen)
            target = b.mlm_labels[chosen]
            mlm_sum += F.cross_entropy(out.mlm_logits, target, reduction="sum").item()
            mlm_right += (out.mlm_logits.argmax(-1) == target).sum().item()
            n_chosen += target.numel()
            nsp_sum += F.cross_entropy(out.nsp_logits, b.nsp_labels, reduction="sum").item()
            nsp_right += (out.nsp_logits.argmax(-1) == b.nsp_labels).sum().item()
    return {"mlm_loss": mlm_sum / n_chosen, "mlm_accuracy": mlm_right / n_chosen, "masked_tokens": int(n_chosen),
            "nsp_loss": nsp_sum / len(pairs), "nsp_accuracy": nsp_right / len(pairs), "pairs": len(pairs)}


def heldout_pairs(tokenizer: WordPiece, valid_texts: Sequence[str], n: int, seed: int) -> list[SentencePair]:
    """The first ``n`` sentence pairs (in a seeded order) from the held-out reviews."""
    pairs = sentence_pairs(encode_documents(tokenizer, valid_texts), seed=seed)
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed)).tolist()
    return [pairs[i] for i in order[:n]]


class HeldOutCurve(Callback):
    """Every ``every`` steps (and after the last), :func:`evaluate_pretraining` on ``pairs``; the rows land in
    ``rows`` as dicts with the step."""

    main_process_only = True  # it only measures and prints (on the plain model, no collective): rank 0 alone under DDP

    def __init__(self, pairs: Sequence[SentencePair], specials: SpecialIds, every: int, total: int, **kwargs):
        self.pairs, self.specials, self.every, self.total, self.kwargs = pairs, specials, every, total, kwargs
        self.rows: list[dict] = []

    def on_batch_end(self, trainer: Trainer, loss) -> None:
        from tqdm import tqdm

        if trainer.step % self.every == 0 or trainer.step == self.total:
            row = {"step": trainer.step, **evaluate_pretraining(trainer.model, self.pairs, self.specials, **self.kwargs)}
            self.rows.append(row)
            tqdm.write(f"step {row['step']}  held-out MLM loss {row['mlm_loss']:.3f} (accuracy {row['mlm_accuracy']:.1%})  "
                       f"NSP loss {row['nsp_loss']:.3f} (accuracy {row['nsp_accuracy']:.1%})", file=sys.stdout)
            sys.stdout.flush()  # a line between the redraws of a progress bar (tqdm.write clears and redraws it)

    def state_dict(self) -> dict:
        return {"rows": self.rows}  # a resumed run reports the whole curve

    def load_state_dict(self, state: dict) -> None:
        self.rows = [dict(r) for r in state["rows"]]


def pretrain(out_dir: str | Path, steps: int | None = None, preset: str = "full",
             run: RunOptions | None = None, overrides: dict | None = None) -> dict | None:
    """Train the WordPiece and the BERT with ``preset``'s recipe (``gpu``: with the shipped WordPiece and packed
    segments) and write the checkpoint to ``out_dir``; arguments and result as in :mod:`lmlib.recipes.pretraining`."""
    recipe, model_config, tokenizer_recipe = plan(preset, steps, PRETRAIN_RECIPE, PRETRAIN_CONFIG, PRETRAIN_TEACH,
                                                  TOKENIZER_RECIPE, PRETRAIN_GPU, overrides)
    job = PretrainRun(NAME, out_dir, {"recipe": recipe, "config": model_config, "tokenizer": tokenizer_recipe}, run,
                      preset, bf16=PRETRAIN_GPU["bf16"])
    packed = "dupe_factor" in recipe  # the gpu preset's segments, filled to the full length
    seed_everything(recipe["seed"])
    train_texts, valid_texts = unsup_split(recipe["valid_reviews"])
    train_texts = train_texts[: recipe.get("train_reviews")]  # every one unless the preset takes fewer
    start = time.perf_counter()
    if packed:
        tokenizer = load_tokenizer()[0]
    else:  # BERT's five special tokens first
        tokenizer = WordPiece.train(train_texts, tokenizer_recipe["vocab_size"], score=tokenizer_recipe["score"],
                                    min_frequency=tokenizer_recipe["min_frequency"])
    tokenizer_seconds = time.perf_counter() - start
    specials = SpecialIds.from_tokenizer(tokenizer)
    documents = encode_documents(tokenizer, train_texts)
    if packed:
        rng = random.Random(recipe["seed"])
        pairs = [p for _ in range(recipe["dupe_factor"]) for p in packed_instances(
            documents, recipe["max_len"], rng, recipe["nsp"], recipe["short_seq_prob"])]
        instances = [t.to(job.device) for t in instance_tensors(pairs, specials, recipe["max_len"])]
    else:
        pairs = sentence_pairs(documents, seed=recipe["seed"])
    valid = heldout_pairs(tokenizer, valid_texts, recipe["valid_pairs"], recipe["valid_seed"])
    n_sentences = sum(len(d) for d in documents)
    if job.writes:  # rank 0 alone under torchrun
        print(f"tokenizer: {len(tokenizer)} tokens in {tokenizer_seconds:.0f} s; {n_sentences:,} training sentences, "
              f"{len(pairs):,} {'instances' if packed else 'pairs'}; {len(valid)} held-out pairs", flush=True)

    config = BertConfig(vocab_size=len(tokenizer), pad_id=specials.pad, **model_config)
    model = Bert(config)
    opt = job.adam(weight_decay_groups(model, recipe["weight_decay"]), lr=recipe["lr"], betas=recipe["betas"])
    T = recipe["steps"]
    warmup = min(recipe["warmup"], max(1, T // 10)) if packed else max(1, int(recipe["warmup_frac"] * T))
    curve = [HeldOutCurve(valid[:256], specials, every=recipe["curve_every"], total=T, max_len=recipe["max_len"],
                          mask_rate=recipe["mask_rate"], seed=recipe["valid_seed"])] if "curve_every" in recipe else []
    nsp = recipe.get("nsp", True)
    trainer = Trainer(model, opt, lambda m, b: pretraining_loss(m, b, nsp),
                      [WarmupLinear(T, warmup), GradientClipping(recipe["clip"]),
                       job.progress(lambda batch: batch.attention_mask.sum()), *curve], **job.trainer_options())
    tokens_seen = [0]

    def batches(epoch: int):
        if packed:
            made = packed_batches(*instances, specials, config.vocab_size, recipe["batch_size"], T, recipe["seed"],
                                  recipe["mask_rate"])
        else:
            made = pair_batches(pairs, specials, config.vocab_size, recipe["batch_size"], T, recipe["seed"],
                                recipe["max_len"], recipe["mask_rate"])
        for b in made:
            tokens_seen[0] = tokens_seen[0] + b.attention_mask.sum()  # a tensor: read once, at the end
            yield b

    job.fit(trainer, batches)  # a resumed run counts the tokens of the batches it skips, too
    if not job.writes:
        return None
    model.cpu()
    round_to_fp16(model)  # the metrics describe the weights as shipped
    metrics = evaluate_pretraining(model, valid, specials, recipe["max_len"], recipe["mask_rate"], recipe["valid_seed"])
    slice_metrics = evaluate_pretraining(model, valid[:256], specials, recipe["max_len"], recipe["mask_rate"],
                                         recipe["valid_seed"])
    losses = trainer.batch_losses
    report = {
        "model": "BERT (lmlib.models.bert), " + ("MLM + NSP" if nsp else "MLM alone (the NSP head untrained)")
                 + " pretraining on IMDb's unlabelled reviews" + (", segments filled to the full length" if packed else ""),
        "config": config.__dict__,
        "tokenizer": {**tokenizer_recipe, "special_tokens": list(tokenizer.vocab[:5]),
                      "train_seconds": tokenizer_seconds},
        "recipe": recipe, "sentence_rule": split_sentences.__doc__.split("\n\n")[0].replace("\n    ", " "),
        "parameters": model.num_parameters(),
        "train_reviews": len(train_texts), "train_sentences": n_sentences,
        ("train_instances" if packed else "train_pairs"): len(pairs),
        "pairs_seen": trainer.step * recipe["batch_size"], "tokens_seen": int(tokens_seen[0]), "steps": trainer.step,
        **last_losses(losses), "train_loss_per_100_steps": [row["loss"] for row in loss_curve(losses)],
        **({"heldout_curve_256_pairs": curve[0].rows} if curve else {}),
        "valid": metrics, "valid_slice_256": slice_metrics,
    }
    report = save_shipped(out_dir, NAME, model.state_dict(), config.__dict__, job.annotate(report),
                          side_files={"tokenizer.json": tokenizer.save}, skip=("mlm.decoder.weight",))
    job.finish()
    return report


def load_pretrained(directory: str | Path = CHECKPOINT_DIR, **overrides) -> tuple[Bert, WordPiece]:
    """``(model, tokenizer)`` of the shipped IMDb BERT, after checking every file's sha256; eval mode.

    ``overrides`` change config fields that do not change the weights' shapes (e.g. ``dropout=0.1``).
    The checkpoint's ``pretrain.json`` is :func:`pretrain_report`."""
    config, tensors, _ = load_shipped(directory, NAME, REBUILD)
    bad = set(overrides) - {"dropout", "attention_dropout"}
    if bad:
        raise ValueError(f"only dropout and attention_dropout can be overridden when loading, got {sorted(bad)}")
    model = Bert(BertConfig(**{**config, **overrides}))
    tensors["mlm.decoder.weight"] = tensors["tok_emb.weight"]  # tied: stored once
    model.load_state_dict(tensors)
    tokenizer = WordPiece.load(Path(directory) / "tokenizer.json")
    if len(tokenizer) != model.config.vocab_size:
        raise ValueError(f"tokenizer.json has {len(tokenizer)} tokens but the weights {model.config.vocab_size}: "
                         f"they come from different runs; rebuild with `{REBUILD}`")
    return model.eval(), tokenizer


def load_tokenizer(directory: str | Path = CHECKPOINT_DIR) -> tuple[WordPiece, dict]:
    """``(tokenizer, report)`` of the shipped IMDb BERT after checking the tokenizer's sha256 alone: what rebuilding
    the weights needs (the gpu preset keeps this WordPiece), even when they are missing or corrupt."""
    # a new WordPiece comes only with the one-core recipe, which trains the model as well
    report = verify_shipped(directory, "python -m lmlib pretrain bert --preset full", files=("tokenizer.json",))
    return WordPiece.load(Path(directory) / "tokenizer.json"), report


def pretrain_report(directory: str | Path = CHECKPOINT_DIR) -> dict:
    """The shipped checkpoint's ``pretrain.json`` (recipe, metrics, sha256)."""
    return json.loads((Path(directory) / "pretrain.json").read_text())


# -- fine-tuning: [CLS] classification ----------------------------------------------------------------------

def classifier(pretrained: bool = True, num_classes: int = 2, dropout: float = 0.1,
               directory: str | Path = CHECKPOINT_DIR) -> tuple[BertClassifier, WordPiece]:
    """A :class:`BertClassifier` on the shipped IMDb BERT with ``dropout`` inside and before the head
    (``pretrained=False``: the same architecture and tokenizer from a random initialisation). The MLM and NSP
    heads are dropped."""
    bert, tokenizer = load_pretrained(directory)
    config = BertConfig(**{**bert.config.__dict__, "dropout": dropout, "attention_dropout": dropout,
                           "mlm_head": False, "nsp_head": False})
    fresh = Bert(config)
    if pretrained:
        fresh.load_state_dict({k: v for k, v in bert.state_dict().items() if not k.startswith(("mlm.", "nsp."))})
    return BertClassifier(fresh, num_classes, dropout), tokenizer


def encode_single(tokenizer: WordPiece, texts: Sequence[str], max_len: int = 128) -> list[list[int]]:
    """``[CLS] text [SEP]`` per text, a text longer than ``max_len − 2`` word pieces cut to its first and last
    pieces by :func:`lmlib.text.truncation.head_and_tail` (the rule of GPT's fine-tuning experiment, so the
    two compare: a review's opening and its verdict both survive)."""
    if max_len < 4:
        raise ValueError(f"max_len must be at least 4 ([CLS], a first and a last piece, [SEP]), got {max_len}")
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    unk = tokenizer.token_to_id(tokenizer.unk_token)
    return [[cls_id, *head_and_tail(tokenizer.encode(t) or [unk], max_len - 2), sep_id] for t in texts]


def classification_batches(inputs: Sequence[Sequence[int]], labels: Sequence[int], batch_size: int, pad: int,
                           shuffle: bool = False, seed: int = 0) -> list[tuple]:
    """``((input_ids, segment_ids, attention_mask), labels)`` batches of
    :func:`lmlib.text.batching.classification_batches` (right-padded with ``pad``); all segment ids 0 (one segment)."""
    return [((b.ids, torch.zeros_like(b.ids), b.mask.long()), b.labels)
            for b in padded_batches(inputs, labels, batch_size, pad, shuffle, seed)]


def classification_loss(model: BertClassifier, batch) -> BatchResult:
    (ids, segments, mask), y = batch
    logits = model(ids, segments, mask)
    return BatchResult(F.cross_entropy(logits, y), n=y.numel(), correct=int((logits.argmax(-1) == y).sum()))


# GPT's fine-tuning budget (lmlib.recipes.gpt.FINETUNE_RECIPE), so that notebook 12 compares like with like. On
# training reviews (never the test split), random weights stayed at chance with 1e-4 and 3e-4, and the pretrained
# model does best at 5e-4 too (tests/benchmarks/bench_bert_finetune_rates.py).
FINETUNE_RECIPE = dict(max_len=128, batch_size=16, lr=5e-4, warmup_frac=0.1, weight_decay=0.01, dropout=0.1,
                       clip=1.0, epochs=3, min_steps=80)


def finetune(model: BertClassifier, inputs: Sequence[Sequence[int]], labels: Sequence[int], pad: int, seed: int = 0,
             callbacks=(), device: str = "cpu", **overrides) -> Trainer:
    """Fine-tune every weight (Devlin et al. §4: "all of the parameters are fine-tuned end-to-end") with AdamW,
    linear warm-up and decay, ``epochs`` shuffled passes repeated until at least ``min_steps`` steps (so 100
    labels get a useful number of updates). ``overrides`` change entries of ``FINETUNE_RECIPE``; ``device`` is where
    it trains."""
    check_inputs(model.bert, *classification_batches(inputs, labels, len(inputs), pad)[0][0])
    r, epochs, T = finetune_plan(FINETUNE_RECIPE, overrides, len(inputs))
    warmup = max(1, int(r["warmup_frac"] * T))
    opt = torch.optim.AdamW(weight_decay_groups(model, r["weight_decay"]), lr=r["lr"])
    trainer = Trainer(model, opt, classification_loss,
                      [WarmupLinear(T, warmup), GradientClipping(r["clip"]), *callbacks],
                      device=device)
    trainer.fit(lambda epoch: classification_batches(inputs, labels, r["batch_size"], pad, shuffle=True,
                                                     seed=seed + 1000 * epoch), epochs=epochs)
    return trainer


@torch.no_grad()
def predict(model: BertClassifier, inputs: Sequence[Sequence[int]], pad: int, batch_size: int = 128) -> torch.Tensor:
    """The predicted class of each input (eval mode, on the model's device; returned on the CPU)."""
    device = next(model.parameters()).device
    preds = []
    with eval_mode(model):
        for (ids, seg, mask), _ in classification_batches(inputs, [0] * len(inputs), batch_size, pad):
            check_inputs(model.bert, ids, seg, mask)
            preds.append(model(ids.to(device), seg.to(device), mask.to(device)).argmax(-1).cpu())
    return torch.cat(preds)
