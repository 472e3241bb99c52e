"""Typed options (scorers, environments): each declares a frozen dataclass; unknown keys are rejected.

Supported field types: ``bool``, ``int``, ``float`` (an int is accepted), ``str``,
``tuple[str, ...]`` (written as a YAML/JSON list), ``dict[str, Any]``, ``Any`` and ``X | None``.
A field without a default is required.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from skillopt_ci.core.errors import InputError


@dataclasses.dataclass(frozen=True)
class NoOptions:
    pass


def options_to_dict(options: Any) -> dict[str, Any]:
    """The options as plain JSON-ready values (tuples become lists)."""
    values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def parse_options(cls: type, raw: dict[str, Any], scorer: str, where: str | None = None) -> Any:
    """Build ``cls(**raw)`` after checking every key and value type; ``InputError`` otherwise.

    ``scorer`` names the owner in messages: a scorer type (``exact`` → ``scorer "exact"``) or a
    phrase naming something else (``environment tools``), used as it is."""
    owner = scorer if " " in scorer else f'scorer "{scorer}"'
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    allowed = ", ".join(fields) or "(none)"
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in fields:
            raise InputError(
                f'unknown option "{key}" for {owner}; allowed options: {allowed}',
                where=where,
            )
        ok, converted = _check(hints[key], value)
        if not ok:
            raise InputError(
                f'option "{key}" of {owner} must be {_describe(hints[key])}, '
                f"got {type(value).__name__} {value!r:.60}",
                where=where,
            )
        values[key] = converted
    for name, f in fields.items():
        missing = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if missing and name not in values:
            raise InputError(f'{owner} needs option "{name}"', where=where)
    return cls(**values)


def _check(hint: Any, value: Any) -> tuple[bool, Any]:
    if hint is Any:
        return True, value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(hint):
            ok, converted = _check(arm, value)
            if ok:
                return True, converted
        return False, value
    if hint is type(None):
        return value is None, value
    if hint is bool:
        return isinstance(value, bool), value
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if hint is str:
        return isinstance(value, str), value
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, (list, tuple)):
            return False, value
        checked = [_check(item, v) for v in value]
        return all(ok for ok, _ in checked), tuple(v for _, v in checked)
    if origin is dict or hint is dict:
        return isinstance(value, dict), value
    raise TypeError(f"unsupported option type {hint!r}")


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if origin is tuple:
        return f"a list of {_describe(typing.get_args(hint)[0]).split(' ', 1)[1]}s"
    if origin is dict or hint is dict:
        return "a mapping"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, str(hint))
