"""Verified datasets: a registry of pinned sources and sha256 sums, a cache, and loaders.

>>> from lmlib import data
>>> train = data.load_ptb("train")          # list of token lists, each ending in "<eos>"
>>> texts, labels = data.load_rt_polarity()
"""

from .loaders import (
    LOADERS,
    Analogy,
    LabelledTexts,
    WordPair,
    load,
    load_analogies,
    load_eng_fra,
    load_ptb,
    load_rt_polarity,
    load_simlex999,
    load_sst2,
    load_time_machine,
    load_tiny_shakespeare,
    load_wordsim353,
)
from .registry import DATASETS, DataFile, Dataset, data_file, dataset
from .store import DataError, data_dir, fetch, fetch_dataset, path, sha256_of, verify

__all__ = [
    "Analogy", "DATASETS", "DataError", "DataFile", "Dataset", "LOADERS", "LabelledTexts", "WordPair",
    "data_dir", "data_file", "dataset", "fetch", "fetch_dataset", "load", "load_analogies", "load_eng_fra",
    "load_ptb", "load_rt_polarity", "load_simlex999", "load_sst2", "load_time_machine",
    "load_tiny_shakespeare", "load_wordsim353", "path", "sha256_of", "verify",
]
