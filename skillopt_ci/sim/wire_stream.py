"""Server-Sent Events for ``stream: true`` requests, as the OpenAI Responses API and Anthropic
Messages send them: the event names, payload shapes and order the ``openai`` and ``anthropic``
SDKs (and the Codex and Claude Code CLIs) parse. A stream is built from the same finished body
the non-streaming route answers with, so both routes always agree. No I/O happens here.

Each event is one ``bytes`` frame (``event: <type>\\ndata: <json>\\n\\n``); the server writes
them as HTTP chunks, and a ``drop`` fault closes the connection after the first frame.
"""

from __future__ import annotations

import copy
import json
from typing import Any


def frame(event: dict[str, Any]) -> bytes:
    """One SSE frame; the event name is the payload's ``type``."""
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


def responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The Responses API event sequence that ends in ``response.completed`` with ``response``."""
    events: list[dict[str, Any]] = []
    start = dict(copy.deepcopy(response), status="in_progress", output=[], usage=None, incomplete_details=None)
    events.append({"type": "response.created", "response": start})
    events.append({"type": "response.in_progress", "response": start})
    for index, item in enumerate(response["output"]):
        events.extend(_item_events(index, item))
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    events.append({"type": final, "response": response})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "message":
        opened = dict(item, status="in_progress", content=[])
        events = [{"type": "response.output_item.added", "output_index": index, "item": opened}]
        for part_index, part in enumerate(item["content"]):
            at = dict(where, content_index=part_index)
            text = part.get("text", "")
            events.append({"type": "response.content_part.added", **at,
                           "part": dict(part, text="", annotations=[])})
            if text:
                events.append({"type": "response.output_text.delta", **at, "delta": text, "logprobs": []})
            events.append({"type": "response.output_text.done", **at, "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", **at, "part": part})
    elif kind == "function_call":
        opened = dict(item, status="in_progress", arguments="")
        events = [{"type": "response.output_item.added", "output_index": index, "item": opened},
                  {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
                  {"type": "response.function_call_arguments.done", **where, "name": item["name"],
                   "arguments": item["arguments"]}]
    elif kind == "custom_tool_call":
        opened = dict(item, input="")
        events = [{"type": "response.output_item.added", "output_index": index, "item": opened},
                  {"type": "response.custom_tool_call_input.delta", **where, "delta": item["input"]},
                  {"type": "response.custom_tool_call_input.done", **where, "input": item["input"]}]
    else:
        events = [{"type": "response.output_item.added", "output_index": index, "item": item}]
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def anthropic_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The Messages stream (message_start ... message_stop) that builds ``message``."""
    usage = message.get("usage")
    start = dict(message, content=[], stop_reason=None, stop_sequence=None)
    if usage is not None:
        start["usage"] = dict(usage, output_tokens=min(1, usage.get("output_tokens", 0)))
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            if block["text"]:
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "text_delta", "text": block["text"]}})
        else:  # tool_use
            opened = dict(block, input={})
            events.append({"type": "content_block_start", "index": index, "content_block": opened})
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta",
                                     "partial_json": json.dumps(block["input"], ensure_ascii=False)}})
        events.append({"type": "content_block_stop", "index": index})
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None}}
    delta["usage"] = {"output_tokens": usage["output_tokens"]} if usage is not None else {"output_tokens": 0}
    events.append(delta)
    events.append({"type": "message_stop"})
    return events


def stream_frames(protocol: str, body: dict[str, Any]) -> list[bytes]:
    """The SSE frames for a finished body of ``protocol`` ("responses" or "anthropic")."""
    events = anthropic_events(body) if protocol == "anthropic" else responses_events(body)
    return [frame(event) for event in events]
