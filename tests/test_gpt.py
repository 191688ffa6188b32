"""lmlib.models.gpt: shapes, the key/value cache, sampling filters, bad input, and a copy of transformers' GPT-2."""

import ast
import inspect
import math
from fractions import Fraction
from types import SimpleNamespace

import pytest
import torch
from host_reads import no_host_reads
from torch import nn

from lmlib.models import gpt as gpt_module
from lmlib.models.gpt import (
    GPT,
    HF_GPT2_TRANSPOSED,
    GPTConfig,
    apply_temperature,
    check_inputs,
    generate,
    top_k_filter,
    top_p_filter,
)

torch.set_num_threads(1)
NEG = float("-inf")


def tiny(**overrides) -> GPT:
    torch.manual_seed(0)
    settings = dict(vocab_size=23, block_size=16, num_layers=2, num_heads=2, d_model=16, dropout=0.0)
    settings.update(overrides)
    return GPT(GPTConfig(**settings)).eval()


# --- config and forward -----------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, words", [
    ("vocab_size", 0, "GPTConfig.vocab_size"),
    ("num_heads", 3, "num_heads=3"),
    ("dropout", 1.0, "[0, 1)"),
    ("norm", "middle", "GPTConfig.norm must be one of ('pre', 'post'), got 'middle'"),
    ("activation", "relu", "GPTConfig.activation must be one of ('gelu_tanh', 'gelu'), got 'relu'"),
    ("layer_norm_eps", 0.0, "positive"),
])
def test_config_refuses_bad_fields(field, value, words):
    settings = dict(vocab_size=10, d_model=16, num_heads=2)
    settings[field] = value
    with pytest.raises(ValueError) as info:
        GPTConfig(**settings)
    assert words in str(info.value)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_shapes_tied_head_and_attention_maps(norm):
    model = tiny(norm=norm)
    idx = torch.randint(0, 23, (3, 10))
    logits = model(idx)
    assert logits.shape == (3, 10, 23)
    assert model.lm_head.weight is model.tok_emb.weight
    assert isinstance(model.ln_f, torch.nn.LayerNorm) == (norm == "pre")
    explicit, maps = model(idx, return_attentions=True)
    torch.testing.assert_close(explicit, logits, atol=1e-5, rtol=0)
    assert len(maps) == 2 and all(m.shape == (3, 2, 10, 10) for m in maps)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 2, 10))
    assert (maps[1].triu(diagonal=1) == 0).all()  # no position looks ahead


def test_untied_head_and_residual_init():
    model = tiny(tie_embeddings=False, num_layers=8)
    assert model.lm_head.weight is not model.tok_emb.weight
    std = model.blocks[0].mlp.proj.weight.std().item()
    assert abs(std - 0.02 / math.sqrt(16)) < 0.002  # 1/√N with N = 2·num_layers


def test_prediction_at_t_does_not_depend_on_later_tokens():
    model = tiny()
    a = torch.randint(0, 23, (1, 12))
    b = a.clone()
    b[0, 7:] = (b[0, 7:] + 1) % 23
    torch.testing.assert_close(model(a)[:, :7], model(b)[:, :7])


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_kv_cache_equals_recomputing_at_every_step(norm):
    model = tiny(norm=norm)
    idx = torch.randint(0, 23, (2, 16))
    with torch.no_grad():
        cache = model.new_cache()
        prompt = model(idx[:, :5], cache=cache)
        torch.testing.assert_close(prompt, model(idx[:, :5]), atol=1e-5, rtol=0)
        chunk = model(idx[:, 5:8], cache=cache)  # several new tokens after a cached prefix
        torch.testing.assert_close(chunk, model(idx[:, :8])[:, 5:], atol=1e-5, rtol=0)
        for t in range(8, 16):
            step = model(idx[:, t:t + 1], cache=cache)[:, -1]
            torch.testing.assert_close(step, model(idx[:, :t + 1])[:, -1], atol=1e-5, rtol=0)
        assert len(cache) == 16
        _, maps = model(idx[:, :4], cache=model.new_cache(), return_attentions=True)
        assert maps[0].shape == (2, 2, 4, 4)


def test_generate_with_cache_equals_without_and_slides_past_block_size():
    model = tiny()
    prompt = torch.randint(0, 23, (2, 3))
    for kwargs in (dict(greedy=True), dict(seed=5, top_k=5, temperature=0.8), dict(seed=5, top_p=0.9)):
        fast = generate(model, prompt, 20, use_cache=True, **kwargs)  # 23 tokens > block_size 16
        slow = generate(model, prompt, 20, use_cache=False, **kwargs)
        assert fast.shape == (2, 23) and torch.equal(fast, slow), kwargs
        assert torch.equal(fast[:, :3], prompt)


