"""AWD-LSTM model: shapes, tying, dropout wiring, a no-dropout equivalence with nn.LSTM, AR/TAR formulas."""

import math
from dataclasses import replace

import pytest
import torch
from host_reads import no_host_reads
from torch import nn

from lmlib.models.awd_lstm import AWDLSTMConfig, AWDLSTMEncoder, AWDLSTMLanguageModel, check_inputs
from lmlib.text.batching import batchify, bptt_batches
from lmlib.training.awd_training import (
    activation_penalty,
    ar_regularizer,
    tar_regularizer,
    temporal_activation_penalty,
)
from lmlib.training.objectives import StatefulLMLoss
from lmlib.training.trainer import Trainer


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def small(**kw) -> AWDLSTMConfig:
    return AWDLSTMConfig(**{"vocab_size": 30, "embed_size": 6, "hidden_size": 10, "num_layers": 3, **kw})


@pytest.mark.parametrize("field,value", [("embed_p", 1.0), ("input_p", -0.2), ("hidden_p", 1.3),
                                         ("weight_p", 1), ("output_p", 2.0), ("vocab_size", 0),
                                         ("num_layers", 0), ("embed_size", 2.5), ("pad_id", 30)])
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        small(**{field: value})


def test_layer_sizes_tied_and_untied():
    assert small().layer_sizes() == [(6, 10), (10, 10), (10, 6)]
    assert small(tie_weights=False).layer_sizes() == [(6, 10), (10, 10), (10, 10)]
    assert small(num_layers=1).layer_sizes() == [(6, 6)]


def test_shapes_state_and_stored_outputs():
    torch.manual_seed(0)
    model = AWDLSTMLanguageModel(small())
    ids = torch.randint(0, 30, (4, 7))
    logits, state = model(ids)
    assert logits.shape == (4, 7, 30)
    assert [tuple(h.shape) for h, _ in state] == [(1, 4, 10), (1, 4, 10), (1, 4, 6)]
    assert [tuple(o.shape) for o in model.last_outputs] == [(4, 7, 10), (4, 7, 10), (4, 7, 6)]
    assert len(model.last_raw_outputs) == 3
    logits2, _ = model(ids, state)
    assert logits2.shape == logits.shape
    check_inputs(model, ids, state)
    for args, named in [((torch.randint(0, 30, (3, 7)), state), "layer 0"), ((torch.randint(0, 30, (7,)),), "(7,)"),
                        ((ids + 30,), str(int(ids.max()) + 30))]:
        with pytest.raises(ValueError) as err:
            check_inputs(model, *args)
        assert named in str(err.value), (named, str(err.value))
    with no_host_reads():
        model(ids, state)


def test_weights_are_tied_and_share_one_tensor():
    model = AWDLSTMLanguageModel(small())
    assert model.decoder.weight is model.encoder.embedding.weight
    n_params = sum(p.numel() for p in model.parameters())
    untied = AWDLSTMLanguageModel(small(tie_weights=False))
    assert untied.decoder.weight is not untied.encoder.embedding.weight
    assert sum(p.numel() for p in untied.parameters()) > n_params


def test_encoder_layers_are_a_module_list_for_layer_groups():
    enc = AWDLSTMEncoder(small())
    assert isinstance(enc.layers, nn.ModuleList) and len(enc.layers) == 3
    assert isinstance(enc.embedding, nn.Embedding)


def test_layer_groups_cover_every_parameter_lowest_first():
    for tie in (True, False):
        model = AWDLSTMLanguageModel(small(tie_weights=tie))
        groups = model.layer_groups()
        assert groups[0] is model.encoder.embedding and list(groups[1:-1]) == list(model.encoder.layers[:-1])
        seen = [id(p) for g in groups for p in dict.fromkeys(g.parameters())]
        owned = {id(p) for p in model.parameters()}
        assert set(seen) == owned
        assert id(model.decoder.bias) in {id(p) for p in groups[-1].parameters()}
    enc = model.encoder
    assert enc.layer_groups() == [enc.embedding, *enc.layers]


def test_eval_mode_is_deterministic_and_train_mode_is_not():
    torch.manual_seed(1)
    model = AWDLSTMLanguageModel(small())
    ids = torch.randint(0, 30, (2, 5))
    model.eval()
    torch.testing.assert_close(model(ids)[0], model(ids)[0])
    model.train()
    assert not torch.equal(model(ids)[0], model(ids)[0])
    outs, raws = model.last_outputs, model.last_raw_outputs
    assert not torch.equal(outs[-1], raws[-1])  # output dropout sits between raw and dropped


