"""Settings for every pytest run, unit tests and notebooks alike (nbval starts each kernel with this environment).

It sits at the repository root so that `pytest notebooks/03_rnn_lstm.ipynb` gets the same settings as the full run.
"""

import os

# A from_pretrained call would otherwise wait ~30 s on the network before failing.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Notebooks are tested in the preset a class would run live.
os.environ.setdefault("LMLIB_PRESET", "teach")
# Progress bars are noise in stored outputs.
os.environ.setdefault("TQDM_DISABLE", "1")

# Beside a checkout laid out as in CI (../shared/data next to the repository), use that mirror by default.
_MIRROR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shared", "data")
if "LMLIB_DATA_DIR" not in os.environ and os.path.isfile(os.path.join(_MIRROR, "manifest.json")):
    os.environ["LMLIB_DATA_DIR"] = os.path.abspath(_MIRROR)
