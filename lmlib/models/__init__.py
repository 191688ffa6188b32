"""Every model of the course, one module per idea, each checked against its paper or a reference library.

A model never imports the training loop: what a loss or a regularizer needs, it exposes (``last_outputs``,
``layer_groups()``), and the training layer above reads it. Each module's ``check_inputs`` refuses bad input where it
enters (a recipe, a notebook's helper), saying what to do; the forwards check nothing, so they never read a value
back from the device."""
