"""What the notebooks need on top of the library: presets, plots and figures, exercises, the perplexity
leaderboard, the committed benchmark results and the readings computed from a run."""

from . import answers_0608  # noqa: E402,F401  (registers notebooks 06 and 08's exercises in answers.EXERCISES)
