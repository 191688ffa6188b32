"""Encoder-decoder: the encoder against nn.GRU run by hand, the decoder step against its equations,
teacher forcing against step-by-step decoding, masking, and greedy / beam search on toy models."""

import copy
import math
from typing import NamedTuple

import pytest
import torch
from host_reads import no_host_reads
from torch import nn

from lmlib.models.seq2seq import (
    Seq2Seq,
    Seq2SeqConfig,
    beam_search,
    check_inputs,
    greedy_decode,
)
from lmlib.text.translation import Seq2SeqBatch
from lmlib.training.objectives import seq2seq_loss


@torch.no_grad()
def sequence_log_prob(model, src, src_mask, tokens: list[int]) -> float:
    """log p(tokens, <eos> | src) under the eval-mode model (src: (1, S)), by teacher forcing."""
    tgt_in = torch.tensor([[model.config.bos_id] + tokens])
    logp, _ = model(src, src_mask, tgt_in)
    return logp.gather(-1, torch.tensor([tokens + [model.config.eos_id]])[..., None]).sum().item()


def small_model(attention="additive", seed=0):
    torch.manual_seed(seed)
    return Seq2Seq(Seq2SeqConfig(src_vocab_size=11, tgt_vocab_size=9, embed_size=6, hidden_size=5, attention=attention)).eval()


def toy_batch():
    src = torch.tensor([[5, 6, 7, 3], [8, 3, 0, 0]])
    return src, src != 0


def test_encoder_annotations_match_unpadded_runs():
    model = small_model()
    src, mask = toy_batch()
    enc = model.encode(src, mask)
    assert enc.annotations.shape == (2, 4, 10) and enc.summary.shape == (2, 10)
    # row 1 alone, without padding, through the same nn.GRU: padding must not leak into the states
    alone, last = model.encoder(model.src_embed(src[1:, :2]))
    torch.testing.assert_close(enc.annotations[1, :2], alone[0])
    assert (enc.annotations[1, 2:] == 0).all()
    # C = [→h_S; ←h_1]: the forward state after the last real token, the backward state at the first
    torch.testing.assert_close(enc.summary[1], torch.cat([alone[0, -1, :5], alone[0, 0, 5:]]))


def test_decoder_step_follows_equations():
    model = small_model()
    src, mask = toy_batch()
    state = model.start(src, mask)
    y_prev = torch.tensor([2, 2])
    logp, new_state, alpha = model.step(y_prev, state)
    h, s_prev = state.encoded.annotations, state.hidden
    att = model.attention
    # e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j), padding excluded, α = softmax, c_i = Σ α_ij h_j
    e = att.v_a(torch.tanh(att.W_a(s_prev)[:, None] + att.U_a(h))).squeeze(-1)
    e = e.masked_fill(~mask, float("-inf"))
    alpha_want = torch.softmax(e, -1)
    torch.testing.assert_close(alpha, alpha_want)
    assert alpha[1, 2:].eq(0).all()
    c = (alpha_want[..., None] * h).sum(1)
    emb = model.tgt_embed(y_prev)
    s = model.decoder(torch.cat([emb, c], -1), s_prev)
    torch.testing.assert_close(new_state.hidden, s)
    t = torch.tanh(model.readout(torch.cat([s, emb, c], -1)))
    torch.testing.assert_close(logp, torch.log_softmax(model.output(t), -1))
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(2))


def test_fixed_context_uses_the_same_c_every_step():
    model = small_model(attention=None)
    src, mask = toy_batch()
    state = model.start(src, mask)
    ctx1, w = model.context(state.hidden, state.encoded)
    assert w is None
    torch.testing.assert_close(ctx1, state.encoded.summary)
    # changing the annotations (not the summary) cannot change the output of the fixed-context model
    logp, _, _ = model.step(torch.tensor([2, 2]), state)
    enc = state.encoded._replace(annotations=torch.randn_like(state.encoded.annotations))
    logp2, _, _ = model.step(torch.tensor([2, 2]), state._replace(encoded=enc))
    torch.testing.assert_close(logp, logp2)


