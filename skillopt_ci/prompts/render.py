"""Prompt templates shipped in this folder: load them and fill their ``{{name}}`` placeholders.

A template may start with an HTML comment documenting its placeholders; it is removed before the
prompt is sent. Filling is one pass: text inserted for a placeholder is never expanded again, so
untrusted text that happens to contain ``{{...}}`` stays as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib.resources import files

PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.DOTALL)


def strip_leading_comment(template: str) -> str:
    """A template without the HTML comment that documents it, if it starts with one."""
    return _LEADING_COMMENT.sub("", template, count=1)


@cache
def load_template(name: str) -> str:
    """The template ``name`` (e.g. ``"reflect_failures.md"``) without its leading comment."""
    return strip_leading_comment((files("skillopt_ci") / "prompts" / name).read_text(encoding="utf-8"))


def placeholders(template: str) -> set[str]:
    return set(PLACEHOLDER.findall(template))


def render(template: str, values: Mapping[str, object]) -> str:
    """Fill every placeholder; a placeholder without a value is a ``KeyError`` naming it (a bug
    in the template or its caller, not an input problem). Extra values are ignored."""
    missing = placeholders(template) - set(values)
    if missing:
        raise KeyError(f"no value for template placeholder(s) {sorted(missing)}")
    return PLACEHOLDER.sub(lambda m: str(values[m[1]]), template)


def render_template(name: str, values: Mapping[str, object]) -> str:
    return render(load_template(name), values)
