"""The records' one JSON mechanism (``skillopt_ci.core.codec``): files written by the hand-written
``to_dict`` methods it replaced load and write back byte for byte, a malformed file still fails
with one line naming it, numbers keep their type, and importing a record does not load pydantic.

``tests/data/records_v1/`` was written by revision 5211de7 (the last with hand-written methods):
the offline demo's training and eval run directories, and a gate report, a comparison, result
lines with a trajectory and a small training state built with that revision's records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import DATA
from skillopt_ci import __version__
from skillopt_ci.core import codec
from skillopt_ci.core.compare import Comparison
from skillopt_ci.core.edits import Edit
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import EvalSummary, TaskResult, Usage
from skillopt_ci.core.trajectory import STEP_TEXT_LIMIT, Step
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.gate.verdict import GateReport
from skillopt_ci.train.history import StepRecord
from skillopt_ci.train.records import TrainingSummary
from skillopt_ci.train.state import STATE_FILE, TrainState, Version

OLD = DATA / "records_v1"

JSON_FILES = [
    (DATA / "state_v1.json", TrainState), (OLD / "state_small.json", TrainState),
    (OLD / "step.json", StepRecord), (OLD / "step_slow.json", StepRecord),
    (OLD / "train_summary.json", TrainingSummary), (OLD / "eval_summary.json", EvalSummary),
    (OLD / "eval_summary_extras.json", EvalSummary), (OLD / "comparison.json", Comparison),
    (OLD / "gate.json", GateReport),
]
JSONL_FILES = [(OLD / "history.jsonl", StepRecord), (OLD / "results.jsonl", TaskResult),
               (OLD / "results_agent.jsonl", TaskResult)]


@pytest.mark.parametrize(("path", "cls"), JSON_FILES, ids=lambda x: getattr(x, "name", None) or x.__name__)
def test_a_file_the_hand_written_methods_wrote_loads_and_writes_back_byte_for_byte(path: Path, cls: type) -> None:
    text = path.read_text(encoding="utf-8")
    record = cls.from_dict(json.loads(text))
    data = record.to_dict()
    if cls is GateReport:  # the writing tool's version, not the record's
        assert data["tool_version"] == __version__
        data["tool_version"] = json.loads(text)["tool_version"]
    original = json.loads(text)
    if cls is TrainState and original.get("buffer", {}).get("schema_version") == 1:
        # the optimizer's memory is upgraded on write (schema 2: each rejection's kind and evidence);
        # the rest of the file stays byte for byte
        assert data["buffer"]["schema_version"] == 2
        assert [r["edit"] for r in data["buffer"]["rejected"]] == [r["edit"] for r in original["buffer"]["rejected"]]
        data["buffer"] = original["buffer"]
    assert json.dumps(data, indent=2, ensure_ascii=False) + "\n" == text
    assert cls.from_dict(json.loads(json.dumps(record.to_dict()))) == record


@pytest.mark.parametrize(("path", "cls"), JSONL_FILES, ids=lambda x: getattr(x, "name", None) or x.__name__)
def test_lines_the_hand_written_methods_wrote_load_and_write_back_byte_for_byte(path: Path, cls: type) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [cls.from_dict(json.loads(line)) for line in lines]
    assert [json.dumps(r.to_dict(), ensure_ascii=False) for r in records] == lines
    assert len(records) > 1


def test_steps_write_what_the_hand_written_method_wrote() -> None:
    """The steps ``results_agent.jsonl``'s trajectory was made of (a text and arguments cut at the
    limit, an error, an observation with a reward and an image), written again."""
    steps = [Step("model", "x" * (STEP_TEXT_LIMIT + 5), usage=Usage(10, 2), elapsed_s=0.123456),
             Step("tool_call", name="python", arguments='{"code": "' + "y" * STEP_TEXT_LIMIT + '"}', call_id="c1",
                  elapsed_s=1),
             Step("tool_result", "Traceback", name="python", call_id="c1", is_error=True, elapsed_s=1.5),
             Step("observation", "You see a mug.", reward=1, done=False, images=("img/a.png",), elapsed_s=2.0)]
    written = json.loads((OLD / "results_agent.jsonl").read_text().splitlines()[0])["trajectory"]
    assert json.dumps([s.to_dict() for s in steps]) == json.dumps(written)
    assert Step.from_dict(written[2]) == steps[2] and Step.from_dict(written[3]) == steps[3]


def test_the_fixtures_hold_the_keys_that_are_left_out_or_reshaped() -> None:
    """The byte-for-byte tests above mean something only if the files exercise the special cases."""
    agent = (OLD / "results_agent.jsonl").read_text()
    assert '"trajectory"' in agent and '"is_error": true' in agent and "more characters cut" in agent
    assert '"reward"' not in (OLD / "results.jsonl").read_text()
    gate = json.loads((OLD / "gate.json").read_text())
    assert gate["policy"]["margin"] == 0 and isinstance(gate["policy"]["margin"], int)
    assert gate["skills"][0]["files"] == [{"path": "scripts/check.py", "change": "changed"},
                                          {"path": "references/api.md", "change": "added"}]
    assert "files" not in gate["skills"][1]
    assert json.loads((OLD / "eval_summary_extras.json").read_text())["no_skill"]["line"].startswith("no skill:")
    small = json.loads((OLD / "state_small.json").read_text())
    assert small["spent"]["cancelled_rollouts"] == 3 and list(small["val_samples"]) == ["1", "0"]
    assert "cancelled_rollouts" not in json.loads((DATA / "state_v1.json").read_text())["spent"]
    step = json.loads((OLD / "step.json").read_text())
    assert list(step)[:5] == ["step", "kind", "epoch", "batch", "incumbent_version"] and "decision" in step


def test_an_int_in_a_float_field_stays_an_int_both_ways() -> None:
    version = Version(1, "h", 0, "e0-s00", 1, "val")
    assert version.to_dict()["val_mean"] == 1 and isinstance(version.to_dict()["val_mean"], int)
    read = Version.from_dict({**version.to_dict(), "val_mean": 0})
    assert isinstance(read.val_mean, int) and Version.from_dict({**version.to_dict(), "val_mean": 0.5}).val_mean == 0.5


def test_a_record_that_does_not_fit_fails_with_one_line_naming_the_field() -> None:
    with pytest.raises(codec.RecordError) as info:
        Edit.from_dict({"op": "append", "support": "many"})
    assert str(info.value).startswith("Edit.support: Input should be a valid integer")
    assert "\n" not in str(info.value) and isinstance(info.value, ValueError)


def test_a_malformed_state_file_fails_with_one_line_naming_the_file(tmp_path: Path) -> None:
    data = json.loads((DATA / "state_v1.json").read_text())
    data["history"][1]["epoch"] = "first"
    (tmp_path / STATE_FILE).write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        TrainState.load(tmp_path)
    assert info.value.where == str(tmp_path / STATE_FILE)
    assert "could not be read" in info.value.message and "history.1.epoch" in info.value.message
    assert "\n" not in str(info.value)


def test_a_malformed_result_line_names_the_file_and_the_line(tmp_path: Path) -> None:
    good = (OLD / "results.jsonl").read_text().splitlines()[0]
    (tmp_path / "results.jsonl").write_text(good + "\n" + json.dumps({"task_id": "t", "repeat": "two"}) + "\n")
    with pytest.raises(InputError) as info:
        RunDir(tmp_path).load_results()
    assert info.value.where == f"{tmp_path / 'results.jsonl'}:2"


def test_importing_the_records_or_asking_for_help_does_not_load_pydantic() -> None:
    code = ("import runpy, sys\n"
            "import skillopt_ci.train.state, skillopt_ci.gate.verdict, skillopt_ci.core.records\n"
            "assert 'pydantic' not in sys.modules, 'records'\n"
            "sys.argv = ['skillopt-ci', '--help']\n"
            "try:\n    runpy.run_module('skillopt_ci', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert exc.code in (0, None)\n"
            "print('pydantic' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