@pytest.mark.parametrize("attention", [None, "additive", "general", "dot", "scaled_dot", "content", "location"])
def test_teacher_forcing_equals_stepping(attention):
    model = small_model(attention)
    src, mask = toy_batch()
    tgt_in = torch.tensor([[2, 4, 5, 6], [2, 7, 8, 0]])
    logp, weights = model(src, src_mask=mask, tgt_in=tgt_in)
    state = model.start(src, mask)
    for i in range(4):
        step_logp, state, w = model.step(tgt_in[:, i], state)
        torch.testing.assert_close(logp[:, i], step_logp)
    if attention is not None:
        assert weights.shape == (2, 4, 4) and weights[1, :, 2:].eq(0).all()


def test_loss_ignores_padding():
    model = small_model()
    src, mask = toy_batch()
    tgt_in = torch.tensor([[2, 4, 5], [2, 7, 0]])
    tgt_out = torch.tensor([[4, 5, 3], [7, 3, 0]])
    result = seq2seq_loss(model, Seq2SeqBatch(src, mask, tgt_in, tgt_out, tgt_out != 0))
    logp, _ = model(src, mask, tgt_in)
    picked = [logp[0, 0, 4], logp[0, 1, 5], logp[0, 2, 3], logp[1, 0, 7], logp[1, 1, 3]]
    assert result.n == 5
    torch.testing.assert_close(result.loss, -torch.stack(picked).mean())


def ends_early(model, src, mask, max_len):
    """A copy of ``model`` whose <eos> logit is that of the second word its greedy decoding of row 0
    produced, plus a little: <eos> now wins wherever that word would have, so row 0 ends within two steps."""
    tokens, _, _ = greedy_decode(model, src, mask, max_len=max_len)
    word, eos = tokens[0][1], model.config.eos_id
    early = copy.deepcopy(model)
    with torch.no_grad():
        early.output.weight[eos] = early.output.weight[word]
        early.output.bias[eos] = early.output.bias[word] + 0.01
    return early


def test_greedy_log_prob_and_beam_one_equals_greedy():
    src, mask = toy_batch()
    plain = small_model()
    ended = {True: 0, False: 0}
    for model in (plain, ends_early(plain, src, mask, 6)):
        tokens, log_probs, weights = greedy_decode(model, src, mask, max_len=6)
        assert weights.shape[0] == 2 and weights.shape[2] == 4
        for b in range(2):
            one = (src[b:b + 1, : int(mask[b].sum())], mask[b:b + 1, : int(mask[b].sum())])
            finished = len(tokens[b]) < 6
            ended[finished] += 1
            if finished:  # ended with <eos>: the log-probability covers it
                assert log_probs[b] == pytest.approx(sequence_log_prob(model, *one, tokens[b]), abs=1e-5)
            best = beam_search(model, *one, beam_size=1, max_len=6)[0]
            assert best.tokens == tokens[b]
            assert best.log_prob == pytest.approx(log_probs[b], abs=1e-5)
    # both endings were checked: a sentence closed by <eos>, and one cut off at max_len
    assert ended[True] >= 1 and ended[False] >= 1


class ToyState(NamedTuple):
    last: torch.Tensor


class ToyConfig(NamedTuple):
    bos_id: int = 0
    eos_id: int = 1


