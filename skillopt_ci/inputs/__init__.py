"""Files in, validated: the config, suites, skills on disk, JSON Schemas, the example project."""
