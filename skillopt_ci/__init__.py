"""skillopt-ci: treat an agent's skill document as trainable weights, in CI."""

__version__ = "0.1.0"
