"""The pull-request gate: changed skills from git, paired verdicts, the gate report."""
