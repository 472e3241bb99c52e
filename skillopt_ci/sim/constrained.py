"""What a provider's constrained decoding does to a reply, played by the scripted server.

A request that forces one tool (OpenAI ``tool_choice: {type: function, function: {name}}``, the
Responses ``{type: function, name}``, Anthropic ``{type: tool, name}``) gets that tool's call,
whose arguments are the JSON object in the policy's text. A request with a JSON response format
(``response_format`` ``json_schema`` / ``json_object``, the Responses ``text.format``) gets only
the JSON object of the policy's text, without the prose around it. A policy that already
answers with tool calls, or whose text holds no JSON object, is left as it is (a real server
would have produced something; what matters in the tests is that the client asked).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from skillopt_ci.sim.protocols import ScriptedReply, ScriptedToolCall


def forced_tool(params: dict[str, Any]) -> str | None:
    """The tool a request forces, or None."""
    choice = params.get("tool_choice")
    if not isinstance(choice, dict):
        return None
    if choice.get("type") == "tool":
        return choice.get("name")
    if choice.get("type") == "function":
        function = choice.get("function")
        return function.get("name") if isinstance(function, dict) else choice.get("name")
    return None


def json_format(params: dict[str, Any]) -> str | None:
    """``json_schema`` or ``json_object`` when the request asks for a JSON reply, else None."""
    fmt = params.get("response_format")
    if not isinstance(fmt, dict):
        text = params.get("text")
        fmt = text.get("format") if isinstance(text, dict) else None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    return kind if kind in ("json_schema", "json_object") else None


def first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def constrain(params: dict[str, Any], reply: ScriptedReply) -> ScriptedReply:
    """``reply`` as the provider would have sent it under the request's constraints."""
    if reply.tool_calls:
        return reply
    found = first_object(reply.text)
    if found is None:
        return reply
    tool = forced_tool(params)
    if tool:
        return replace(reply, text="", tool_calls=(ScriptedToolCall(tool, found),), finish_reason="tool_calls")
    if json_format(params):
        return replace(reply, text=json.dumps(found, ensure_ascii=False))
    return reply
