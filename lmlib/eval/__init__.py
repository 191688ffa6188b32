"""Metrics: BLEU and chrF for translation, word-vector benchmarks."""
