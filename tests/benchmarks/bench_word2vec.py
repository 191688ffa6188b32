"""lmlib's SGNS against gensim's Word2Vec (C-optimised) on PTB train, same settings, same evaluation.

Run from the repository root:  LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_word2vec.py

Both train skip-gram with negative sampling with the same vector size, window, negatives, epochs,
subsampling threshold and min_count, on the same sentences (PTB train lines, no <eos>). Both are scored
by lmlib.eval.word_eval (which agrees with gensim's own evaluators, see tests/test_word2vec.py). gensim gets
2 worker threads, lmlib 2 PyTorch threads. Results go to lmlib/results/word2vec.json.
"""

from __future__ import annotations

import os
import platform
import time

import gensim
import torch
from common import write_result
from gensim.models import Word2Vec as GensimWord2Vec

from lmlib.data import load_analogies, load_ptb, load_simlex999, load_wordsim353
from lmlib.eval.word_eval import evaluate_analogies, evaluate_word_pairs
from lmlib.models.word2vec import Word2VecConfig
from lmlib.recipes.word2vec import train_word2vec
from lmlib.runtime import seed_everything

SETTINGS = {
    "word2vec defaults (t=1e-3, 5 epochs, d=100)": dict(vector_size=100, window=5, negative=5, sample=1e-3, epochs=5),
    "notebook teach preset (t=1e-4, 2 epochs, d=50, alpha=0.1)": dict(vector_size=50, window=5, negative=5, sample=1e-4,
                                                                     epochs=2, alpha=0.1),
}


def scores(vectors: torch.Tensor, itos) -> dict:
    analogies = evaluate_analogies(vectors, itos, load_analogies())
    simlex = evaluate_word_pairs(vectors, itos, load_simlex999())
    wordsim = evaluate_word_pairs(vectors, itos, load_wordsim353())
    return {"analogy_accuracy": analogies.accuracy, "analogy_coverage": analogies.coverage,
            "simlex_spearman": simlex.spearman, "simlex_coverage": simlex.coverage,
            "wordsim_spearman": wordsim.spearman, "wordsim_coverage": wordsim.coverage}


def main() -> None:
    torch.set_num_threads(2)
    sentences = [line[:-1] for line in load_ptb("train")]  # drop <eos>: sentences bound the windows instead
    results = []
    load_at_start = list(os.getloadavg())
    for name, setting in SETTINGS.items():
        seed_everything(0)
        config = Word2VecConfig(min_count=5, **setting)
        start = time.perf_counter()
        ours = train_word2vec(sentences, config)
        ours_seconds = time.perf_counter() - start
        ours_scores = scores(ours.vectors, ours.vocab.itos)

        start = time.perf_counter()
        gensim = GensimWord2Vec(sentences, sg=1, hs=0, negative=config.negative, window=config.window,
                                vector_size=config.vector_size, epochs=config.epochs, sample=config.sample,
                                min_count=config.min_count, alpha=config.alpha, min_alpha=config.min_alpha,
                                workers=2, seed=0)
        gensim_seconds = time.perf_counter() - start
        gensim_scores = scores(torch.tensor(gensim.wv.vectors), gensim.wv.index_to_key)

        row = {"setting": name, "config": {k: v for k, v in config.__dict__.items()},
               "vocab_size": {"lmlib": len(ours.vocab), "gensim": len(gensim.wv)},
               "lmlib": ours_scores | {"seconds": ours_seconds}, "gensim": gensim_scores | {"seconds": gensim_seconds},
               "ratios_lmlib_over_gensim": {
                   "analogy_accuracy": ours_scores["analogy_accuracy"] / gensim_scores["analogy_accuracy"],
                   "simlex_spearman": ours_scores["simlex_spearman"] / gensim_scores["simlex_spearman"],
                   "wordsim_spearman": ours_scores["wordsim_spearman"] / gensim_scores["wordsim_spearman"],
                   "wall_time": ours_seconds / gensim_seconds}}
        results.append(row)
        print(f"\n{name}   (vocab {len(ours.vocab)} vs {len(gensim.wv)})")
        print(f"{'':18}{'lmlib':>10}{'gensim':>10}{'ratio':>8}")
        for key in ("analogy_accuracy", "simlex_spearman", "wordsim_spearman"):
            print(f"{key:18}{ours_scores[key]:10.4f}{gensim_scores[key]:10.4f}{row['ratios_lmlib_over_gensim'][key]:8.2f}")
        print(f"{'seconds':18}{ours_seconds:10.1f}{gensim_seconds:10.1f}{row['ratios_lmlib_over_gensim']['wall_time']:8.2f}")
        print(f"coverage: analogies {ours_scores['analogy_coverage']:.3f}, SimLex {ours_scores['simlex_coverage']:.3f}, "
              f"WordSim {ours_scores['wordsim_coverage']:.3f}", flush=True)
        write(results, load_at_start)



def write(results: list, load_at_start: list) -> None:
    """Write after every setting, so a run cut short still leaves what it measured."""
    meta = {"corpus": "PTB train (887,521 words, 42,068 sentences)", "threads": 2, "torch": torch.__version__,
            "gensim": gensim.__version__, "python": platform.python_version(),
            "machine": f"{platform.machine()}, 2 cores shared with other jobs (see load averages)",
            "load_average_at_start": load_at_start, "load_average_now": list(os.getloadavg())}
    write_result("word2vec", {"meta": meta, "results": results})


if __name__ == "__main__":
    main()
