"""The response-cache modes, defined once: the config, the cache and the ``--cache`` options all
read this tuple (the config schema's enum is checked against it in the tests).

``read-write`` (default), ``refresh`` (never read, always write), ``off``, and ``replay-only``
(read; a miss is an error). Kept apart from the cache itself so that the CLI can offer the choices
without importing sqlite or YAML at start-up.
"""

CACHE_MODES = ("read-write", "refresh", "off", "replay-only")