def test_without_dropout_equals_an_nn_lstm_stack():
    # With every p = 0 the AWD-LSTM is embedding -> nn.LSTM layers -> tied linear: rebuild that from
    # PyTorch modules with copied weights and compare logits and states.
    torch.manual_seed(2)
    cfg = replace(small(), embed_p=0.0, input_p=0.0, hidden_p=0.0, weight_p=0.0, output_p=0.0)
    model = AWDLSTMLanguageModel(cfg).train()
    ids = torch.randint(0, 30, (3, 8))
    logits, state = model(ids)
    x = nn.functional.embedding(ids, model.encoder.embedding.weight)
    ref_state = []
    for (n_in, n_out), layer in zip(cfg.layer_sizes(), model.encoder.layers):
        lstm = nn.LSTM(n_in, n_out, batch_first=True)
        lstm.load_state_dict(layer.lstm.state_dict())
        x, s = lstm(x)
        ref_state.append(s)
    ref_logits = x @ model.encoder.embedding.weight.T + model.decoder.bias
    torch.testing.assert_close(logits, ref_logits)
    for (h, c), (rh, rc) in zip(state, ref_state):
        torch.testing.assert_close(h, rh)
        torch.testing.assert_close(c, rc)


def test_pad_vector_is_zero_and_gets_no_gradient():
    model = AWDLSTMLanguageModel(small(pad_id=0))
    assert torch.equal(model.encoder.embedding.weight[0], torch.zeros(6))
    logits, _ = model(torch.tensor([[0, 3, 4]]))
    logits.sum().backward()
    # the decoder is tied, so row 0 does get gradient through the softmax; the lookup itself adds none
    enc_only = AWDLSTMEncoder(small(pad_id=0))
    outs, _, _ = enc_only(torch.tensor([[0, 3, 4]]))
    outs[-1].sum().backward()
    assert torch.equal(enc_only.embedding.weight.grad[0], torch.zeros(6))


def test_ar_and_tar_match_the_formulas():
    torch.manual_seed(3)
    h = torch.randn(2, 5, 4)
    ar = sum(h[b, t, u] ** 2 for b in range(2) for t in range(5) for u in range(4)) / (2 * 5 * 4)
    tar = sum((h[b, t + 1, u] - h[b, t, u]) ** 2 for b in range(2) for t in range(4) for u in range(4)) / (2 * 4 * 4)
    assert activation_penalty(h).item() == pytest.approx(ar.item(), rel=1e-6)
    assert temporal_activation_penalty(h).item() == pytest.approx(tar.item(), rel=1e-6)
    assert temporal_activation_penalty(h[:, :1]).item() == 0.0
    with pytest.raises(ValueError):
        activation_penalty(h[0])


def test_ar_tar_callbacks_add_alpha_and_beta_times_the_penalties():
    torch.manual_seed(4)
    model = AWDLSTMLanguageModel(small())
    streams = batchify(torch.randint(0, 30, (400,)), 4)
    batches = list(bptt_batches(streams, 9))
    ar, tar = ar_regularizer(2.0), tar_regularizer(1.0)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.0), StatefulLMLoss(), [ar, tar])
    trainer.train_step(batches[0])
    expect_ar = 2.0 * activation_penalty(model.last_outputs[-1]).item()
    expect_tar = 1.0 * temporal_activation_penalty(model.last_raw_outputs[-1]).item()
    assert ar.values[-1] == pytest.approx(expect_ar, rel=1e-5)
    assert tar.values[-1] == pytest.approx(expect_tar, rel=1e-5)


def test_trains_on_a_repeating_sequence():
    torch.manual_seed(5)
    cfg = small(embed_size=16, hidden_size=16, num_layers=2, embed_p=0.0, input_p=0.1, hidden_p=0.1, weight_p=0.1, output_p=0.1)
    model = AWDLSTMLanguageModel(cfg)
    streams = batchify(torch.arange(12).repeat(40), 4)
    data = list(bptt_batches(streams, 10))
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=0.02), StatefulLMLoss(),
                      [ar_regularizer(2.0), tar_regularizer(1.0)])
    trainer.fit(data, epochs=20)
    assert trainer.evaluate(data).loss < 0.1 * math.log(30)


