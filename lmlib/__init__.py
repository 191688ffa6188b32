"""lmlib: language models from n-grams to BERT, written from scratch to be read.

The package behind the notebook course in ``notebooks/``. Start with :mod:`lmlib.data` (verified
datasets), :class:`lmlib.vocab.Vocab`, :mod:`lmlib.batching` and :class:`lmlib.trainer.Trainer`.
"""

from .presets import choose
from .runtime import pick_device, seed_everything
from .trainer import BatchResult, Callback, EvalResult, Trainer
from .vocab import Vocab

__version__ = "0.1.0"
__all__ = ["BatchResult", "Callback", "EvalResult", "Trainer", "Vocab", "choose", "pick_device", "seed_everything"]
