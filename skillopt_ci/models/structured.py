"""Structured replies: asking a provider for JSON that fits a schema through its own mechanism.

The optimizer's replies must be JSON objects of a known schema. Where a provider can constrain
decoding to a schema, asking it to costs nothing and turns "unusable reply" into a rare event (a
small model's free-form replies were almost never usable). The mode per model
(``structured_output`` in ``skillopt.yml``):

- ``json_schema``: OpenAI / Azure Chat Completions ``response_format: {type: json_schema,
  json_schema: {name, schema, strict: true}}`` (the Responses API: ``text.format``); for
  ``openai-compatible`` servers (vLLM and others) the same without ``strict``;
- ``json_object``: ``response_format: {type: json_object, schema}``, what llama.cpp servers read
  as a grammar;
- ``tool``: Anthropic, a forced call of one tool whose input schema is the reply's schema; the
  call's input is the reply;
- ``off``: nothing is asked; the reply is parsed and, when unusable, asked for once more (as
  before).

``auto`` (the default) picks ``json_schema`` for the OpenAI providers and ``tool`` for
Anthropic. The reply is always validated against the full schema afterwards: providers' strict
modes accept a subset of JSON Schema (:func:`strict_schema` derives it), so constrained decoding
is a help, never the check.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MODES = ("auto", "json_schema", "json_object", "tool", "off")
# Keywords OpenAI's strict mode refuses; the local validation still applies them.
UNSUPPORTED_STRICT = ("allOf", "oneOf", "not", "if", "then", "else", "minLength", "maxLength",
                      "minProperties", "maxProperties", "uniqueItems", "default", "examples", "$schema",
                      "$id", "patternProperties", "dependentRequired", "const")


@dataclass(frozen=True)
class ReplyFormat:
    """The schema a reply must fit, and what the provider is asked for (``mode``, resolved)."""

    name: str
    schema: Mapping[str, Any]
    mode: str = "json_schema"

    def key(self) -> dict[str, Any]:
        """What identifies this request in the response cache."""
        text = json.dumps(self.schema, sort_keys=True, separators=(",", ":"))
        return {"name": self.name, "mode": self.mode, "schema": text}


def resolve_mode(configured: str, provider: str) -> str:
    """The mode ``auto`` stands for at ``provider``; any other value as configured."""
    if configured != "auto":
        return configured
    return "tool" if provider == "anthropic" else "json_schema"


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The strict-mode subset of ``schema``: every object closed with every property required
    (an optional one may be ``null`` instead), keywords strict mode refuses left out, an ``enum``
    of strings typed. :func:`undo_strict` turns a reply back into the original shape."""
    return _strict(copy.deepcopy(dict(schema)))


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: _strict(v) for k, v in node.items() if k not in UNSUPPORTED_STRICT}
    if "enum" in node and "type" not in node and all(isinstance(v, str) for v in node["enum"]):
        node["type"] = "string"
    properties = node.get("properties")
    if isinstance(properties, dict) and (node.get("type") == "object" or "type" not in node):
        required = set(node.get("required", ()))
        for name, prop in properties.items():
            if name not in required:
                properties[name] = _nullable(prop)
        node["required"] = list(properties)
        node["additionalProperties"] = False
        node["type"] = "object"
    return node


def _nullable(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return prop
    kind = prop.get("type")
    if isinstance(kind, str):
        return {**prop, "type": [kind, "null"]} if "enum" not in prop else {**prop, "type": [kind, "null"],
                                                                           "enum": [*prop["enum"], None]}
    return {"anyOf": [prop, {"type": "null"}]}


def undo_strict(text: str, schema: Mapping[str, Any]) -> str:
    """A strict-mode reply in the original shape: the ``null`` of a property that was optional
    is left out. Text that is not JSON is returned as it is (the validation reports it)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    return json.dumps(_undo(data, dict(schema), dict(schema)), ensure_ascii=False)


def _undo(data: Any, node: dict[str, Any], root: dict[str, Any]) -> Any:
    node = _deref(node, root)
    if isinstance(data, dict) and isinstance(node.get("properties"), dict):
        required = set(node.get("required", ()))
        out = {}
        for key, value in data.items():
            if value is None and key not in required:
                continue
            sub = node["properties"].get(key)
            out[key] = _undo(value, sub, root) if isinstance(sub, dict) else value
        return out
    if isinstance(data, list) and isinstance(node.get("items"), dict):
        return [_undo(item, node["items"], root) for item in data]
    return data


def _deref(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return target if isinstance(target, dict) else node
    return node


STRICT_PROVIDERS = ("openai", "azure-openai")  # whose json_schema mode takes "strict": true


def _schema_for(reply: ReplyFormat, provider: str) -> tuple[dict[str, Any], bool]:
    strict = provider in STRICT_PROVIDERS
    return (strict_schema(reply.schema) if strict else dict(reply.schema)), strict


def _tool(reply: ReplyFormat) -> dict[str, Any]:
    return {"name": reply.name, "description": "Give your whole answer as this tool's input.",
            "parameters": dict(reply.schema)}


def chat_fields(reply: ReplyFormat, provider: str) -> dict[str, Any]:
    """Body fields of a Chat Completions request asking for ``reply``."""
    if reply.mode == "tool":
        return {"tools": [{"type": "function", "function": _tool(reply)}],
                "tool_choice": {"type": "function", "function": {"name": reply.name}}}
    if reply.mode == "json_object":
        return {"response_format": {"type": "json_object", "schema": dict(reply.schema)}}
    schema, strict = _schema_for(reply, provider)
    spec: dict[str, Any] = {"name": reply.name, "schema": schema}
    if strict:
        spec["strict"] = True
    return {"response_format": {"type": "json_schema", "json_schema": spec}}


def responses_fields(reply: ReplyFormat, provider: str) -> dict[str, Any]:
    """Body fields of a Responses API request asking for ``reply``."""
    if reply.mode == "tool":
        return {"tools": [{"type": "function", **_tool(reply), "strict": False}],
                "tool_choice": {"type": "function", "name": reply.name}}
    if reply.mode == "json_object":
        return {"text": {"format": {"type": "json_object"}}}
    schema, strict = _schema_for(reply, provider)
    return {"text": {"format": {"type": "json_schema", "name": reply.name, "schema": schema, "strict": strict}}}


def anthropic_fields(reply: ReplyFormat) -> dict[str, Any]:
    """Body fields of a Messages request asking for ``reply``: one forced tool call."""
    return {"tools": [{"name": reply.name, "description": "Give your whole answer as this tool's input.",
                       "input_schema": dict(reply.schema)}],
            "tool_choice": {"type": "tool", "name": reply.name}}


def reply_text(text: str, calls: tuple[Any, ...], reply: ReplyFormat, provider: str) -> tuple[str, tuple[Any, ...]]:
    """The reply's JSON text and the remaining tool calls: a forced call's arguments are the
    reply; a strict reply loses the ``null`` of its optional properties."""
    if reply.mode == "tool":
        forced = [c for c in calls if c.name == reply.name]
        if forced:
            return forced[0].arguments, tuple(c for c in calls if c.name != reply.name)
        return text, calls
    if reply.mode == "json_schema" and provider in STRICT_PROVIDERS:
        return undo_strict(text, reply.schema), calls
    return text, calls