def test_weight_drop_forward_and_gradient_equal_an_nn_lstm_run_with_the_dropped_matrix():
    # DropConnect: W̃_hh = M ⊙ W_hh / (1 - p). The layer must (a) run the LSTM with W̃_hh, and (b) send the
    # gradient back to the raw W_hh through the mask: dL/dW_hh = M / (1 - p) ⊙ dL/dW̃_hh, zero where M = 0.
    from lmlib.models.dropouts import WeightDropLSTM

    torch.manual_seed(6)
    p = 0.5
    layer = WeightDropLSTM(5, 6, weight_p=p).train()
    x, upstream = torch.randn(2, 7, 5), torch.randn(2, 7, 6)
    out, (h, c) = layer(x, generator=torch.Generator().manual_seed(11))
    (out * upstream).sum().backward()
    w_tilde = layer.dropped_weight(torch.Generator().manual_seed(11)).detach()  # the same draw again
    w_raw = layer.lstm.weight_hh_l0.detach()
    kept = w_tilde != 0
    assert 0.3 < 1 - kept.float().mean().item() < 0.7, "about half of the 144 entries should be dropped"
    torch.testing.assert_close(w_tilde[kept], w_raw[kept] / (1 - p))

    ref = nn.LSTM(5, 6, batch_first=True)
    ref.load_state_dict(layer.lstm.state_dict())
    with torch.no_grad():
        ref.weight_hh_l0.copy_(w_tilde)
    ref_out, (ref_h, ref_c) = ref(x)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close((h, c), (ref_h, ref_c))
    (ref_out * upstream).sum().backward()
    grad = layer.lstm.weight_hh_l0.grad
    torch.testing.assert_close(grad, ref.weight_hh_l0.grad * kept / (1 - p))
    assert torch.equal(grad[~kept], torch.zeros_like(grad[~kept])) and (grad[kept] != 0).all()
    torch.testing.assert_close(layer.lstm.weight_ih_l0.grad, ref.weight_ih_l0.grad)  # input weights: no mask


def test_tied_matrix_gets_the_gradient_of_the_lookup_plus_that_of_the_decoder():
    from torch.func import functional_call

    torch.manual_seed(7)
    model = AWDLSTMLanguageModel(small()).eval()
    ids = torch.randint(0, 30, (3, 6))
    upstream = torch.randn(3, 6, 30)
    logits, _ = model(ids)
    (logits * upstream).sum().backward()
    # the same computation with the two uses of E given separate copies E_in (lookup) and E_out (softmax)
    E = model.encoder.embedding.weight.detach()
    E_in, E_out = E.clone().requires_grad_(), E.clone().requires_grad_()
    outputs, _, _ = functional_call(model.encoder, {"embedding.weight": E_in}, (ids,))
    ref_logits = nn.functional.linear(outputs[-1], E_out, model.decoder.bias)
    torch.testing.assert_close(logits, ref_logits)
    (ref_logits * upstream).sum().backward()
    assert E_in.grad.abs().sum() > 0 and E_out.grad.abs().sum() > 0  # both uses contribute
    torch.testing.assert_close(model.encoder.embedding.weight.grad, E_in.grad + E_out.grad)


def test_eval_mode_with_every_dropout_set_equals_an_nn_lstm_stack_with_the_same_weights():
    # In evaluation every dropout is the identity and DropConnect uses the raw W_hh (no 1/(1-p) scaling):
    # the model is then embedding -> nn.LSTM per layer -> tied linear, with the state carried between calls.
    torch.manual_seed(8)
    cfg = small(embed_p=0.2, input_p=0.3, hidden_p=0.3, weight_p=0.5, output_p=0.4)
    model = AWDLSTMLanguageModel(cfg)
    first, second = torch.randint(0, 30, (2, 5)), torch.randint(0, 30, (2, 4))
    model(first)  # one training pass first, so nothing left over from it may leak into evaluation
    model.eval()
    _, state = model(first)
    logits, new_state = model(second, state)
    refs = []
    for (n_in, n_out), layer in zip(cfg.layer_sizes(), model.encoder.layers):
        lstm = nn.LSTM(n_in, n_out, batch_first=True)
        lstm.load_state_dict(layer.lstm.state_dict())
        refs.append(lstm)
    E = model.encoder.embedding.weight
    x, ref_state = E[second], []
    for lstm, s in zip(refs, state):
        x, s = lstm(x, s)
        ref_state.append(s)
    torch.testing.assert_close(logits, x @ E.T + model.decoder.bias)
    for (h, c), (rh, rc) in zip(new_state, ref_state):
        torch.testing.assert_close(h, rh)
        torch.testing.assert_close(c, rc)


