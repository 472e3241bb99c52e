"""One folder per benchmark (its importer, scorers, environments and demo fixture), each
described by the ``PACK`` of its ``__init__.py`` and registered by one line in
``skillopt_ci.benchmarks.BENCHMARKS``."""