class GreedyTrap(nn.Module):
    """A fixed next-word table where greedy decoding is fooled: from <bos>, word 2 (p=.6) beats word 3
    (p=.4), but after 2 no continuation is likely (p(<eos>) = .3 is the best), while after 3 the sentence
    ends with p(<eos>) = .9. Greedy finds "2 <eos>" (.6 · .3 = .18); the best is "3 <eos>" (.4 · .9 = .36)."""

    config = ToyConfig()

    def __init__(self):
        super().__init__()
        table = torch.full((6, 6), 1e-9)
        table[0, 2], table[0, 3] = 0.6, 0.4
        table[2, 1], table[2, 4], table[2, 5], table[2, 3] = 0.3, 0.25, 0.25, 0.2
        table[3, 1], table[3, 4] = 0.9, 0.1
        table[4, 1] = table[5, 1] = 1.0
        self.register_buffer("log_table", (table / table.sum(1, keepdim=True)).log())

    def start(self, src, src_mask):
        return ToyState(torch.zeros(src.shape[0], dtype=torch.long))

    def step(self, y_prev, state):
        return self.log_table[y_prev], ToyState(y_prev), None


def test_beam_beats_greedy_on_a_trap():
    model = GreedyTrap()
    src = torch.zeros(1, 1, dtype=torch.long)
    mask = torch.ones(1, 1, dtype=torch.bool)
    tokens, log_probs, _ = greedy_decode(model, src, mask, max_len=5)
    assert tokens[0] == [2]
    assert log_probs[0] == pytest.approx(math.log(0.6 * 0.3), abs=1e-5)
    best = beam_search(model, src, mask, beam_size=2, max_len=5, alpha=0.0)[0]
    assert best.tokens == [3] and best.log_prob == pytest.approx(math.log(0.4 * 0.9), abs=1e-5)
    assert best.log_prob >= log_probs[0]
    assert beam_search(model, src, mask, beam_size=1, max_len=5)[0].tokens == tokens[0]


@pytest.mark.parametrize("seed", range(4))
def test_beam_at_least_as_probable_as_greedy_on_random_toy_models(seed):
    model = small_model(seed=seed)
    src, mask = torch.tensor([[5, 6, 7, 3]]), torch.ones(1, 4, dtype=torch.bool)
    greedy_tokens, greedy_lp, _ = greedy_decode(model, src, mask, max_len=8)
    beam = beam_search(model, src, mask, beam_size=8, max_len=8, alpha=0.0)
    assert beam[0].log_prob >= greedy_lp[0] - 1e-6
    checked = 0
    for hyp in beam:  # every finished hypothesis' score is the model's own probability of that sequence
        if len(hyp.tokens) < 8:
            assert hyp.log_prob == pytest.approx(sequence_log_prob(model, src, mask, hyp.tokens), abs=1e-4)
            checked += 1
    assert checked >= 1, "no hypothesis ended with <eos>, so no score was checked"


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="'cosine'"):
        Seq2SeqConfig(5, 5, attention="cosine")
    with pytest.raises(ValueError, match="dropout.*1.0"):
        Seq2SeqConfig(5, 5, dropout=1.0)
    model = small_model()
    src, mask = toy_batch()
    with pytest.raises(ValueError, match="batch of 2"):
        beam_search(model, src, mask)
    with pytest.raises(ValueError, match="eos_id=3"):
        Seq2SeqConfig(3, 5)


def test_decoding_lengths_must_be_positive():
    model = small_model()
    src, mask = toy_batch()
    with pytest.raises(ValueError, match="max_len.*0"):
        greedy_decode(model, src, mask, max_len=0)
    one, one_mask = src[:1], mask[:1]
    with pytest.raises(ValueError, match="max_len.*0"):
        beam_search(model, one, one_mask, max_len=0)
    with pytest.raises(ValueError, match="beam_size.*0"):
        beam_search(model, one, one_mask, beam_size=0)


def test_bad_batches_are_refused_by_check_inputs_naming_the_value():
    model = small_model()
    src, mask = toy_batch()
    check_inputs(model, src, mask, src)
    holed = mask.clone()
    holed[0, 1] = False  # a hole in the mask: the packed GRU would read the padded slot as a word
    cases = [((src, mask.float()), "torch.float32"), ((src.float(), mask), "torch.float32"),
             ((src[:0], mask[:0]), "(0, 4)"), ((src[:, :0], mask[:, :0]), "(2, 0)"),
             ((src, torch.zeros_like(mask)), "[0, 1]"), ((src, holed), "[0]"),
             ((torch.tensor([[5, 11, 3, 0]]), torch.tensor([[True, True, True, False]])), "11"),
             ((src, mask, src[:1]), "(1, 4)")]
    for args, named in cases:
        with pytest.raises(ValueError) as err:
            check_inputs(model, *args)
        assert named in str(err.value), (named, str(err.value))


