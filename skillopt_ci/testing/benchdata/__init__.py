"""Tiny datasets in each benchmark's upstream format, and a simulated target for each.

One module per benchmark (``<name>.py``), each with ``write_fixture(dest, manifest=None) -> Path``
(the path ``bench import --from`` takes) and ``policy(request)`` (deterministic: right on some
fixture tasks, wrong on others). ``skillopt-ci demo --benchmark NAME`` and the tests use them.
"""
