"""ULMFiT's stage (c) as Howard & Ruder (2018, sec. 3.3) run it: gradual unfreezing with a slanted triangle per stage,
then every layer until a dev split stops improving, and whole documents read through BPT3C."""

import pytest
import torch

from lmlib.models.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel
from lmlib.models.ulmfit import ULMFiTClassifier, bpt3c
from lmlib.recipes.ulmfit import accuracy, stage_stlr, train_classifier, unfreezing_stages
from lmlib.training.callbacks import Callback, EarlyStopping
from lmlib.training.schedules import discriminative_lrs, stlr
from lmlib.training.trainer import Trainer


def tiny_cfg(vocab_size=30):
    return AWDLSTMConfig(vocab_size=vocab_size, embed_size=8, hidden_size=12, num_layers=2, embed_p=0.0, input_p=0.0,
                         hidden_p=0.0, weight_p=0.0, output_p=0.0, pad_id=0)


def tiny_classifier(seed=0, bptt=None):
    torch.manual_seed(seed)
    return ULMFiTClassifier(AWDLSTMLanguageModel(tiny_cfg()).encoder, 2, bptt=bptt)


def toy_data(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = [i % 2 for i in range(n)]
    seqs = [[int(t) + 1 + 14 * y for t in torch.randint(0, 14, (int(torch.randint(3, 12, (1,), generator=g)),),
                                                         generator=g)] for y in labels]
    return seqs, labels


class Seen(Callback):
    """Per step: each optimizer group's rate and whether its parameters train."""

    def __init__(self, groups):
        self.groups, self.rates, self.trains = groups, [], []

    def on_batch_begin(self, trainer, batch):
        self.rates.append([g["lr"] for g in trainer.optimizer.param_groups])
        self.trains.append([all(p.requires_grad for p in g.parameters()) for g in self.groups])


def test_unfreezing_stages_give_one_epoch_per_group_then_one_stage_for_all():
    assert unfreezing_stages(9, 5, 10) == [10, 10, 10, 10, 50]  # 4 partial stages, then 5 epochs of all groups
    assert unfreezing_stages(3, 5, 10) == [10, 10, 10]  # too short to unfreeze everything
    assert unfreezing_stages(5, 5, 10, gradual=False) == [50]
    assert stage_stlr(0, [10, 50]) == stlr(0, 10, eta_max=1.0) and stage_stlr(10, [10, 50]) == stlr(0, 50, eta_max=1.0)
    assert stage_stlr(59, [10, 50]) == stlr(49, 50, eta_max=1.0)
    with pytest.raises(ValueError, match="past the last stage"):
        stage_stlr(60, [10, 50])


def test_each_group_meets_its_peak_rate_when_unfrozen_and_the_embedding_trains_for_the_last_stage():
    # The cause of issue 43's flat curve: one triangle over the whole run unfroze the lower groups only in its decay
    # tail (the embedding in the last epoch at <= 22% of its peak), so a pretrained encoder barely moved.
    seqs, labels = toy_data(40)  # 5 batches of 8
    model = tiny_classifier()
    groups = model.layer_groups()  # embedding, LSTM 1, LSTM 2, head
    seen = Seen(groups)
    eta, factor, spe = 0.01, 2.0, 5
    train_classifier(model, seqs, labels, epochs=6, eta_top=eta, factor=factor, batch_size=8, min_steps_per_epoch=1,
                     callbacks=[seen])
    stages = [spe, spe, spe, 3 * spe]  # three partial stages for four groups, then three epochs of all of them
    peaks = discriminative_lrs(eta, len(groups), factor)
    assert len(seen.rates) == sum(stages)
    for t, (rates, trains) in enumerate(zip(seen.rates, seen.trains)):
        assert rates == pytest.approx([p * stage_stlr(t, stages) for p in peaks], rel=1e-9)
        k = min(t // spe + 1, len(groups))  # groups training at step t, from the top
        assert trains == [g >= len(groups) - k for g in range(len(groups))], t
    embedding = [r[0] for r, tr in zip(seen.rates, seen.trains) if tr[0]]
    assert len(embedding) == 3 * spe and max(embedding) == pytest.approx(peaks[0], rel=1e-9)
    for g in range(len(groups)):  # every group's own triangle peaks while it trains
        assert max(r[g] for r, tr in zip(seen.rates, seen.trains) if tr[g]) == pytest.approx(peaks[g], rel=1e-9)


def test_without_gradual_unfreezing_one_triangle_spans_the_run():
    seqs, labels = toy_data(40)
    model = tiny_classifier()
    seen = Seen(model.layer_groups())
    train_classifier(model, seqs, labels, epochs=2, eta_top=0.01, gradual=False, factor=1.0, batch_size=8,
                     min_steps_per_epoch=1, callbacks=[seen])
    assert [r[-1] for r in seen.rates] == pytest.approx([0.01 * stlr(t, 10, eta_max=1.0) for t in range(10)])
    assert all(all(tr) for tr in seen.trains)


def test_bpt3c_reads_a_document_as_one_pass_and_no_gradient_crosses_a_piece():
    torch.manual_seed(0)
    encoder = AWDLSTMLanguageModel(tiny_cfg()).encoder.eval()
    ids = torch.arange(1, 11)[None].repeat(2, 1)  # (2, 10): each token id at one position
    whole = encoder(ids)[0][-1]
    pieces = bpt3c(encoder, ids, 4)  # pieces of 4, 4 and 2 tokens
    assert pieces.shape == whole.shape
    assert torch.allclose(pieces, whole, atol=1e-6)  # the state is carried from piece to piece
    encoder.embedding.weight.grad = None
    bpt3c(encoder, ids, 4)[:, 4:8].sum().backward()  # a loss on the second piece's hidden states only
    grad = encoder.embedding.weight.grad
    assert grad[1:5].abs().sum() == 0  # tokens 1-4 (the first piece) get nothing: the state was detached
    assert (grad[5:9].abs().sum(1) > 0).all()
    encoder.embedding.weight.grad = None
    whole_grad = torch.autograd.grad(encoder(ids)[0][-1][:, 4:8].sum(), encoder.embedding.weight)[0]
    assert (whole_grad[1:5].abs().sum(1) > 0).all()  # one pass would have carried it back


def test_the_classifier_pools_every_piece_and_gives_the_one_pass_logits():
    one_pass, pieces = tiny_classifier(bptt=None).eval(), tiny_classifier(bptt=3).eval()
    ids = torch.tensor([[3, 4, 5, 6, 7, 8, 9, 10], [3, 4, 5, 6, 0, 0, 0, 0]])
    mask = ids != 0
    assert torch.allclose(pieces(ids, mask), one_pass(ids, mask), atol=1e-6)
    loss = pieces(ids, mask).logsumexp(-1).sum()
    grad = torch.autograd.grad(loss, pieces.encoder.embedding.weight)[0]
    assert (grad[[3, 4, 5]].abs().sum(1) > 0).all()  # the first piece's hidden states are pooled, so it learns
    with pytest.raises(ValueError, match="bptt"):
        ULMFiTClassifier(AWDLSTMLanguageModel(tiny_cfg()).encoder, 2, bptt=0)


def test_training_stops_when_the_dev_split_stops_improving_and_keeps_the_best_epoch():
    model = torch.nn.Linear(1, 1)
    scores = iter([0.5, 0.7, 0.6, 0.65, 0.9])
    kept = {}

    def score(trainer):
        kept[trainer.epoch] = model.weight.item()
        return next(scores)

    stopper = EarlyStopping(patience=2, score=score, from_epoch=1)
    batches = [(torch.ones(4, 1), torch.zeros(4, 1))]
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1),
                      lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]) + 1.0, [stopper])
    trainer.fit(batches, epochs=10)
    assert trainer.epoch == 5 and stopper.scores == [0.5, 0.7, 0.6, 0.65]  # epoch 1 not watched; 2 bad epochs stop it
    assert stopper.best_epoch == 3 and model.weight.item() == kept[3], (kept, model.weight.item())  # the best epoch is back


