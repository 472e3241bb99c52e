"""``skillopt-ci train`` on the example project with the simulated optimizer, and a run killed
and resumed in real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.inputs.yamlfile import schema_validator
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_OPTIMIZER
from skillopt_ci.train.history import StepRecord
from skillopt_ci.train.state import TrainState

VOLATILE_FIELDS = ("spend", "stats")  # depend on timing or spend, not on the decisions taken


def train_project(root: Path, base_url: str, train: dict | None = None, **config) -> Path:
    project = write_project(root, base_url, **config)
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    data["models"]["optimizer"] = {"provider": "openai-compatible", "model": SIM_OPTIMIZER, "base_url": base_url,
                                   "max_retries": 1}
    data["pricing"][SIM_OPTIMIZER] = {"input": 2.0, "output": 4.0}
    data["train"] = {"epochs": 2, "batch_size": 6, **(train or {})}
    (project / "skillopt.yml").write_text(yaml.safe_dump(data))
    return project


def train(project: Path, out: Path, *args: str):
    return run_cli("train", "--skill", "ticket-triage", "--out", str(out), "--quiet", *args, cwd=project)


def summary_of(run: Path) -> dict:
    data = json.loads((run / "summary.json").read_text())
    schema_validator("train_summary.schema.json").validate(data)
    return data


def _train_process(project: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "skillopt_ci", "train", "--skill", "ticket-triage", "--out", str(out),
                             "--quiet"], cwd=project, env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def kill_and_resume(server: ScriptedModelServer, tmp_path: Path, kill_at: int, train_options: dict | None = None
                    ) -> tuple[Path, TrainState]:
    """A training run in its own process, SIGKILLed once the server has answered ``kill_at``
    calls, then run again to its end: (the run directory, its final state). The kill must cut the
    run short (still running, ended by the signal, no outputs written) and leave the resumed run
    model calls to make, or the resume would prove nothing."""
    project = train_project(tmp_path / f"k{kill_at}", server.openai_base_url, cache={"mode": "off"},
                            train=train_options)
    out = tmp_path / f"k{kill_at}-run"
    server.reset()
    proc = _train_process(project, out)
    deadline = time.monotonic() + 60
    while server.call_count < kill_at and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, f"the run ended before call {kill_at}: there is nothing to interrupt"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed = TrainState.load(out)
    assert killed is None or killed.phase != "done", kill_at
    assert not (out / "best_skill.md").exists() and not (out / "summary.json").exists()
    calls_before = server.call_count
    resumed = _train_process(project, out)
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert server.call_count > calls_before, "the resumed run had nothing left to do"
    return out, TrainState.load(out)


def stable_history(history: list[StepRecord]) -> list[dict]:
    """The history as JSON without the fields that depend on timing or spend (to compare runs)."""
    return [{k: v for k, v in r.to_dict().items() if k not in VOLATILE_FIELDS} for r in history]
