"""lmlib.recipes.transfer (frozen-feature sentiment probes of ULMFiT's LM and ELMo's biLM, beside random init) and
tests/benchmarks/bench_transfer_milestones.py on tiny random checkpoints."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))

import bench_transfer_milestones as B  # noqa: E402

from lmlib.models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel  # noqa: E402
from lmlib.models.elmo import BiLM, BiLMConfig  # noqa: E402
from lmlib.recipes import elmo as E  # noqa: E402
from lmlib.recipes import transfer as T  # noqa: E402
from lmlib.recipes import ulmfit as U  # noqa: E402
from lmlib.recipes.shipping import save_shipped  # noqa: E402
from lmlib.text.vocab import Vocab  # noqa: E402

WORDS = "the film was good bad great awful plot actor . ! and it".split()
QUICK = T.ProbeConfig(Cs=(0.01, 1.0), folds=2, max_iter=200)


def tiny_lm(vocab):
    torch.manual_seed(0)
    return AWDLSTMLanguageModel(AWDLSTMConfig(vocab_size=len(vocab), embed_size=6, hidden_size=8, num_layers=3,
                                              embed_p=0.0, input_p=0.0, hidden_p=0.0, weight_p=0.0, output_p=0.0,
                                              pad_id=0)).eval()


def tiny_bilm():
    torch.manual_seed(0)
    return BiLM(BiLMConfig(vocab_size=len(WORDS) + 4, embed_size=4, hidden_size=6, num_layers=2, dropout=0.0,
                           char_embed_size=4, filters=((1, 4), (2, 4)), num_highway=1, max_chars=10)).eval()


def toy_data(n_train=12, n_test=8):
    """Reviews whose label is whether they say "good" or "bad": every probe here can learn it."""
    g = torch.Generator().manual_seed(0)

    def review(i, label):
        filler = [WORDS[j] for j in torch.randint(0, 3, (3 + i % 4,), generator=g).tolist()]
        return " ".join([*filler, "good" if label else "bad", "."])

    def part(n, offset):
        return [review(i + offset, i % 2) for i in range(n)], [i % 2 for i in range(n)]

    train = part(n_train, 0)
    return T.ProbeData(test=part(n_test, 100), train={(n_train, 0): train, (n_train // 2, 0): (
        train[0][: n_train // 2], train[1][: n_train // 2])})


def vocab_of_words():
    return Vocab(WORDS, specials=("<pad>",), unk="<unk>")


def test_head_and_tail_sentences_keeps_first_and_last_words_in_their_sentences():
    sentences = [["a", "b", "c"], ["d", "e"], ["f", "g", "h"]]
    assert T.head_and_tail_sentences(sentences, 4) == [["a", "b"], ["g", "h"]]
    assert T.head_and_tail_sentences(sentences, 5) == [["a", "b"], ["f", "g", "h"]]  # odd: the tail gets one more
    assert T.head_and_tail_sentences(sentences, 8) == sentences  # short enough: untouched
    # one sentence holding the end of the head and the start of the tail is read as two pieces
    assert T.head_and_tail_sentences([list("abcdef")], 4) == [["a", "b"], ["e", "f"]]
    words = [w for s in sentences for w in s]
    assert [w for p in T.head_and_tail_sentences(sentences, 6) for w in p] == U.head_and_tail(words, 6)


def test_elmo_features_of_a_short_review_equal_the_recipes_pooling():
    # under 128 words nothing is cut, so the mean of each layer is lmlib.recipes.elmo.pooled_features'
    bilm = tiny_bilm()
    texts = ["The film was good. The plot was bad!", "An actor."]
    feats = T.elmo_features(bilm, texts)
    expected = E.pooled_features(bilm, texts, 128)
    assert set(feats) == {"0", "1", "2", "all"}
    for j in range(3):
        assert torch.allclose(feats[str(j)], expected[:, j], atol=1e-6)
    assert torch.allclose(feats["all"], expected.flatten(1), atol=1e-6)


def test_elmo_features_read_the_head_and_the_tail_of_a_long_review():
    bilm = tiny_bilm()
    long = " ".join(["good film ."] * 30 + ["bad actor !"] * 30)  # 180 words: the ending differs from the start
    sentences = E.sentences_of(long, min_words=1)
    kept = T.head_and_tail_sentences(sentences, 128)
    expected = E.token_features(bilm, kept).mean(0)  # (L + 1, 2d): the mean over the kept words
    got = T.elmo_features(bilm, [long])
    assert torch.allclose(got["2"][0], expected[2], atol=1e-5)
    assert not torch.allclose(got["2"][0], E.pooled_features(bilm, [long], 128)[0, 2], atol=1e-3)  # not the head only


def test_ulmfit_features_are_concat_pooling_of_every_layer_and_ignore_padding():
    vocab = vocab_of_words()
    lm = tiny_lm(vocab)
    texts = ["the film was good .", "bad", "it was an awful awful plot and the actor was bad ."]
    feats = T.ulmfit_features(lm, vocab, texts, batch_size=3)
    assert feats["concat"].shape == (3, 3 * (8 + 8 + 6)) and feats["embeddings"].shape == (3, 6)
    alone = T.ulmfit_features(lm, vocab, texts[1:2], batch_size=1)  # no padding at all
    assert torch.allclose(feats["concat"][1], alone["concat"][0], atol=1e-6)
    assert torch.allclose(feats["embeddings"][1], alone["embeddings"][0], atol=1e-6)
    ids = torch.tensor([vocab.encode(U.review_tokens(texts[0]))])
    outputs, _, _ = lm.encoder(ids)
    last = outputs[-1][0]  # (T, 6)
    assert torch.allclose(feats["concat"][0, -18:], torch.cat([last[-1], last.max(0).values, last.mean(0)]), atol=1e-6)


def test_fit_probe_chooses_c_by_cross_validation_and_refuses_too_few_labels():
    rng = np.random.default_rng(0)
    y = np.array([0, 1] * 20)
    x = rng.normal(size=(40, 5)) + 3.0 * y[:, None] * np.array([1, 0, 0, 0, 0])  # one informative feature
    search = T.fit_probe(x, y, T.ProbeConfig(Cs=(1e-4, 1.0)), seed=0)
    assert search.best_params_["logreg__C"] == 1.0  # at C = 1e-4 the weights are all but zero
    assert np.mean(search.predict(x) == y) > 0.9
    with pytest.raises(ValueError, match="at least 5 examples of each class"):
        T.fit_probe(x[:6], y[:6])
    with pytest.raises(ValueError, match="Cs"):
        T.ProbeConfig(Cs=(0.0,))


def test_ulmfit_probes_give_a_row_per_init_feature_and_sample():
    vocab = vocab_of_words()
    rows = T.ulmfit_probes(tiny_lm(vocab), vocab, toy_data(), QUICK)
    keys = {(r["init"], r["feature"], r["n_labels"]) for r in rows}
    assert keys == {(i, f, n) for i in ("pretrained", "random") for f in ("concat", "embeddings") for n in (6, 12)}
    assert all(0 <= r["accuracy"] <= 1 and r["C"] in QUICK.Cs for r in rows)
    summary = T.summary(rows)
    assert len(summary) == 8 and all(s["seeds"] == 1 and s["se"] is None for s in summary)


def test_best_layer_is_chosen_by_cross_validation_not_by_the_test_set():
    rows = [dict(init="pretrained", n_labels=100, seed=0, feature="0", accuracy=0.9, cv_accuracy=0.6),
            dict(init="pretrained", n_labels=100, seed=0, feature="1", accuracy=0.7, cv_accuracy=0.8),
            dict(init="pretrained", n_labels=100, seed=0, feature="all", accuracy=0.95, cv_accuracy=0.99)]
    best = T.best_layer_rows(rows, ["0", "1"])
    assert [(b["feature"], b["layer"], b["accuracy"]) for b in best] == [("best", "1", 0.7)]


def test_summary_mean_and_standard_error():
    rows = [dict(init="random", feature="0", n_labels=100, seed=s, accuracy=a) for s, a in enumerate((0.5, 0.6, 0.7))]
    (s,) = T.summary(rows)
    assert s["mean"] == pytest.approx(0.6) and s["se"] == pytest.approx(0.1 / 3 ** 0.5)


def test_benchmark_measures_tiny_checkpoints_and_records_what_they_read(tmp_path):
    vocab = vocab_of_words()
    lm = tiny_lm(vocab)
    U.save_pretrained(lm, vocab, tmp_path / "ulmfit", {"config": lm.config.__dict__, "tokens_seen": 4_000_000,
                                                       "stage_a": {"tokens_seen": 7}}, stem="ulmfit_imdb")
    bilm = tiny_bilm()
    elmo_vocab = Vocab(WORDS, specials=("<pad>", "<bos>", "<eos>"), unk="<unk>")
    save_shipped(tmp_path / "elmo", E.NAME, bilm.state_dict(), bilm.config.__dict__, {"config": bilm.config.__dict__, "tokens_seen": 16_000_000,
                 "run": {"device": "cpu", "stretches": []}}, side_files={"vocab.json": elmo_vocab.save})
    data, settings = toy_data(), dict(B.SETTINGS)
    ulmfit, ulmfit_vocab = B.measure(tmp_path / "ulmfit", data, QUICK, settings)
    assert ulmfit["kind"] == "ulmfit" and ulmfit["tokens_seen"] == 4_000_000 and ulmfit["stage_a_tokens_seen"] == 7
    report = json.loads((tmp_path / "ulmfit" / "pretrain.json").read_text())
    assert ulmfit["sha256"] == report["sha256"] and ulmfit_vocab == vocab
    elmo, _ = B.measure(tmp_path / "elmo", data, QUICK, settings)
    assert elmo["kind"] == "elmo" and elmo["tokens_seen"] == 16_000_000
    assert elmo["device"] == "cpu" and ulmfit["device"] is None  # a milestone's run record; none recorded: unknown
    assert {r["feature"] for r in elmo["rows"]} == {"0", "1", "2", "all", "best"}
    assert {r["init"] for r in elmo["rows"]} == {"pretrained", "random"}
    # a checkpoint whose weights changed is refused, not probed
    weights = tmp_path / "elmo" / f"{E.NAME}.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + bytes([weights.read_bytes()[-1] ^ 1]))
    with pytest.raises(ValueError, match="sha256"):
        B.measure(tmp_path / "elmo", data, QUICK, settings)
    with pytest.raises(ValueError, match="cannot tell"):
        B.kind_of({"config": {"d_model": 8}})


def test_benchmark_writes_one_result_and_keeps_measured_checkpoints_on_a_rerun(tmp_path, monkeypatch):
    vocab = vocab_of_words()
    lm = tiny_lm(vocab)
    U.save_pretrained(lm, vocab, tmp_path / "ckpt", {"config": lm.config.__dict__, "tokens_seen": 64_000_000},
                      stem="ulmfit_imdb")
    monkeypatch.setattr(B, "probe_data", lambda settings: (toy_data(), 3))
    monkeypatch.setattr(B.T, "ProbeConfig", lambda: QUICK)
    out = tmp_path / "milestones.json"
    assert B.main([str(tmp_path / "ckpt"), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    report = json.loads((tmp_path / "ckpt" / "pretrain.json").read_text())
    assert data["checkpoint_sha256"] == report["sha256"]["ulmfit_imdb.safetensors"]
    assert "tests/benchmarks/bench_transfer_milestones.py" in data["command"].split()
    assert [c["tokens_seen"] for c in data["checkpoints"]] == [64_000_000]
    assert data["test"]["other_benchmarks_test_reviews_excluded"] == 3

    def measured_again(*args):
        raise AssertionError("a checkpoint already in the result file was measured again")

    monkeypatch.setattr(B, "measure", measured_again)
    assert B.main([str(tmp_path / "ckpt"), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["checkpoints"] == data["checkpoints"]


def test_append_keeps_the_milestones_whose_weights_are_gone_in_order_of_tokens(tmp_path, monkeypatch):
    vocab = vocab_of_words()
    monkeypatch.setattr(B, "probe_data", lambda settings: (toy_data(), 3))
    monkeypatch.setattr(B.T, "ProbeConfig", lambda: QUICK)
    out = tmp_path / "milestones.json"
    for name, tokens, seed in (("late", 64_000_000, 1), ("early", 16_000_000, 2)):
        lm = tiny_lm(vocab)
        with torch.no_grad():
            lm.encoder.embedding.weight.add_(0.01 * seed)   # two milestones, two sets of weights
        U.save_pretrained(lm, vocab, tmp_path / name, {"config": lm.config.__dict__, "tokens_seen": tokens},
                          stem="ulmfit_imdb")
    assert B.main([str(tmp_path / "late"), "--out", str(out)]) == 0
    late = json.loads(out.read_text())["checkpoints"]
    shutil.rmtree(tmp_path / "late")   # a later session: the earlier milestone's weights are gone
    assert B.main([str(tmp_path / "early"), "--append", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [c["tokens_seen"] for c in data["checkpoints"]] == [16_000_000, 64_000_000]
    assert data["checkpoints"][1] == late[0] and "checkpoint_sha256" not in data
    assert len(data["earlier_commands"]) == 1 and "late" in data["earlier_commands"][0]
    # without --append the file holds what this command measured, nothing else
    assert B.main([str(tmp_path / "early"), "--out", str(out)]) == 0
    assert [c["tokens_seen"] for c in json.loads(out.read_text())["checkpoints"]] == [16_000_000]
    # rows measured with other settings do not join a curve
    with pytest.raises(SystemExit):
        B.main([str(tmp_path / "early"), "--append", "--seeds", "0", "--out", str(out)])
