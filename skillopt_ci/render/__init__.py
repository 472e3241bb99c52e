"""Pure renderers: markdown helpers and the eval report."""
