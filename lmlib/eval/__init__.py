"""Evaluation: BLEU and chrF for translation, word-vector benchmarks, zero- and few-shot prompting, scaling-law fits."""
