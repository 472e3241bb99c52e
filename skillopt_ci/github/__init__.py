"""GitHub integration: the Action's entry point and the adapters it uses (runner files, PyGithub)."""
