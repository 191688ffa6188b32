"""lmlib.models.bert: shapes and masks, bad input, and copies of transformers' BERT that give the same numbers."""

import pytest
import torch
import torch.nn.functional as F
from host_reads import no_host_reads

from lmlib.models import bert as bert_module
from lmlib.models.bert import Bert, BertConfig, check_inputs
from lmlib.text.bert_data import SpecialIds, pretraining_batch, sentence_pairs

torch.set_num_threads(1)
VOCAB = 101


def tiny(**overrides) -> Bert:
    torch.manual_seed(0)
    settings = dict(vocab_size=VOCAB, block_size=24, num_layers=2, num_heads=2, d_model=32, d_ff=48, dropout=0.0)
    settings.update(overrides)
    return Bert(BertConfig(**settings)).eval()


def pair_batch():
    """3 rows of 10: [CLS] A [SEP] B [SEP] with both segments, the 2nd and 3rd rows padded."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, VOCAB, (3, 10), generator=g)
    segments = torch.zeros_like(ids)
    segments[:, 5:] = 1
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 7:] = 0
    attention_mask[2, 4:] = 0
    ids[:, 0] = 2
    ids[attention_mask == 0] = 0
    segments[attention_mask == 0] = 0
    return ids, segments, attention_mask


# --- config and forward -----------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, words", [
    ("vocab_size", 0, "BertConfig.vocab_size"),
    ("num_heads", 5, "num_heads=5"),
    ("dropout", 1.0, "[0, 1)"),
    ("attention_dropout", -0.1, "[0, 1)"),
    ("layer_norm_eps", 0.0, "1e-12"),
    ("pad_id", 200, "not an id of the vocabulary"),
    ("pooler", False, "nsp_head=True needs pooler=True"),
])
def test_config_refuses_bad_fields(field, value, words):
    settings = dict(vocab_size=100, d_model=16, num_heads=2)
    settings[field] = value
    with pytest.raises(ValueError) as info:
        BertConfig(**settings)
    assert words in str(info.value)


def test_defaults_are_bert_base():
    c = BertConfig()
    assert (c.vocab_size, c.block_size, c.num_layers, c.num_heads, c.d_model, c.d_ff) == (30522, 512, 12, 12, 768, 3072)
    assert c.layer_norm_eps == 1e-12 and c.attention_dropout == c.dropout == 0.1


def test_shapes_tied_head_hidden_states_and_attention_maps():
    model = tiny()
    ids, segments, attention_mask = pair_batch()
    out = model(ids, segments, attention_mask)
    assert out.mlm_logits.shape == (3, 10, VOCAB) and out.nsp_logits.shape == (3, 2) and out.pooled.shape == (3, 32)
    assert len(out.hidden_states) == 3 and all(h.shape == (3, 10, 32) for h in out.hidden_states)
    assert out.last_hidden_state is out.hidden_states[-1] and out.attentions is None
    assert model.mlm.decoder.weight is model.tok_emb.weight
    explicit = model(ids, segments, attention_mask, return_attentions=True)  # written-out attention
    torch.testing.assert_close(explicit.mlm_logits, out.mlm_logits, atol=1e-5, rtol=0)
    maps = explicit.attentions
    assert len(maps) == 2 and all(m.shape == (3, 2, 10, 10) for m in maps)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 2, 10))
    assert (maps[1][2, :, :, 4:] == 0).all() and (maps[1][1, :, :, 7:] == 0).all()  # nobody looks at padding


def test_padding_changes_nothing_at_real_positions():
    model = tiny()
    ids, segments, attention_mask = pair_batch()
    batched = model(ids, segments, attention_mask)
    alone = model(ids[2:, :4], segments[2:, :4])
    for h, h_alone in zip(batched.hidden_states, alone.hidden_states):
        torch.testing.assert_close(h[2:, :4], h_alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(batched.nsp_logits[2:], alone.nsp_logits, atol=1e-5, rtol=0)
    other = ids.clone()
    other[attention_mask == 0] = 9  # different tokens under the padding
    torch.testing.assert_close(model(other, segments, attention_mask).mlm_logits[attention_mask == 1],
                               batched.mlm_logits[attention_mask == 1], atol=1e-5, rtol=0)


def test_segments_matter_and_default_to_zero():
    model = tiny()
    ids, segments, _ = pair_batch()
    torch.testing.assert_close(model(ids).pooled, model(ids, torch.zeros_like(ids)).pooled)
    assert not torch.allclose(model(ids, segments).pooled, model(ids).pooled)


def test_heads_follow_the_config():
    ids = pair_batch()[0]
    encoder = tiny(mlm_head=False, nsp_head=False)(ids)
    assert encoder.mlm_logits is None and encoder.nsp_logits is None and encoder.pooled.shape == (3, 32)
    mlm_only = tiny(pooler=False, nsp_head=False)(ids)
    assert mlm_only.pooled is None and mlm_only.mlm_logits.shape == (3, 10, VOCAB)


def test_masked_positions_give_the_same_logits_and_gradients():
    model = tiny()
    ids, segments, attention_mask = pair_batch()
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 1], labels[1, 6], labels[2, 2] = 7, 8, 9, 10
    chosen = labels != -100
    full = model(ids, segments, attention_mask)
    few = model(ids, segments, attention_mask, masked_positions=chosen)
    assert few.mlm_logits.shape == (4, VOCAB)
    torch.testing.assert_close(few.mlm_logits, full.mlm_logits[chosen], atol=1e-6, rtol=0)
    grads = []
    for logits, target in ((full.mlm_logits.reshape(-1, VOCAB), labels.reshape(-1)), (few.mlm_logits, labels[chosen])):
        model.zero_grad()
        F.cross_entropy(logits, target).backward(retain_graph=True)
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 20
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    check_inputs(model, ids, segments, attention_mask, masked_positions=chosen)
    with pytest.raises(ValueError) as err:
        check_inputs(model, ids, masked_positions=labels)
    assert "torch.int64" in str(err.value)
    with pytest.raises(ValueError) as err:
        check_inputs(tiny(mlm_head=False, nsp_head=False), ids, masked_positions=chosen)
    assert "mlm_head=False" in str(err.value)


def test_a_pretraining_batch_runs_through_the_model():
    docs = [[[5 + (d * 7 + j * 3 + t) % 90 for t in range(4 + j % 3)] for j in range(4)] for d in range(3)]
    batch = pretraining_batch(sentence_pairs(docs, seed=0), SpecialIds(0, 1, 2, 3, 4), VOCAB, max_len=12,
                              generator=torch.Generator().manual_seed(0))
    chosen = batch.mlm_labels != -100
    out = tiny()(batch.input_ids, batch.segment_ids, batch.attention_mask, masked_positions=chosen)
    loss = F.cross_entropy(out.mlm_logits, batch.mlm_labels[chosen]) + F.cross_entropy(out.nsp_logits,
                                                                                       batch.nsp_labels)
    assert out.mlm_logits.shape == (int(chosen.sum()), VOCAB) and torch.isfinite(loss)


def test_pad_embedding_starts_at_zero_and_gets_no_gradient():
    model = tiny()
    assert (model.tok_emb.weight[0] == 0).all()
    ids, segments, attention_mask = pair_batch()
    model(ids, segments, attention_mask).last_hidden_state.sum().backward()  # (the tied MLM output layer would
    assert (model.tok_emb.weight.grad[0] == 0).all()  # give the [PAD] row a gradient, in transformers' BERT too) and model.tok_emb.weight.grad[5:].abs().sum() > 0


def test_a_few_steps_fit_one_masked_batch():
    model = tiny()
    model.train()
    ids, segments, attention_mask = pair_batch()
    labels = torch.full_like(ids, -100)
    labels[:, 2] = ids[:, 2]
    masked = ids.clone()
    masked[:, 2] = 4
    nsp = torch.tensor([0, 1, 0])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        out = model(masked, segments, attention_mask)
        loss = F.cross_entropy(out.mlm_logits.reshape(-1, VOCAB), labels.reshape(-1)) + \
            F.cross_entropy(out.nsp_logits, nsp)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


# --- bad input ------------------------------------------------------------------------------------------------

def test_bad_inputs_are_refused_by_check_inputs_naming_the_value():
    model = tiny()
    ids, segments, attention_mask = pair_batch()
    check_inputs(model, ids, segments, attention_mask)
    bad = [
        ((torch.zeros(1, 25, dtype=torch.long),), "25"),  # longer than block_size=24
        ((torch.tensor([[0, 101]]),), "101"),  # outside the vocabulary
        ((torch.tensor([[-1, 5]]),), "-1"),
        ((torch.tensor([2, 7]),), "(2,)"),  # no batch dimension
        ((ids, segments + 1), "2"),  # segment 2 of type_vocab_size=2
        ((ids, segments - 1), "-1"),
        ((ids, segments[:, :5]), "(3, 5)"),
        ((ids, segments, attention_mask * 2), "2"),
        ((ids, segments, torch.zeros_like(attention_mask)), "all padding"),
        ((ids, segments, attention_mask.flip(1)), "position 0"),
    ]
    for args, named in bad:
        with pytest.raises(ValueError) as err:
            check_inputs(model, *args)
        assert named in str(err.value), (args, str(err.value))


def test_forward_reads_nothing_back_from_the_device():
    model = tiny()
    ids, segments, attention_mask = pair_batch()
    with no_host_reads():
        out = model(ids, segments, attention_mask, masked_positions=attention_mask.bool())
    torch.testing.assert_close(out.pooled, model(ids, segments, attention_mask).pooled)


def test_state_dict_from_another_vocabulary_or_config_is_refused_clearly():
    model = tiny()
    model.load_state_dict(tiny().state_dict())
    with pytest.raises(ValueError, match=r"tok_emb.weight.*vocab_size.*BertConfig the checkpoint.*tokenizer"):
        model.load_state_dict(tiny(vocab_size=50).state_dict())
    with pytest.raises(ValueError, match=r"pos_emb.weight.*block_size"):
        model.load_state_dict(tiny(block_size=8).state_dict())
    with pytest.raises(ValueError, match=r"seg_emb.weight.*type_vocab_size"):
        model.load_state_dict(tiny(type_vocab_size=3).state_dict())
    with pytest.raises(ValueError, match=r"unexpected \['layers.2"):
        model.load_state_dict(tiny(num_layers=3).state_dict())
    with pytest.raises(ValueError, match=r"missing \['mlm.decoder.bias"):
        model.load_state_dict(tiny(mlm_head=False).state_dict())


# --- transformers' BERT ---------------------------------------------------------------------------------------

def perturbed(cls_name: str):
    """A transformers BERT of the given class, tiny, with every parameter moved off its initial value (LayerNorm
    1/0 and zero biases would hide mapping mistakes)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=96, max_position_embeddings=24, type_vocab_size=2)
    model = getattr(transformers, cls_name)(config).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    after = model.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k, _ in model.named_parameters())
    return model


