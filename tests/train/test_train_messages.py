"""What ``train`` says when it is run again on a finished run."""

from __future__ import annotations

from helpers.cli import run_cli
from helpers.training import train_project
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels


def test_rerun_of_a_finished_training_says_it_is_complete(tmp_path):
    with ScriptedModelServer(SimulatedModels()) as sim:
        project = train_project(tmp_path / "p", sim.openai_base_url, train={"epochs": 1})
        args = ("train", "--skill", "ticket-triage", "--out", str(tmp_path / "run"))
        assert run_cli(*args, "--quiet", cwd=project).code == 0
        calls = sim.call_count
        again = run_cli(*args, cwd=project)
    assert again.code == 0, again.err
    assert sim.call_count == calls
    assert "already complete: reusing its result" in again.err and "--fresh" in again.err
    assert "resuming" not in again.err and "at done" not in again.err
