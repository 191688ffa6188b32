"""Every model of the course, one module per idea, each checked against its paper or a reference library."""
