"""Every model of the course, one module per idea, each checked against its paper or a reference library.

A model never imports the training loop: what a loss or a regularizer needs, it exposes (``last_outputs``,
``layer_groups()``), and the training layer above reads it."""
