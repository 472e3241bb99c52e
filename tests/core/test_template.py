"""The one ``{{ }}`` renderer, as the suite prompt and the shipped prompts use it."""

from __future__ import annotations

import pytest

from skillopt_ci.core.task import Task
from skillopt_ci.core.template import placeholders, render
from skillopt_ci.inputs.suite import render_template as render_prompt


def test_suite_prompt_and_shipped_prompts_fill_in_one_pass():
    task = Task(id="t1", input="{{ input }} {{ meta.x }}", fields={"input": "{{ input }} {{ meta.x }}", "meta": {"x": [1, 2]}})
    assert render_prompt("Q: {{ input }} / {{meta.x}}", task) == "Q: {{ input }} {{ meta.x }} / [1, 2]"
    assert render("{{ a }}+{{b}}", {"a": "{{ b }}", "b": 3}) == "{{ b }}+3"


def test_placeholders_are_listed_once_in_order_and_missing_values_are_named():
    assert placeholders("{{ b }} {{ a.c }} {{b}}") == ["b", "a.c"]
    with pytest.raises(KeyError, match="'b'"):
        render("{{ a }} {{ b }}", {"a": 1})
