"""``budgets.max_target_calls``: training plans its steps within the target calls left, keeps what
the final test needs, and says what each budget bought (the best-so-far curve) in the summary,
the report, the job summary and the pull request body."""

from __future__ import annotations

import signal
import time
from itertools import pairwise

import pytest
import yaml

from helpers.training import _train_process, stable_history, summary_of, train, train_project
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_OPTIMIZER, SimulatedModels
from skillopt_ci.train.call_plan import CallPlan, best_so_far
from skillopt_ci.train.history import StageSpend, StepRecord
from skillopt_ci.train.pr_body import render_training_pr
from skillopt_ci.train.records import TrainingSummary
from skillopt_ci.train.report import curve_line
from skillopt_ci.train.state import TrainState

BUDGET = 150  # the example's unbudgeted run sends about 290 target calls


@pytest.fixture
def sim():
    with ScriptedModelServer(SimulatedModels()) as server:
        yield server


def budgeted(root, base_url, calls=BUDGET, **config):
    return train_project(root, base_url, cache={"mode": "off"}, budgets={"max_target_calls": calls}, **config)


def target_calls_at(server: ScriptedModelServer) -> int:
    return sum(1 for c in server.calls if c.request.model != SIM_OPTIMIZER)


def test_budget_stops_the_steps_and_still_tests_the_best_skill(tmp_path, sim):
    project = budgeted(tmp_path / "p", sim.openai_base_url)
    run = tmp_path / "run"
    res = train(project, run)
    assert res.code == 0, res.err
    s = summary_of(run)
    assert s["complete"] is True and s["test"] is not None  # ended with a tested best skill
    assert s["stopped"].startswith("target-call budget: stopped before step ")
    assert target_calls_at(sim) == s["target_calls"] <= BUDGET  # counted as the provider saw them
    state = TrainState.load(run)
    assert state.phase == "done" and state.epoch == 0  # the first epoch was cut short by the plan
    # What each budget bought: the best skill so far against the calls spent, where a user looks.
    curve = s["best_so_far"]
    assert [p["step"] for p in curve] == ["baseline", *(r.step for r in state.history)]
    assert curve[0]["calls"] == state.baseline_calls > 0
    assert all(a["calls"] < b["calls"] for a, b in pairwise(curve))
    assert curve[-1]["version"] == state.incumbent and curve[-1]["calls"] <= BUDGET - 24  # 24: the test
    line = f"Best so far by target calls (of {BUDGET}): {curve[0]['calls']} → val"
    assert line in res.out  # the terminal table (also the Action's job summary)
    report = (run / "report.md").read_text()
    assert line in report and "Steps stopped early, then the best skill was tested: target-call budget" in report
    assert "Stopped early:" not in report  # not a run to resume: it finished within its budget


def test_unbudgeted_runs_show_the_curve_without_a_budget(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url, train={"epochs": 1})
    run = tmp_path / "run"
    assert train(project, run).code == 0
    s = summary_of(run)
    assert s["stopped"] is None and "max_target_calls" not in s
    assert "Best so far by target calls: " in (run / "report.md").read_text()


def test_the_pr_body_shows_the_curve_against_the_budget(tmp_path, sim):
    project = budgeted(tmp_path / "p", sim.openai_base_url)
    assert train(project, tmp_path / "run").code == 0
    summary = TrainingSummary.from_dict(summary_of(tmp_path / "run"))
    _, body = render_training_pr(summary, current_text="a\n", trained_text="b\n", run_url=None)
    run_section = body.split("### Run", 1)[1]
    assert f"- Best so far by target calls (of {BUDGET}): " in run_section
    assert "- Steps stopped early, then the best skill was tested: target-call budget: " in run_section


def test_a_budget_reached_mid_stage_stops_cleanly_and_resumes(tmp_path, sim):
    # 30 calls with 24 kept for the test: the baseline's validation (12 tasks) cannot finish.
    project = budgeted(tmp_path / "p", sim.openai_base_url, calls=30)
    run = tmp_path / "run"
    res = train(project, run)
    assert res.code == 3 and "target-call budget reached" in res.err
    assert target_calls_at(sim) <= 30 - 24
    assert TrainState.load(run).phase == "baseline"
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    data["budgets"]["max_target_calls"] = BUDGET
    (project / "skillopt.yml").write_text(yaml.safe_dump(data))
    assert train(project, run).code == 0
    s = summary_of(run)
    assert s["complete"] is True and s["test"] is not None and s["target_calls"] <= BUDGET


