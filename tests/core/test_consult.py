"""Whether an agent rollout consulted the skill under test, from its steps (core.consult)."""

from __future__ import annotations

import json

import pytest

from skillopt_ci.core.consult import find_consult
from skillopt_ci.core.records import Consult, TaskResult
from skillopt_ci.core.trajectory import Step

CLAUDE = ".claude/skills/triage"
CODEX = ".agents/skills/triage"


def call(name: str, **arguments: object) -> Step:
    return Step("tool_call", name=name, arguments=json.dumps(arguments))


def chatter() -> list[Step]:
    return [Step("observation", name="skills", text="skills listed for the agent: triage"), Step("model", text="Let me look.")]


def test_claude_codes_skill_tool_naming_the_skill_is_a_consult_at_its_step():
    steps = [*chatter(), call("Bash", command="ls"), call("Skill", skill="triage")]
    assert find_consult(steps, CLAUDE, "triage") == Consult(True, step=3, how="skill tool")


def test_the_skill_tool_naming_another_skill_is_not_a_consult():
    assert find_consult([call("Skill", skill="billing")], CLAUDE, "triage") == Consult(False)


@pytest.mark.parametrize("step, how", [
    (call("Read", file_path="/tmp/ws-81/.claude/skills/triage/SKILL.md"), "read SKILL.md"),
    (call("Read", file_path=".claude/skills/triage/SKILL.md"), "read SKILL.md"),
    (call("Bash", command="head -n 40 ./.claude/skills/triage/SKILL.md | cat"), "command reads SKILL.md"),
])
def test_reading_its_skill_md_by_any_path_through_the_install_folder_is_a_consult(step, how):
    assert find_consult([step], CLAUDE, "triage") == Consult(True, step=0, how=how)


def test_codex_reads_it_through_bash_lc_with_an_absolute_path():
    steps = [call("exec_command", command="/bin/bash -lc 'cat /work/ws/.agents/skills/triage/SKILL.md'")]
    assert find_consult(steps, CODEX, "triage") == Consult(True, step=0, how="command reads SKILL.md")


@pytest.mark.parametrize("step", [
    call("Bash", command="cat notes-triage.md triage.md"),  # the name, not the skill
    call("Read", file_path=".claude/skills/triage-old/SKILL.md"),  # another folder
    call("Read", file_path=".claude/skills/SKILL.md"),
    call("Write", file_path=".claude/skills/triage/SKILL.md", content="x"),  # writing is not reading
    call("Edit", file_path=".claude/skills/triage/SKILL.md", old_string="a", new_string="b"),
    Step("tool_result", name="Bash", text="cat .claude/skills/triage/SKILL.md"),  # a result, not a call
])
def test_a_file_that_merely_names_the_skill_or_a_write_is_not_a_consult(step):
    assert find_consult([step], CLAUDE, "triage").consulted is False


def test_its_references_and_scripts_are_told_apart_from_the_body():
    steps = [
        call("exec_command", command="bash -lc 'cat .agents/skills/triage/references/codes.md'"),
        call("exec_command", command="python3 -u .agents/skills/triage/scripts/route.py --case 7 && echo ok"),
    ]
    assert find_consult(steps, CODEX, "triage") == Consult(False, references=True, scripts=True)
    ran = find_consult([call("Bash", command="./.claude/skills/triage/scripts/route.sh")], CLAUDE, "triage")
    assert ran.scripts and not ran.references and not ran.consulted
    read = find_consult([call("Bash", command="sed -n 1,80p .claude/skills/triage/scripts/route.sh")], CLAUDE, "triage")
    assert read.references and not read.scripts  # reading a script's source is reading


def test_the_first_consult_is_the_one_recorded():
    steps = [call("Bash", command="cat .claude/skills/triage/SKILL.md"), call("Skill", skill="triage")]
    assert find_consult(steps, CLAUDE, "triage") == Consult(True, step=0, how="command reads SKILL.md")


def test_a_result_keeps_its_consult_in_results_jsonl_and_a_chat_result_reads_as_before():
    consulted = TaskResult("t1", 0, consult=Consult(True, step=2, how="skill tool"))
    data = consulted.to_dict()
    assert data["consult"] == {"consulted": True, "step": 2, "how": "skill tool"}
    assert TaskResult.from_dict(data) == consulted
    assert "consult" not in TaskResult("t1", 0).to_dict()
    assert TaskResult.from_dict({"task_id": "t1", "repeat": 0, "consult": {"consulted": False}}).consult == Consult(False)


def test_the_rate_over_finished_rollouts_and_its_wilson_interval():
    from skillopt_ci.core.records import Consulted
    from skillopt_ci.core.stats import wilson_ci
    from skillopt_ci.render.eval_report import consulted_line, fmt_consulted

    results = [TaskResult(f"t{i}", 0, score=1.0, consult=Consult(i < 5, references=i == 0)) for i in range(6)]
    results += [TaskResult("t9", 0, error={"kind": "time_limit", "message": "x"}, consult=Consult(True)),
                TaskResult("chat", 0, score=1.0)]  # an errored rollout and a result with no agent are not counted
    rate = Consulted.of(results)
    assert rate == Consulted(5, 6, references=1) and fmt_consulted(rate) == "5/6 (83%)"
    assert consulted_line(rate) == ("The agent consulted the skill in 5 of 6 finished rollouts (83.3%, 95% CI 44–97%); "
                                    "read its other files in 1.")
    assert Consulted.of([TaskResult("chat", 0, score=1.0)]) is None
    low, high = wilson_ci(0, 6)
    assert low == 0.0 and round(high, 3) == 0.390  # not the empty interval a normal approximation gives at 0 of 6
    assert wilson_ci(0, 0) is None
