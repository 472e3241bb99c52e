"""Skill × tasks × repeats: the runner, evaluations, run directories, locks, merging shards."""