def test_a_step_that_takes_more_than_planned_stops_inside_and_still_tests_the_best_skill(tmp_path, sim):
    # The mean rule's credit assignment validates the candidate once per edit, which the plan (one
    # validation a step) does not foresee: the first step starts, then reaches the calls kept for the test.
    project = budgeted(tmp_path / "p", sim.openai_base_url, calls=70, train={"acceptance": "mean"})
    run = tmp_path / "run"
    res = train(project, run)
    assert res.code == 0, res.err
    s = summary_of(run)
    assert s["stopped"] == ("target-call budget: step e0-s00 took more than planned and stopped at 46 of 70 target "
                            "calls, then went to the final test with the 24 calls kept for it")
    assert s["complete"] is True and s["test"] is not None and target_calls_at(sim) == s["target_calls"] <= 70
    assert TrainState.load(run).history == []  # the step it stopped inside is not recorded
    assert train(project, run).code == 0 and summary_of(run) == s  # a finished run stays finished


@pytest.mark.parametrize("bad", [0, -5, "many", 2.5])
def test_a_bad_target_call_budget_is_rejected(tmp_path, bad):
    project = train_project(tmp_path / "p", "http://127.0.0.1:9", budgets={"max_target_calls": bad})
    res = train(project, tmp_path / "run")
    assert res.code == 2 and "budgets.max_target_calls" in res.err and str(bad) in res.err
    assert not (tmp_path / "run").exists()


def test_a_kill_at_the_budget_resumes_to_the_same_run(tmp_path):
    with ScriptedModelServer(SimulatedModels(), latency=0.05) as server:
        assert train(budgeted(tmp_path / "ref", server.openai_base_url), tmp_path / "ref-run").code == 0
        expected, total = TrainState.load(tmp_path / "ref-run"), server.call_count
        server.reset()
        out = tmp_path / "run"
        proc = _train_process(budgeted(tmp_path / "p", server.openai_base_url), out)
        deadline = time.monotonic() + 60
        while server.call_count < total - 12 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert proc.poll() is None, "the run ended before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = TrainState.load(out)
        # The premise: killed in the final test, after the plan stopped the steps at the budget.
        assert killed is not None and killed.phase == "test" and killed.stopped == expected.stopped
        resumed = _train_process(tmp_path / "p", out)
        _, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        state = TrainState.load(out)
    assert stable_history(state.history) == stable_history(expected.history)
    assert [v.hash for v in state.versions] == [v.hash for v in expected.versions]
    assert state.stopped == expected.stopped and state.phase == "done"
    assert (out / "best_skill.md").read_text() == (tmp_path / "ref-run/best_skill.md").read_text()
    assert summary_of(out)["best_so_far"] == summary_of(tmp_path / "ref-run")["best_so_far"]


def _step(step: str, version: int, val: float, **calls: int) -> StepRecord:
    return StepRecord.from_dict({
        "step": step, "kind": "step", "epoch": 0, "incumbent_version": 0, "decision": "accepted", "reason": "r",
        "candidate_val": val, "incumbent_val": val, "incumbent_version_after": version,
        "spend": {stage: {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0, **({"target_calls": n} if n else {})}
                  for stage, n in calls.items()}})


def test_the_plan_starts_a_step_that_can_screen_one_edit_and_validate_it():
    plan = CallPlan(budget=200, test=48, validation=24, batch=8, screening=True)
    assert plan.step_calls([]) == 8 + 16 + 24  # the rollout, one edit's alone run and confirmation, validation
    history = [_step("e0-s00", 1, 0.5, rollout=8, screening=70, validation=40)]
    assert plan.step_calls(history) == 8 + 16 + 40  # the largest validation seen; screening shrinks to fit
    assert plan.stop_before("step e0-s01", 64, 88) is None  # 200 - 88 - 48 = 64 left
    why = plan.stop_before("step e0-s01", 64, 89)
    assert why is not None and why.startswith("target-call budget: stopped before step e0-s01, which may need 64")
    assert "63 left of 200 after 89 spent and 48 kept for the final test" in why
    # Screening may spend what is left once the test and the step's validation are kept, in rollouts:
    assert plan.screening_left(history, 100, baseline_calls=24) == 200 - 100 - 48 - 40
    assert plan.screening_left(history, 100, baseline_calls=48) == (200 - 100 - 48 - 40) / 2  # two calls a rollout
    assert plan.screening_left(history, 190, baseline_calls=24) == 0


