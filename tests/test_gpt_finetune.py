"""GPT-1 fine-tuning (lmlib.models.gpt_finetune, training.objectives.gpt_finetune_loss) against Radford et al.
(2018) §3.2-3.3: the input transformations token by token, h_l^m W_y on the [extract] state, both orders summed
for similarity, and L_3 = L_2 + λ·L_1 against a loss written out row by row."""

import math

import pytest
import torch
import torch.nn.functional as F
from host_reads import no_host_reads

from lmlib.models.gpt import GPT, GPTConfig
from lmlib.models.gpt_finetune import (
    FinetuneTokens,
    GPTClassifier,
    check_inputs,
    classification_input,
    entailment_input,
    finetune_batches,
    make_batch,
    multiple_choice_inputs,
    similarity_inputs,
)
from lmlib.text.tokenizers import ByteLevelBPE
from lmlib.text.truncation import head_and_tail
from lmlib.training.objectives import gpt_finetune_loss, text_lm_targets
from lmlib.training.schedules import warmup_cosine

TOK = FinetuneTokens(start=1, delim=2, extract=3, pad=0)


def tiny_classifier(seed=0, num_classes=2, dropout=0.0):
    torch.manual_seed(seed)
    gpt = GPT(GPTConfig(vocab_size=20, block_size=24, num_layers=2, num_heads=2, d_model=16, dropout=dropout))
    return GPTClassifier(gpt, num_classes, dropout=dropout).eval()


def test_input_transformations_are_the_papers():
    assert classification_input([7, 8, 9], TOK, max_len=10) == [1, 7, 8, 9, 3]
    assert entailment_input([7, 8], [9], TOK) == [1, 7, 8, 2, 9, 3]
    assert similarity_inputs([7, 8], [9], TOK) == ([1, 7, 8, 2, 9, 3], [1, 9, 2, 7, 8, 3])
    with pytest.raises(ValueError, match="empty"):
        classification_input([], TOK, max_len=10)
    with pytest.raises(ValueError, match="hypothesis is empty"):
        entailment_input([7], [], TOK)


def test_multiple_choice_writes_one_sequence_per_answer():
    # Story Cloze by hand: context "he ran fast" = [7, 8, 9]; endings "won" = [10] and "lost the race" = [11, 12, 13].
    # [z; q; $; a_k] with [start] in front and [extract] at the end, one row per ending.
    assert multiple_choice_inputs([7, 8, 9], [[10], [11, 12, 13]], TOK) == [
        [1, 7, 8, 9, 2, 10, 3],
        [1, 7, 8, 9, 2, 11, 12, 13, 3],
    ]
    with pytest.raises(ValueError, match="got 1"):
        multiple_choice_inputs([7], [[8]], TOK)
    with pytest.raises(ValueError, match="hypothesis is empty"):
        multiple_choice_inputs([7], [[8], []], TOK)


def test_head_and_tail_keeps_both_ends():
    ids = list(range(10))
    assert head_and_tail(ids, 10) == ids
    assert head_and_tail(ids, 4) == [0, 1, 8, 9]
    assert head_and_tail(ids, 5) == [0, 1, 7, 8, 9]
    assert classification_input(ids, TOK, max_len=6) == [1, 0, 1, 8, 9, 3]
    with pytest.raises(ValueError, match="at least 2"):
        head_and_tail(ids, 1)


def test_make_batch_pads_right_and_finds_extract():
    batch = make_batch([[1, 5, 3], [1, 5, 6, 7, 3]], [0, 1], pad=0)
    assert batch.ids.tolist() == [[1, 5, 3, 0, 0], [1, 5, 6, 7, 3]]
    assert batch.extract_pos.tolist() == [2, 4]
    with pytest.raises(ValueError, match="2 labels for 1"):
        make_batch([[1, 5, 3]], [0, 1], pad=0)
    with pytest.raises(ValueError, match="got 1"):
        make_batch([[1, 5, 3]], [0], pad=0, pairs=True)


def test_head_reads_the_extract_state_and_padding_is_invisible():
    model = tiny_classifier()
    short, long = [1, 5, 6, 3], [1, 5, 6, 7, 8, 9, 3]
    batch = make_batch([short, long], [0, 1], pad=0)
    logits = model(batch.ids, batch.extract_pos).logits
    alone = model(torch.tensor([short]), torch.tensor([3])).logits
    assert torch.allclose(logits[0], alone[0], atol=1e-6)  # right padding changes nothing (causal attention)
    hidden, _ = model.gpt.hidden_states(torch.tensor([long]))
    assert torch.allclose(logits[1], model.head(hidden[0, -1]), atol=1e-6)  # softmax(h_l^m W_y): the [extract] state


def test_mean_pooling_reads_the_mean_state_over_start_to_extract():
    model = tiny_classifier()
    model.pooling = "mean"
    short, long = [1, 5, 6, 3], [1, 5, 6, 7, 8, 9, 3]
    batch = make_batch([short, long], [0, 1], pad=0)
    logits = model(batch.ids, batch.extract_pos).logits
    for row, ids in enumerate((short, long)):
        hidden, _ = model.gpt.hidden_states(torch.tensor([ids]))
        assert torch.allclose(logits[row], model.head(hidden[0].mean(0)), atol=1e-6)  # padding left out of the mean
    with pytest.raises(ValueError, match="'max'"):
        GPTClassifier(model.gpt, 2, pooling="max")


