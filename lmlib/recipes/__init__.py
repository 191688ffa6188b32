"""Recipes: a model, its data and the one Trainer put together into a whole training run.

The layer above :mod:`lmlib.training`: models know nothing of training, training knows nothing of any
model, and a recipe is where they meet (word2vec's training, ULMFiT's three stages and the pretraining
command line).
"""
