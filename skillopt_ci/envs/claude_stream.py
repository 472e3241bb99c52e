"""Claude Code's ``--output-format stream-json --verbose`` output as trajectory steps. Pure.

The CLI prints one JSON object a line:

- ``system``/``init``: the session's set-up; its ``skills`` list is what the agent was shown (the
  names and descriptions reach the model, the bodies do not) → one ``observation`` step naming them;
- ``assistant``: one model message; ``text`` blocks → ``model`` steps, ``tool_use`` blocks →
  ``tool_call`` steps (arguments as JSON text);
- ``user``: ``tool_result`` blocks → ``tool_result`` steps (``is_error`` as the CLI says: a
  non-zero exit, a refused permission, a tool error); other text (the body of a skill the agent
  loaded with the ``Skill`` tool arrives this way) → ``observation`` steps;
- ``system``/``permission_denied``: a tool the permission settings refused → an ``error`` step;
- ``result``: the end: ``result`` (the final message), ``is_error``, ``num_turns``,
  ``total_cost_usd``, ``usage``, ``permission_denials`` (each an ``error`` step unless already
  reported), ``subtype`` (``error_max_turns`` …) and ``errors``; its ``terminal_reason``
  (``completed``, ``max_turns``, ``api_error``…; else ``stop_reason``, else ``subtype``) is the
  rollout's finish reason.

Lines that are not JSON objects (a warning the CLI printed to stdout) are skipped. No ``result``
event means the CLI stopped early: that is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core.records import Usage
from skillopt_ci.core.trajectory import Step
from skillopt_ci.envs.agent_output import Parsed, json_events, stamp


@dataclass
class ClaudeStream(Parsed):
    """What one ``claude -p`` run reported (what every agent CLI's output says, plus the turn count
    Claude Code reports and the skills it listed for the agent). ``failed`` says why it did not
    finish (``None``: it did)."""

    num_turns: int | None = None
    skills: tuple[str, ...] = ()


def parse_stream(stdout: str, times: Sequence[float] = ()) -> ClaudeStream:
    """Parse the whole stream-json output of one run (``times``: when each line arrived)."""
    parsed = ClaudeStream()
    names: dict[str, str] = {}  # tool_use id → tool name, for the results
    denied: set[str] = set()
    ended = False
    for event, elapsed in json_events(stdout, times):
        before = len(parsed.steps)
        _event(event, parsed, names, denied)
        ended = ended or event.get("type") == "result"
        stamp(parsed.steps, before, elapsed)
    if not ended:
        parsed.failed = "the CLI stopped without its final result event"
    return parsed


def _event(event: dict[str, Any], parsed: ClaudeStream, names: dict[str, str], denied: set[str]) -> None:
    kind = event.get("type")
    if kind == "system":
        _system(event, parsed, denied)
    elif kind == "assistant":
        _assistant(event.get("message") or {}, parsed, names)
    elif kind == "user":
        _user(event.get("message") or {}, parsed, names)
    elif kind == "result":
        _result(event, parsed, names, denied)


def _system(event: dict[str, Any], parsed: ClaudeStream, denied: set[str]) -> None:
    subtype = event.get("subtype")
    if subtype == "init":
        skills = tuple(str(s) for s in event.get("skills") or ())
        parsed.skills = skills
        listed = ", ".join(skills) if skills else "(none)"
        parsed.steps.append(Step("observation", name="skills", text=f"skills listed for the agent: {listed}"))
    elif subtype == "permission_denied":
        call_id = event.get("tool_use_id")
        if call_id:
            denied.add(str(call_id))
        message = event.get("message") or "permission denied"
        parsed.steps.append(Step("error", name=event.get("tool_name"), call_id=call_id,
                                 text=f"permission denied: {message}", is_error=True))


def _assistant(message: dict[str, Any], parsed: ClaudeStream, names: dict[str, str]) -> None:
    synthetic = message.get("model") == "<synthetic>"  # the CLI's own words (an API error), not the model's
    for block in _blocks(message.get("content")):
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            text = str(block["text"])
            parsed.steps.append(Step("error", text=text, is_error=True) if synthetic else Step("model", text=text))
        elif kind == "tool_use":
            call_id = str(block.get("id") or "")
            name = str(block.get("name") or "")
            names[call_id] = name
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            parsed.steps.append(Step("tool_call", name=name, arguments=arguments, call_id=call_id or None))


def _user(message: dict[str, Any], parsed: ClaudeStream, names: dict[str, str]) -> None:
    content = message.get("content")
    if isinstance(content, str):
        if content.strip():
            parsed.steps.append(Step("observation", text=content))
        return
    for block in _blocks(content):
        kind = block.get("type")
        if kind == "tool_result":
            call_id = str(block.get("tool_use_id") or "")
            parsed.steps.append(Step("tool_result", name=names.get(call_id), call_id=call_id or None,
                                     text=_result_text(block.get("content")), is_error=bool(block.get("is_error"))))
        elif kind == "text" and block.get("text"):
            parsed.steps.append(Step("observation", text=str(block["text"])))


def _result(event: dict[str, Any], parsed: ClaudeStream, names: dict[str, str], denied: set[str]) -> None:
    result = event.get("result")
    parsed.output = result if isinstance(result, str) else ""
    parsed.usage = _usage(event.get("usage"))
    cost = event.get("total_cost_usd")
    parsed.cost_usd = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
    turns = event.get("num_turns")
    parsed.num_turns = turns if isinstance(turns, int) else None
    reason = event.get("terminal_reason") or event.get("stop_reason") or event.get("subtype")
    parsed.finish_reason = str(reason) if reason else None
    for denial in event.get("permission_denials") or ():
        if not isinstance(denial, dict) or str(denial.get("tool_use_id")) in denied:
            continue
        name = denial.get("tool_name") or names.get(str(denial.get("tool_use_id")))
        parsed.steps.append(Step("error", name=name, call_id=denial.get("tool_use_id"), is_error=True,
                                 text=f"permission denied: {name}"))
    if event.get("is_error") or str(event.get("subtype", "")).startswith("error"):
        parsed.failed = _failure(event, parsed.output)
        if event.get("subtype") == "error_max_turns":  # its own --max-turns (set from max_turns)
            parsed.failed_kind = "max_turns"


def _failure(event: dict[str, Any], output: str) -> str:
    errors = [str(e) for e in event.get("errors") or () if e]
    if errors:
        return "; ".join(errors)
    reason = event.get("api_error") or event.get("terminal_reason") or event.get("subtype") or "error"
    return f"{reason}: {output}" if output else str(reason)


def _usage(data: Any) -> Usage:
    """Anthropic counts cached prompt tokens apart from ``input_tokens``; all of them were read."""
    if not isinstance(data, dict):
        return Usage()

    def count(key: str) -> int:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    if data.get("input_tokens") is None and data.get("output_tokens") is None:
        return Usage()
    prompt = count("input_tokens") + count("cache_creation_input_tokens") + count("cache_read_input_tokens")
    return Usage(prompt, count("output_tokens"))


def _blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in _blocks(content):
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            parts.append("[image]")
    return "\n".join(parts)
