"""The shipped IMDb GPT (lmlib/pretrained/gpt_imdb): verified on load, refused when corrupt, and as good on held-out
reviews as its pretrain.json says; its recipe's pieces (windows, the held-out stream) against their definitions."""

import json
import math
import shutil

import pytest
import torch

from lmlib.recipes import gpt as G


@pytest.fixture(scope="module")
def shipped():
    return G.load_pretrained()


def test_checkpoint_matches_its_recipe(shipped):
    # The shipped GPT was pretrained with the gpu preset, this module's config and tokenizer (its rebuild command
    # names it); its pretrain.json names the steps the time budget left (tokens = steps x batch x T).
    from lmlib.recipes.pretraining import plan

    model, tokenizer, report = shipped
    assert model.config.__dict__ == report["config"]
    assert {k: report["config"][k] for k in G.PRETRAIN_CONFIG} == G.PRETRAIN_CONFIG
    recipe, _, _ = plan("gpu", None, G.PRETRAIN_RECIPE, G.PRETRAIN_CONFIG, G.PRETRAIN_TEACH, gpu=G.PRETRAIN_GPU)
    assert report["recipe"] == json.loads(json.dumps(recipe))
    assert report["rebuild"] == G.REBUILD and "--preset gpu" in G.REBUILD
    assert len(tokenizer) == report["config"]["vocab_size"] == G.TOKENIZER_RECIPE["vocab_size"]
    assert tokenizer.special_tokens == G.GPT_SPECIALS
    steps = report.get("steps", recipe["steps"])
    assert steps <= recipe["steps"]
    assert report["tokens_seen"] == steps * recipe["batch_size"] * model.config.block_size
    assert (G.CHECKPOINT_DIR / "gpt_imdb.safetensors").stat().st_size <= 10 * 2**20
    assert model.lm_head.weight is model.tok_emb.weight


def test_held_out_loss_is_the_recorded_one(shipped, one_thread):
    # The first 64 held-out windows: the recorded figure is over 256, so the two agree to sampling noise only,
    # and a fp16 round trip or a wrong tokenizer would show as a large gap. Against a unigram model as a floor.
    model, tokenizer, report = shipped
    _, valid = G.unsup_split(report["recipe"]["valid_reviews"])
    need = 64 * model.config.block_size + 1
    ids: list[int] = []
    for text in valid:
        ids.extend(G.encode_stream(tokenizer, [text]).tolist())
        if len(ids) >= need:
            break
    stream = torch.tensor(ids)
    nll = G.evaluate_stream(model, stream, 64)
    assert abs(nll - report["valid_nll"]) < 0.1
    counts = torch.bincount(stream, minlength=len(tokenizer)).double() + 1
    unigram_nll = -(counts / counts.sum()).log()[stream].mean().item()
    assert nll < unigram_nll - 1.0  # the model has learned far more than token frequencies
    assert math.isclose(report["valid_ppl"], math.exp(report["valid_nll"]), rel_tol=1e-9)


def test_a_corrupt_checkpoint_is_refused(tmp_path):
    copy = tmp_path / "gpt_imdb"
    shutil.copytree(G.CHECKPOINT_DIR, copy)
    weights = copy / "gpt_imdb.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        G.load_pretrained(copy)
    shutil.copy(G.CHECKPOINT_DIR / "gpt_imdb.safetensors", weights)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer.json is missing"):
        G.load_pretrained(copy)


def test_the_tokenizer_loads_without_the_weights_but_not_when_it_is_corrupt(tmp_path):
    # A rebuild of the weights (the gpu preset) reads the shipped BPE: it must not need the weights it
    # is about to replace, and must not train on a tokenizer that is not the recorded one.
    copy = tmp_path / "gpt_imdb"
    shutil.copytree(G.CHECKPOINT_DIR, copy)
    (copy / "gpt_imdb.safetensors").write_bytes(b"not weights")
    tokenizer, report = G.load_tokenizer(copy)
    assert tokenizer.encode("A gem of a film.") == G.load_pretrained()[1].encode("A gem of a film.")
    assert report["config"]["vocab_size"] == len(tokenizer)
    with pytest.raises(ValueError, match="sha256"):
        G.load_pretrained(copy)
    (copy / "tokenizer.json").write_text((copy / "tokenizer.json").read_text().replace("Ġthe", "Ġthf", 1))
    with pytest.raises(ValueError, match=r"tokenizer.json has sha256 [0-9a-f]{64}, but pretrain.json records"):
        G.load_tokenizer(copy)


