"""The one ``{{ placeholder }}`` renderer: suite prompts (filled from a task's fields) and the
prompts shipped for the judge and the optimizer (filled from a mapping) both use it. Pure.

A placeholder is a name, optionally dotted (``{{ input.ticket }}``), with optional spaces inside
the braces. Filling is one pass: text inserted for a placeholder is never expanded again, so
untrusted text that happens to contain ``{{...}}`` stays as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}\}")


def placeholders(template: str) -> list[str]:
    """The placeholder names of ``template``, each once, in order of first appearance."""
    return list(dict.fromkeys(PLACEHOLDER.findall(template)))


def fill(template: str, value: Callable[[str], str]) -> str:
    """Replace each placeholder with ``value(name)``; whatever ``value`` raises propagates."""
    return PLACEHOLDER.sub(lambda match: value(match[1]), template)


def render(template: str, values: Mapping[str, object]) -> str:
    """Fill every placeholder with ``str(values[name])``; a placeholder without a value is a
    ``KeyError`` naming it (a bug in the template or its caller, not an input problem). Extra
    values are ignored."""
    missing = set(placeholders(template)) - set(values)
    if missing:
        raise KeyError(f"no value for template placeholder(s) {sorted(missing)}")
    return fill(template, lambda name: str(values[name]))
