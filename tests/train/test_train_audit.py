"""The harm audit at an epoch's end (``train/audit.py``): the real trainer on the noisy simulated world
behind the scripted server, with accepted rules planted in the state together with the evidence
they were accepted on; and deletions judged on validation by the ``screened`` rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.noisy_world import (
    GOOD_RULES,
    HARMFUL_RULES,
    USELESS_RULES,
    NoisyModels,
    harmful_in,
    perfect_skill,
    world_config,
    write_world,
)
from helpers.training import stable_history
from skillopt_ci.core.edits import Edit, EditCaps, apply_edits
from skillopt_ci.core.signtest import sign_test
from skillopt_ci.core.skill import load_skill
from skillopt_ci.engine.evaluation import EvalSession
from skillopt_ci.inputs.config import Budgets, TrainPolicy
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.sim.server import ScriptedModelServer
from skillopt_ci.train.acceptance import ScreenedRule
from skillopt_ci.train.audit import pick, removal_of, without
from skillopt_ci.train.history import Decision, EditEvidence, ScreenedEdit, ScreenNote, StepKind
from skillopt_ci.train.optimizer import OptimizerBuffer
from skillopt_ci.train.report import render_train_report
from skillopt_ci.train.state import TrainState
from skillopt_ci.train.summary import build_summary
from skillopt_ci.train.trainer import Trainer

GOOD = f"- {GOOD_RULES['billing']}"
HARMFUL, VICTIM = next(iter(HARMFUL_RULES.items()))  # breaks "returns", whose rule the skill states
USELESS = f"- {USELESS_RULES[0]}"
PLANTED = perfect_skill().replace(f"{GOOD}\n", "") + f"{GOOD}\n- {HARMFUL}\n{USELESS}\n"


def append(text: str) -> Edit:
    return Edit("append", text=text, rationale="planted")


class Killed(Exception):
    """Stands for a kill: nothing after the last checkpoint is saved."""


def planted_run(server: ScriptedModelServer, root: Path, out: Path, kill_at: str | None = None) -> TrainState:
    """A one-epoch run whose incumbent holds a good, a harmful and a useless rule, each planted with
    the evidence of a step that accepted it, from the end of its epoch on: the audit, then the test.
    ``kill_at``: stop (as a kill would) when an evaluation into that directory starts. ``server``
    plays the world's models (one per run, kept across a kill as a provider would be)."""
    files = write_world(root / "world", seed=3)
    suite = load_suite(files.suite)
    kinds = dict(zip([t.id for t in suite.tasks("train")], files.kinds["train"], strict=True))
    billing = tuple(t for t, k in kinds.items() if k == "billing")[:2]
    noise = tuple(t for t, k in kinds.items() if k == "shipping")[:1]  # a kind the rule does nothing for
    policy = TrainPolicy(epochs=1, seed=0, slow_update=False, meta_skill=False)
    config = world_config(server.openai_base_url, root, files, policy, concurrency=1)
    with EvalSession(config, show_progress=False) as session:
        trainer = Trainer(config, config.skills[0], load_skill(files.skill), suite, session, out, policy=policy,
                          budgets=Budgets(), log=lambda line: None)
        state = TrainState.load(out)
        if state is None:
            state = TrainState()
            trainer.do_baseline(state)
            planted = trainer.evaluator.evaluate(PLANTED, "val", "steps/e0-s00/val")
            trainer.add_version(state, PLANTED, "e0-s00", planted.summary.mean, "steps/e0-s00/val")
            state.incumbent, state.phase, state.step = 1, "epoch_end", trainer.steps_per_epoch
            state.buffer = OptimizerBuffer()
            state.evidence = [EditEvidence("e0-s00", 0, append(GOOD), billing, 2, 0),
                              EditEvidence("e0-s00", 1, append(f"- {HARMFUL}"), noise, 2, 0),
                              EditEvidence("e0-s00", 2, append(USELESS), noise, 2, 0)]
            trainer.checkpoint(state)
        if kill_at is not None:
            evaluate = trainer.evaluator.evaluate

            def killing(text, split, out_dir, **kw):
                if out_dir == kill_at:
                    raise Killed(out_dir)
                return evaluate(text, split, out_dir, **kw)

            trainer.evaluator.evaluate = killing  # type: ignore[method-assign]
        state = trainer.run(state)
        (out / "report.md").write_text(render_train_report(build_summary(trainer, state), state))
    return state


def audits(state: TrainState) -> dict[str, object]:
    return {r.audit.edit.text: r for r in state.history if r.kind is StepKind.AUDIT}


