"""The sampled softmax against the exact one, in one process: training tokens per second of the AWD-LSTM of ULMFiT's
stage (b) (its GPU-staged checkpoint: 16,001 words, 200/256, 3 layers, tied) and of the ELMo biLM (the shipped config),
at 1 and 2 threads, and the held-out perplexity (exact) after the same number of training tokens each way.

Speed: the two losses take turns, a block of steps each, for ``--rounds`` rounds, and the ratio is the median of the
rounds' ratios, so work elsewhere on the machine slows both alike. Perplexity: the stage (b) LM trained on for
``--tokens`` review tokens from its checkpoint with each loss (same seed, batches, rate), then measured on the first
``--heldout`` held-out review tokens; the biLM trained from its random init for ``--bilm-tokens`` tokens each way.

    python tests/benchmarks/bench_sampled_softmax.py   # writes lmlib/results/sampled_softmax.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import torch
from common import machine, write_result

from lmlib.recipes import elmo, ulmfit
from lmlib.text.batching import batchify, bptt_batches
from lmlib.training.callbacks import GradientClipping
from lmlib.training.objectives import StatefulLMLoss
from lmlib.training.sampled_softmax import SampledSoftmax, unigram_proposal
from lmlib.training.trainer import Trainer

STAGE_B = ulmfit._repo_path(ulmfit.IMDB_CPU["recipe"]["start"])
NEGATIVES = {"awd_lstm": ulmfit.IMDB_CPU["recipe"]["sampled"], "bilm": elmo.PRETRAIN_CPU["recipe"]["sampled"]}
POWER = ulmfit.IMDB_CPU["recipe"]["proposal_power"]


def awd_setup(reviews: int):
    """The stage (b) LM, its training windows (32 x 70, as the cpu preset) and held-out stream, the proposal."""
    lm, vocab = ulmfit.load_pretrained(STAGE_B, **ulmfit.IMDB_RECIPE["dropouts"])
    texts, held_out = ulmfit.imdb_lm_texts(train_reviews=reviews)
    train = ulmfit.review_stream(vocab, texts)
    held = ulmfit.review_stream(vocab, held_out)
    windows = list(bptt_batches(batchify(train, 32), 70))
    return lm, windows, held, unigram_proposal(torch.bincount(train, minlength=len(vocab)), POWER)


def bilm_setup(reviews: int):
    """A biLM of the shipped config at random init, batches of 128 sentences (as the cpu preset), the proposal."""
    train, valid = elmo.unsup_sentences(train_reviews=reviews)
    vocab = elmo.target_vocab(train)
    counts = Counter(w.lower() for s in train for w in s)
    freq = [counts.get(w, 0) for w in vocab.itos]
    freq[vocab.stoi[elmo.UNK]] += sum(len(s) for s in train) - sum(counts[w] for w in vocab.itos if w in counts)
    freq[vocab.stoi[elmo.BOS]] = freq[vocab.stoi[elmo.EOS]] = len(train)
    torch.manual_seed(0)
    model = elmo.BiLM(elmo.BiLMConfig(vocab_size=len(vocab), **elmo.PRETRAIN_CONFIG))
    return model, train, valid[:500], vocab, unigram_proposal(torch.tensor(freq), POWER)


def speed(make_trainer, batches, rounds: int, block: int) -> dict:
    """Tokens per second of each loss, taking turns a block at a time; ``make_trainer(loss)`` -> (trainer, tokens of
    a batch)."""
    per = {"exact": [], "sampled": []}
    trainers = {name: make_trainer(name) for name in per}
    for trainer, _ in trainers.values():  # warm-up
        for batch in batches[:2]:
            trainer.train_step(batch)
    for r in range(rounds):
        for name, (trainer, count) in trainers.items():
            chunk = batches[(r * block) % len(batches):][:block]
            start = time.perf_counter()
            for batch in chunk:
                trainer.train_step(batch)
            per[name].append(sum(count(b) for b in chunk) / (time.perf_counter() - start))
    ratios = [s / e for s, e in zip(per["sampled"], per["exact"])]
    return {"exact_tokens_per_s": statistics.median(per["exact"]),
            "sampled_tokens_per_s": statistics.median(per["sampled"]), "ratio": statistics.median(ratios),
            "round_ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=int, default=6, help="steps of one loss before the other takes its turn")
    parser.add_argument("--tokens", type=int, default=400_000, help="stage (b) training tokens for the perplexity")
    parser.add_argument("--heldout", type=int, default=60_000)
    parser.add_argument("--bilm-tokens", type=int, default=200_000)
    parser.add_argument("--reviews", type=int, default=3000, help="training reviews read (the batches come from them)")
    args = parser.parse_args()
    for name in ("rounds", "block", "tokens", "heldout", "bilm_tokens", "reviews"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    out = {"settings": vars(args), "negatives": NEGATIVES, "proposal": f"unigram ** {POWER}",
           "stage_b_checkpoint": str(STAGE_B.relative_to(STAGE_B.parents[2])), "speed": {}, "perplexity": {}}

    lm, windows, held, q_awd = awd_setup(args.reviews)
    start_state = {k: v.clone() for k, v in lm.state_dict().items()}
    model, sentences, valid, vocab, q_bilm = bilm_setup(args.reviews)
    bilm_start = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(0)
    bilm_batches = [elmo.encode_batch([sentences[i] for i in torch.randint(0, len(sentences), (128,), generator=g)],
                                      vocab) for _ in range(args.rounds * args.block + 2)]

    def awd_trainer(name):
        lm.load_state_dict(start_state)
        sampled = SampledSoftmax(q_awd, NEGATIVES["awd_lstm"]) if name == "sampled" else None
        opt = torch.optim.Adam(lm.parameters(), 1e-3, betas=(0.8, 0.99))
        return Trainer(lm, opt, StatefulLMLoss(1, sampled), [GradientClipping(0.5)]), lambda b: b.x.numel()

    def bilm_trainer(name):
        model.load_state_dict(bilm_start)
        loss = elmo.bilm_objective(SampledSoftmax(q_bilm, NEGATIVES["bilm"]) if name == "sampled" else None)
        opt = torch.optim.Adam(model.parameters(), 3e-3)
        return Trainer(model, opt, loss, [GradientClipping(1.0)]), lambda b: int((b[1] != 0).sum())

    for threads in (1, 2):
        torch.set_num_threads(threads)
        out["speed"][f"awd_lstm_{threads}_threads"] = speed(awd_trainer, windows, args.rounds, args.block)
        out["speed"][f"bilm_{threads}_threads"] = speed(bilm_trainer, bilm_batches, args.rounds, args.block)
        print({k: round(v["ratio"], 2) for k, v in out["speed"].items()}, flush=True)

    torch.set_num_threads(2)
    steps = args.tokens // (32 * 70)
    lm.load_state_dict(start_state)
    out["perplexity"]["awd_lstm_before"] = ulmfit.evaluate_lm(lm, held[: args.heldout])
    for name in ("exact", "sampled"):
        torch.manual_seed(0)
        trainer, _ = awd_trainer(name)
        trainer.fit(windows[:steps])
        out["perplexity"][f"awd_lstm_{name}"] = ulmfit.evaluate_lm(lm, held[: args.heldout])
        print(name, out["perplexity"], flush=True)
    bilm_steps = max(1, args.bilm_tokens // 2700)
    g = torch.Generator().manual_seed(1)
    for name in ("exact", "sampled"):
        torch.manual_seed(0)
        trainer, _ = bilm_trainer(name)
        trainer.fit([elmo.encode_batch([sentences[i] for i in torch.randint(0, len(sentences), (128,), generator=g)],
                                       vocab) for _ in range(bilm_steps)])
        g = torch.Generator().manual_seed(1)
        metrics = elmo.evaluate_bilm(model, valid, vocab)
        out["perplexity"][f"bilm_{name}"] = {"forward": metrics["forward_ppl"], "backward": metrics["backward_ppl"]}
        print(name, out["perplexity"], flush=True)
    out.update(awd_lstm_training_tokens=steps * 32 * 70, bilm_steps=bilm_steps, machine=machine("torch"))
    write_result("sampled_softmax", out)


if __name__ == "__main__":
    main()