def test_ar_and_tar_on_a_tensor_worked_by_hand():
    h = torch.tensor([[[1.0, 2.0], [3.0, 5.0], [0.0, -1.0]]], requires_grad=True)  # (batch 1, time 3, units 2)
    # AR = mean of squares = (1 + 4 + 9 + 25 + 0 + 1) / 6
    ar = activation_penalty(h)
    assert ar.item() == pytest.approx(40 / 6)
    # TAR: h_2 - h_1 = (2, 3), h_3 - h_2 = (-3, -6); mean of squares = (4 + 9 + 9 + 36) / 4
    assert temporal_activation_penalty(h).item() == pytest.approx(58 / 4)
    ar.backward()
    torch.testing.assert_close(h.grad, 2 * h.detach() / 6)  # d/dh of mean(h²)


def test_pad_row_of_the_tied_matrix_gets_only_the_decoders_gradient():
    # the lookup of <pad> adds no gradient (padding_idx), the softmax over the vocabulary does: row pad_id of
    # the tied matrix must receive exactly the decoder's share
    from torch.func import functional_call

    torch.manual_seed(9)
    model = AWDLSTMLanguageModel(small(pad_id=0)).eval()
    ids = torch.tensor([[0, 3, 4, 0], [5, 0, 6, 7]])
    logits, _ = model(ids)
    logits.logsumexp(-1).sum().backward()
    E = model.encoder.embedding.weight.detach()
    E_in, E_out = E.clone().requires_grad_(), E.clone().requires_grad_()
    outputs, _, _ = functional_call(model.encoder, {"embedding.weight": E_in}, (ids,))
    nn.functional.linear(outputs[-1], E_out, model.decoder.bias).logsumexp(-1).sum().backward()
    assert torch.equal(E_in.grad[0], torch.zeros(6)) and E_out.grad[0].abs().sum() > 0
    torch.testing.assert_close(model.encoder.embedding.weight.grad[0], E_out.grad[0])


def test_regroup_state_stacks_the_ranks_carried_rows_into_the_whole_batchs_state_and_cuts_it_again():
    """Under DDP each rank carries the hidden state of its own rows: the state one process carries for the whole
    batch is the ranks' states stacked along the batch dimension, which is what a resume with another number of
    processes relies on."""
    torch.manual_seed(5)
    model = AWDLSTMLanguageModel(small()).eval()  # eval: no dropout, so the rows do not depend on their neighbours
    streams = batchify(torch.randint(0, 30, (400,)), 4)
    windows = list(bptt_batches(streams, 9))[:2]
    whole, shares = StatefulLMLoss(state_batch_dim=1), [StatefulLMLoss(state_batch_dim=1) for _ in range(2)]
    with torch.no_grad():
        for x, y in windows:
            whole(model, (x, y))
            for r, loss in enumerate(shares):
                loss(model, (x[2 * r: 2 * r + 2], y[2 * r: 2 * r + 2]))
    stacked = whole.regroup_state([loss.state_dict() for loss in shares], rank=0, world_size=1)["state"]
    for (h, c), (h_ref, c_ref) in zip(stacked, whole.state):
        torch.testing.assert_close(h, h_ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c, c_ref, rtol=1e-5, atol=1e-6)
    for r, loss in enumerate(shares):
        cut = whole.regroup_state([whole.state_dict()], rank=r, world_size=2)["state"]
        for (h, c), (h_ref, c_ref) in zip(cut, loss.state):
            torch.testing.assert_close(h, h_ref, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(c, c_ref, rtol=1e-5, atol=1e-6)
    assert whole.regroup_state([{"state": None}] * 2, rank=0, world_size=1) == {"state": None}
    with pytest.raises(ValueError, match="4 streams, which 3 processes cannot share equally"):
        whole.regroup_state([whole.state_dict()], rank=0, world_size=3)
    with pytest.raises(ValueError, match=r"StatefulLMLoss\(state_batch_dim=...\).*resume with the 2 process"):
        StatefulLMLoss().regroup_state([s.state_dict() for s in shares], rank=0, world_size=1)
