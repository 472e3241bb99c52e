"""Prompt templates shipped in this folder: load them and fill their ``{{name}}`` placeholders
(with the one renderer, :mod:`skillopt_ci.core.template`).

A template may start with an HTML comment documenting its placeholders; it is removed before the
prompt is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib.resources import files

from skillopt_ci.core.template import render

_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.DOTALL)


def strip_leading_comment(template: str) -> str:
    """A template without the HTML comment that documents it, if it starts with one."""
    return _LEADING_COMMENT.sub("", template, count=1)


@cache
def load_template(name: str) -> str:
    """The template ``name`` (e.g. ``"reflect_failures.md"``) without its leading comment."""
    return strip_leading_comment((files("skillopt_ci") / "prompts" / name).read_text(encoding="utf-8"))


def render_template(name: str, values: Mapping[str, object]) -> str:
    """The shipped template ``name`` filled by :func:`skillopt_ci.core.template.render`."""
    return render(load_template(name), values)
