"""Suite-defined function tools: their JSON Schema from type hints (or declared), and how a call
that raises, hangs or gets bad arguments is shown to the model."""

from __future__ import annotations

import re
from typing import Literal

import pytest

from fakes.tool_model import ScriptedCaller, call, reply, turn
from helpers.tools_env import make_suite, rollout
from skillopt_ci.core.errors import InputError
from skillopt_ci.envs.functions import schema_from_signature
from skillopt_ci.envs.registry import build_environment

TOOLS_PY = '''
from pathlib import Path
from typing import Literal

CITIES = {"paris": 2_100_000, "lyon": 520_000}


def population(city: str, unit: Literal["people", "thousands"] = "people", notes: list[str] | None = None) -> int:
    """Look up the population of a city.

    Uses the suite's table.

    Args:
        city: the city, lower case
        unit: how to count
    """
    count = CITIES[city]
    return count if unit == "people" else count // 1000


def save(name: str, workspace: Path, task) -> str:
    """Write the task id into a workspace file."""
    (workspace / name).write_text(task.id)
    return f"saved {name}"


def stuck(seconds: float) -> str:
    """Never comes back in time."""
    import time
    time.sleep(seconds)
    return "late"
'''


def test_a_function_tool_gets_its_schema_from_type_hints(tmp_path):
    suite = make_suite(tmp_path, {"helpers/cities.py": TOOLS_PY})
    model = ScriptedCaller(turn(call("population", city="lyon", unit="thousands")), reply("520 thousand"))
    env, result = rollout(suite, model, tools=["helpers.cities:population", "submit_answer"])
    result.close()
    spec = model.received[0].tools[0]
    assert spec.name == "population"
    assert spec.description == "Look up the population of a city."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "the city, lower case"},
            "unit": {"type": "string", "enum": ["people", "thousands"], "description": "how to count",
                     "default": "people"},
            "notes": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
        },
        "required": ["city"],
    }
    assert result.steps[2].text == "520" and not result.steps[2].is_error
    assert set(env.identity()["tool_files"]) == {"helpers/cities.py"}


def test_a_function_tool_that_raises_or_gets_bad_arguments_is_an_error_result(tmp_path):
    suite = make_suite(tmp_path, {"cities.py": TOOLS_PY})
    model = ScriptedCaller(
        turn(call("population", city="berlin"), call("population", city="paris", unit="miles")),
        reply("unknown"),
    )
    _, result = rollout(suite, model, tools=["cities:population"])
    result.close()
    raised, refused = [s for s in result.steps if s.kind == "tool_result"]
    assert raised.is_error and raised.text.startswith("population raised KeyError: 'berlin' at line")
    assert refused.is_error and "unit: 'miles' is not one of ['people', 'thousands']" in refused.text
    assert result.ok and result.output == "unknown"


def test_a_hanging_function_tool_times_out(tmp_path):
    suite = make_suite(tmp_path, {"cities.py": TOOLS_PY})
    model = ScriptedCaller(turn(call("stuck", seconds=30)), reply("moved on"))
    _, result = rollout(suite, model, tools=["cities:stuck"], tool_timeout_s=0.5)
    result.close()
    assert result.steps[2].is_error and "did not finish within its time limit of 0.5 s" in result.steps[2].text
    assert result.output == "moved on"


def test_a_function_tool_receives_the_workspace_and_the_task(tmp_path):
    suite = make_suite(tmp_path, {"cities.py": TOOLS_PY})
    model = ScriptedCaller(turn(call("record", {"name": "id.txt"})), reply("ok"))
    entry = {"function": "cities:save", "name": "record", "description": "Record the task."}
    _, result = rollout(suite, model, tools=[entry])
    spec = model.received[0].tools[0]
    assert spec.parameters["properties"] == {"name": {"type": "string"}}  # workspace and task are not the model's
    assert spec.description == "Record the task."
    assert (result.workspace / "id.txt").read_text() == "t1"
    result.close()


def test_declared_parameters_are_used_and_checked(tmp_path):
    suite = make_suite(tmp_path, {"cities.py": TOOLS_PY})
    schema = {"type": "object", "properties": {"city": {"type": "string", "enum": ["paris"]}}, "required": ["city"]}
    env = build_environment({"type": "tools", "tools": [{"function": "cities:population", "parameters": schema}]}, suite)
    assert env.specs[0].parameters == schema
    with pytest.raises(InputError, match="parameters is not a JSON Schema"):
        build_environment({"type": "tools", "tools": [{"function": "cities:population",
                                                        "parameters": {"type": 5}}]}, suite)


@pytest.mark.parametrize("entry, says", [
    ("nope:fn", "function tool file not found"),
    ("cities:missing", 'function tool has no function "missing"'),
    ("broken:fn", "syntax error in function tool"),
])
def test_a_function_tool_that_does_not_load_is_an_input_error(tmp_path, entry, says):
    suite = make_suite(tmp_path, {"cities.py": TOOLS_PY, "broken.py": "def fn(:\n"})
    with pytest.raises(InputError, match=re.escape(says)):
        build_environment({"type": "tools", "tools": [entry]}, suite)


def test_schema_from_type_hints_covers_the_common_types():
    def fn(a: int, b: float, c: bool, d: dict, e: dict[str, int], f: list, g: Literal[1, 2],
           h: int | None = None, i=3, *rest, **more):
        """"""

    schema = schema_from_signature(fn)
    assert schema["required"] == ["a", "b", "c", "d", "e", "f", "g"]
    props = schema["properties"]
    assert props["a"] == {"type": "integer"} and props["b"] == {"type": "number"}
    assert props["c"] == {"type": "boolean"} and props["d"] == {"type": "object"}
    assert props["e"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["f"] == {"type": "array"} and props["g"] == {"type": "integer", "enum": [1, 2]}
    assert props["h"] == {"type": ["integer", "null"], "default": None}
    assert props["i"] == {"default": 3}
    assert set(props) == set("abcdefghi")


def test_a_type_hint_without_a_schema_is_an_input_error(tmp_path):
    suite = make_suite(tmp_path, {"odd.py": "import datetime\ndef when(d: datetime.date) -> str:\n    return str(d)\n"})
    with pytest.raises(InputError, match="parameter \"d\": type 'date' has no JSON Schema"):
        build_environment({"type": "tools", "tools": ["odd:when"]}, suite)


def test_a_large_result_keeps_its_start_and_end(tmp_path):
    suite = make_suite(tmp_path, {"big.py": "def big(n: int) -> str:\n    return 'START ' + 'ab\\u00e9\\n' * n + ' END'\n"})
    model = ScriptedCaller(turn(call("big", n=300_000)), reply("ok"))
    _, result = rollout(suite, model, tools=["big:big"], tool_output_chars=2000)
    result.close()
    shown = result.steps[2]
    assert not shown.is_error and shown.text.startswith("START ab") and shown.text.endswith(" END")
    assert "characters cut" in shown.text and len(shown.text) < 2100
