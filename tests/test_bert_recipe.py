"""lmlib.recipes.bert: the sentence rule, the schedule, the pretraining loss against its definition, the shipped
checkpoint (its recipe, sha256 verified, its held-out metrics reproduced, a corrupt copy refused, the tokenizer
readable without the weights) and [CLS] fine-tuning."""

import json
import math
import shutil

import pytest
import torch
import torch.nn.functional as F

from lmlib.data import sha256_of
from lmlib.models.bert import Bert, BertConfig
from lmlib.recipes import bert as B
from lmlib.text.bert_data import IGNORE_INDEX, SentencePair, SpecialIds, pretraining_batch
from lmlib.text.tokenizers import WordPiece


def test_split_sentences_rule():
    text = 'I loved it. Really!\n\nThe cast ("all of them.") shone? Yes... ok'
    assert B.split_sentences(text) == ["I loved it.", "Really!", 'The cast ("all of them.', "shone?", "Yes...", "ok"]
    assert B.split_sentences("") == []
    assert B.split_sentences("no end mark") == ["no end mark"]
    assert B.split_sentences("3.5 stars out of 5") == ["3.5 stars out of 5"]  # no space after the point


def test_warmup_linear_matches_formula():
    T, warmup = 20, 4
    values = [B.warmup_linear(t, T, warmup) for t in range(T)]
    assert values[:4] == [0.25, 0.5, 0.75, 1.0]
    assert values[4] == 1.0 and values[-1] == pytest.approx(1 / 16)
    assert all(a >= b for a, b in zip(values[4:], values[5:]))
    with pytest.raises(ValueError, match="outside"):
        B.warmup_linear(T, T, warmup)
    with pytest.raises(ValueError, match="warmup"):
        B.warmup_linear(0, T, T)


def _tiny():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefgh"]
    tok = WordPiece(vocab)
    torch.manual_seed(0)
    model = Bert(BertConfig(vocab_size=len(vocab), block_size=16, num_layers=1, num_heads=2, d_model=8, dropout=0.0))
    return tok, model, SpecialIds.from_tokenizer(tok)


def test_pretraining_loss_is_mean_mlm_plus_mean_nsp(one_thread):
    tok, model, sp = _tiny()
    pairs = [SentencePair([5, 6, 7, 8], [9, 10], True), SentencePair([5, 11], [6, 7, 8, 9, 10], False)]
    batch = pretraining_batch(pairs, sp, len(tok.vocab), 16, mask_rate=0.5, generator=torch.Generator().manual_seed(3))
    loss = B.pretraining_loss(model, batch).loss
    full = model(batch.input_ids, batch.segment_ids, batch.attention_mask)
    mlm = F.cross_entropy(full.mlm_logits.flatten(0, 1), batch.mlm_labels.flatten(), ignore_index=IGNORE_INDEX)
    nsp = F.cross_entropy(full.nsp_logits, batch.nsp_labels)
    assert loss.item() == pytest.approx((mlm + nsp).item(), abs=1e-5)


def test_pair_batches_are_seeded_and_cover_pairs():
    _, _, sp = _tiny()
    pairs = [SentencePair([5 + i % 7], [6], bool(i % 2)) for i in range(10)]
    a = list(B.pair_batches(pairs, sp, 12, 4, 5, seed=1, max_len=8))
    b = list(B.pair_batches(pairs, sp, 12, 4, 5, seed=1, max_len=8))
    assert len(a) == 5 and all(torch.equal(x.input_ids, y.input_ids) for x, y in zip(a, b))
    assert sum(x.nsp_labels.numel() for x in a) == 20


def test_classifier_reads_pooled_cls(one_thread):
    _, model, _ = _tiny()
    clf = B.BertClassifier(model, num_classes=3).eval()
    ids = torch.tensor([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]])
    mask = (ids != 0).long()
    logits = clf(ids, torch.zeros_like(ids), mask)
    expected = clf.head(model(ids, attention_mask=mask).pooled)
    assert torch.allclose(logits, expected, atol=1e-6)
    with pytest.raises(ValueError, match="pooler"):
        B.BertClassifier(Bert(BertConfig(vocab_size=12, block_size=8, num_layers=1, num_heads=2, d_model=8,
                                         pooler=False, nsp_head=False)))


def test_encode_single_keeps_the_first_and_last_pieces():
    tok, _, _ = _tiny()
    pieces = tok.encode("a b c d e f g h")
    (row,) = B.encode_single(tok, ["a b c d e f g h"], max_len=6)
    assert row == [2, *pieces[:2], *pieces[-2:], 3]  # [CLS], the first two and the last two pieces, [SEP]
    (odd,) = B.encode_single(tok, ["a b c d e f g h"], max_len=7)
    assert odd == [2, *pieces[:2], *pieces[-3:], 3]  # an odd budget gives the tail the extra piece
    assert B.encode_single(tok, ["a b"], max_len=6) == [[2, *tok.encode("a b"), 3]]  # short texts are whole
    assert B.encode_single(tok, [""], max_len=5) == [[2, 1, 3]]
    with pytest.raises(ValueError, match="max_len"):
        B.encode_single(tok, ["a"], max_len=3)


