"""What the notebooks need on top of the library: presets, plots, exercises, the perplexity leaderboard."""