def test_train_classifier_with_a_dev_split_stops_after_unfreezing_and_restores_the_best_epoch():
    seqs, labels = toy_data(40)
    dev_seqs, dev_labels = toy_data(24, seed=1)
    model = tiny_classifier(bptt=4)
    trainer = train_classifier(model, seqs, labels, epochs=12, eta_top=0.01, batch_size=8, min_steps_per_epoch=1,
                               max_len=None, valid=(dev_seqs, dev_labels), patience=1, sortish=True)
    stop = trainer.early_stopping
    assert len(stop.scores) == trainer.epoch - 3  # watched from the first epoch that trains every group (4 groups)
    assert stop.best_epoch >= 4 and stop.scores[stop.best_epoch - 4] == max(stop.scores)
    assert accuracy(model, dev_seqs, dev_labels, max_len=None) == max(stop.scores)
    for watch_from, unwatched in ((None, 0), (3, 3)):  # one rate from the start: watched from epoch 0 unless told
        flat = train_classifier(tiny_classifier(), seqs, labels, epochs=8, gradual=False, factor=1.0, batch_size=8,
                                min_steps_per_epoch=1, valid=(dev_seqs, dev_labels), patience=1, watch_from=watch_from)
        assert len(flat.early_stopping.scores) == flat.epoch - unwatched
    with pytest.raises(ValueError, match="valid"):
        train_classifier(tiny_classifier(), seqs, labels, epochs=1, valid=(dev_seqs, dev_labels[:3]))
