"""The one Trainer, its callbacks, losses, learning-rate schedules, checkpoints and runtime settings.

Nothing here imports a model: models sit below training."""
