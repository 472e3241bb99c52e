"""The training loop's collaborators, each alone, against the simulated models behind the scripted
server (the real OpenAI SDK): the stage evaluator, the edit proposer, the validation gate and
credit assignment."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from helpers.project import LEGACY_TRAIN
from skillopt_ci.core.compare import ComparePolicy
from skillopt_ci.core.edits import Edit, EditCaps
from skillopt_ci.core.skill import load_skill
from skillopt_ci.demo import demo_config
from skillopt_ci.engine.evaluation import EvalSession
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.inputs.config import Budgets, TrainPolicy
from skillopt_ci.inputs.scaffold import example_path
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_OPTIMIZER, SimulatedModels
from skillopt_ci.train.credit import CreditAssigner
from skillopt_ci.train.evaluate import BudgetExhausted, BudgetMeter, EarlyStop, StageEvaluator
from skillopt_ci.train.gate import ValidationGate, Verdict
from skillopt_ci.train.history import Decision, StageSpend
from skillopt_ci.train.optimizer import OptimizerBuffer
from skillopt_ci.train.propose import EditProposer
from skillopt_ci.train.state import Spend, Version

BUG_ANCHOR = '- If the ticket mentions "crash" or "error", the category is bug.'
BUG_RULE = '- If the ticket mentions "crash", "error", "broken" or "freezes", the category is bug.'
GREETING = "- Always greet the customer warmly."


class Parts:
    """A run directory, an evaluation session on the simulated models, and the example suite."""

    def __init__(self, tmp: Path, session: EvalSession, server: ScriptedModelServer):
        self.server = server
        self.dir, self.session = tmp / "run", session
        self.suite = load_suite(example_path("eval_suites/ticket-triage"))
        self.skill = load_skill(example_path("skills/ticket-triage/SKILL.md"))
        self.evaluator = StageEvaluator(session, self.suite, "ticket-triage", self.dir, 1, lambda: Budgets())
        self.caps = EditCaps(max_edit_chars=400, max_skill_tokens=4000)

    def baseline(self) -> Version:
        outcome = self.evaluator.evaluate(self.skill.text, "val", "versions/v000/val")
        return Version(0, self.skill.hash, None, "baseline", outcome.summary.mean, "versions/v000/val")

    def gate(self, **policy) -> ValidationGate:
        return ValidationGate(self.evaluator, self.suite.tasks("val"), 1, TrainPolicy(**{**LEGACY_TRAIN, **policy}),
                              ComparePolicy.from_gate(self.session.config.gate, margin=0.0),
                              lambda v: RunDir(self.dir / v.val_dir).load_results())


@pytest.fixture
def parts(tmp_path):
    with ScriptedModelServer(SimulatedModels()) as server:
        config = demo_config(server.openai_base_url, tmp_path / "runs")
        with EvalSession(config, show_progress=False) as session:
            yield Parts(tmp_path, session, server)


def test_evaluator_raises_budget_exhausted_when_the_budget_stops_it(parts):
    evaluator = replace(parts.evaluator, remaining=lambda: Budgets(max_tokens=0))
    with pytest.raises(BudgetExhausted, match="token"):
        evaluator.evaluate(parts.skill.text, "val", "out")


def test_evaluator_returns_an_evaluation_its_own_callback_stopped_whatever_the_message(parts):
    stop = EarlyStop(lambda results: "any words at all")  # fires before the first launch
    outcome = parts.evaluator.evaluate(parts.skill.text, "val", "out", stop_when=stop)
    assert stop.fired and not outcome.summary.complete and outcome.results == []
    assert outcome.summary.stopped == "any words at all"


def test_rollouts_in_flight_when_early_stopping_fires_are_counted_as_cancelled(parts):
    """Every worker is waiting on the model when the first result stops the run: the others' calls
    were sent (a provider bills them) and are counted, though no result of theirs is kept."""
    parts.server.latency = 0.3
    concurrency = parts.session.pool.config.concurrency
    tasks = parts.suite.tasks("val")
    assert len(tasks) >= concurrency > 1
    stop = EarlyStop(lambda results: "enough" if results else None)
    outcome = parts.evaluator.evaluate(parts.skill.text, "val", "out", stop_when=stop)
    assert stop.fired and len(outcome.results) == 1
    assert outcome.cancelled == concurrency - 1
    assert parts.evaluator.cancelled == concurrency - 1
    meter = BudgetMeter(parts.session, Budgets(), cancelled=lambda: parts.evaluator.cancelled)
    meter.start(Spend(cancelled_rollouts=2))
    assert meter.spent().cancelled_rollouts == concurrency + 1


def test_meter_counts_what_earlier_processes_spent(parts):
    meter = BudgetMeter(parts.session, Budgets(max_tokens=1000))
    meter.start(Spend(input_tokens=600, output_tokens=400))
    assert meter.exhausted() == "token budget reached (1000 of 1000)"
    assert meter.remaining().max_tokens == 0
    before = meter.reading()
    parts.evaluator.evaluate(parts.skill.text, "val", "out")
    assert meter.reading().minus(before).input_tokens > 0


def test_proposer_rolls_out_reflects_and_applies_within_the_budget(parts):
    proposer = EditProposer(parts.evaluator, parts.session, parts.caps, group_size=3, max_edits=3,
                            meter=lambda: StageSpend())
    batch = parts.suite.tasks("train")[:6]
    proposed = proposer.propose("e0-s00", parts.skill.text, batch, 0, OptimizerBuffer(), "", budget=2)
    assert proposed.rollout.failures, "the example skill fails some train tasks"
    assert set(proposed.rollout.failures) <= {t.id for t in batch}
    assert proposed.proposals and len(proposed.selected) <= 2
    assert proposed.candidate_text is not None and proposed.candidate_text != parts.skill.text
    assert all(e.text in proposed.candidate_text for e in proposed.applied if e.op != "delete")
    assert any(c.request.model == SIM_OPTIMIZER for c in parts.server.calls)
    assert (parts.dir / "steps/e0-s00/rollout/results.jsonl").is_file()


def test_proposer_says_why_when_nothing_applies(parts):
    proposer = EditProposer(parts.evaluator, parts.session, parts.caps, group_size=3, max_edits=3,
                            meter=lambda: StageSpend())
    proposed = proposer.propose("e0-s00", parts.skill.text, parts.suite.tasks("train")[:6], 0, OptimizerBuffer(),
                                "", budget=0)
    assert proposed.candidate_text is None and proposed.why_nothing() == "no edit proposed"


def test_gate_accepts_a_better_skill_and_rejects_a_tie_early(parts):
    incumbent = parts.baseline()
    better = parts.skill.text.replace(BUG_ANCHOR, BUG_RULE)
    assert better != parts.skill.text
    accepted = parts.gate().judge(incumbent, better, "e0-s00")
    assert accepted.verdict is Verdict.ACCEPTED and accepted.verdict.decision is Decision.ACCEPTED
    assert accepted.candidate_val > incumbent.val_mean and accepted.results
    tie = parts.gate(early_stop=True).judge(incumbent, parts.skill.text, "e0-s01")
    assert tie.verdict is Verdict.EARLY_REJECTED and tie.verdict.decision is Decision.REJECTED
    assert tie.candidate_val is None and tie.reason.startswith("validation does not beat")


def test_gate_without_early_stop_scores_the_whole_split_and_gives_the_same_reason(parts):
    incumbent = parts.baseline()
    full = parts.gate(early_stop=False).judge(incumbent, parts.skill.text, "e0-s01")
    early = parts.gate(early_stop=True).judge(incumbent, parts.skill.text, "e0-s02")
    assert full.verdict is Verdict.REJECTED and full.candidate_val == pytest.approx(incumbent.val_mean)
    assert full.reason == early.reason


def test_credit_assignment_drops_the_edit_that_does_not_help(parts):
    incumbent = parts.baseline()
    edits = [Edit("replace", BUG_RULE, BUG_ANCHOR, "freezes are bugs"), Edit("append", GREETING, "", "tone")]
    candidate_text = parts.skill.text.replace(BUG_ANCHOR, BUG_RULE).rstrip("\n") + "\n" + GREETING + "\n"
    accepted = parts.gate().judge(incumbent, candidate_text, "e0-s00")
    assert accepted.accepted
    base = parts.gate().incumbent_results(incumbent)
    credit = CreditAssigner(parts.evaluator, parts.suite.tasks("val"), parts.caps).assign(
        "e0-s00", parts.skill.text, edits, base, accepted.results)
    assert credit.used == "pruned" and credit.kept == [edits[0]]
    assert [r["edit"]["text"] for r in credit.removed] == [GREETING]
    assert BUG_RULE in credit.text and GREETING not in credit.text
    assert (parts.dir / "steps/e0-s00/credit").is_dir()
