"""lmlib: language models from n-grams to BERT, written from scratch to be read.

The package behind the notebook course in ``notebooks/``. Start with :mod:`lmlib.data` (verified
datasets), :class:`lmlib.text.vocab.Vocab`, :mod:`lmlib.text.batching` and :class:`lmlib.training.trainer.Trainer`.
"""

from .course.presets import choose
from .runtime import eval_mode, pick_device, seed_everything
from .text.vocab import Vocab
from .training.trainer import BatchResult, Callback, EvalResult, Trainer

__version__ = "0.1.0"
__all__ = ["BatchResult", "Callback", "EvalResult", "Trainer", "Vocab", "choose", "eval_mode", "pick_device", "seed_everything"]