def test_the_audit_removes_a_harmful_and_a_noise_confirmed_rule_and_keeps_a_good_one(tmp_path):
    with ScriptedModelServer(NoisyModels()) as server:
        state = planted_run(server, tmp_path, tmp_path / "run")
    best = (tmp_path / "run" / "skills" / f"v{state.incumbent:03d}.md").read_text()
    assert GOOD in best and HARMFUL not in best and USELESS not in best
    assert harmful_in(best) == []
    done = audits(state)
    harmful, useless, good = done[f"- {HARMFUL}"], done[USELESS], done[GOOD]
    # newest first; each removal is a version of its own
    assert [r.audit.edit.text for r in state.history if r.kind is StepKind.AUDIT] == [USELESS, f"- {HARMFUL}", GOOD]
    assert (useless.decision, harmful.decision, good.decision) == (Decision.ACCEPTED, Decision.ACCEPTED,
                                                                    Decision.REJECTED)
    assert [v.step for v in state.versions] == ["baseline", "e0-s00", useless.step, harmful.step]
    # the harmful rule: its evidence did not hold, and validation is better without it
    note = harmful.audit
    assert not note.reconfirmed and note.removed and note.better > note.worse
    assert note.without_val > note.with_val
    assert harmful.reason.startswith(f"removed: without it validation {note.without_val:.2f} vs {note.with_val:.2f}, "
                                     f"{note.better} of {note.better + note.worse} discordant pairs better")
    assert f"its evidence task won {note.wins} of {note.wins + note.losses}" in harmful.reason
    # the useless rule: not re-confirmed, and validation cannot tell: removed all the same
    assert not useless.audit.reconfirmed and useless.audit.removed and useless.reason.startswith("removed: ")
    # the good rule: re-confirmed on its own evidence, kept without spending validation
    assert good.audit.reconfirmed and good.audit.with_val is None
    assert good.reason.startswith("kept: its evidence tasks won ")
    assert good.outcome.spend["validation"].input_tokens == 0 and good.outcome.spend["confirmation"].input_tokens > 0
    assert [e.removed_by for e in state.evidence] == [None, harmful.step, useless.step]
    assert state.evidence[0].audits == 1
    # the records say so in the history file and the report
    lines = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["audit"] * 3 and lines[1]["audit"]["removed"] is True
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"| {harmful.step} | accepted |" in report and "removed: without it validation" in report


def test_a_run_killed_mid_audit_resumes_to_the_identical_run(tmp_path):
    with ScriptedModelServer(NoisyModels()) as server:
        reference = planted_run(server, tmp_path / "ref", tmp_path / "ref-run")
    second = next(r.step for r in reference.history if r.kind is StepKind.AUDIT and r.step.endswith("-01"))
    server = ScriptedModelServer(NoisyModels()).__enter__()
    with pytest.raises(Killed):
        planted_run(server, tmp_path / "k", tmp_path / "k-run", kill_at=f"steps/{second}/confirm-1-without")
    on_disk = TrainState.load(tmp_path / "k-run")
    # the premise: the kill came after the first audit had decided (and removed its rule), before a checkpoint
    assert on_disk is not None and on_disk.phase == "epoch_end" and on_disk.audited_epoch is None
    assert on_disk.history == [] and (tmp_path / "k-run" / "skills" / "v002.md").exists()
    assert (tmp_path / "k-run" / "steps" / second / "confirm-1-with" / "results.jsonl").exists()
    try:
        resumed = planted_run(server, tmp_path / "k", tmp_path / "k-run")
    finally:
        server.__exit__(None, None, None)
    assert stable_history(resumed.history) == stable_history(reference.history)
    assert resumed.evidence == reference.evidence and resumed.versions == reference.versions


def test_state_files_written_before_the_audit_load_and_its_records_survive_a_round_trip():
    old = TrainState(phase="steps").to_dict()
    assert "evidence" not in old and "audited_epoch" not in old  # a run without audits writes what it wrote
    assert TrainState.from_dict(old).evidence == []
    state = TrainState(phase="epoch_end", audited_epoch=0,
                       evidence=[EditEvidence("e0-s01", 1, append(GOOD), ("train-001",), 2, 0, audits=1)])
    again = TrainState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again.evidence == state.evidence and again.audited_epoch == 0


def test_sign_test_is_the_exact_one_sided_binomial_tail():
    assert sign_test(0, 0) == 1.0 and sign_test(0, 5) == 1.0
    assert sign_test(4, 0) == pytest.approx(1 / 16)
    assert sign_test(9, 2) == pytest.approx(67 / 2048)
    assert sign_test(5, 5) == pytest.approx(638 / 1024)


def test_a_rule_is_taken_out_by_the_inverse_of_the_edit_that_put_it_in():
    base = perfect_skill()
    added, _ = apply_edits(base, [append(USELESS)])
    assert without(added, append(USELESS), EditCaps())[0] == base
    anchor = f"- {GOOD_RULES['shipping']}"
    replaced = Edit("replace", anchor=anchor, text=f"{anchor} Always.")
    text, _ = apply_edits(base, [replaced])
    assert without(text, replaced, EditCaps())[0] == base
    assert removal_of(Edit("delete", anchor=anchor)) is None
    assert without(base, append(USELESS), EditCaps()) is None  # not in the skill: nothing to audit
    evidence = [EditEvidence(f"e0-s0{i}", 0, append(t), (), 2, 0, audits=a)
                for i, (t, a) in enumerate([(USELESS, 0), (f"- {HARMFUL}", 1), ("- Gone.", 0), (GOOD, 0)])]
    assert pick(evidence, base + f"{USELESS}\n- {HARMFUL}\n", EditCaps(), limit=3) == [3, 0, 1]  # "Gone." is gone
    assert pick(evidence, PLANTED, EditCaps(), limit=2) == [3, 0]  # fewest audits, then newest


