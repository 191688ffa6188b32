"""lmlib.recipes.accelerated: the GPU-sized pretraining path, checked on the CPU against the course's own references.

* masking on the device follows the rule of lmlib.text.bert_data.mask_tokens (shares within 5 binomial standard
  deviations, as tests/test_bert_data.py checks that function);
* packed instances are spans of consecutive sentences laid out as encode_pair lays out a pair, and lose no text;
* device_loop takes the same steps as the course's Trainer with the same schedule and clipping, and fits a run to
  a time budget by shortening its schedule;
* ELMo's word-type tensors give the inputs lmlib.recipes.elmo.encode_batch gives;
* the square-root rate rule, and the command line's refusals before any work.
"""

import math
import random
import subprocess
import sys
import types

import pytest
import torch

from lmlib.models.elmo import encode_words
from lmlib.recipes import accelerated as A
from lmlib.recipes.elmo import SPECIALS as ELMO_SPECIALS
from lmlib.recipes.elmo import encode_batch, target_vocab
from lmlib.text.bert_data import SpecialIds, encode_pair
from lmlib.training.callbacks import GradientClipping
from lmlib.training.schedules import WarmupCosine, warmup_cosine
from lmlib.training.trainer import Trainer

torch.set_num_threads(1)
SPECIALS = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
VOCAB = 40


def within(share: float, p: float, n: int, sigmas: float = 5.0) -> bool:
    return abs(share - p) <= sigmas * math.sqrt(p * (1 - p) / n)


# -- masking on the device --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def masked():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (500, 128), generator=g)
    ids[:, 0], ids[:, 60] = SPECIALS.cls, SPECIALS.sep
    ids[::2, 100:] = SPECIALS.pad  # half the rows end in padding
    special = torch.tensor(SPECIALS.all())
    out, chosen = A.mask_on_device(ids, special, VOCAB, 5, 0.15, torch.Generator().manual_seed(1))
    return ids, out, chosen


def test_fifteen_percent_of_ordinary_positions_are_chosen_and_no_special_or_padding(masked):
    ids, _, chosen = masked
    ordinary = ids >= 5
    assert not chosen[~ordinary].any()
    assert within(chosen[ordinary].float().mean().item(), 0.15, int(ordinary.sum()))


def test_chosen_tokens_are_masked_eighty_ten_ten(masked):
    ids, out, chosen = masked
    n = int(chosen.sum())
    is_mask = (out[chosen] == SPECIALS.mask).float().mean().item()
    same = (out[chosen] == ids[chosen]).float().mean().item()
    # a random replacement may draw the original token: 10% + 10% / (VOCAB - 5) of chosen positions stay the same
    assert within(is_mask, 0.8, n)
    assert within(same, 0.1 + 0.1 / (VOCAB - 5), n)
    assert (out[~chosen] == ids[~chosen]).all()  # nothing else changes


def test_random_replacements_are_ordinary_tokens(masked):
    ids, out, chosen = masked
    replaced = chosen & (out != ids) & (out != SPECIALS.mask)
    assert replaced.any() and (out[replaced] >= 5).all() and (out[replaced] < VOCAB).all()


# -- packed instances -------------------------------------------------------------------------------------------

def _documents(n_docs=60, seed=0):
    rng = random.Random(seed)
    token = iter(range(5, 10**6))  # every token unique, so a span can be traced back to where it came from
    return [[[next(token) for _ in range(rng.randint(1, 30))] for _ in range(rng.randint(1, 15))]
            for _ in range(n_docs)]


def _where(documents):
    return {t: (d, s) for d, doc in enumerate(documents) for s, sentence in enumerate(doc) for t in sentence}


def test_without_nsp_every_instance_is_one_contiguous_span_and_no_text_is_lost():
    docs = _documents()
    instances = A.packed_instances(docs, 64, random.Random(0), nsp=False, short_seq_prob=0.0)
    where = _where(docs)
    seen = set()
    for a, b, is_next in instances:
        assert is_next and a and b and len(a) + len(b) <= 64 - 3
        text = a + b
        assert len({where[t][0] for t in text}) == 1  # one document
        assert all(y == x + 1 for x, y in zip(text, text[1:])) or len(a) + len(b) == 61  # contiguous unless trimmed
        seen.update(text)
    kept_documents = {where[t][0] for t in seen}
    short = [d for d, doc in enumerate(docs) if sum(map(len, doc)) >= 2]  # a one-token document gives no pair
    assert set(short) <= kept_documents