def test_seed_repeats_samples_and_generator_works():
    model = tiny()
    prompt = torch.zeros(4, 1, dtype=torch.long)
    a = generate(model, prompt, 12, seed=1)
    assert torch.equal(a, generate(model, prompt, 12, seed=1))
    assert not torch.equal(a, generate(model, prompt, 12, seed=2))
    g = torch.Generator().manual_seed(1)
    assert torch.equal(a, generate(model, prompt, 12, generator=g))
    model.train()
    generate(model, prompt, 1, greedy=True)
    assert model.training  # the mode is restored


# --- sampling filters on hand-made distributions ------------------------------------------------------------

def logits_of(probs):
    return torch.tensor(probs).log()


def test_temperature_scales_logits():
    z = torch.tensor([[2.0, -1.0, 0.5]])
    torch.testing.assert_close(apply_temperature(z, 0.5), z * 2)
    flat = torch.softmax(apply_temperature(z, 100.0), -1)
    assert (flat - 1 / 3).abs().max() < 0.01


def test_top_k_keeps_k_and_ties_at_boundary():
    z = torch.tensor([[0.1, 3.0, 2.0, -1.0, 2.5]])
    assert torch.equal(top_k_filter(z, 2), torch.tensor([[NEG, 3.0, NEG, NEG, 2.5]]))
    assert torch.equal(top_k_filter(z, 1), torch.tensor([[NEG, 3.0, NEG, NEG, NEG]]))
    assert torch.equal(top_k_filter(z, 9), z)
    tied = torch.tensor([[1.0, 2.0, 2.0, 0.0]])  # k=2 boundary is value 2.0; k=1 keeps both tied tokens
    assert torch.equal(top_k_filter(tied, 1), torch.tensor([[NEG, 2.0, 2.0, NEG]]))


def test_top_p_keeps_smallest_set_reaching_p():
    z = logits_of([[0.1, 0.5, 0.15, 0.25]])
    kept = lambda p: (top_p_filter(z, p) > NEG)[0].tolist()  # noqa: E731
    assert kept(0.5) == [False, True, False, False]  # 0.5 alone reaches 0.5
    assert kept(0.51) == [False, True, False, True]  # 0.5 + 0.25
    assert kept(0.74) == [False, True, False, True]
    assert kept(0.76) == [False, True, True, True]
    assert kept(0.05) == [False, True, False, False]  # the top token always stays
    assert kept(1.0) == [True] * 4
    rows = logits_of([[0.1, 0.5, 0.15, 0.25], [0.7, 0.1, 0.1, 0.1]])
    assert (top_p_filter(rows, 0.6) > NEG).tolist() == [[False, True, False, True], [True, False, False, False]]


def nucleus_by_hand(probs, p):
    """The indices Holtzman et al.'s top-p keeps, in exact arithmetic: the shortest prefix of the tokens sorted
    by probability whose mass reaches p (probs and p given as decimal strings, read as exact fractions)."""
    exact = [Fraction(q) for q in probs]
    order = sorted(range(len(exact)), key=lambda i: -exact[i])
    kept, mass = [], Fraction(0)
    for i in order:
        kept.append(i)
        mass += exact[i]
        if mass >= Fraction(p):
            break
    return sorted(kept)


@pytest.mark.parametrize("probs, p", [
    (["0.4", "0.3", "0.3"], "0.4"),  # 0.4 alone reaches p, though float32 gives 0.40000001 or 0.39999998
    (["0.4", "0.3", "0.2", "0.1"], "0.4"),
    (["0.4", "0.3", "0.2", "0.1"], "0.7"),
    (["0.4", "0.3", "0.2", "0.1"], "0.9"),
    (["0.1", "0.2", "0.3", "0.4"], "0.7"),
    (["0.4", "0.3", "0.2", "0.1"], "0.4001"),  # just above a boundary: one more token
    (["0.4", "0.3", "0.2", "0.1"], "0.6999"),  # just below one: no more
])
def test_top_p_at_a_boundary_that_is_not_exact_in_floating_point(probs, p):
    z = logits_of([[float(q) for q in probs]])
    kept = (top_p_filter(z, float(p)) > NEG)[0].nonzero().squeeze(1).tolist()
    assert kept == nucleus_by_hand(probs, p)


class FixedLogits(nn.Module):
    """A stand-in for a GPT whose next-token logits are always ``logits`` (vocab,), to test generate's sampling."""

    def __init__(self, logits):
        super().__init__()
        self.logits, self.config = torch.tensor(logits), SimpleNamespace(block_size=8, vocab_size=len(logits))

    def forward(self, idx, cache=None):
        return self.logits.expand(idx.size(0), idx.size(1), -1)  # (B, T, V)


