"""JSON replies through each provider's own mechanism (models/structured.py): what is asked on the
wire, what the caller gets back, and the optimizer using it. The scripted server plays the
constrained decoder (testing/constrained.py): a forced tool's call, or only the JSON object."""

from __future__ import annotations

import asyncio
import json

import pytest

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.wire import make_pool, protocol_setup, run_calls
from skillopt_ci.inputs.yamlfile import load_schema, schema_validator
from skillopt_ci.models.base import Message
from skillopt_ci.models.structured import ReplyFormat, strict_schema, undo_strict
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.train.optimizer.ask import ask_json
from skillopt_ci.train.optimizer.proposals import PROPOSAL_REPLY, read_proposal

PROPOSAL = {"analysis": "Refunds were counted as sales.",
            "edits": [{"op": "append", "text": "- Subtract refunds.", "rationale": "3 tasks missed it"}]}
CHATTY = "Sure! Here is my proposal:\n" + json.dumps(PROPOSAL) + "\nHope this helps."
ASK = [Message("system", "You improve skills."), Message("user", "Propose edits as JSON.")]


def walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def test_the_decoding_schema_accepts_only_replies_the_contract_accepts():
    from jsonschema import Draft202012Validator

    decoding = Draft202012Validator(PROPOSAL_REPLY.schema)
    contract = schema_validator("proposal.schema.json")
    edits = [{"op": "append", "text": "x", "rationale": "r"}, {"op": "insert_after", "anchor": "a", "text": "x", "rationale": "r"},
             {"op": "replace", "anchor": "a", "text": "x", "rationale": "r"}, {"op": "delete", "anchor": "a", "rationale": "r"},
             {"op": "insert_after", "text": "x", "rationale": "r"}, {"op": "delete", "rationale": "r"},
             {"op": "append", "text": "", "rationale": "r"}, {"op": "append", "rationale": "r"}]
    for edit in edits:
        reply = {"analysis": "a", "edits": [edit]}
        assert decoding.is_valid(reply) == contract.is_valid(reply), edit
    assert sum(decoding.is_valid({"analysis": "a", "edits": [e]}) for e in edits) == 4


def test_the_strict_schema_closes_every_object_and_the_reply_comes_back_in_the_original_shape():
    original = load_schema("proposal.schema.json")
    strict = strict_schema(original)
    objects = [n for n in walk(strict) if isinstance(n.get("properties"), dict)]
    assert len(objects) == 2  # the reply and one edit
    for node in objects:
        assert node["additionalProperties"] is False and node["required"] == list(node["properties"])
    edit = strict["$defs"]["edit"]
    assert edit["properties"]["anchor"]["type"] == ["string", "null"]  # optional: may be null
    assert edit["properties"]["op"] == {"enum": ["append", "insert_after", "replace", "delete"], "type": "string"}
    assert not any(k in n for n in walk(strict) for k in ("allOf", "if", "minLength", "$schema"))
    assert original["$defs"]["edit"]["allOf"]  # the original is untouched
    reply = {**PROPOSAL, "edits": [{**PROPOSAL["edits"][0], "anchor": None}]}
    back = json.loads(undo_strict(json.dumps(reply), original))
    assert back == PROPOSAL and not list(schema_validator("proposal.schema.json").iter_errors(back))


@pytest.mark.parametrize("protocol", ["openai", "azure", "responses", "anthropic"])
def test_each_provider_is_asked_in_its_own_way_and_a_chatty_model_still_gives_a_usable_proposal(tmp_path, protocol):
    with ScriptedModelServer(lambda request: CHATTY) as srv:
        spec, env = protocol_setup(protocol, srv)
        (done,) = run_calls(make_pool(tmp_path, spec, env), {"messages": ASK, "reply": PROPOSAL_REPLY})
        body = srv.calls[0].request.body
    assert json.loads(done.text) == PROPOSAL and done.tool_calls == ()
    assert read_proposal(done.text, 3).edits[0].text == "- Subtract refunds."
    if protocol in ("openai", "azure"):
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["name"] == "skill_proposal"
        variants = fmt["json_schema"]["schema"]["properties"]["edits"]["items"]["anyOf"]
        assert all(v["additionalProperties"] is False and "minLength" not in json.dumps(v) for v in variants)
    elif protocol == "responses":
        fmt = body["text"]["format"]
        assert (fmt["type"], fmt["name"], fmt["strict"]) == ("json_schema", "skill_proposal", True)
    else:
        assert body["tool_choice"] == {"type": "tool", "name": "skill_proposal"}
        assert body["tools"][0]["input_schema"] == PROPOSAL_REPLY.schema