def test_segments_are_filled_towards_the_full_length():
    docs = _documents(seed=1)
    instances = A.packed_instances(docs, 64, random.Random(0), nsp=False, short_seq_prob=0.0)
    lengths = [len(a) + len(b) for a, b, _ in instances]
    long_docs = sum(1 for doc in docs if sum(map(len, doc)) > 61)
    assert long_docs > 5 and sum(n >= 50 for n in lengths) >= long_docs  # one sentence per segment would not


def test_with_nsp_half_the_pairs_are_not_next_and_their_b_comes_from_another_document():
    docs = _documents(400, seed=2)
    where = _where(docs)
    instances = A.packed_instances(docs, 64, random.Random(0), nsp=True, short_seq_prob=0.1)
    not_next = [(a, b) for a, b, is_next in instances if not is_next]
    assert 0.45 < len(not_next) / len(instances) < 0.7  # 50%, plus the one-sentence chunks that must take a random B
    for a, b in not_next:
        assert where[a[0]][0] != where[b[0]][0]
    for a, b, is_next in instances:
        if is_next:
            assert where[a[0]][0] == where[b[0]][0] and b[0] == a[-1] + 1 or len(a) + len(b) == 61


def test_with_nsp_the_sentences_a_random_b_displaced_are_read_again():
    docs = _documents(200, seed=5)
    instances = A.packed_instances(docs, 512, random.Random(0), nsp=True, short_seq_prob=0.0)  # nothing is trimmed
    own = {t for a, b, is_next in instances for t in (a + b if is_next else a)}  # text read in its own document
    assert own == {t for doc in docs for sentence in doc for t in sentence}


def test_instance_tensors_lay_out_pairs_as_encode_pair():
    instances = A.packed_instances(_documents(20), 48, random.Random(3), nsp=True)
    ids, segments, labels = A.instance_tensors(instances, SPECIALS, 48)
    for row, (a, b, is_next) in enumerate(instances):
        expect_ids, expect_segments = encode_pair(a, b, SPECIALS, 48)
        n = len(expect_ids)
        assert ids[row, :n].tolist() == expect_ids and (ids[row, n:] == SPECIALS.pad).all()
        assert segments[row, :n].tolist() == expect_segments and (segments[row, n:] == 0).all()
        assert labels[row].item() == (0 if is_next else 1)


def test_packed_tensors_do_not_depend_on_the_number_of_workers():
    docs = _documents(2500, seed=4)  # two parts of 2,000 documents
    one = A.packed_tensors(docs, 64, 0, True, 0.1, SPECIALS, 2, workers=1)
    two = A.packed_tensors(docs, 64, 0, True, 0.1, SPECIALS, 2, workers=2)
    assert all(torch.equal(x, y) for x, y in zip(one, two))
    assert not torch.equal(one[0], A.packed_tensors(docs, 64, 1, True, 0.1, SPECIALS, 2, workers=1)[0])



def test_packing_on_forked_workers_finishes_after_the_parent_used_its_thread_pool():
    """The GPU session's BERT runs hung for ten minutes in packed_tensors: their workers ran torch operations in
    processes forked after the parent had used its thread pool. Reproduced here in a fresh interpreter (a big
    matmul on 2 threads first), with a time limit far above the second it takes."""
    script = """
import random, torch
from lmlib.recipes import accelerated as A
from lmlib.text.bert_data import SpecialIds
torch.set_num_threads(2)
x = torch.randn(1500, 1500)
(x @ x).sum()
rng = random.Random(0)
docs = [[[rng.randrange(5, 200) for _ in range(rng.randrange(3, 30))] for _ in range(rng.randrange(1, 8))]
        for _ in range(4000)]
ids, _, _ = A.packed_tensors(docs, 64, 0, True, 0.1, SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4), 1, workers=2)
print(ids.shape[0])
"""
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("packed_tensors on 2 forked workers did not finish in 120 s (a fork deadlock)")
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 0