@pytest.mark.parametrize("temperature, p, kept", [(0.5, 0.85, [0, 1]), (2.0, 0.75, [0, 1, 2])])
def test_generate_applies_the_temperature_before_top_p(monkeypatch, temperature, p, kept):
    # Sampling draws from softmax(z / τ) cut to its nucleus; top-p before the temperature would keep [0, 1, 2]
    # and [0, 1] here instead.
    probs = [0.5, 0.3, 0.15, 0.05]
    sharpened = [q ** (1 / temperature) for q in probs]  # softmax(log q / τ) ∝ q^(1/τ)
    sharpened = [q / sum(sharpened) for q in sharpened]
    by_hand = nucleus_by_hand([repr(q) for q in sharpened], repr(p))
    assert by_hand == kept
    expected = [sharpened[i] / sum(sharpened[j] for j in kept) if i in kept else 0.0 for i in range(4)]
    seen = []
    real_multinomial = torch.multinomial

    def spy(weights, *args, **kwargs):
        seen.append(weights.clone())
        return real_multinomial(weights, *args, **kwargs)

    monkeypatch.setattr(torch, "multinomial", spy)
    model = FixedLogits([math.log(q) for q in probs])
    generate(model, torch.zeros(1, 1, dtype=torch.long), 1, temperature=temperature, top_p=p, seed=0, use_cache=False)
    assert len(seen) == 1
    assert seen[0][0].tolist() == pytest.approx(expected, abs=1e-6)


def test_a_temperature_too_small_for_the_logits_is_refused_with_greedy_advice():
    with pytest.raises(ValueError, match=r"temperature 1e-39 is so small.*greedy=True"):
        apply_temperature(torch.tensor([[2.0, -1.0]]), 1e-39)  # 2 / 1e-39 = 2e39 > float32's 3.4e38
    model = FixedLogits([2.0, -1.0, 0.5])
    prompt = torch.zeros(1, 1, dtype=torch.long)
    for temperature in (1e-39, 1e-45, 1e-60):  # 1e-60 rounds to 0 in float32
        with pytest.raises(ValueError, match="greedy=True"):
            generate(model, prompt, 2, temperature=temperature, seed=0, use_cache=False)
    small = generate(model, prompt, 2, temperature=1e-30, seed=0, use_cache=False)  # small but finite: the argmax
    assert torch.equal(small, generate(model, prompt, 2, greedy=True, use_cache=False))


def test_top_p_keeps_or_drops_ties_together():
    z = logits_of([[0.4, 0.2, 0.2, 0.2]])
    assert (top_p_filter(z, 0.5) > NEG)[0].tolist() == [True, True, True, True]  # tie at the boundary: all kept
    assert (top_p_filter(z, 0.39) > NEG)[0].tolist() == [True, False, False, False]


# --- bad input ------------------------------------------------------------------------------------------------

def test_bad_inputs_are_refused_by_check_inputs_naming_the_value():
    model = tiny()
    check_inputs(model, torch.zeros(1, 16, dtype=torch.long))
    for idx, named in [(torch.zeros(1, 17, dtype=torch.long), "17"), (torch.tensor([[0, 23]]), "23"),
                       (torch.tensor([1, 2]), "(2,)")]:
        with pytest.raises(ValueError) as err:
            check_inputs(model, idx)
        assert named in str(err.value), str(err.value)
    cache = model.new_cache()
    model(torch.zeros(1, 15, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError) as err:
        check_inputs(model, torch.zeros(1, 2, dtype=torch.long), cache)
    assert "15 cached" in str(err.value)
    with pytest.raises(ValueError) as err:
        generate(model, torch.tensor([[0, 23]]), 1)  # generate is a boundary: it checks the prompt
    assert "23" in str(err.value)


def test_forward_reads_nothing_back_from_the_device():
    model = tiny()
    idx = torch.randint(0, 23, (2, 6))
    with no_host_reads():
        logits = model(idx)
        cache = model.new_cache()
        model(idx[:, :4], cache=cache)
        model(idx[:, 4:], cache=cache, return_attentions=True)
    assert logits.shape == (2, 6, 23)


def test_sampling_arguments_are_refused_before_any_work():
    model = tiny()
    prompt = torch.zeros(1, 1, dtype=torch.long)
    for kwargs, words in [(dict(top_p=0.0), "top_p must be in \\(0, 1\\]"), (dict(top_p=1.5), "top_p must be"),
                          (dict(top_k=0), "top_k must be an int >= 1"), (dict(temperature=0), "greedy=True"),
                          (dict(temperature=-1.0), "temperature must be")]:
        with pytest.raises(ValueError, match=words):
            generate(model, prompt, 3, **kwargs)


def test_state_dict_from_another_config_is_refused_clearly():
    model = tiny()
    model.load_state_dict(tiny().state_dict())
    with pytest.raises(ValueError, match=r"tok_emb.weight.*vocab_size.*GPTConfig the checkpoint"):
        model.load_state_dict(tiny(vocab_size=30).state_dict())
    with pytest.raises(ValueError, match=r"pos_emb.pe.*block_size"):
        model.load_state_dict(tiny(block_size=8).state_dict())
    with pytest.raises(ValueError, match=r"unexpected \['blocks.2"):
        model.load_state_dict(tiny(num_layers=3).state_dict())


def test_models_do_not_import_training_recipes_or_course():
    tree = ast.parse(inspect.getsource(gpt_module))
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[-1] in ("training", "recipes", "course") or
                m.startswith(("..training", "..recipes", "..course"))], imported
    assert not any(m.startswith(("training", "recipes", "course")) for m in imported)