def test_similarity_adds_both_orders_and_is_symmetric():
    model = tiny_classifier()
    ab, ba = similarity_inputs([5, 6], [7, 8, 9], TOK)
    batch = make_batch([ab, ba], [1], pad=0, pairs=True)
    logits = model(batch.ids, batch.extract_pos, pairs=True).logits
    h_ab = model.gpt.hidden_states(torch.tensor([ab]))[0][0, -1]
    h_ba = model.gpt.hidden_states(torch.tensor([ba]))[0][0, -1]
    assert logits.shape == (1, 2)
    assert torch.allclose(logits[0], model.head(h_ab + h_ba), atol=1e-5)
    swapped = make_batch([ba, ab], [1], pad=0, pairs=True)
    assert torch.allclose(model(swapped.ids, swapped.extract_pos, pairs=True).logits, logits, atol=1e-5)


def test_text_lm_targets_cover_the_text_only():
    ids = torch.tensor([[1, 5, 6, 3, 0], [1, 7, 8, 9, 3]])
    targets = text_lm_targets(ids, torch.tensor([3, 4]))
    assert targets.tolist() == [[5, 6, -100, -100], [7, 8, 9, -100]]


@pytest.mark.parametrize("lam", [0.0, 0.5, 2.0])
def test_l3_equals_l2_plus_lambda_l1_written_out(lam):
    model = tiny_classifier(seed=1)
    inputs = [[1, 5, 6, 3], [1, 7, 8, 9, 10, 3], [1, 11, 3]]
    labels = [0, 1, 1]
    batch = make_batch(inputs, labels, pad=0)
    got = gpt_finetune_loss(lam)(model, batch)
    l2 = sum(F.cross_entropy(model(torch.tensor([x]), torch.tensor([len(x) - 1])).logits, torch.tensor([y]))
             for x, y in zip(inputs, labels)) / len(inputs)
    nll, count = 0.0, 0
    for x in inputs:  # L_1: each text token predicted from the tokens before it, [start] included
        logp = F.log_softmax(model.gpt(torch.tensor([x]))[0], dim=-1)
        for t in range(1, len(x) - 1):
            nll, count = nll - logp[t - 1, x[t]], count + 1
    assert math.isclose(got.loss.item(), (l2 + lam * nll / count).item(), rel_tol=1e-5)
    assert got.n == 3
    with pytest.raises(ValueError, match="-0.1"):
        gpt_finetune_loss(-0.1)


def test_fine_tuning_learns_a_toy_task(one_thread):
    # label = whether token 5 occurs in the text: needs the [extract] state to have looked back over every token
    g = torch.Generator().manual_seed(0)
    texts = [torch.randint(6, 20, (int(torch.randint(3, 10, (1,), generator=g)),), generator=g).tolist() for _ in range(96)]
    labels = [i % 2 for i in range(96)]
    for text, y in zip(texts, labels):
        if y:
            text[int(torch.randint(0, len(text), (1,), generator=g))] = 5
    inputs = [classification_input(t, TOK, max_len=24) for t in texts]
    model = tiny_classifier(seed=2).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = gpt_finetune_loss(0.5)
    for epoch in range(12):
        for batch in finetune_batches(inputs, labels, 16, TOK.pad, shuffle=True, seed=epoch):
            opt.zero_grad()
            loss_fn(model, batch).loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        batch = make_batch(inputs, labels, TOK.pad)
        accuracy = (model(batch.ids, batch.extract_pos).logits.argmax(-1) == batch.labels).float().mean().item()
    assert accuracy >= 0.95


def test_tokens_come_from_a_tokenizer_that_reserved_them():
    plain = ByteLevelBPE([])
    with pytest.raises(ValueError, match="GPT_SPECIALS"):
        FinetuneTokens.from_tokenizer(plain)
    reserved = ByteLevelBPE([], special_tokens=("<|endoftext|>", "<|start|>", "<|delim|>", "<|extract|>"))
    assert FinetuneTokens.from_tokenizer(reserved) == FinetuneTokens(start=1, delim=2, extract=3, pad=0)


def test_extract_positions_are_checked_and_forward_reads_nothing_back():
    model = tiny_classifier()
    ids = torch.tensor([[1, 5, 3]])
    check_inputs(model, ids, torch.tensor([2]))
    with pytest.raises(ValueError) as err:
        check_inputs(model, ids, torch.tensor([3]))
    assert "3" in str(err.value).split("got")[1]
    with no_host_reads():
        for pooling in ("extract", "mean"):
            model.pooling = pooling
            model(torch.cat([ids, ids]), torch.tensor([2, 1]), pairs=True)


def test_warmup_cosine_follows_its_formula():
    T, warmup, r = 110, 10, 0.1
    assert warmup_cosine(0, T, warmup, r) == pytest.approx(1 / 10)
    assert warmup_cosine(9, T, warmup, r) == pytest.approx(1.0)
    assert warmup_cosine(10, T, warmup, r) == pytest.approx(1.0)
    assert warmup_cosine(T - 1, T, warmup, r) == pytest.approx(r)
    t = 60
    expected = r + (1 - r) * 0.5 * (1 + math.cos(math.pi * (t - warmup) / (T - warmup - 1)))
    assert warmup_cosine(t, T, warmup, r) == pytest.approx(expected)
    values = [warmup_cosine(t, T, warmup, r) for t in range(warmup, T)]
    assert all(a >= b for a, b in zip(values, values[1:]))
    for bad in [dict(t=T), dict(warmup=T), dict(min_ratio=1.5)]:
        args = {"t": 0, "T": T, "warmup": warmup, "min_ratio": r, **bad}
        with pytest.raises(ValueError):
            warmup_cosine(**args)
