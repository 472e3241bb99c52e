"""The ``claude-code`` environment: its stream-json parser on captured output, its set-up (the
home, the variables, the command line), failure handling with fake binaries, and the real
``claude -p`` end to end against the scripted model server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillopt_ci.envs.claude_stream import parse_stream

STREAMS = Path(__file__).parent / "data/claude-stream"


def stream(name: str) -> str:
    return (STREAMS / f"{name}.jsonl").read_text()


def test_a_finished_run_becomes_steps_output_and_spend():
    parsed = parse_stream(stream("success"))
    assert parsed.failed is None
    assert parsed.output == "All done."
    assert parsed.cost_usd == pytest.approx(0.004)
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (500, 100)
    assert parsed.num_turns == 6
    kinds = [(s.kind, s.name) for s in parsed.steps]
    assert kinds[0] == ("observation", "skills")
    assert "demo-skill" in parsed.steps[0].text and parsed.skills[0] == "demo-skill"
    calls = [s for s in parsed.steps if s.kind == "tool_call"]
    assert [c.name for c in calls] == ["Skill", "Bash", "Write", "Bash"]
    assert json.loads(calls[0].arguments) == {"skill": "demo-skill"}
    results = [s for s in parsed.steps if s.kind == "tool_result"]
    assert [r.name for r in results] == ["Skill", "Bash", "Write", "Bash"]
    assert [r.is_error for r in results] == [False, False, False, True]  # `exit 3` is an error result
    assert results[-1].text == "Exit code 3"
    # The skill's body reached the agent after its Skill call: recorded as what it observed.
    body = parsed.steps[kinds.index(("tool_result", "Skill")) + 1]
    assert body.kind == "observation" and "Always write out.txt." in body.text
    assert parsed.steps[-1].kind == "model" and parsed.steps[-1].text == "All done."


def test_a_permission_denial_is_an_error_step_and_max_turns_fails_the_run():
    parsed = parse_stream(stream("denied_max_turns"))
    assert parsed.failed == "Reached maximum number of turns (3)"
    denials = [s for s in parsed.steps if s.kind == "error"]
    assert len(denials) == 1  # the system event and the result's permission_denials name the same call
    assert denials[0].name == "Write" and denials[0].is_error and "permission" in denials[0].text
    assert parsed.steps[-1].kind == "tool_result" and parsed.steps[-1].is_error


def test_a_denial_only_in_the_result_event_is_still_recorded():
    lines = [json.loads(x) for x in stream("denied_max_turns").splitlines()]
    kept = [x for x in lines if x.get("subtype") != "permission_denied"]
    parsed = parse_stream("\n".join(json.dumps(x) for x in kept))
    denials = [s for s in parsed.steps if s.kind == "error"]
    assert [(d.name, d.call_id) for d in denials] == [("Write", "toolu_3")]


def test_an_api_error_is_a_failure_and_the_clis_own_words_are_not_the_models():
    parsed = parse_stream(stream("connection_refused"))
    assert parsed.failed and parsed.failed.startswith("connection_failed")
    assert not [s for s in parsed.steps if s.kind == "model"]
    assert [s.kind for s in parsed.steps] == ["observation", "error"]


def test_a_stream_cut_short_or_holding_noise_is_a_failure_not_a_crash():
    text = stream("success")
    cut = "\n".join(text.splitlines()[:4])
    parsed = parse_stream("a warning on stdout\n[1, 2]\n{not json\n" + cut)
    assert parsed.failed == "the CLI stopped without its final result event"
    assert [s.name for s in parsed.steps if s.kind == "tool_call"] == ["Skill"]
    assert parse_stream("").failed