# --- transformers' GPT-2 ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=97, n_positions=40, n_layer=2, n_head=2, n_embd=64,
                                     bos_token_id=None, eos_token_id=None, pad_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():  # move every weight off its initial value: LayerNorm 1/0 and zero biases hide mistakes
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    after = model.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k, _ in model.named_parameters())
    return model


def test_from_hf_gives_gpt2_logits_and_greedy_tokens(hf_gpt2):
    model = GPT.from_hf(hf_gpt2)
    assert not model.training and model.config.activation == "gelu_tanh" and model.config.layer_norm_eps == 1e-5
    assert len(HF_GPT2_TRANSPOSED) == 4
    idx = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf_gpt2(idx).logits, atol=1e-5, rtol=0)
    prompt = idx[:1, :4]
    ours = generate(model, prompt, 20, greedy=True)
    theirs = hf_gpt2.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=20,
                              min_new_tokens=20)
    assert torch.equal(ours, theirs)


def test_from_hf_refuses_other_architectures():
    transformers = pytest.importorskip("transformers")
    bert = transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                                                num_attention_heads=2, intermediate_size=32))
    with pytest.raises(ValueError, match=r"GPT2LMHeadModel.*got a BertForMaskedLM \(model_type 'bert'\)"):
        GPT.from_hf(bert)
    odd = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=30,
                                                               n_positions=8, activation_function="relu"))
    with pytest.raises(ValueError, match=r"activation_function"):
        GPT.from_hf(odd)


def test_from_hf_copies_the_one_dropout_rate_and_refuses_three_different_ones():
    transformers = pytest.importorskip("transformers")
    sizes = dict(n_layer=1, n_head=2, n_embd=16, vocab_size=30, n_positions=8)
    same = transformers.GPT2LMHeadModel(transformers.GPT2Config(**sizes, embd_pdrop=0.2, attn_pdrop=0.2,
                                                                resid_pdrop=0.2))
    assert GPT.from_hf(same).config.dropout == 0.2
    for field in ("embd_pdrop", "attn_pdrop"):  # resid_pdrop stays 0.1: the one rate cannot stand for both
        odd = transformers.GPT2LMHeadModel(transformers.GPT2Config(**sizes, **{field: 0.0}))
        with pytest.raises(ValueError, match=rf"different dropout rates .*'{field}': 0.0.*one rate for all three"):
            GPT.from_hf(odd)


def test_from_pretrained_offline_fails_clearly(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match=r"could not load GPT-2 weights 'gpt2'.*HF_HUB_OFFLINE"):
        GPT.from_pretrained("gpt2", cache_dir=str(tmp_path))


def test_real_weights_only_when_asked_and_never_offline(monkeypatch):
    """Nothing reaches the Hub unless the student asked (the switch or LMLIB_REAL_WEIGHTS=1); the offline
    variables refuse before any connection; an unreachable Hub says so; only then are weights allowed."""
    import socket

    from lmlib.models.state_dicts import real_weights

    calls = []

    def refuse(address, timeout):
        calls.append(address)
        raise OSError("no route to host")

    class Connection:
        def close(self):
            calls.append("closed")

    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LMLIB_REAL_WEIGHTS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(socket, "create_connection", lambda address, timeout: Connection())
    # Online, but not asked: no connection is even tried.
    assert real_weights() == (False, "not asked for") and calls == []
    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(variable, "1")
        allowed, why = real_weights(asked=True)
        assert not allowed and variable in why and calls == []  # the variable alone decides
        monkeypatch.delenv(variable)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert real_weights(asked=True) == (False, "huggingface.co did not answer within 2 s")
    assert calls == [("huggingface.co", 443)]
    monkeypatch.setattr(socket, "create_connection", lambda address, timeout: Connection())
    assert real_weights(asked=True) == (True, "") and calls[-1] == "closed"
    monkeypatch.setenv("LMLIB_REAL_WEIGHTS", "1")
    assert real_weights() == (True, "")
