"""``--baseline none``: the score with no skill beside the skill's, on eval, gate and train output.

The scripted simulated target follows the rules a skill states, so with no skill it scores lower;
the no-skill side is an ordinary cached run beside the main one.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.repo import (
    ACCOUNT_RULE,
    BILLING_RULE,
    BUG_RULE,
    SKILL,
    commit_on_branch,
    gate_json,
    make_repo,
    skill_text,
)
from helpers.training import summary_of, train, train_project
from skillopt_ci.core.skill import NO_SKILL_NAME, load_skill, no_skill
from skillopt_ci.inputs.yamlfile import schema_validator
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.pr_body import render_training_pr
from skillopt_ci.train.records import TrainingSummary


@pytest.fixture
def sim():
    with ScriptedModelServer(SimulatedModels()) as server:
        yield server


LINE = re.compile(r"no skill: (\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]; the skill adds ([+-]\d\.\d{3}) "
                  r"\[([+-]\d\.\d{3}), ([+-]\d\.\d{3})\] \(paired over (\d+) tasks\)")


def test_no_skill_is_named_and_hashed_apart(project):
    empty = no_skill()
    real = load_skill(project / "skills/ticket-triage/SKILL.md")
    assert empty.name == NO_SKILL_NAME == "no skill"
    assert empty.hash == no_skill().hash != real.hash
    assert empty.hash != real.with_text("").hash  # not the digest of empty text either
    assert empty.body == "" and empty.folder is None


def test_eval_baseline_none_shows_what_the_skill_adds(project, server):
    out = project / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--baseline", "none", "--quiet", cwd=project)
    assert res.code == 0, res.err
    assert "warning" not in res.err  # the empty skill is on purpose
    match = LINE.search(res.out)
    assert match, res.out
    none_mean, delta, n = float(match[1]), float(match[4]), int(match[7])
    assert n == 12
    summary = json.loads((out / "summary.json").read_text())
    schema_validator("summary.schema.json").validate(summary)
    worth = summary["no_skill"]
    assert worth["line"] == match[0]
    assert worth["mean"] == pytest.approx(none_mean, abs=5e-4) and worth["delta"] == pytest.approx(delta, abs=5e-4)
    assert worth["delta"] == pytest.approx(summary["mean"] - worth["mean"], abs=1e-9)
    assert worth["delta"] > 0  # the simulated target follows the skill's rules
    # Its own run directory beside the main one, named as the no-skill run, same tasks.
    none_dir = project / "run-no-skill"
    none_summary = json.loads((none_dir / "summary.json").read_text())
    assert none_summary["skill"]["name"] == "no skill" and none_summary["n_tasks"] == 12
    assert none_summary["skill"]["hash"] == no_skill().hash
    assert match[0] in (out / "report.md").read_text()
    # No skill means no system message: half the calls had one, half had none.
    systems = [c.request.system for c in server.calls]
    assert len(systems) == 24 and sum(1 for s in systems if not s) == 12


def test_eval_baseline_rerun_hits_the_cache(project, server):
    first = run_cli("eval", "ticket-triage", "--baseline", "none", "--quiet", cwd=project)
    assert first.code == 0, first.err
    calls = len(server.calls)
    again = run_cli("eval", "ticket-triage", "--baseline", "none", "--quiet", cwd=project)
    assert again.code == 0, again.err
    assert len(server.calls) == calls  # 0 new calls on either side
    assert LINE.search(first.out)[0] == LINE.search(again.out)[0]


def test_eval_json_carries_the_no_skill_line(project):
    res = run_cli("eval", "ticket-triage", "--baseline", "none", "--json", "--quiet", cwd=project)
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert LINE.fullmatch(data["no_skill"]["line"])


def test_unknown_baseline_is_usage_error(project, server):
    res = run_cli("eval", "ticket-triage", "--baseline", "foo", "--quiet", cwd=project)
    assert res.code == 2
    assert "--baseline" in res.err and "'foo'" in res.err
    assert server.calls == []


def test_gate_report_shows_the_no_skill_line_and_keeps_the_verdict(tmp_path, server):
    root = make_repo(tmp_path, server.openai_base_url)
    commit_on_branch(root, "worse", {SKILL: skill_text(root).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "")
                                           .replace(BILLING_RULE, "")})
    plain = run_cli("gate", "--base", "main", "--head", "worse", "--out", str(tmp_path / "g1"), "--quiet", cwd=root)
    out = tmp_path / "g2"
    res = run_cli("gate", "--base", "main", "--head", "worse", "--out", str(out), "--baseline", "none", "--quiet",
                  cwd=root)
    assert res.code == plain.code == 1, res.err
    data = gate_json(out)
    skill = data["skills"][0]
    assert skill["verdict"] == gate_json(tmp_path / "g1")["skills"][0]["verdict"] == "regressed"
    line = skill["head"]["no_skill"]["line"]
    assert LINE.fullmatch(line)
    assert skill["head"]["no_skill"]["mean"] < skill["head"]["mean"]
    report = (out / "report.md").read_text()
    assert f"- **ticket-triage** baseline: {line}" in report
    assert "baseline" not in (tmp_path / "g1" / "report.md").read_text()
    assert f"ticket-triage baseline: {line}" in res.out
    assert json.loads((out / "ticket-triage/no-skill/summary.json").read_text())["skill"]["name"] == "no skill"


def test_compare_baseline_none(tmp_path, server):
    root = write_project(tmp_path / "p", server.openai_base_url)
    res = run_cli("compare", SKILL, SKILL, "--suite", "eval_suites/ticket-triage", "--out", str(tmp_path / "c"),
                  "--baseline", "none", "--quiet", cwd=root)
    assert res.code == 0, res.err
    assert LINE.search(res.out)
    assert LINE.search((tmp_path / "c" / "report.md").read_text())


def test_train_summary_report_and_pr_body_show_the_no_skill_line(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url, train={"epochs": 1})
    run = tmp_path / "run"
    res = train(project, run, "--baseline", "none")
    assert res.code == 0, res.err
    s = summary_of(run)
    assert set(s["no_skill"]) == {"val", "test"}
    for split in ("val", "test"):
        worth = s["no_skill"][split]
        assert LINE.fullmatch(worth["line"])
        assert worth["delta"] == pytest.approx(s[split]["trained"] - worth["mean"], abs=1e-9)
        assert f"No skill on {split} (trained skill vs none): {worth['line']}" in res.out
        assert json.loads((run / "versions/none" / split / "summary.json").read_text())["skill"]["name"] == "no skill"
    report = (run / "report.md").read_text()
    assert f"No skill on test (trained skill vs none): {s['no_skill']['test']['line']}" in report
    _, body = render_training_pr(TrainingSummary.from_dict(s), current_text="a\n", trained_text="b\n", run_url=None)
    assert f"No skill on val (trained skill vs none): {s['no_skill']['val']['line']}" in body
    # Re-running the finished run asks the models nothing, the no-skill side included.
    calls = sim.call_count
    assert train(project, run, "--baseline", "none").code == 0
    assert sim.call_count == calls
    assert summary_of(run)["no_skill"] == s["no_skill"]


def test_train_without_baseline_has_no_no_skill_line(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url, train={"epochs": 1})
    res = train(project, tmp_path / "run")
    assert res.code == 0, res.err
    assert "no_skill" not in summary_of(tmp_path / "run") and "No skill" not in res.out
    assert not (tmp_path / "run/versions/none").exists()
