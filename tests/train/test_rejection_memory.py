"""The rejection memory is evidence, not a verdict: an edit measured and lost is told apart from one
dropped before anything measured it, in the prompt the optimizer reads, on disk, and in training."""

from __future__ import annotations

import json

import pytest

from helpers.training import train, train_project
from skillopt_ci.core.edits import Edit
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.reflection_prompt import between
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.history import Decision, StepKind
from skillopt_ci.train.optimizer import (
    EpochEdit,
    OptimizerBuffer,
    ReflectionContext,
    RejectionKind,
    classify_rejection,
)
from skillopt_ci.train.optimizer.buffer import REFUTED_HEADING, UNPROVEN_HEADING
from skillopt_ci.train.optimizer.meta import render_epoch_log
from skillopt_ci.train.optimizer.reflect import FAILURE, reflection_messages
from skillopt_ci.train.state import TrainState

LOST = Edit("append", "- Treat every billing case as urgent.")
NOISY = Edit("append", "- For billing cases, quote the invoice number first.")
MEMORY = ("## Memory of this epoch", "## What has helped before")


def memory_of(buffer: OptimizerBuffer) -> str:
    """The memory section of a real failure-reflection prompt built with ``buffer``."""
    messages = reflection_messages(FAILURE, [], ReflectionContext("# Skill\n", buffer, "", 3))
    return between(messages[-1].content, *MEMORY)


# ---- one classification ------------------------------------------------------------------------


def test_a_validation_loss_is_refuted_with_the_means_as_evidence():
    why = classify_rejection("validation does not beat the incumbent's 0.710", validated=True,
                             candidate_val=0.62, incumbent_val=0.71)
    assert why.kind is RejectionKind.REFUTED
    assert why.evidence == "validation 0.620 vs the incumbent's 0.710"
    together = classify_rejection("x", validated=True, candidate_val=0.5, incumbent_val=0.6, together=3)
    assert together.evidence.endswith("judged together with 2 other edits")
    early = classify_rejection("validation does not beat the incumbent's 0.710", validated=True, incumbent_val=0.71)
    assert early.kind is RejectionKind.REFUTED and "0.710" in early.evidence


@pytest.mark.parametrize(("pairs", "kind"), [((1, 4), RejectionKind.REFUTED), ((2, 2), RejectionKind.UNPROVEN),
                                             ((3, 1), RejectionKind.UNPROVEN), (None, RejectionKind.UNPROVEN)])
def test_a_screened_edit_is_refuted_only_by_losing_its_paired_re_runs(pairs, kind):
    why = classify_rejection("screened out: alone it fixed 1 of 2 training failures, confirmed 0", pairs=pairs)
    assert why.kind is kind
    if kind is RejectionKind.REFUTED:
        assert why.evidence == "lost 4 of 5 discordant paired re-runs against the incumbent"
    else:
        assert why.evidence == why.reason


@pytest.mark.parametrize("reason", [
    "screened out: proposed for no failure, so nothing can confirm it",
    "screened out: cannot be applied alone",
    "screened out alone: fixed none of 1 training failures",
    "screened out: fixed 1 of 4 training failures, broke 2 of 3 successes",
])
def test_procedural_reasons_are_unproven(reason):
    assert classify_rejection(reason).kind is RejectionKind.UNPROVEN


def test_a_gain_too_small_to_accept_is_not_a_loss():
    why = classify_rejection("rejected: +0.062 [-0.016, +0.141] paired over 24 tasks", validated=True,
                             candidate_val=0.74, incumbent_val=0.68)
    assert why.kind is RejectionKind.UNPROVEN
    assert why.evidence == "validation 0.740 vs the incumbent's 0.680: higher, but not enough to be accepted"
    tie = classify_rejection("validation does not beat", validated=True, candidate_val=0.68, incumbent_val=0.68)
    assert tie.kind is RejectionKind.REFUTED


def test_a_rejected_slow_update_block_and_an_inconclusive_gate_are_unproven():
    block = classify_rejection("rejected: -0.100", validated=True, candidate_val=0.6, incumbent_val=0.7, block=True)
    assert block.kind is RejectionKind.UNPROVEN
    assert classify_rejection("inconclusive: too few measurements").kind is RejectionKind.UNPROVEN


# ---- what the optimizer reads ------------------------------------------------------------------


def test_the_memory_says_not_to_repeat_only_what_was_measured_and_lost():
    buffer = (OptimizerBuffer()
              .with_rejected([LOST], classify_rejection("validation does not beat", validated=True,
                                                        candidate_val=0.62, incumbent_val=0.71))
              .with_rejected([NOISY], classify_rejection("screened out alone: fixed none of 1 training failures")))
    memory = memory_of(buffer)
    refuted = between(memory, REFUTED_HEADING, UNPROVEN_HEADING)
    unproven = between(memory, UNPROVEN_HEADING, "## none")
    assert refuted and unproven
    assert 'append "- Treat every billing case as urgent.": validation 0.620 vs the incumbent\'s 0.710' in refuted
    assert "do not" in refuted.lower() and "invoice number" not in refuted
    assert 'append "- For billing cases, quote the invoice number first.": screened out alone' in unproven
    assert "do not" not in unproven.lower() and "may be proposed again" in unproven
    assert "urgent" not in unproven


