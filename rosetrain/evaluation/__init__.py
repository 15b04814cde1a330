"""Running a model over a split: predictions that survive interrupts, then the score."""