@pytest.mark.parametrize("attention", [None, "additive", "scaled_dot", "content"])
def test_forward_reads_nothing_back_from_the_device(attention):
    model = small_model(attention)
    src, mask = toy_batch()
    with no_host_reads():  # (pack_padded_sequence's lengths move to the CPU with .cpu(), the one copy it needs)
        model(src, mask, src)


def test_beam_ranks_finished_hypotheses_by_log_prob_over_length_with_eos():
    """alpha = 1 on the greedy trap, scores by hand with |y| counting <eos>: "3 <eos>" log .36 / 2 = -0.511 beats
    "2 4 <eos>" log .15 / 3 = -0.632 and "2 <eos>" log .18 / 2 = -0.857. Dividing by the words without <eos> would
    rank "2 4 <eos>" (log .15 / 2 = -0.949) above "3 <eos>" (log .36 / 1 = -1.022)."""
    model = GreedyTrap()
    src, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    hyps = beam_search(model, src, mask, beam_size=4, max_len=5, alpha=1.0)
    by_tokens = {tuple(h.tokens): h for h in hyps}
    assert hyps[0].tokens == [3]
    assert hyps[0].score == pytest.approx(math.log(0.4 * 0.9) / 2, abs=1e-5)
    assert by_tokens[(2, 4)].score == pytest.approx(math.log(0.6 * 0.25) / 3, abs=1e-5)
    assert by_tokens[(2,)].score == pytest.approx(math.log(0.6 * 0.3) / 2, abs=1e-5)
    half = beam_search(model, src, mask, beam_size=4, max_len=5, alpha=0.5)
    assert all(h.score == pytest.approx(h.log_prob / (len(h.tokens) + 1) ** 0.5, abs=1e-6) for h in half)


class EndsThenTalks(nn.Module):
    """Two kinds of row, told apart by their first source token. Row kind 0 ends at once (p(<eos> | <bos>) = .9) but
    would go on talking after its <eos> (<eos> -> 4 -> 5 -> ...); row kind 1 says "2 3 <eos>". Greedy decoding must
    keep row 0 finished while row 1 goes on."""

    config = ToyConfig()

    def __init__(self):
        super().__init__()
        table = torch.full((2, 6, 6), 1e-9)
        table[0, 0, 1], table[0, 0, 2] = 0.9, 0.1
        table[0, 1, 4] = table[0, 4, 5] = table[0, 5, 4] = 1.0
        table[1, 0, 2], table[1, 0, 1] = 0.8, 0.2
        table[1, 2, 3], table[1, 2, 1] = 0.7, 0.3
        table[1, 3, 1] = 1.0
        table[1, 1, 4] = table[1, 4, 1] = table[1, 5, 1] = 1.0
        self.register_buffer("log_table", (table / table.sum(2, keepdim=True)).log())

    def start(self, src, src_mask):
        return ToyState(src[:, 0].clone())

    def step(self, y_prev, state):
        return self.log_table[state.last, y_prev], state, None


def test_greedy_keeps_a_finished_row_finished_while_others_go_on():
    model = EndsThenTalks()
    src, mask = torch.tensor([[0], [1]]), torch.ones(2, 1, dtype=torch.bool)
    tokens, log_probs, _ = greedy_decode(model, src, mask, max_len=6)
    assert tokens == [[], [2, 3]]
    assert log_probs[0] == pytest.approx(math.log(0.9), abs=1e-5)
    assert log_probs[1] == pytest.approx(math.log(0.8 * 0.7 * 1.0), abs=1e-5)