def test_shipped_checkpoint_matches_its_recipe_and_reproduces_its_heldout_metrics(one_thread):
    # The shipped BERT was pretrained with the gpu preset, this module's config and WordPiece (its rebuild command
    # names it); its pretrain.json names the steps the time budget left. Its held-out figures were measured on the
    # CPU after the fp16 rounding, so the shipped file gives them back on 2,000 held-out pairs.
    from lmlib.recipes.pretraining import plan

    model, tokenizer = B.load_pretrained()
    report = B.pretrain_report()
    size = (B.CHECKPOINT_DIR / f"{B.NAME}.safetensors").stat().st_size
    assert size <= 10 * 2**20
    assert "mlm.decoder.weight" not in json.dumps(list(_keys(B.CHECKPOINT_DIR / f"{B.NAME}.safetensors")))
    assert model.mlm.decoder.weight is model.tok_emb.weight
    recipe, _, _ = plan("gpu", None, B.PRETRAIN_RECIPE, B.PRETRAIN_CONFIG, B.PRETRAIN_TEACH, gpu=B.PRETRAIN_GPU)
    assert report["recipe"] == json.loads(json.dumps(recipe))  # the shipped run is today's gpu preset
    assert report["rebuild"] == B.REBUILD and "--preset gpu" in B.REBUILD
    assert {k: report["config"][k] for k in B.PRETRAIN_CONFIG} == B.PRETRAIN_CONFIG
    assert model.config.__dict__ == report["config"] and len(tokenizer) == report["config"]["vocab_size"]
    assert report.get("steps", recipe["steps"]) <= recipe["steps"]
    assert report["tokens_per_parameter"] == pytest.approx(report["tokens_seen"] / model.num_parameters())
    r = report["recipe"]
    _, valid_texts = B.unsup_split(r["valid_reviews"])
    pairs = B.heldout_pairs(tokenizer, valid_texts, r["valid_pairs"], r["valid_seed"])
    got = B.evaluate_pretraining(model, pairs, B.SpecialIds.from_tokenizer(tokenizer), r["max_len"], r["mask_rate"],
                                 r["valid_seed"])
    want = report["valid"]
    assert got["pairs"] == want["pairs"] and got["masked_tokens"] == want["masked_tokens"]
    assert got["mlm_loss"] == pytest.approx(want["mlm_loss"], abs=1e-3)
    assert got["mlm_accuracy"] == pytest.approx(want["mlm_accuracy"], abs=1e-3)
    assert got["nsp_accuracy"] == pytest.approx(want["nsp_accuracy"], abs=1e-3)
    assert got["mlm_loss"] < 4.0 and got["mlm_loss"] < math.log(len(tokenizer)) - 4  # far better than uniform
    assert got["nsp_accuracy"] > 0.6  # next sentence prediction learned (chance: 0.5)


def _keys(path):
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as fh:
        return list(fh.keys())


def test_corrupt_or_foreign_checkpoint_is_refused(tmp_path):
    copy = tmp_path / "bert_imdb"
    shutil.copytree(B.CHECKPOINT_DIR, copy)
    weights = copy / f"{B.NAME}.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        B.load_pretrained(copy)
    # a tokenizer of another vocabulary beside the weights (its sha256 recorded): refused, not silently misread
    shutil.copy(B.CHECKPOINT_DIR / f"{B.NAME}.safetensors", weights)
    small = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
    small.save(copy / "tokenizer.json")
    report = json.loads((copy / "pretrain.json").read_text())
    report["sha256"]["tokenizer.json"] = sha256_of(copy / "tokenizer.json")
    (copy / "pretrain.json").write_text(json.dumps(report))
    with pytest.raises(ValueError, match="different runs"):
        B.load_pretrained(copy)
    # a checkpoint of another vocabulary: the weights do not fit a BERT built for it
    model, _ = B.load_pretrained()
    other = Bert(BertConfig(**{**model.config.__dict__, "vocab_size": model.config.vocab_size + 10}))
    with pytest.raises(ValueError, match="vocab_size"):
        other.load_state_dict(model.state_dict())


def test_the_tokenizer_loads_without_the_weights_but_not_when_it_is_corrupt(tmp_path):
    # A rebuild of the weights (the gpu preset) reads the shipped WordPiece: it must not need the
    # weights it is about to replace, and must not train on a tokenizer that is not the recorded one.
    copy = tmp_path / "bert_imdb"
    shutil.copytree(B.CHECKPOINT_DIR, copy)
    (copy / f"{B.NAME}.safetensors").write_bytes(b"not weights")
    tokenizer, report = B.load_tokenizer(copy)
    assert tokenizer.encode("A gem of a film.") == B.load_pretrained()[1].encode("A gem of a film.")
    assert report["config"]["vocab_size"] == len(tokenizer)
    with pytest.raises(ValueError, match="sha256"):
        B.load_pretrained(copy)
    text = (copy / "tokenizer.json").read_text()
    (copy / "tokenizer.json").write_text(text.replace('"the"', '"thf"', 1))
    assert (copy / "tokenizer.json").read_text() != text
    with pytest.raises(ValueError, match=r"tokenizer.json has sha256 [0-9a-f]{64}, but pretrain.json records"):
        B.load_tokenizer(copy)
