"""The one Trainer, its callbacks, losses, learning-rate schedules and checkpoints.

Nothing here imports a model: models sit below training, and a loss only calls the model it is given.
Putting a model and the Trainer together is a recipe (:mod:`lmlib.recipes`)."""
