"""Screening before validation and statistical credit assignment (``train.screening``,
``train.screen_edits_alone``, ``train.credit_confidence``), end to end: the real CLI against the
simulated target behind the scripted server, with scripted optimizers that propose a useless, a
good and a harmful rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import run_cli
from helpers.project import LEGACY_TRAIN
from helpers.repo import SKILL
from helpers.training import kill_and_resume, stable_history, train_project
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_OPTIMIZER, SimulatedModels
from skillopt_ci.sim.triage import TriagePolicy
from skillopt_ci.train.history import Decision
from skillopt_ci.train.screen import count
from skillopt_ci.train.state import TrainState

BUG_ANCHOR = '- If the ticket mentions "crash" or "error", the category is bug.'
BUG_RULE = '- If the ticket mentions "crash", "error", "broken" or "freezes", the category is bug.'
GREETING = "- Always greet the customer warmly."
HARMFUL = '- If the ticket mentions "error", the category is billing.'  # placed first, it wins over the bug rule

GOOD_EDIT = {"op": "replace", "anchor": BUG_ANCHOR, "text": BUG_RULE, "rationale": "freezes and broken are bugs"}
USELESS_EDIT = {"op": "append", "text": GREETING, "rationale": "tone"}
HARMFUL_EDIT = {"op": "insert_after", "anchor": "## Category", "text": HARMFUL, "rationale": "errors are billing"}


def optimizer(edits: list[dict], target=None):
    """A scripted optimizer proposing ``edits`` until the skill holds the good rule (no edits for
    successes); every other request goes to ``target``."""
    target = target or TriagePolicy()

    def policy(request):
        if request.model != SIM_OPTIMIZER:
            return target(request)
        wanted = [] if BUG_RULE in request.last_user or "reflect on successes" in request.last_user else edits
        return json.dumps({"analysis": "scripted", "edits": wanted})

    return policy


def val_inputs(project: Path) -> list[str]:
    lines = (project / "eval_suites/ticket-triage/val.jsonl").read_text().splitlines()
    return [json.loads(line)["input"] for line in lines if line.strip()]


def validation_calls(server: ScriptedModelServer, project: Path) -> int:
    """Target calls on validation tasks, counted at the server."""
    inputs = val_inputs(project)
    return sum(1 for c in server.calls if c.request.model != SIM_OPTIMIZER
               and any(text in c.request.last_user for text in inputs))


def run(tmp_path: Path, name: str, policy, train: dict, **config) -> tuple[TrainState, Path, Path, int]:
    with ScriptedModelServer(policy) as server:
        project = train_project(tmp_path / f"p-{name}", server.openai_base_url, cache={"mode": "off"},
                                train={"epochs": 1, "slow_update": False, "meta_skill": False, **train}, **config)
        res = run_cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / name), "--quiet", cwd=project)
        assert res.code == 0, res.err
        calls = validation_calls(server, project)
    return TrainState.load(tmp_path / name), tmp_path / name, project, calls


def test_a_failure_is_fixed_when_its_score_rises_and_a_success_broken_when_it_falls():
    before = {"f1": 0.0, "f2": 0.5, "f3": 0.5, "s1": 1.0, "s2": 1.0}
    result = count(before, {"f1": 0.5, "f2": 0.5, "f3": 0.0, "s1": 0.5, "s2": 1.0}, ["f1", "f2", "f3"], ["s1", "s2"])
    assert (result.fixed, result.broken, result.passes) == (1, 1, True)
    assert result.why() == "fixed 1 of 3 training failures, broke 1 of 2 successes"
    worse = count(before, {"f1": 0.5, "s1": 0.0, "s2": 0.5}, ["f1", "f2", "f3"], ["s1", "s2"])
    assert not worse.passes and worse.why() == "fixed 1 of 3 training failures, broke 2 of 2 successes"
    assert count(before, {"f1": 0.0}, ["f1"], []).why() == "fixed 0 of 1 training failures"


def test_screening_rejects_a_candidate_that_fixes_nothing_without_validation(tmp_path):
    policy = optimizer([USELESS_EDIT])
    state, out, project, calls = run(tmp_path, "screened", policy, {**LEGACY_TRAIN, "screening": True})
    n_val = len(val_inputs(project))
    assert calls == n_val  # the baseline's validation, nothing more
    steps = [r for r in state.history if r.decision is not None]
    assert steps and all(r.decision is Decision.REJECTED for r in steps)
    first = steps[0]
    assert first.reason == f"screened out: fixed 0 of {len(first.rollout.failures)} training failures"
    assert first.screen is not None and not first.screen.passed and first.screen.fixed == 0
    assert first.outcome.spend["screening"].input_tokens > 0 and first.outcome.spend["validation"].input_tokens == 0
    assert not (out / "steps" / first.step / "val").exists()
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert history[0]["screen"]["reason"] == first.reason
    # Without screening the same useless candidates are validated.
    plain, _, _, unscreened = run(tmp_path, "unscreened", policy, LEGACY_TRAIN)
    assert unscreened > n_val
    assert all(r.screen is None and set(r.outcome.spend) <= {"rollout", "reflect", "validation"}
               for r in plain.history)  # options off: today's records


def test_screen_edits_alone_removes_a_harmful_edit_bundled_with_a_good_one(tmp_path):
    policy = optimizer([GOOD_EDIT, HARMFUL_EDIT])
    options = {"batch_size": 18, "credit_assignment": False}
    state, out, project, _ = run(tmp_path, "alone", policy, options)  # the defaults screen each edit alone
    step = state.history[0]
    assert step.decision is Decision.ACCEPTED, step.reason
    assert [e.edit.text for e in step.screen.dropped] == [HARMFUL]
    dropped = step.screen.dropped[0]
    assert dropped.reason.startswith("screened out alone: fixed none of") and dropped.failures
    kept = next(e for e in step.screen.edits if e.kept)
    assert kept.edit.text == BUG_RULE and kept.fixed >= 1
    # confirmed against the current skill on the failures it fixed, side by side
    assert kept.pairs is not None and kept.pairs[0] > kept.pairs[1] and kept.confirmed is None
    assert "beat the incumbent in" in kept.reason and step.screen.confirmed
    assert "1 of 2 edits screened out alone" in step.reason
    best = (out / "best_skill.md").read_text()
    assert BUG_RULE in best and HARMFUL not in best
    summary = json.loads((out / "summary.json").read_text())
    assert [e["edit"]["text"] for e in summary["accepted_edits"]] == [BUG_RULE]
    # Each decision in one line, and the edit left out with why: in the summary and in report.md.
    point = next(p for p in summary["points"] if p["step"] == step.step)
    assert point["reason"] == step.reason
    assert [(x["text"], x["reason"]) for x in point["left_out"]] == [(HARMFUL, dropped.reason)]
    report = (out / "report.md").read_text()
    assert "## Edits left out before a decision" in report and dropped.reason.split(":")[0] in report
    # Without it, the harmful rule rides in with the good one (the bundle beats the incumbent).
    _, plain, _, _ = run(tmp_path, "bundled", policy, {**options, **LEGACY_TRAIN})
    assert HARMFUL in (plain / "best_skill.md").read_text()
    assert (project / SKILL).read_text() != best


def noisy_run(tmp_path: Path, name: str, seed: int, confidence: float | None) -> TrainState:
    policy = optimizer([USELESS_EDIT, GOOD_EDIT], target=TriagePolicy(flip=0.2, seed=seed))
    train = {"batch_size": 18, "repeats": 2, "credit_confidence": confidence, **LEGACY_TRAIN}
    state, _, _, _ = run(tmp_path, name, policy, train, concurrency=1)  # one at a time: the noise is repeatable
    return state


NOISY_SEED = 9  # a seed whose one leave-out pass of the good rule happens to come out level


def test_credit_confidence_keeps_a_good_edit_a_single_noisy_pass_drops(tmp_path):
    single = noisy_run(tmp_path, "single", NOISY_SEED, None)
    tested = noisy_run(tmp_path, "tested", NOISY_SEED, 0.8)
    step, same = single.history[0], tested.history[0]
    assert step.decision is same.decision is Decision.ACCEPTED  # the same noise up to credit assignment
    # One pass without the good rule came out level: today's rule drops it.
    assert step.credit.used == "pruned" and [r.edit.text for r in step.credit.removed] == [BUG_RULE]
    assert BUG_RULE not in [r.edit.text for r in same.credit.removed]
    trial = next(t for t in same.credit.trials if t["left_out"]["text"] == BUG_RULE)
    assert not trial["dropped"] and trial["reason"].startswith("leaving it out loses (mean difference +")
    assert BUG_RULE in (tmp_path / "tested/best_skill.md").read_text()
    assert BUG_RULE not in (tmp_path / "single/best_skill.md").read_text()


@pytest.mark.slow
def test_resume_with_the_options_on_gives_the_same_run(tmp_path):
    options = {"screening": True, "credit_confidence": 0.8}
    with ScriptedModelServer(SimulatedModels(), latency=0.01) as server:
        reference = train_project(tmp_path / "ref", server.openai_base_url, cache={"mode": "off"}, train=options)
        assert run_cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "ref-run"), "--quiet",
                       cwd=reference).code == 0
        total = server.call_count
        expected = TrainState.load(tmp_path / "ref-run")
        assert any(r.screen is not None for r in expected.history)
        for kill_at in (total // 4, (2 * total) // 3):
            out, state = kill_and_resume(server, tmp_path, kill_at, options)
            assert stable_history(state.history) == stable_history(expected.history), kill_at
            assert (out / "best_skill.md").read_text() == (tmp_path / "ref-run/best_skill.md").read_text()