def test_screening_under_a_small_allowance_drops_edits_as_not_measured_and_stops_confirming():
    from types import SimpleNamespace

    from skillopt_ci.core.edits import Edit, EditCaps
    from skillopt_ci.train.optimizer import RejectionKind, classify_rejection
    from skillopt_ci.train.screen import Screener

    ran: list[tuple[str, ...]] = []

    def run(text, tasks, label, at=0, trigger=False):  # the edit passes every time, the incumbent fails every time
        ran.append(tuple(tasks))
        return dict.fromkeys(tasks, 1.0 if "- Fix." in text else 0.0)

    proposed = SimpleNamespace(sources=lambda edit: ("t1", "t2"), successes=(), scores={"t1": 0.0, "t2": 0.0},
                               rollout=SimpleNamespace(failures=("t1", "t2")), applied=[Edit("append", text="- Fix.")],
                               candidate_text="skill\n- Fix.\n")
    left = {"rollouts": 3.0}
    screener = Screener(None, EditCaps(), candidate=False, alone=True, allowance=lambda: left["rollouts"])  # type: ignore[arg-type]
    none = screener._controlled("e0-s00", 1000, "skill\n", proposed, tuple(proposed.applied), proposed.scores, run)
    assert not none.passed and ran == []  # 2 alone + 4 paired > 3: nothing run, nothing spent
    edit = none.note.edits[0]
    assert edit.reason == "screened out: the target-call budget left too few calls to screen it (not measured)"
    assert classify_rejection(edit.reason, pairs=edit.pairs).kind is RejectionKind.UNPROVEN  # may come back
    left["rollouts"] = 7.0  # the alone run (2) and one paired round (4), then no more
    some = screener._controlled("e0-s00", 1000, "skill\n", proposed, tuple(proposed.applied), proposed.scores,
                                lambda *a, **k: (left.update(rollouts=left["rollouts"] - len(a[1])), run(*a, **k))[1])
    edit = some.note.edits[0]
    assert not some.passed and edit.pairs == (2, 0)  # two wins, the budget stopped the rounds before a confirmation
    assert edit.reason.endswith("not enough to confirm within the target-call budget")
    assert classify_rejection(edit.reason, pairs=edit.pairs).kind is RejectionKind.UNPROVEN


def test_old_runs_load_and_get_a_curve_by_step():
    assert StageSpend.from_dict({"input_tokens": 3, "output_tokens": 4, "cost_usd": 0.5}).target_calls == 0
    assert "target_calls" not in StageSpend(3, 4, 0.5).to_dict()  # old files stay as they were
    curve = best_so_far([_step("e0-s00", 1, 0.6, rollout=0), _step("e0-s01", 1, 0.6, rollout=0)], 0.4)
    assert [(p.step, p.calls, p.version) for p in curve] == [("baseline", 0, 0), ("e0-s00", 0, 1), ("e0-s01", 0, 1)]
    summary = TrainingSummary.from_dict({**_SUMMARY, "best_so_far": [p.to_dict() for p in curve]})
    assert curve_line(summary) == "Best so far by step: baseline → val 0.400 (v0), e0-s00 → val 0.600 (v1), " \
                                  "e0-s01 → val 0.600 (v1)"
    assert curve_line(TrainingSummary.from_dict(_SUMMARY)) == ""  # a summary written before the curve


_SUMMARY = {
    "skill": {"name": "s"}, "suite": {"name": "x"}, "baseline_hash": "a", "best_hash": "b", "final_hash": "b",
    "best_version": 1, "val": {"split": "val", "current": 0.4, "trained": 0.6, "delta": 0.2, "ci": None,
                               "verdict": "improved", "n_tasks": 4},
    "test": None, "final_val": 0.6, "final_test": None, "accepted_edits": [], "steps_accepted": 1,
    "steps_rejected": 0, "steps_skipped": 0, "points": [], "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
    "wall_time_s": 1.0, "improved": True,
}
