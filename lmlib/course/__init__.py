"""What the notebooks need on top of the library: presets, plots and figures, exercises, the perplexity
leaderboard, the committed benchmark results and the readings computed from a run."""