@pytest.fixture(scope="module")
def hf_pretraining():
    return perturbed("BertForPreTraining")


def test_from_hf_equals_bert_for_pretraining(hf_pretraining):
    hf = hf_pretraining
    hf.set_attn_implementation("eager")
    model = Bert.from_hf(hf)
    assert not model.training and model.config.layer_norm_eps == 1e-12 and model.config.d_model == 64
    ids, segments, attention_mask = pair_batch()
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask, output_hidden_states=True,
                    output_attentions=True)
        ours = model(ids, segments, attention_mask, return_attentions=True)
        fused = model(ids, segments, attention_mask)
    for got in (ours, fused):
        torch.testing.assert_close(got.mlm_logits, theirs.prediction_logits, atol=1e-5, rtol=0)
        torch.testing.assert_close(got.nsp_logits, theirs.seq_relationship_logits, atol=1e-5, rtol=0)
        assert len(got.hidden_states) == len(theirs.hidden_states) == 3
        for h, h_hf in zip(got.hidden_states, theirs.hidden_states):
            torch.testing.assert_close(h, h_hf, atol=1e-5, rtol=0)
    assert len(theirs.attentions) == 2
    for a, a_hf in zip(ours.attentions, theirs.attentions):
        torch.testing.assert_close(a, a_hf, atol=1e-5, rtol=0)
    hf.set_attn_implementation("sdpa")
    with torch.no_grad():
        sdpa = hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask)
    torch.testing.assert_close(fused.mlm_logits, sdpa.prediction_logits, atol=1e-5, rtol=0)


