"""YAML documents that remember where things are, and JSON Schema validation with good messages.

Errors name the file, the line and the path inside the document (``skills[1].suite``), so a user
can go straight to the problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.text import cut

PathParts = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, located as precisely as we can. ``level`` is
    ``error`` (the input cannot be used) or ``warning`` (usable, but probably not what was meant;
    ``--strict`` makes it an error)."""

    file: str
    message: str
    path: str = ""
    line: int | None = None
    level: str = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"

    @property
    def is_warning(self) -> bool:
        return self.level == "warning"

    def to_error(self, hint: str | None = None) -> InputError:
        where = f"{self.file}:{self.line}" if self.line else self.file
        msg = f"{self.path}: {self.message}" if self.path else self.message
        return InputError(msg, where=where, hint=hint)


@dataclass(frozen=True)
class YamlDoc:
    """Parsed data plus the node tree used to find line numbers."""

    file: str
    data: Any
    root: yaml.Node | None

    def line_of(self, path: PathParts) -> int | None:
        """1-based line of the value at ``path`` (or of its nearest existing ancestor)."""
        node = self.root
        line = node.start_mark.line + 1 if node is not None else None
        for part in path:
            child = _child(node, part)
            if child is None:
                break
            node = child
            line = node.start_mark.line + 1
        return line

    def problem(self, path: PathParts, message: str) -> Problem:
        return Problem(self.file, message, format_path(path), self.line_of(path))


def _child(node: yaml.Node | None, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == part:
                return value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part]
    return None


def format_path(path: PathParts) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_yaml(path: Path, display: str | None = None) -> YamlDoc:
    """Read a YAML file. Raises :class:`InputError` with file and line on a syntax error."""
    shown = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", where=shown) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", where=shown) from None
    return parse_yaml(text, shown)


def parse_yaml(text: str, file: str) -> YamlDoc:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else file
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"not valid YAML: {problem}", where=where) from None
    return YamlDoc(file=file, data=data, root=root)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A JSON Schema shipped in ``skillopt_ci/inputs/schemas/``."""
    text = resources.files("skillopt_ci.inputs.schemas").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def schema_validator(name: str) -> Any:
    """A Draft 2020-12 validator for one of our schemas; references between them (by file name,
    e.g. ``summary.schema.json``) resolve locally, never over the network."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    names = [p.name for p in resources.files("skillopt_ci.inputs.schemas").iterdir() if p.name.endswith(".schema.json")]
    registry: Registry = Registry()
    for other in names:
        schema = load_schema(other)
        resource = Resource.from_contents(schema)
        registry = registry.with_resources([(schema["$id"], resource), (other, resource)])
    return Draft202012Validator(load_schema(name), registry=registry)


def schema_problems(doc: YamlDoc, schema_name: str) -> list[Problem]:
    """Every JSON Schema violation of ``doc``, in document order, with readable messages."""
    validator = schema_validator(schema_name)
    problems = []
    for err in validator.iter_errors(doc.data):
        path = tuple(err.absolute_path)
        problems.append(doc.problem(path, _describe(err)))
    problems.sort(key=lambda p: (p.line or 0, p.path))
    return problems


def _describe(err: Any) -> str:
    """Turn a jsonschema error into a sentence that says what is allowed. A message quotes the
    input (a key pasted into the wrong field): it is redacted before it is cut."""
    v = err.validator
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        return f"unknown key {', '.join(map(repr, extra))}; allowed keys: {', '.join(allowed)}"
    if v == "enum":
        shown = [str(v) for v in err.validator_value if isinstance(v, str)] or list(map(str, err.validator_value))
        return f"{err.instance!r} is not one of: {', '.join(shown)}"
    if v == "required":
        return err.message.replace("is a required property", "is required")
    if v == "type":
        expected = err.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return cut(f"expected {expected}, got {type(err.instance).__name__} {err.instance!r}", 200)
    if v in ("oneOf", "anyOf") and isinstance(err.instance, dict) and "type" in err.instance:
        return cut(f"invalid settings for type {err.instance['type']!r}: {err.message}", 300)
    return cut(err.message, 300)
