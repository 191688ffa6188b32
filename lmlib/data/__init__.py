"""Verified datasets: a registry of pinned sources and sha256 sums, a cache, and loaders.

>>> from lmlib import data
>>> train = data.load_ptb("train")          # list of token lists, each ending in "<eos>"
>>> texts, labels = data.load_rt_polarity()
>>> texts, labels = data.load_imdb("test")     # 25,000 reviews, <br /> turned into newlines
>>> tagged = data.load_ud_pos("dev")           # 2,001 sentences of (word, UPOS) pairs
"""

from .loaders import (
    UNLABELLED,
    Analogy,
    LabelledTexts,
    RatedTexts,
    WordPair,
    load_analogies,
    load_eng_fra,
    load_imdb,
    load_ptb,
    load_rt_polarity,
    load_simlex999,
    load_sst2,
    load_time_machine,
    load_tiny_shakespeare,
    load_ud_pos,
    load_wordsim353,
    parse_conllu_pos,
)
from .registry import DATASETS, DataFile, Dataset, Packed, data_file, dataset
from .store import DataError, data_dir, fetch, fetch_dataset, path, read_verified, sha256_of, verify

__all__ = [
    "Analogy", "DATASETS", "DataError", "DataFile", "Dataset", "LabelledTexts", "Packed",
    "RatedTexts", "UNLABELLED", "WordPair", "data_dir", "data_file", "dataset", "fetch", "fetch_dataset",
    "load_analogies", "load_eng_fra", "load_imdb", "load_ptb", "load_rt_polarity", "load_simlex999",
    "load_sst2", "load_time_machine", "load_tiny_shakespeare", "load_ud_pos", "load_wordsim353",
    "parse_conllu_pos", "path", "read_verified", "sha256_of", "verify",
]