def test_random_windows_are_next_token_pairs():
    stream = torch.arange(100)
    batches = list(G.random_windows(stream, block_size=8, batch_size=4, steps=3, seed=0))
    assert len(batches) == 3
    for x, y in batches:
        assert x.shape == y.shape == (4, 8)
        assert torch.equal(y, x + 1)  # consecutive ids: the target is the next token
    again = list(G.random_windows(stream, 8, 4, 3, seed=0))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again))
    with pytest.raises(ValueError, match="too few"):
        next(G.random_windows(torch.arange(5), 8, 4, 1, seed=0))


def test_random_windows_start_anywhere_up_to_the_last_full_window():
    # 20 tokens hold windows of 9 starting at 0..11: each of the 12 starts is drawn, about equally often.
    stream = torch.arange(20)
    starts = torch.cat([x[:, 0] for x, _ in G.random_windows(stream, 8, 400, 12, seed=0)])
    counts = torch.bincount(starts, minlength=12)
    assert len(counts) == 12 and counts.sum() == 4800
    assert (counts - 400).abs().max() <= 5 * math.sqrt(4800 * (1 / 12) * (11 / 12))  # ±5 binomial σ
    x, y = next(G.random_windows(torch.arange(9), 8, 2, 1, seed=0))  # exactly one window fits
    assert torch.equal(x, torch.arange(8).expand(2, 8)) and torch.equal(y, torch.arange(1, 9).expand(2, 8))
    with pytest.raises(ValueError, match="holds 8 tokens, too few for windows of 9"):
        next(G.random_windows(torch.arange(8), 8, 2, 1, seed=0))


# the third spells <|endoftext|> in its text: there it is 13 characters, encoded as bytes, not a boundary
REVIEWS = ["A fine film, well acted.", "Naïve, slow: 日本 🙂 — two stars.", "<|endoftext|> is not in this one",
           "Bad. Bad. Bad."] * 5


@pytest.fixture(scope="module")
def small_bpe():
    return G.ByteLevelBPE.train(REVIEWS, 300, special_tokens=G.GPT_SPECIALS)


def test_bits_per_char_counts_each_end_of_text_as_one_character(small_bpe):
    texts = REVIEWS[:4]
    stream = G.encode_stream(small_bpe, texts)
    chars = sum(len(t) + 1 for t in texts)  # each review and the boundary after it
    assert G.text_characters(small_bpe, stream) == chars
    assert G.text_characters(small_bpe, stream[:-1]) == chars - 1
    assert G.bits_per_char(2.0, small_bpe, stream) == pytest.approx(2.0 * len(stream) / chars / math.log(2))
    with pytest.raises(ValueError, match="no characters"):
        G.bits_per_char(2.0, small_bpe, [])


def test_the_pretrain_report_counts_held_out_characters_with_one_per_boundary(tmp_path, monkeypatch, one_thread):
    # A two-step teach run on a handful of reviews; its bits per character against the held-out text counted
    # by hand, each <|endoftext|> one character (a newline) rather than its 13-character spelling.
    valid = [f"Review {i}: {REVIEWS[i % 4]}" for i in range(12)]
    monkeypatch.setattr(G, "unsup_split", lambda valid_reviews: (REVIEWS, valid))
    report = G.pretrain(tmp_path / "run", steps=2, preset="teach")
    _, tokenizer, _ = G.load_pretrained(tmp_path / "run")
    targets = G.encode_stream(tokenizer, valid)[1: report["valid_tokens"] + 1]
    (newline,) = tokenizer.encode("\n")
    eos = tokenizer.token_to_id(G.EOS)
    assert report["valid_tokens"] >= 64 and (targets == eos).sum() >= 3
    chars = len(tokenizer.decode(torch.where(targets == eos, newline, targets).tolist()))  # each boundary a "\n"
    assert report["valid_bits_per_char"] == pytest.approx(
        report["valid_nll"] * report["valid_tokens"] / chars / math.log(2), rel=1e-12)


def test_evaluate_stream_is_the_mean_nll_of_its_windows(shipped):
    model, _, _ = shipped
    stream = torch.randint(0, model.config.vocab_size, (3 * model.config.block_size + 1,), generator=torch.Generator().manual_seed(0))
    T = model.config.block_size
    with torch.no_grad():
        logits = model(stream[: 3 * T].view(3, T))
    expected = torch.nn.functional.cross_entropy(logits.flatten(0, 1), stream[1: 3 * T + 1]).item()
    assert G.evaluate_stream(model, stream, 3) == pytest.approx(expected, rel=1e-5)
