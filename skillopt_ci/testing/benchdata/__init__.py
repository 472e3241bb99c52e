"""Tiny datasets in each benchmark's upstream format, and the simulated target that answers them.

One module per benchmark: ``write_fixture(dest, manifest=None) -> Path`` writes the data a user
would pass to ``bench import --from`` (a few items, or one per id of ``manifest``), and
``policy(request)`` answers the imported tasks on the scripted model server, right on some and
wrong on others.
"""
