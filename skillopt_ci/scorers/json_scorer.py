"""JSON scorer: the output is JSON (``valid``), matches a JSON Schema (``schema``), or has the
expected values in chosen fields (``fields``, partial credit)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import clip, quote
from skillopt_ci.scorers.base import Score, Scorer, require_expected

MODES = ("valid", "schema", "fields")
_FENCE = re.compile(r"```[ \t]*(?:jsonc?|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, else a fenced block, else the first object or
    array that parses. Raises ``ValueError`` saying why nothing parsed."""
    decoder = json.JSONDecoder()
    try:
        return json.loads(text.strip())
    except json.JSONDecodeError as exc:
        first_error = exc
    for block in _FENCE.findall(text):
        try:
            return json.loads(block.strip())
        except json.JSONDecodeError as exc:
            first_error = exc
            break
    for m in re.finditer(r"[\[{]", text):
        try:
            return decoder.raw_decode(text, m.start())[0]
        except json.JSONDecodeError:
            continue
    raise ValueError(str(first_error))


def lookup(data: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` for a key, or a dotted path like ``items.0.price``."""
    if isinstance(data, dict) and path in data:
        return True, data[path]
    for part in path.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return False, None
    return True, data


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1``; floats compared to 1e-9."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    kinds = {list: "an array", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), "null")


def _show(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False), 40)


@dataclass(frozen=True)
class JsonOptions:
    mode: str | None = None  # default: "schema" with a schema, "fields" with fields, else "valid"
    schema: dict[str, Any] | None = None
    schema_file: str | None = None  # relative to the suite directory; JSON or YAML
    fields: tuple[str, ...] | None = None  # default: every key of task.expected


class JsonScorer(Scorer):
    name = "json"
    Options = JsonOptions

    def setup(self) -> None:
        o = self.options
        has_schema = o.schema is not None or o.schema_file is not None
        self.mode = o.mode or (
            "schema" if has_schema else "fields" if o.fields is not None else "valid"
        )
        if self.mode not in MODES:
            raise self.error(f'unknown mode "{self.mode}"; allowed: {", ".join(MODES)}')
        if has_schema and self.mode != "schema":
            raise self.error('options "schema" and "schema_file" need mode "schema"')
        if o.fields is not None and self.mode != "fields":
            raise self.error('option "fields" needs mode "fields"')
        if self.mode == "schema":
            if (o.schema is None) == (o.schema_file is None):
                raise self.error('mode "schema" needs exactly one of "schema" or "schema_file"')
            self.validator = self._validator(o.schema if o.schema is not None else self._load())

    def _load(self) -> Any:
        import yaml

        path = self.suite_dir / str(self.options.schema_file)
        try:
            text = path.read_text(encoding="utf-8")
            return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
        except FileNotFoundError:
            raise self.error("schema file not found", where=str(path)) from None
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise self.error(
                f"cannot read schema file: {clip(str(exc), 120)}", where=str(path)
            ) from exc

    def _validator(self, schema: Any) -> Any:
        import jsonschema

        where = str(self.suite_dir / self.options.schema_file) if self.options.schema_file else None
        if not isinstance(schema, (dict, bool)):
            raise self.error("a JSON Schema must be an object", where=where)
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise self.error(
                f"invalid JSON Schema at {exc.json_path}: {clip(exc.message, 120)}", where=where
            ) from exc
        return cls(schema, format_checker=cls.FORMAT_CHECKER)

    def score(self, output: str, task: Task) -> Score:
        try:
            data = extract_json(output)
        except ValueError as exc:
            return Score.binary(False, f"output is not valid JSON ({exc}); got {quote(output)}")
        if self.mode == "valid":
            return Score.binary(True, "output is valid JSON")
        if self.mode == "schema":
            return self._schema(data)
        return self._fields(data, task)

    def _schema(self, data: Any) -> Score:
        import jsonschema

        errors = list(self.validator.iter_errors(data))
        if not errors:
            return Score.binary(True, "output matches the JSON Schema")
        best = jsonschema.exceptions.best_match(errors)
        more = f" (+{len(errors) - 1} more schema errors)" if len(errors) > 1 else ""
        return Score.binary(False, f"{best.json_path}: {clip(best.message, 160)}{more}")

    def _fields(self, data: Any, task: Task) -> Score:
        expected = require_expected(task, self.name)
        if not isinstance(expected, dict):
            raise InputError(
                f'task "{task.id}": json mode "fields" needs "expected" to be an object',
                where=task.source or None,
            )
        if not isinstance(data, dict):
            return Score(
                0.0, False, f"output JSON is {_kind(data)}, expected an object: {_show(data)}"
            )
        names = list(self.options.fields) if self.options.fields is not None else list(expected)
        problems = []
        for name in names:
            found, want = lookup(expected, name)
            if not found:
                raise InputError(
                    f'task "{task.id}": field "{name}" is not in "expected"',
                    where=task.source or None,
                )
            found, got = lookup(data, name)
            if not found:
                problems.append(f'missing key "{name}"')
            elif not same(got, want):
                problems.append(f'"{name}": expected {_show(want)}, got {_show(got)}')
        if not names:
            return Score.binary(True, "no fields to compare")
        right = len(names) - len(problems)
        if not problems:
            return Score(1.0, True, f"all {len(names)} fields match")
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        feedback = f"{right}/{len(names)} fields match: {'; '.join(problems[:3])}{more}"
        return Score(right / len(names), False, feedback)