def test_a_memory_of_only_unproven_edits_says_nothing_against_them():
    memory = memory_of(OptimizerBuffer().with_rejected([NOISY], "screened out: cannot be applied alone"))
    assert REFUTED_HEADING not in memory and UNPROVEN_HEADING in memory
    assert "do not" not in memory.lower() and "invoice number" in memory


def test_the_prompts_tell_the_optimizer_an_unmeasured_edit_may_come_back():
    messages = reflection_messages(FAILURE, [], ReflectionContext("# Skill\n", OptimizerBuffer(), "", 3))
    rules = messages[-1].content.split("## Rules for edits", 1)[1]
    assert "measured and lost" in rules and "propose it again" in rules
    assert "listed as rejected in the memory" not in rules


def test_the_epoch_log_tells_the_meta_skill_which_losses_were_measured():
    log = render_epoch_log([EpochEdit(LOST, False, "validation 0.5", RejectionKind.REFUTED),
                            EpochEdit(NOISY, False, "fixed none", RejectionKind.UNPROVEN),
                            EpochEdit(NOISY, True, "validation 0.8 beats 0.7"),
                            EpochEdit(LOST, False, "an old log")])
    lines = log.splitlines()[1:-1]
    assert [line.split(":", 1)[0] for line in lines] == ["- measured and lost", "- dropped unmeasured", "- accepted",
                                                          "- rejected"]
    entry = EpochEdit(NOISY, False, "fixed none", RejectionKind.UNPROVEN)
    assert EpochEdit.from_dict(json.loads(json.dumps(entry.to_dict()))) == entry
    assert "kind" not in EpochEdit(NOISY, True, "ok").to_dict()  # an accepted entry is written as before


# ---- on disk ------------------------------------------------------------------------------------


def test_a_version_1_buffer_loads_with_kinds_from_its_reasons():
    v1 = {"schema_version": 1, "epoch": 1, "rejected": [
        {"edit": LOST.to_dict(), "reason": "validation does not beat the incumbent's 0.667", "epoch": 0},
        {"edit": NOISY.to_dict(), "reason": "screened out alone: fixed none of 1 training failures", "epoch": 1},
    ], "failure_counts": {"t1": 2}, "recurring_failures": ["t1"]}
    buffer = OptimizerBuffer.from_dict(v1)
    assert [r.kind for r in buffer.rejected] == [RejectionKind.REFUTED, RejectionKind.UNPROVEN]
    assert [r.reason for r in buffer.rejected] == [e["reason"] for e in v1["rejected"]]
    assert dict(buffer.failure_counts) == {"t1": 2} and buffer.epoch == 1
    data = json.loads(json.dumps(buffer.to_dict()))
    assert data["schema_version"] == 2 and [r["kind"] for r in data["rejected"]] == ["refuted", "unproven"]
    assert OptimizerBuffer.from_dict(data) == buffer
    memory = memory_of(buffer)
    assert "(epoch 1)" in between(memory, REFUTED_HEADING, UNPROVEN_HEADING)
    with pytest.raises(ValueError, match="schema_version 3"):
        OptimizerBuffer.from_dict({**data, "schema_version": 3})


# ---- in training --------------------------------------------------------------------------------


def test_training_records_a_validation_loss_as_refuted_with_its_means(tmp_path):
    with ScriptedModelServer(SimulatedModels()) as sim:
        project = train_project(tmp_path / "p", sim.openai_base_url,
                                train={"epochs": 2, "acceptance": "mean", "early_stop": False,
                                       "credit_assignment": False, "group_size": 8})  # a run with both losses
        assert train(project, tmp_path / "run").code == 0
    state = TrainState.load(tmp_path / "run")
    lost = [r for r in state.history if r.kind is StepKind.STEP and r.outcome is not None
            and r.outcome.decision is Decision.REJECTED and r.outcome.candidate_val is not None]
    assert lost, "the simulated optimizer's harmful edits should lose on validation"
    step = lost[-1]
    evidence = f"validation {step.outcome.candidate_val:.3f} vs the incumbent's {step.outcome.incumbent_val:.3f}"
    edits = {o.edit.key() for o in step.applied if o.applied}
    entries = [r for r in state.buffer.rejected if r.edit.key() in edits]
    assert entries and all(r.kind is RejectionKind.REFUTED and r.evidence.startswith(evidence) for r in entries)
    refuted = between("\n" + state.buffer.render(), REFUTED_HEADING, UNPROVEN_HEADING)
    assert evidence in refuted
    # the rejected slow-update block of the same epoch is kept as unproven, not held against it
    slow = [r for r in state.history if r.kind is StepKind.SLOW_UPDATE and r.epoch == step.epoch and r.applied
            and r.outcome is not None and r.outcome.decision is Decision.REJECTED]
    assert slow
    for record in slow:
        block = [r for r in state.buffer.rejected if r.edit.key() == record.applied[0].edit.key()]
        assert block and block[0].kind is RejectionKind.UNPROVEN
