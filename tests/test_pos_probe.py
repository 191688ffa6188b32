"""The POS transfer probe (lmlib.eval.pos_probe), its benchmark's command line and notebook 08's reading of it."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from lmlib.models.elmo import BiLM, BiLMConfig, elmo_representations
from lmlib.recipes import pos_probe as P
from lmlib.recipes.elmo import standardize

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))

TAGGED = [[("The", "DET"), ("cat", "NOUN"), ("sat", "VERB")],
          [("A", "DET"), ("dog", "NOUN")],
          [("cat", "VERB"), ("cat", "NOUN"), ("ran", "VERB"), ("!", "PUNCT")]]
TAGS = ["DET", "NOUN", "PUNCT", "VERB"]


def test_tag_ids_follow_the_words_and_refuse_a_tag_outside_the_set():
    assert P.tag_ids(TAGGED, TAGS).tolist() == [0, 1, 3, 0, 1, 3, 1, 3, 2]
    with pytest.raises(ValueError, match="PUNCT"):
        P.tag_ids(TAGGED, ["DET", "NOUN", "VERB"])


def test_samples_are_seeded_and_each_smaller_one_starts_the_larger():
    a = P.sample_sentences(50, [5, 20], seed=3)
    assert a == P.sample_sentences(50, [5, 20], seed=3) and a != P.sample_sentences(50, [5, 20], seed=4)
    assert a[20][:5] == a[5] and len(set(a[20])) == 20 and all(0 <= i < 50 for i in a[20])
    with pytest.raises(ValueError):
        P.sample_sentences(10, [11], seed=0)
    with pytest.raises(ValueError):
        P.sample_sentences(10, [0], seed=0)


def test_word_rows_are_the_rows_of_the_chosen_sentences_words():
    # sentence 0 holds rows 0-2, sentence 1 rows 3-4, sentence 2 rows 5-8
    assert P.word_rows(TAGGED, [2, 0]).tolist() == [5, 6, 7, 8, 0, 1, 2]
    assert P.word_rows(TAGGED, [1]).tolist() == [3, 4]


def test_static_features_look_words_up_lower_cased_and_give_unknown_words_zeros():
    vectors = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    x, known = P.static_features(vectors, {"the": 0, "cat": 1}, [["The", "cat", "sat"]])
    assert x.shape == (3, 1, 2) and known.tolist() == [True, True, False]
    assert x[:, 0].tolist() == [[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]]
    _, cased = P.static_features(vectors, {"the": 0, "cat": 1}, [["The"]], lower=False)
    assert cased.tolist() == [False]


def test_most_frequent_tag_baseline_by_hand():
    # in TAGGED "cat" is NOUN twice and VERB once; overall NOUN (3) and VERB (3) tie, NOUN seen first
    test = [[("cat", "NOUN"), ("sat", "VERB"), ("zebra", "NOUN"), ("The", "DET")]]
    assert P.most_frequent_tag_accuracy(TAGGED, test) == 1.0
    test = [[("cat", "VERB"), ("zebra", "VERB")]]
    assert P.most_frequent_tag_accuracy(TAGGED, test) == 0.0
    with pytest.raises(ValueError):
        P.most_frequent_tag_accuracy([], test)


def _layered(n: int, informative: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, 8) features where only layer ``informative`` says the tag (its first coordinate), the rest noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = torch.randn(n, 3, 8, generator=g)
    x[:, informative, :3] += 4.0 * torch.nn.functional.one_hot(y, 3)
    return x, y


def test_a_scalar_mix_tagger_puts_its_weight_on_the_layer_that_knows_the_tags():
    x, y = _layered(600, informative=1)
    test_x, test_y = _layered(600, informative=1, seed=1)
    tr, te = standardize(x, test_x)
    quick = dict(P.TAGGER, steps=100)  # the recipe, fewer steps: this task is easy
    mix = P.fit_tagger(tr, y, 3, None, seed=0, recipe=quick)
    weights = P.mix_weights(mix)
    assert max(range(3), key=lambda j: weights["s"][j]) == 1
    assert P.tagger_accuracy(mix, te, test_y) > 0.95
    one = P.fit_tagger(tr, y, 3, 1, seed=0, recipe=quick)
    assert P.mix_weights(one) is None and P.tagger_accuracy(one, te, test_y) > 0.95
    noise = P.fit_tagger(tr, y, 3, 0, seed=0, recipe=quick)  # a layer that knows nothing: about chance
    assert P.tagger_accuracy(noise, te, test_y) < 0.5
    with pytest.raises(ValueError):
        P.fit_tagger(tr, y[:10], 3, None, seed=0, recipe=quick)


def test_bilm_features_give_each_word_its_layers_in_sentence_order():
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=20, embed_size=8, hidden_size=16, num_layers=2, char_embed_size=4,
                           filters=((1, 4), (2, 4)), num_highway=1, max_chars=10)).eval()
    sentences = [["a", "longer", "sentence", "here"], ["short", "one"]]
    x = P.bilm_features(bilm, sentences)
    assert x.shape == (6, 3, 16)
    for k, (start, s) in enumerate(((0, sentences[0]), (4, sentences[1]))):
        alone, _ = elmo_representations(bilm, [s], "all")  # (L + 1, 1, T, 2d)
        assert torch.allclose(x[start: start + len(s)], alone[:, 0].transpose(0, 1), atol=1e-5), k


def test_the_benchmark_refuses_a_folder_without_pretrain_json_and_one_seed_before_any_work(tmp_path, capsys):
    import bench_elmo_pos as B

    with pytest.raises(SystemExit):
        B.arguments(["--checkpoint", str(tmp_path)])
    assert "pretrain.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        B.arguments(["--seeds", "0"])
    assert B.arguments([]).out == "elmo_pos"  # the shipped biLM: lmlib/results/elmo_pos.json
    (tmp_path / "pretrain.json").write_text("{}")
    assert B.arguments(["--checkpoint", str(tmp_path)]).out == tmp_path / "elmo_pos.json"


# -- the committed result and notebook 08's reading of it ---------------------------------------------------------

def test_the_committed_result_is_the_shipped_bilms_and_its_summary_and_checks_follow_from_its_rows():
    from lmlib.course import elmo_pos, results

    data = results.load("elmo_pos")
    assert data["checkpoint"]["sha256"] == results.shipped_report("elmo_imdb")["sha256"]
    assert len(data["settings"]["seeds"]) >= 3 and data["settings"]["sizes"] == [100, 1000]
    rows = elmo_pos.pos_transfer_rows()
    assert {r["n_labels"] for r in rows} == {100, 1000}
    for r in rows:
        values = [x["accuracy"] for x in data["rows"] if x["method"] == r["method"] and x["n_labels"] == r["n_labels"]]
        mean = sum(values) / len(values)
        se = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
        assert r["mean"] == pytest.approx(mean) and r["se"] == pytest.approx(se) and r["seeds"] == len(values)
    for check in elmo_pos.pos_checks():
        a, b = {"scalar mix − character CNN": ("(a)", "(b)"), "scalar mix − random-init biLM": ("(a)", "(c)")}[check["check"]]
        names = [next(m for m in data["methods"] if m.startswith(x)) for x in (a, b)]
        d, se = elmo_pos.paired_difference(data["rows"], *names, check["n_labels"])
        assert check["difference"] == pytest.approx(d) and check["se"] == pytest.approx(se)
        assert check["holds"] == (d >= check["bar"] and d - 2 * se > 0)
    reading = elmo_pos.pos_reading()
    assert all(f"{c['difference']:+.3f}" in reading for c in elmo_pos.pos_checks())


def test_the_reading_is_refused_beside_another_biLM(monkeypatch):
    from lmlib.course import elmo_pos, results

    real = results.load

    def other(name):
        data = json.loads(json.dumps(real(name)))
        if name == "elmo_pos":
            data["checkpoint"]["sha256"] = {"elmo_imdb.safetensors": "0" * 64}
        return data

    monkeypatch.setattr(results, "load", other)
    with pytest.raises(RuntimeError, match="another biLM"):
        elmo_pos.pos_transfer_rows()