class Gate:
    """Records which of the gate's tests a rule asked for."""

    def __init__(self):
        self.asked: list[tuple[str, str | None]] = []

    def judge_noninferior(self, incumbent, candidate_text, step_id, samples, *, mode=None):
        self.asked.append(("noninferior", mode))

    def judge_paired(self, incumbent, candidate_text, step_id, samples, *, sequential, honest):
        self.asked.append(("paired", None))


def test_the_screened_rule_judges_a_deletion_by_non_inferiority_and_anything_else_unconfirmed_by_a_gain():
    gate = Gate()
    ScreenedRule().judge(gate, None, "", "e0-s00", None, confirmed=False, deletes_only=True)
    ScreenedRule().judge(gate, None, "", "e0-s01", None, confirmed=False)
    assert gate.asked == [("noninferior", "deletions only; non-inferiority"), ("paired", None)]


def test_a_kept_deletion_does_not_cost_the_confirmed_edits_beside_it_their_non_inferiority():
    confirmed = ScreenedEdit(append(GOOD), ("t1",), 1, 0, True, "kept", (2, 0))
    deletion = ScreenedEdit(Edit("delete", anchor=USELESS), ("t1",), 0, 0, True, "kept for validation")
    note = ScreenNote(("t1",), (), 1000, 1, 0, (confirmed, deletion), True, "screening")
    assert note.confirmed
    unconfirmed = ScreenedEdit(append(USELESS), ("t1",), 1, 0, True, "kept")
    assert not ScreenNote(("t1",), (), 1000, 1, 0, (confirmed, unconfirmed), True, "screening").confirmed
    assert not ScreenNote(("t1",), (), 1000, 0, 0, (deletion,), True, "screening").confirmed


def test_screening_keeps_a_deletion_that_fixes_nothing_alone_for_validation_and_drops_an_addition():
    from types import SimpleNamespace

    from skillopt_ci.train.screen import Screener

    screener = Screener(None, EditCaps(), candidate=False, alone=True)  # type: ignore[arg-type]  # runs are faked
    proposed = SimpleNamespace(sources=lambda edit: ("t1", "t2"), successes=(),
                               rollout=SimpleNamespace(failures=("t1", "t2")))
    unchanged = lambda text, tasks, label, at=0, trigger=False: dict.fromkeys(tasks, 0.0)  # noqa: E731  # nothing is fixed
    deletion = Edit("delete", anchor=USELESS)
    before = {"t1": 0.0, "t2": 0.0}
    kept = screener._alone("e0-s00", PLANTED, 0, deletion, proposed, before, unchanged)
    assert kept.kept and kept.pairs is None and kept.reason.startswith("kept: passed to validation unconfirmed")
    dropped = screener._alone("e0-s00", PLANTED, 1, append("- Be brief."), proposed, before, unchanged)
    assert not dropped.kept and dropped.reason.startswith("screened out alone: fixed none of 2")


SENTENCE = "You route customer support tickets. "  # the simulated target reads no such line


def test_a_deletion_that_fixes_no_failure_is_accepted_on_validation_when_it_loses_nothing(tmp_path):
    from helpers.cli import run_cli
    from helpers.training import train_project
    from skillopt_ci.sim.sim_models import SIM_OPTIMIZER
    from skillopt_ci.sim.triage import TriagePolicy

    target = TriagePolicy()

    def policy(request):
        if request.model != SIM_OPTIMIZER:
            return target(request)
        wanted = [] if "reflect on successes" in request.last_user else [
            {"op": "delete", "anchor": SENTENCE, "rationale": "the model routes tickets without being told"}]
        return json.dumps({"analysis": "scripted", "edits": wanted})

    with ScriptedModelServer(policy) as server:
        project = train_project(tmp_path / "p", server.openai_base_url, cache={"mode": "off"},
                                train={"epochs": 1, "slow_update": False, "meta_skill": False})
        res = run_cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=project)
        assert res.code == 0, res.err
    state = TrainState.load(tmp_path / "run")
    step = next(r for r in state.history if r.screen is not None and r.screen.edits)
    assert step.screen.edits[0].reason.startswith("kept: passed to validation unconfirmed")
    assert step.decision is Decision.ACCEPTED, step.reason
    assert "deletions only; non-inferiority" in step.reason
    assert SENTENCE not in (tmp_path / "run" / "best_skill.md").read_text()
