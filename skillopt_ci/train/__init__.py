"""Training: the trainer loop, its state and records, the optimizer, reports and the PR body."""
