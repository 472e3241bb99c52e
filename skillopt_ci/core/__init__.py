"""Pure functions over typed records: tasks, skills, edits, results, statistics, comparisons."""