@pytest.mark.parametrize(("mode", "expected"), [
    ("auto", {"type": "json_schema"}),    # vLLM and others: the schema, without strict
    ("json_object", {"type": "json_object"}),  # llama.cpp servers: a grammar from the schema
    ("off", None),
])
def test_an_openai_compatible_server_gets_the_configured_format(tmp_path, mode, expected):
    with ScriptedModelServer(lambda request: json.dumps(PROPOSAL)) as srv:
        spec = {"provider": "openai-compatible", "model": "smollm2", "base_url": srv.openai_base_url,
                "structured_output": mode}
        run_calls(make_pool(tmp_path, spec, {"OPENAI_API_KEY": "k"}), {"messages": ASK, "reply": PROPOSAL_REPLY})
        body = srv.calls[0].request.body
    fmt = body.get("response_format")
    if expected is None:
        assert fmt is None and "tool_choice" not in body
        return
    assert fmt["type"] == expected["type"]
    schema = fmt["json_schema"]["schema"] if mode == "auto" else fmt["schema"]
    assert schema == PROPOSAL_REPLY.schema and "strict" not in fmt.get("json_schema", {})


def weak_model(request):
    """A small model: valid JSON only when decoding is constrained to the schema (as llama.cpp's
    grammar does); left to itself it rambles and never closes the object."""
    if "response_format" in request.params:
        return json.dumps(PROPOSAL)
    return "I think refunds matter. " + json.dumps(PROPOSAL)[:-1]


@pytest.mark.parametrize(("mode", "usable", "calls"), [("json_object", True, 1), ("off", False, 2)])
def test_a_weak_optimizer_is_usable_only_when_asked_for_the_schema(tmp_path, mode, usable, calls):
    async def ask(srv):
        spec = {"provider": "openai-compatible", "model": "smollm2", "base_url": srv.openai_base_url,
                "structured_output": mode}
        pool = make_pool(tmp_path, spec, {"OPENAI_API_KEY": "k"})
        try:
            return await ask_json(_Role(pool), ASK, lambda text: read_proposal(text, 3), PROPOSAL_REPLY)
        finally:
            await pool.aclose()

    with ScriptedModelServer(weak_model) as srv:
        answer = asyncio.run(ask(srv))
        assert srv.call_count == calls == answer.attempts
    assert (answer.value is not None) is usable
    if not usable:
        assert "unusable optimizer reply after a retry" in answer.error


class _Role:
    """The pool under the optimizer's role name (the test pool has only a target)."""

    def __init__(self, pool):
        self.pool = pool

    async def complete(self, role, messages, sample_index=0, **kwargs):
        return await self.pool.complete("target", messages, sample_index, **kwargs)


def test_structured_and_free_replies_are_cached_apart(tmp_path):
    with ScriptedModelServer(lambda request: json.dumps(PROPOSAL)) as srv:
        spec, env = protocol_setup("openai", srv)
        pool = make_pool(tmp_path, spec, env, mode="read-write")
        run_calls(pool, {"messages": ASK, "reply": PROPOSAL_REPLY}, {"messages": ASK},
                  {"messages": ASK, "reply": PROPOSAL_REPLY})
        assert srv.call_count == 2  # the third is the first one again, from the cache


def test_a_json_response_format_for_anthropic_is_refused_at_validate(tmp_path):
    with ScriptedModelServer() as srv:
        root = write_project(tmp_path, srv.openai_base_url)
        text = (root / "skillopt.yml").read_text()
        (root / "skillopt.yml").write_text(text.replace("models:\n", "models:\n  optimizer:\n    provider: anthropic\n"
                                                        "    model: claude-haiku-4-5\n    structured_output: json_object\n", 1))
        result = run_cli("validate", cwd=root)
    assert result.code == 2
    assert "structured_output: json_object is an OpenAI response format" in result.err


def test_reply_format_is_part_of_what_the_pool_is_asked():
    fmt = ReplyFormat("x", {"type": "object"})
    assert fmt.key()["name"] == "x" and fmt.mode == "json_schema"