# -- the loop ---------------------------------------------------------------------------------------------------

def _toy(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def test_device_loop_takes_the_trainers_steps():
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(16, 6, generator=g), torch.randn(16, 1, generator=g)) for _ in range(30)]
    reference = _toy()
    opt = torch.optim.AdamW(reference.parameters(), lr=0.05, weight_decay=0.1)
    Trainer(reference, opt, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]),
            [WarmupCosine(30, 5, 0.1), GradientClipping(0.5)], device="cpu").fit(batches)
    model = _toy()
    opt = A.fused_adamw(model.parameters(), 0.05, (0.9, 0.999), 0.1, torch.device("cpu"))
    run = A.device_loop(model, lambda t: (torch.nn.functional.mse_loss(model(batches[t][0]), batches[t][1]),
                                          torch.tensor(16)), 30, lambda t, T: warmup_cosine(t, T, 5, 0.1), opt, 0.5,
                        bf16=False, log_every=10)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert run["tokens_seen"] == 30 * 16 and run["steps"] == run["planned_steps"] == 30


def test_device_loop_fits_the_schedule_to_a_deadline(monkeypatch):
    # A clock that advances 4 ms per step, so the test does not depend on this machine's speed or load.
    now = [0.0]
    monkeypatch.setattr(A, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    model = _toy()
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)

    def step(t):
        now[0] += 0.004
        return model(torch.ones(2, 6)).pow(2).mean(), torch.tensor(2)

    run = A.device_loop(model, step, 10_000, lambda t, T: warmup_cosine(t, T, 5, 0.1), opt, None, False,
                        log_every=25, deadline=0.6)
    # the first interval is taken as start-up; at step 50 the 9,950 steps left would need 40 s, 0.4 s is left: 150
    assert run["planned_steps"] == 10_000 and 148 <= run["steps"] <= 152
    assert run["train_seconds"] == pytest.approx(0.6, abs=0.02)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01 * warmup_cosine(run["steps"] - 1, run["steps"], 5, 0.1))


def test_scaled_rate_follows_the_square_root_rule():
    assert A.scaled_lr(1e-3, 32, 128) == pytest.approx(2e-3)
    assert A.scaled_lr(2e-3, 256, 64) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="positive"):
        A.scaled_lr(1e-3, 0, 16)


# -- ELMo's word types ------------------------------------------------------------------------------------------

def test_word_type_tensors_give_encode_batchs_inputs():
    sentences = [["The", "film", "was", "great", "."], ["I", "loved", "it", "!"], ["Great", "acting"]]
    vocab = target_vocab(sentences * 3, size=12)
    ids, types = A.sentence_type_ids(sentences, 8)
    chars = encode_words(types, 20)[ids.long()]
    softmax = torch.tensor(vocab.encode([t if t in ELMO_SPECIALS else t.lower() for t in types]))
    softmax[0] = vocab.stoi["<pad>"]
    expect_chars, expect_ids = encode_batch(sentences, vocab, 20)
    width = expect_ids.size(1)
    assert torch.equal(chars[:, :width], expect_chars) and not chars[:, width:].any()
    assert torch.equal(softmax[ids.long()][:, :width], expect_ids)


# -- the command line -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, says", [
    (["gpt", "--steps", "0"], "--steps must be at least 1"),
    (["gpt", "--batch-size", "-4"], "--batch-size must be at least 1"),
    (["ulmfit-imdb"], "needs --stage-a"),
    (["gpt", "--device", "cuda"], "no CUDA GPU"),
])
def test_bad_options_are_refused_in_one_line_before_any_work(tmp_path, args, says):
    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "lmlib.recipes.accelerated", *args, "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and says in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_an_out_that_is_a_file_is_refused(tmp_path):
    file = tmp_path / "taken"
    file.write_text("x")
    result = subprocess.run([sys.executable, "-m", "lmlib.recipes.accelerated", "gpt", "--out", str(file)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "is a file" in result.stderr and file.read_text() == "x"
