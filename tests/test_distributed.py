"""lmlib.training.distributed and the Trainer under DDP: two CPU processes (gloo) against one process.

Two processes, each with half of every global batch, must take the same steps as one process with the whole batch
(same losses, same weights); checkpoints must move between the two set-ups; a rank that dies must make the other
fail within the timeout, with an error that says so. The two-process runs are this file run as a script
(``python tests/test_distributed.py MODE OUT``), once under torchrun and once started by hand with the variables
torchrun would set, so that no agent kills the survivor before it can report.
"""

import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from benchmarks.common import child_env, free_port, torchrun_command

import lmlib
from lmlib.models.elmo import BiLM, BiLMConfig
from lmlib.models.gpt import GPT, GPTConfig
from lmlib.recipes.elmo import bilm_loss, encode_batch
from lmlib.text.batching import LMBatch, batchify, random_blocks
from lmlib.text.vocab import SPECIALS, Vocab
from lmlib.training import distributed
from lmlib.training.callbacks import Checkpoint, GradientClipping, GradualUnfreezing, LRSchedule, PrintEvery
from lmlib.training.objectives import next_token_loss
from lmlib.training.trainer import Callback, Trainer

torch.set_num_threads(1)
STREAM = torch.tensor([(7 * i + i // 5) % 23 for i in range(600)])
GLOBAL_BATCH, STEPS_PER_EPOCH, DEATH_TIMEOUT_S = 4, 5, 3
LAUNCH_LIMIT_S = 120  # a hard limit on every launch: a hanging run fails the test instead of the suite


def global_batches(epoch: int) -> list[LMBatch]:
    """The global batches of one epoch: GLOBAL_BATCH blocks of 8 tokens, the same in every process."""
    g = torch.Generator().manual_seed(100 + epoch)
    return [random_blocks(STREAM, 8, GLOBAL_BATCH, g) for _ in range(STEPS_PER_EPOCH)]


class CountSteps(Callback):
    def __init__(self):
        self.calls = 0

    def on_batch_end(self, trainer, loss):
        self.calls += 1


class CountStepsOnMain(CountSteps):
    main_process_only = True


def make_trainer(callbacks=(), seed=0) -> Trainer:
    """A tiny GPT (no dropout, so one process and two draw no different masks) with callbacks that change training
    and must run on every rank: a schedule, clipping, and unfreezing, which makes DDP rebuild in epoch 2."""
    lmlib.seed_everything(seed)
    model = GPT(GPTConfig(vocab_size=23, block_size=16, num_layers=2, num_heads=2, d_model=16, dropout=0.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    schedule = LRSchedule(lambda t: 1.0 / (1.0 + 0.1 * t))
    unfreezing = GradualUnfreezing([model.blocks[0], model.blocks[1]])
    return Trainer(model, optimizer, next_token_loss, [schedule, GradientClipping(0.5), unfreezing, *callbacks],
                   device="cpu")


# Sentences of different lengths: in every global batch of four, the first two (rank 0's share) hold more words
# than the last two, so a plain mean per rank would weight rank 1's words more than one process does.
WORDS = "the cat sat on a mat while dogs ran past old trees".split()
SENTENCES = [WORDS[i % 5: i % 5 + 3 + (7 * i) % 5] for i in range(16)]
VOCAB = Vocab(WORDS, specials=SPECIALS)


def bilm_batches() -> list:
    return [encode_batch(sorted(SENTENCES[i:i + 4], key=len, reverse=True), VOCAB, max_chars=8)
            for i in range(0, 16, 4)]


def unweighted_bilm_loss(model, batch):
    """ELMo's loss with each rank's plain mean: what bilm_loss would be without mean_over_ranks."""
    char_ids, word_ids = batch
    return sum(model.nll(char_ids, word_ids, model(char_ids)))


def make_bilm_trainer(loss=bilm_loss) -> Trainer:
    """A tiny ELMo biLM without dropout, trained with ELMo's own loss function."""
    lmlib.seed_everything(0)
    config = BiLMConfig(vocab_size=len(VOCAB), embed_size=8, hidden_size=12, num_layers=2,
                        dropout=0.0, char_embed_size=4, filters=((1, 4), (2, 4)), num_highway=1, max_chars=8)
    model = BiLM(config)
    return Trainer(model, torch.optim.Adam(model.parameters(), lr=0.01), loss, device="cpu")


# -- the two-process side (run as a script) ----------------------------------------------------------------
def worker(mode: str, out: Path) -> None:
    timeout = 60 if mode == "train" else DEATH_TIMEOUT_S
    assert distributed.init_distributed(timeout=datetime.timedelta(seconds=timeout))
    rank, record = distributed.rank(), {}
    if mode == "train":
        # a: two epochs from scratch on half of each global batch; save after epoch 1 (every rank asks, rank 0 writes)
        counters = [CountSteps(), CountStepsOnMain()]
        trainer = make_trainer([*counters, PrintEvery(1), Checkpoint(out / f"ddp_last_rank{rank}.pt")])
        trainer.fit(distributed.shard_batches(global_batches), epochs=1)
        trainer.save_checkpoint(out / f"ddp_epoch1_rank{rank}.pt")
        record["draw_after_save"] = torch.rand(4)  # this rank's stream (the tiny GPT has no dropout to disturb)
        trainer.fit(distributed.shard_batches(global_batches), epochs=1)
        record.update(losses=trainer.batch_losses, history=trainer.history, state=trainer.model.state_dict(),
                      counts=[c.calls for c in counters])
        record["valid_loss"] = trainer.evaluate(distributed.shard_batches(global_batches(9))).loss  # each rank half
        record["means"] = [distributed.all_reduce_mean(float(rank)), distributed.all_reduce_mean(torch.tensor([rank, 2.0]))]
        # b: resume the one-process checkpoint of epoch 1 under DDP
        resumed = make_trainer(seed=99)
        resumed.load_checkpoint(out / "single_epoch1.pt")
        resumed.fit(distributed.shard_batches(global_batches), epochs=1)
        record.update(resumed_losses=resumed.batch_losses, resumed_state=resumed.model.state_dict())
        # b2: resume the DDP checkpoint under DDP: each rank takes up its own random stream again
        again = make_trainer([CountSteps(), CountStepsOnMain(), PrintEvery(1), Checkpoint(out / "unused.pt")], seed=7)
        again.load_checkpoint(out / "ddp_epoch1_rank0.pt")
        record["draw_after_load"] = torch.rand(4)
        # c: shares with different numbers of loss terms (ELMo's sentences), with and without mean_over_ranks
        for name, loss in (("bilm", bilm_loss), ("bilm_unweighted", unweighted_bilm_loss)):
            trainer = make_bilm_trainer(loss)
            trainer.fit(distributed.shard_batches(bilm_batches()), epochs=1)
            record[f"{name}_losses"], record[f"{name}_state"] = trainer.batch_losses, trainer.model.state_dict()
        # d: a rank with a batch fewer than the other is refused before anyone waits
        uneven = distributed.shard_batches(global_batches(0))[: STEPS_PER_EPOCH - rank]
        try:
            make_trainer().fit(uneven, epochs=1)
        except ValueError as err:
            record["uneven_error"] = str(err)
    else:  # "die" or "hang": rank 1 stops answering after two steps
        class StopAfterTwoSteps(Callback):
            def on_batch_end(self, trainer, loss):
                if rank == 1 and trainer.step == 2:
                    (out / "death_time").write_text(repr(time.time()))
                    if mode == "hang":
                        time.sleep(LAUNCH_LIMIT_S)  # the test kills it once rank 0 has ended
                    os._exit(1)

        try:
            make_trainer([StopAfterTwoSteps()]).fit(distributed.shard_batches(global_batches), epochs=2)
        except distributed.LostRankError as err:
            record.update(error=str(err), seconds=time.time() - float((out / "death_time").read_text()))
            torch.save(record, out / f"rank{rank}.pt")
            raise
    torch.save(record, out / f"rank{rank}.pt")
    distributed.exit_distributed(0)


# -- the one-process side (pytest) -------------------------------------------------------------------------
def torchrun(mode: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(torchrun_command(2, __file__, mode, str(out)), env=child_env(), capture_output=True,
                          text=True, timeout=LAUNCH_LIMIT_S)


def launch_by_hand(mode: str, out: Path) -> list[subprocess.CompletedProcess]:
    """Two processes with the environment torchrun would give them, but no agent that stops the others when one
    exits: rank 0 must end on its own. Rank 1 is killed once rank 0 has ended, both at the hard limit."""
    port, procs = free_port(), []
    for rank in (0, 1):
        env = child_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, __file__, mode, str(out)], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    deadline, results = time.monotonic() + LAUNCH_LIMIT_S, []
    for proc in procs:
        if proc is not procs[0]:
            proc.kill()
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            pytest.fail(f"the {mode!r} run did not end within {LAUNCH_LIMIT_S} s")
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    return results


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The one-process reference (two epochs on the global batches), its checkpoint after epoch 1, and what each
    rank of one two-process torchrun recorded."""
    out = tmp_path_factory.mktemp("ddp")
    reference = make_trainer()
    reference.fit(global_batches, epochs=1)
    reference.save_checkpoint(out / "single_epoch1.pt")
    reference.fit(global_batches, epochs=1)
    run = torchrun("train", out)
    assert run.returncode == 0, f"torchrun failed:\n{run.stdout}\n{run.stderr[-4000:]}"
    ranks = [torch.load(out / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    return {"out": out, "reference": reference, "ranks": ranks, "stdout": run.stdout}


def assert_states_close(actual: dict, expected: dict) -> None:
    assert list(actual) == list(expected)  # the same keys in the same order: no "module." from the DDP wrapper
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], atol=1e-5, rtol=0, msg=key)


def test_two_processes_with_half_batches_take_the_steps_of_one_with_the_whole_batch(runs):
    reference = runs["reference"]
    assert len(reference.batch_losses) == 2 * STEPS_PER_EPOCH
    for record in runs["ranks"]:  # each rank reports the global loss, not its half's
        assert record["losses"] == pytest.approx(reference.batch_losses, abs=1e-5, rel=0)
        assert [h["train_loss"] for h in record["history"]] == pytest.approx(
            [h["train_loss"] for h in reference.history], abs=1e-5, rel=0)
        assert_states_close(record["state"], reference.model.state_dict())
        assert record["valid_loss"] == pytest.approx(reference.evaluate(global_batches(9)).loss, abs=1e-5, rel=0)
    rank0, rank1 = runs["ranks"]
    assert all(torch.equal(rank0["state"][k], rank1["state"][k]) for k in rank0["state"])  # the ranks never drift
    for record in runs["ranks"]:  # all_reduce_mean of each rank's number, a float and a tensor
        assert record["means"][0] == 0.5 and torch.equal(record["means"][1], torch.tensor([0.5, 2.0]))


def test_shares_with_different_numbers_of_words_take_the_one_process_steps_with_mean_over_ranks(runs):
    batches = bilm_batches()
    for char_ids, _ in batches:  # the premise: rank 0's half holds more words than rank 1's
        words = (char_ids[..., 0] != 0).sum(dim=1)
        assert words[:2].sum() > words[2:].sum()
    reference = make_bilm_trainer()
    reference.fit(batches, epochs=1)
    for record in runs["ranks"]:
        assert record["bilm_losses"] == pytest.approx(reference.batch_losses, abs=1e-5, rel=0)
        assert_states_close(record["bilm_state"], reference.model.state_dict())
        # each rank's plain mean trains on another objective: the test can tell the difference
        unweighted = record["bilm_unweighted_state"]
        assert max((unweighted[k] - v).abs().max() for k, v in reference.model.state_dict().items()) > 1e-3


def test_mean_over_ranks_is_the_mean_itself_in_one_process():
    mean = torch.tensor(2.5, requires_grad=True)
    assert distributed.mean_over_ranks(mean, 7) is mean


def test_output_callbacks_run_on_rank_0_alone_and_training_callbacks_everywhere(runs):
    rank0, rank1 = runs["ranks"]
    assert rank0["counts"] == [2 * STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]
    assert rank1["counts"] == [2 * STEPS_PER_EPOCH, 0]
    assert runs["stdout"].count("step 1  loss") == 1  # PrintEvery printed once, not once per rank
    written = sorted(p.name for p in runs["out"].iterdir() if p.name.startswith("ddp_"))
    assert written == ["ddp_epoch1_rank0.pt", "ddp_last_rank0.pt"]  # Checkpoint and save_checkpoint: rank 0 only


def test_each_rank_draws_its_own_random_numbers_and_a_ddp_resume_gives_each_its_own_stream_back(runs):
    rank0, rank1 = runs["ranks"]
    assert not torch.equal(rank0["draw_after_save"], rank1["draw_after_save"])  # so dropout masks differ too
    for record in (rank0, rank1):
        assert torch.equal(record["draw_after_load"], record["draw_after_save"])
    saved = torch.load(runs["out"] / "ddp_epoch1_rank0.pt", weights_only=True)
    assert len(saved["by_rank"]) == 2
    assert torch.equal(saved["by_rank"][0]["rng"]["torch"], saved["rng"]["torch"])  # one process resumes rank 0's


def test_a_ddp_checkpoint_resumes_in_one_process_like_an_uninterrupted_run(runs, tmp_path):
    reference = runs["reference"]  # the same script's callbacks, now in one process
    resumed = make_trainer([CountSteps(), CountStepsOnMain(), PrintEvery(100), Checkpoint(tmp_path / "last.pt")], seed=99)
    resumed.load_checkpoint(runs["out"] / "ddp_epoch1_rank0.pt")
    assert resumed.step == STEPS_PER_EPOCH and resumed.epoch == 1
    resumed.fit(global_batches, epochs=1)
    assert resumed.batch_losses == pytest.approx(reference.batch_losses, abs=1e-5, rel=0)
    assert_states_close(resumed.model.state_dict(), reference.model.state_dict())
    last = torch.load(runs["out"] / "ddp_last_rank0.pt", weights_only=True)
    assert_states_close(last["model"], reference.model.state_dict())


def test_a_one_process_checkpoint_resumes_under_ddp_like_an_uninterrupted_run(runs):
    reference = runs["reference"]
    for record in runs["ranks"]:
        assert record["resumed_losses"] == pytest.approx(reference.batch_losses, abs=1e-5, rel=0)
        assert_states_close(record["resumed_state"], reference.model.state_dict())


def test_ranks_with_different_numbers_of_batches_are_refused(runs):
    for record in runs["ranks"]:
        assert "the ranks have [5, 4] batches" in record["uneven_error"]
        assert "shard_batches" in record["uneven_error"]


@pytest.mark.parametrize("mode", ["die", "hang"])
def test_a_rank_that_dies_or_hangs_makes_the_other_fail_within_the_timeout(tmp_path, mode):
    rank0, _ = launch_by_hand(mode, tmp_path)
    assert rank0.returncode != 0, rank0.stdout
    record = torch.load(tmp_path / "rank0.pt", weights_only=True)
    if mode == "hang":  # nothing to notice but the silence: the timeout itself ends the wait
        assert DEATH_TIMEOUT_S - 0.5 < record["seconds"] < DEATH_TIMEOUT_S + 2.0
    else:  # the closed connection is noticed at once
        assert record["seconds"] < DEATH_TIMEOUT_S
    assert "rank 0 of 2 stopped while training at step 3 (epoch 1)" in record["error"]
    assert f"within the timeout of {DEATH_TIMEOUT_S} s" in record["error"]
    assert "LostRankError" in rank0.stderr


# -- without torchrun ----------------------------------------------------------------------------------------
def test_shard_gives_each_rank_a_disjoint_equal_share_of_a_batch_and_of_streams():
    batch = random_blocks(STREAM, 8, 6, torch.Generator().manual_seed(0))
    shares = [distributed.shard(batch, rank=r, world_size=3) for r in range(3)]
    assert all(isinstance(s, LMBatch) and s.x.shape == (2, 8) for s in shares)
    assert torch.equal(torch.cat([s.x for s in shares]), batch.x)
    assert torch.equal(torch.cat([s.y for s in shares]), batch.y)
    streams = batchify(STREAM, 4)  # (4, 150): row b continues its own text, so its RNN state stays on one rank
    assert torch.equal(distributed.shard(streams, rank=1, world_size=2), streams[2:])
    assert distributed.shard(batch) is batch  # one process: the whole batch
    for r in (0, 1):
        epoch = distributed.shard_batches(global_batches, rank=r, world_size=2)(0)
        assert isinstance(epoch, list) and len(epoch) == STEPS_PER_EPOCH
        assert all(torch.equal(s.x, g.x[2 * r: 2 * r + 2]) for s, g in zip(epoch, global_batches(0)))


def test_without_torchrun_nothing_joins_a_process_group(monkeypatch):
    for name in distributed.TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert distributed.init_distributed() is False
    assert not torch.distributed.is_initialized()
    assert (distributed.rank(), distributed.world_size(), distributed.is_main_process()) == (0, 1, True)
    assert distributed.all_reduce_mean(2.5) == 2.5
    assert distributed.all_gather({"a": 1}) == [{"a": 1}]
    before = torch.get_rng_state()
    distributed.split_random_streams()  # one process: its stream is left alone
    assert torch.equal(torch.get_rng_state(), before)
    trainer = make_trainer()
    trainer.fit(global_batches, epochs=1)
    assert trainer.distributed is False and trainer._ddp is None
    assert not torch.distributed.is_initialized()


GROUP_OF_ONE = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
EXIT_SCRIPT = """
import sys
from lmlib.training import distributed
joined = distributed.init_distributed()
print("joined" if distributed.in_process_group() else "alone", joined)  # a pipe: buffered, not yet written
distributed.exit_distributed(3)
print("returned")
"""


def test_exit_distributed_leaves_the_group_flushes_and_exits_with_the_code_and_returns_in_one_process():
    grouped = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=60,
                             env=child_env(**GROUP_OF_ONE, MASTER_PORT=str(free_port())))
    assert (grouped.returncode, grouped.stdout) == (3, "joined False\n"), grouped.stderr  # a group of one
    alone = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=60,
                           env=child_env())
    assert (alone.returncode, alone.stdout) == (0, "alone False\nreturned\n"), alone.stderr


CLI_ERROR_SCRIPT = """
import sys
import lmlib.__main__ as cli
from lmlib.training import distributed
def fail(args):
    distributed.init_distributed()
    raise RuntimeError("an unexpected failure")
cli._pretrain = fail
cli.pretrain_main(None)
"""


def test_pretrain_under_torchrun_ends_an_unexpected_error_with_its_traceback_and_status_1():
    run = subprocess.run([sys.executable, "-c", CLI_ERROR_SCRIPT], capture_output=True, text=True, timeout=60,
                         env=child_env(**GROUP_OF_ONE, MASTER_PORT=str(free_port())))
    assert run.returncode == 1
    assert run.stderr.count("RuntimeError: an unexpected failure") == 1, run.stderr


def test_pretrain_in_one_process_lets_an_unexpected_error_go_on_as_usual(monkeypatch):
    import lmlib.__main__ as cli

    for name in distributed.TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def fail(args):
        raise RuntimeError("an unexpected failure")

    monkeypatch.setattr(cli, "_pretrain", fail)
    with pytest.raises(RuntimeError, match="an unexpected failure"):
        cli.pretrain_main(None)


def test_bad_input_says_what_was_wrong_and_how_to_fix_it(monkeypatch):
    with pytest.raises(ValueError, match="distributed=True needs a process group.*torchrun --nproc_per_node=N"):
        Trainer(torch.nn.Linear(2, 2), None, next_token_loss, distributed=True)
    with pytest.raises(ValueError, match="'auto', True or False"):
        Trainer(torch.nn.Linear(2, 2), None, next_token_loss, distributed="yes")
    with pytest.raises(ValueError, match="init_distributed"):
        distributed.wrap_model(torch.nn.Linear(2, 2))
    batch = random_blocks(STREAM, 8, 6)
    with pytest.raises(ValueError, match=r"global batch of 6 rows .* 4 processes.*multiple of the world size 4 \(e.g. 4 or 8\)"):
        distributed.shard(batch, rank=0, world_size=4)
    with pytest.raises(ValueError, match="rank must be in 0 … world_size − 1, got rank 2 of world size 2"):
        distributed.shard(batch, rank=2, world_size=2)
    with pytest.raises(ValueError, match=r"share one B.*\[3, 6\]"):
        distributed.shard((batch.x, batch.y[:3]), rank=0, world_size=2)
    with pytest.raises(ValueError, match="timedelta"):
        distributed.init_distributed(timeout=5)
    for name in distributed.TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="sets RANK, WORLD_SIZE but not LOCAL_RANK, MASTER_ADDR, MASTER_PORT.*torchrun"):
        distributed.init_distributed()


if __name__ == "__main__":
    worker(sys.argv[1], Path(sys.argv[2]))
