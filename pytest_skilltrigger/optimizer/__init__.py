"""Description optimisation: split, proposals from a model, and the improvement loop."""
