"""Tiny datasets in each benchmark's upstream format, and simulated targets for them: one module
per benchmark (``write_fixture(dest, manifest=None)`` and ``policy(request)``)."""
