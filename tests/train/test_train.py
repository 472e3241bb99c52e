"""``skillopt-ci train`` end to end with the simulated target and optimizer behind the scripted
server (the real OpenAI SDK), real files, and real processes for kill-and-resume."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers.cli import run_cli
from helpers.project import LEGACY_TRAIN
from helpers.training import kill_and_resume, stable_history, summary_of, train, train_project
from skillopt_ci.sim import Fault, ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_OPTIMIZER, SimulatedModels
from skillopt_ci.train.history import Decision, StepKind, StepRecord
from skillopt_ci.train.state import TrainState

SKILL = "skills/ticket-triage/SKILL.md"


@pytest.fixture
def sim():
    with ScriptedModelServer(SimulatedModels()) as server:
        yield server


def test_training_raises_validation_and_writes_the_run(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url)
    run = tmp_path / "run"
    res = train(project, run)
    assert res.code == 0, res.err
    s = summary_of(run)
    assert s["val"]["trained"] > s["val"]["current"] and s["improved"]
    assert s["steps_accepted"] >= 1 and s["steps_rejected"] >= 1  # the bad edits were caught
    assert s["test"] is not None and s["test"]["trained"] >= s["test"]["current"] - 0.05
    assert "val" in res.out and "improved" in res.err  # the table says whether val rose *significantly*
    # The run directory: every version, the history, the best skill, the report.
    state = TrainState.load(run)
    assert state.phase == "done" and len(state.versions) == s["steps_accepted"] + 1
    for v in state.versions:
        assert (run / "skills" / f"v{v.number:03d}.md").is_file()
    assert (run / "best_skill.md").read_text() == (run / "skills" / f"v{state.incumbent:03d}.md").read_text()
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert history == [r.to_dict() for r in state.history]
    step = next(r for r in history if r["decision"] == "accepted")
    for key in ("batch", "rollout", "proposals", "merged", "selected", "applied", "spend", "reason"):
        assert key in step, key
    assert set(step["spend"]) == {"rollout", "reflect", "screening", "validation"}
    assert (run / "steps" / step["step"] / "candidate.diff").read_text().startswith("--- current")
    report = (run / "report.md").read_text()
    assert "## Accepted edits" in report and "| val |" in report
    config = json.loads((run / "config.json").read_text())
    assert config["models"]["optimizer"]["model"] == SIM_OPTIMIZER
    # The skill file itself is untouched: training proposes, it never writes the repository.
    assert (project / SKILL).read_text() == (run / "skills/v000.md").read_text()


def test_rerun_of_a_finished_run_changes_nothing(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url, train={"epochs": 1})
    run = tmp_path / "run"
    assert train(project, run).code == 0
    calls = sim.call_count
    before = (run / "state.json").read_text()
    assert train(project, run).code == 0
    assert sim.call_count == calls and (run / "state.json").read_text().split('"spent"')[0] == before.split('"spent"')[0]


def test_early_stopping_makes_the_same_decisions_with_fewer_rollouts(tmp_path, sim):
    # The same decisions hold while the optimizer's prompts are the same: the rejection memory quotes
    # a lost validation's means, which early stopping truncates, so in general later proposals may
    # differ. This scripted run (reflection groups of 8) is one where they do not.
    runs = {}
    for early in (True, False):
        project = train_project(tmp_path / f"p{early}", sim.openai_base_url, train={"early_stop": early, "group_size": 8,
                                                                                **LEGACY_TRAIN},
                                cache={"mode": "off"})
        before = sim.call_count
        assert train(project, tmp_path / f"run{early}").code == 0
        state = TrainState.load(tmp_path / f"run{early}")
        target_calls = sum(len((tmp_path / f"run{early}" / "steps" / r.step / "val" / "results.jsonl")
                               .read_text().splitlines())
                           for r in state.history if (tmp_path / f"run{early}" / "steps" / r.step / "val").exists())
        runs[early] = ([(r.step, r.decision) for r in state.history], target_calls, sim.call_count - before)
    assert runs[True][0] == runs[False][0]
    assert runs[True][1] < runs[False][1]


def test_slow_update_and_meta_skill_are_wired(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url)
    run = tmp_path / "run"
    assert train(project, run).code == 0
    state = TrainState.load(run)
    slow = [r for r in state.history if r.kind is StepKind.SLOW_UPDATE]
    assert slow and slow[0].step == "e0-slow" and state.epochs[0].slow_update == slow[0]
    assert set(slow[0].to_dict()["categories"]) >= {"improved", "regressed", "still_failing", "still_passing"}
    meta = state.epochs[0].meta_skill.text
    assert meta.strip()
    # The meta skill is optimizer memory: epoch 1's reflections see it, no skill version holds it.
    epoch1 = [c for c in sim.calls if c.request.model == SIM_OPTIMIZER and "reflect" in c.request.last_user.lower()]
    assert any(meta.splitlines()[0] in c.request.last_user for c in epoch1)
    for v in state.versions:
        assert meta.splitlines()[0] not in (run / "skills" / f"v{v.number:03d}.md").read_text()


def test_optimizer_prose_is_retried_then_the_step_is_skipped(tmp_path):
    with ScriptedModelServer(SimulatedModels(malformed=True)) as server:
        project = train_project(tmp_path / "p", server.openai_base_url, train={"epochs": 1})
        res = train(project, tmp_path / "run")
        assert res.code == 0, res.err
        optimizer_calls = [c for c in server.calls if c.request.model == SIM_OPTIMIZER]
    state = TrainState.load(tmp_path / "run")
    assert all(r.decision is Decision.SKIPPED for r in state.history)
    assert all("optimizer output unusable" in r.reason for r in state.history)
    assert len(state.versions) == 1
    # Each reflection was asked twice: once, then once more with the validation error.
    assert any("could not be used" in c.request.last_user for c in optimizer_calls)
    assert (tmp_path / "run/best_skill.md").read_text() == (project / SKILL).read_text()
    assert summary_of(tmp_path / "run")["improved"] is False


@pytest.mark.parametrize("patience", [1, None])
def test_training_stops_after_an_epoch_that_changed_nothing_and_tests_its_best(tmp_path, patience):
    # Every reflection is prose: no step can change the skill, so the epochs after the first would
    # start from the same skill. With patience 1 the run tests its best then; without, it runs all 3.
    with ScriptedModelServer(SimulatedModels(malformed=True)) as server:
        project = train_project(tmp_path / "p", server.openai_base_url, train={"epochs": 3, "patience": patience})
        res = train(project, tmp_path / "run")
    assert res.code == 0, res.err
    state, s = TrainState.load(tmp_path / "run"), summary_of(tmp_path / "run")
    assert state.phase == "done" and s["complete"] is True and s["test"] is not None
    assert {r.epoch for r in state.history} == ({0} if patience else {0, 1, 2})
    if patience:
        assert s["stopped"] == "converged: 1 epoch in a row changed nothing (train.patience); 2 of 3 epochs not run"
        assert s["stopped"] in res.out + res.err
    else:
        assert s["stopped"] is None


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5])
def test_a_bad_patience_is_rejected_before_anything_runs(tmp_path, bad):
    project = train_project(tmp_path / "p", "http://127.0.0.1:9", train={"patience": bad})
    res = train(project, tmp_path / "run")
    assert res.code == 2 and "train.patience" in res.err and str(bad) in res.err
    assert not (tmp_path / "run").exists()


def test_unchanged_epochs_counts_back_from_the_last_finished_epoch():
    def record(epoch: int, version: int | None) -> StepRecord:
        return StepRecord(f"e{epoch}-s00", StepKind.STEP, epoch, 0, candidate_version=version)

    state = TrainState(epoch=3, history=[record(0, 1), record(1, None), record(2, None)])
    assert state.unchanged_epochs() == 2
    state.history.append(StepRecord("e2-audit-00", StepKind.AUDIT, 2, 1, candidate_version=2))  # a removal is a change
    assert state.unchanged_epochs() == 0
    assert TrainState(epoch=2, history=[record(1, None)]).unchanged_epochs() == 2  # epoch 0 had no record at all
    assert TrainState(epoch=0).unchanged_epochs() == 0


def test_token_budget_stops_at_a_checkpoint_with_a_report(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url)
    run = tmp_path / "run"
    res = train(project, run, "--budget-tokens", "6000")
    assert res.code == 0, res.err
    s = summary_of(run)
    assert s["complete"] is False and "token budget reached" in s["stopped"]
    assert "Stopped early" in (run / "report.md").read_text()
    assert "re-run the same command to resume" in res.err
    # A bigger budget resumes the same run to the end.
    assert train(project, run).code == 0
    assert summary_of(run)["complete"] is True


def test_budget_of_zero_evaluates_nothing_and_exits_3(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url)
    res = train(project, tmp_path / "run", "--budget-tokens", "0")
    assert res.code == 3 and "nothing could be evaluated" in res.err and "token budget" in res.err
    assert (tmp_path / "run/state.json").is_file()  # the checkpoint is kept
    assert sim.call_count == 0


def test_target_failing_mid_run_keeps_the_checkpoint(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url, target={"max_retries": 0},
                            train={"epochs": 1}, cache={"mode": "off"})
    calls = {"n": 0}

    def plan(request):
        if request.model != SIM_OPTIMIZER:
            calls["n"] += 1
            if calls["n"] > 30:
                return Fault.server_error()
        return None

    sim.fault_plan = plan
    res = train(project, tmp_path / "run")
    assert res.code == 3 and "aborted after" in res.err
    state = TrainState.load(tmp_path / "run")
    assert state.versions and state.versions[0].val_mean is not None
    sim.fault_plan = None
    assert train(project, tmp_path / "run").code == 0
    assert TrainState.load(tmp_path / "run").phase == "done"


def test_zero_score_survives_a_resume(tmp_path, sim):
    project = train_project(tmp_path / "p", sim.openai_base_url)
    skill = project / SKILL
    skill.write_text(skill.read_text().replace("Answer with only category/priority, for example `billing/P3`, and nothing else.",
                                               "Answer politely."))
    run = tmp_path / "run"
    res = train(project, run, "--budget-tokens", "2000")
    state = TrainState.load(run)
    assert state.versions[0].val_mean == 0.0
    assert summary_of(run)["val"]["current"] == 0.0
    assert train(project, run, "--budget-tokens", "2001").code == 0
    resumed = TrainState.load(run)
    assert resumed.versions[0].val_mean == 0.0 and resumed.versions[0].val_mean is not None
    assert res.code == 0


@pytest.mark.parametrize(("setup", "message"), [
    ("empty-train", "'train' split has no tasks"),
    ("no-optimizer", "training needs an optimizer model"),
    ("token-cap", "no room for any edit"),
    ("unknown-skill", "no configured skill named 'nope'"),
])
def test_bad_training_input(tmp_path, sim, setup, message):
    project = train_project(tmp_path / "p", sim.openai_base_url,
                            train={"max_skill_tokens": 60} if setup == "token-cap" else None)
    if setup == "empty-train":
        (project / "eval_suites/ticket-triage/train.jsonl").write_text("")
    if setup == "no-optimizer":
        data = yaml.safe_load((project / "skillopt.yml").read_text())
        del data["models"]["optimizer"]
        (project / "skillopt.yml").write_text(yaml.safe_dump(data))
    skill = "nope" if setup == "unknown-skill" else "ticket-triage"
    res = run_cli("train", "--skill", skill, "--out", str(tmp_path / "run"), cwd=project)
    assert res.code == 2 and message in res.err, res.err
    assert not (tmp_path / "run").exists() and sim.call_count == 0


def test_killed_training_resumes_to_the_same_history_and_best_skill(tmp_path):
    with ScriptedModelServer(SimulatedModels(), latency=0.01) as server:
        reference = train_project(tmp_path / "ref", server.openai_base_url, cache={"mode": "off"})
        assert train(reference, tmp_path / "ref-run").code == 0
        total = server.call_count
        expected = TrainState.load(tmp_path / "ref-run")
        for kill_at in (total // 8, total // 3, (2 * total) // 3):
            out, state = kill_and_resume(server, tmp_path, kill_at)
            assert stable_history(state.history) == stable_history(expected.history), kill_at
            assert [v.hash for v in state.versions] == [v.hash for v in expected.versions]
            assert (out / "best_skill.md").read_text() == (tmp_path / "ref-run/best_skill.md").read_text()
            assert state.meta_skill == expected.meta_skill and state.buffer == expected.buffer
