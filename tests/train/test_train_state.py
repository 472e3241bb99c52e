"""Typed training state: ``state.json`` round-trips exactly through the records, files written
before the records were typed still load, and a file of another version fails with one line."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers.paths import DATA
from helpers.training import train, train_project
from skillopt_ci.core.edits import Edit, EditOutcome
from skillopt_ci.core.errors import InputError
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.history import (
    CreditNote,
    Decision,
    DroppedEdit,
    EpochRecord,
    MetaSkillNote,
    Rollout,
    StageSpend,
    StepKind,
    StepOutcome,
    StepRecord,
)
from skillopt_ci.train.optimizer import EpochEdit, OptimizerBuffer
from skillopt_ci.train.state import STATE_FILE, TrainState

# A finished demo run's state.json, as written before the history was typed (schema version 1).
FIXTURE = DATA / "state_v1.json"


def test_a_state_file_written_before_the_typed_records_loads_and_writes_back_the_same_but_the_buffer_schema(tmp_path):
    shutil.copy(FIXTURE, tmp_path / STATE_FILE)
    state = TrainState.load(tmp_path)
    assert state is not None and state.phase == "done"
    assert [(r.step, r.decision) for r in state.history][:2] == [("e0-s00", Decision.ACCEPTED),
                                                                 ("e0-s01", Decision.REJECTED)]
    assert all(isinstance(r, StepRecord) for r in state.history)
    assert isinstance(state.buffer, OptimizerBuffer) and all(isinstance(e, EpochRecord) for e in state.epochs)
    assert state.epochs[0].slow_update is next(r for r in state.history if r.step == "e0-slow")
    original = json.loads(FIXTURE.read_text())
    written = state.to_dict()
    # the optimizer buffer is written in its schema 2 (each rejection's kind and evidence added)
    assert written["buffer"]["schema_version"] == 2 and original["buffer"]["schema_version"] == 1
    assert [{k: r[k] for k in ("edit", "reason", "epoch")} for r in written["buffer"]["rejected"]] == \
        original["buffer"]["rejected"]
    assert {**written, "buffer": None} == {**original, "buffer": None}
    state.save(tmp_path)
    again = json.loads((tmp_path / STATE_FILE).read_text())
    assert {**again, "buffer": None} == {**original, "buffer": None} and again["buffer"] == written["buffer"]
    assert TrainState.load(tmp_path) == state


def test_every_record_round_trips():
    edit = Edit("append", "- a rule", "", "why", 2, "success")
    outcome = StepOutcome(Decision.ACCEPTED, "better", 0.8, 0.8, 1,
                          {"rollout": StageSpend(10, 2, None), "validation": StageSpend(5, 1, 0.25)},
                          early_stopped=False, delta=0.2, ci=(0.1, 0.3))
    credit = CreditNote(("t1",), ({"left_out": edit.to_dict(), "score": 1.0, "with_it": 1.0, "dropped": True},),
                        (DroppedEdit(edit, "no help"),), "pruned", 0.75, (edit,))
    step = StepRecord("e0-s00", StepKind.STEP, 0, 0, batch=("t1", "t2"), rollout=Rollout(0.5, ("t1",)),
                      proposals=(), merged=(edit,), selected=(edit,), edit_budget=3,
                      applied=(EditOutcome(edit, "applied"),), credit=credit, candidate_version=1, outcome=outcome)
    skipped = StepRecord("e0-slow", StepKind.SLOW_UPDATE, 0, 1, analysis="", outcome=StepOutcome(
        Decision.SKIPPED, "optimizer output unusable: x", None, 0.8, 1, {}))
    in_progress = StepRecord("e1-s00", StepKind.STEP, 1, 1, batch=("t3",))
    for record in (step, skipped, in_progress):
        assert StepRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    assert "delta" not in skipped.to_dict() and skipped.to_dict()["stats"] == {}
    assert "decision" not in in_progress.to_dict()
    assert step.kept_edits() == [edit]
    epoch = EpochRecord(0, skipped, MetaSkillNote("- memory", None))
    assert EpochRecord.from_dict(json.loads(json.dumps(epoch.to_dict()))) == epoch
    state = TrainState(phase="steps", buffer=OptimizerBuffer().with_rejected([edit], "lost").with_failures(["t1"]),
                       epoch_log=[EpochEdit(edit, False, "lost")], history=[step, skipped], epochs=[epoch])
    assert TrainState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_decisions_on_disk_are_the_enum_values():
    assert [d.value for d in Decision] == ["accepted", "rejected", "skipped"]
    assert json.loads(json.dumps({"d": Decision.SKIPPED})) == {"d": "skipped"}


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema_version=2), "state schema_version 2: this skillopt-ci reads version 1"),
    (lambda d: d.pop("schema_version"), "state schema_version None: this skillopt-ci reads version 1"),
    (lambda d: d["history"][0].update(decision="maybe"), "state schema_version 1 could not be read"),
    (lambda d: d["buffer"].update(schema_version=7), "optimizer buffer schema_version 7"),
])
def test_a_state_file_of_another_version_fails_with_one_line_naming_it(tmp_path, change, message):
    data = json.loads(FIXTURE.read_text())
    change(data)
    (tmp_path / STATE_FILE).write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        TrainState.load(tmp_path)
    text = str(info.value)
    assert message in text and STATE_FILE in text and "--fresh" in text and "\n" not in text


def test_train_on_a_run_with_a_newer_state_file_exits_2_naming_the_version(tmp_path):
    with ScriptedModelServer(SimulatedModels()) as sim:
        project = train_project(tmp_path / "p", sim.openai_base_url, train={"epochs": 1})
        run = tmp_path / "run"
        assert train(project, run).code == 0
        data = json.loads((run / STATE_FILE).read_text())
        (run / STATE_FILE).write_text(json.dumps({**data, "schema_version": 3}))
        res = train(project, run)
    assert res.code == 2
    first = res.err.strip().splitlines()[0]
    assert "state.json" in first and "schema_version 3" in first and "Traceback" not in res.err