def test_from_hf_gradients_equal_bert_for_pretraining(hf_pretraining):
    hf = hf_pretraining
    model = Bert.from_hf(hf)
    ids, segments, attention_mask = pair_batch()
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(0)) < 0.3, ids, -100)
    labels[attention_mask == 0] = -100
    labels[0, 1] = ids[0, 1]
    nsp = torch.tensor([0, 1, 1])
    hf.zero_grad()
    hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask, labels=labels,
       next_sentence_label=nsp).loss.backward()
    out = model(ids, segments, attention_mask)
    (F.cross_entropy(out.mlm_logits.reshape(-1, VOCAB), labels.reshape(-1)) + F.cross_entropy(out.nsp_logits, nsp)) \
        .backward()
    hf_params = dict(hf.named_parameters())
    assert len(list(model.named_parameters())) == len(hf_params) == 5 + 16 * 2 + 2 + 4 + 1 + 2  # embeddings, layers, pooler, MLM, NSP
    for key, param in model.named_parameters():  # each name through HF_BERT_NAMES
        torch.testing.assert_close(param.grad, hf_params[bert_module._hf_name(key, "bert.")].grad, atol=1e-5,
                                   rtol=1e-4, msg=key)
    hf.zero_grad()


@pytest.mark.parametrize("cls_name, parts", [
    ("BertModel", (True, False, False)),
    ("BertForMaskedLM", (False, True, False)),
    ("BertForNextSentencePrediction", (True, False, True)),
])
def test_from_hf_copies_the_heads_each_class_has(cls_name, parts):
    hf = perturbed(cls_name)
    model = Bert.from_hf(hf)
    assert (model.config.pooler, model.config.mlm_head, model.config.nsp_head) == parts
    ids, segments, attention_mask = pair_batch()
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask, output_hidden_states=True)
        ours = model(ids, segments, attention_mask)
    for h, h_hf in zip(ours.hidden_states, theirs.hidden_states):
        torch.testing.assert_close(h, h_hf, atol=1e-5, rtol=0)
    if cls_name == "BertModel":
        torch.testing.assert_close(ours.pooled, theirs.pooler_output, atol=1e-5, rtol=0)
    else:
        torch.testing.assert_close(ours.mlm_logits if parts[1] else ours.nsp_logits, theirs.logits, atol=1e-5, rtol=0)


def test_from_hf_refuses_other_models_and_settings():
    transformers = pytest.importorskip("transformers")
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=30,
                                                                n_positions=8))
    with pytest.raises(ValueError, match=r"BertForPreTraining.*got a GPT2LMHeadModel \(model_type 'gpt2'\)"):
        Bert.from_hf(gpt2)
    small = dict(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    classifier = transformers.BertForSequenceClassification(transformers.BertConfig(**small))
    with pytest.raises(ValueError, match=r"got a BertForSequenceClassification"):
        Bert.from_hf(classifier)
    relu = transformers.BertForPreTraining(transformers.BertConfig(hidden_act="relu", **small))
    with pytest.raises(ValueError, match=r"hidden_act.*exact GELU"):
        Bert.from_hf(relu)


def test_from_pretrained_offline_fails_clearly(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match=r"could not load BERT weights 'bert-base-uncased'.*HF_HUB_OFFLINE"):
        Bert.from_pretrained("bert-base-uncased", cache_dir=str(tmp_path))
