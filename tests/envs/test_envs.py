"""The environment seam: chat unchanged (an old cache still replays), plug-in environments through
the entry-point group, trajectories in results.jsonl, errored rollouts keep their steps, scorers
that read the rollout, and the run identity."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.paths import DATA
from skillopt_ci.core.records import TaskResult
from skillopt_ci.train.optimizer.reflect import render_trajectory


def read_results(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def test_chat_replays_a_cache_recorded_before_environments(project, server, tmp_path):
    """The cache and the answers of the version before environments: same keys, same results."""
    cache = project / ".skillopt/cache.sqlite"
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "cache-before-environments.sqlite", cache)
    out = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--repeats", "2", "--cache", "replay-only", "--out", str(out),
                  "--quiet", cwd=project)
    assert res.code == 0, res.err
    assert server.call_count == 0
    before = [json.loads(line) for line in (DATA / "results-before-environments.jsonl").read_text().splitlines()]
    now = sorted(read_results(out), key=lambda r: (r["task_id"], r["repeat"]))
    assert [(r["task_id"], r["repeat"], r["output"], r["score"], r["usage"]) for r in now] == \
        [(r["task_id"], r["repeat"], r["output"], r["score"], r["usage"]) for r in before]
    # A chat result reads as before: no trajectory fields, and run.json has no environment.
    assert all("trajectory" not in r and "transcript" not in r for r in now)
    assert "environment" not in json.loads((out / "run.json").read_text())


PLUGIN = '''
"""A plug-in environment: asks the model twice (a draft, then a final answer). It imports only
the plug-in API, the package skillopt_ci.envs."""
import time
from dataclasses import dataclass

from skillopt_ci.envs import BaseEnvironment, Message, ProviderError, Rollout, Step


@dataclass(frozen=True)
class Options:
    rounds: int = 2
    fail_on: str = ""


class TwoPass(BaseEnvironment):
    name = "two-pass"
    Options = Options

    async def run(self, request, models):
        steps, messages, usage, last = [], [Message("system", request.skill.body), Message("user", request.prompt)], None, ""
        for i in range(self.options.rounds):
            if request.task.id == self.options.fail_on and i == 1:
                steps.append(Step("error", text="the second round refused"))
                return Rollout(output=last, steps=tuple(steps), error={"kind": "two_pass", "message": "round 2 refused"},
                               transcript="\\n".join(s.text for s in steps))
            completion = await models.complete("target", messages, sample_index=request.sample_index)
            last = completion.text
            steps.append(Step("model", text=last, usage=completion.usage))
            messages = [*messages, Message("assistant", last), Message("user", request.prompt)]
            usage = completion.usage if usage is None else usage + completion.usage
        return Rollout(output=last, steps=tuple(steps), usage=usage, transcript="\\n".join(s.text for s in steps))
'''

SCORER = '''
def score(output, task, rollout):
    models = [s for s in rollout.steps if s.kind == "model"]
    ok = output.strip() == task.expected and len(models) == 2
    return ok, f"{len(models)} model steps; answer {output.strip()!r}"
'''


def install_plugin(site: Path, monkeypatch, module: str, source: str, name: str, cls: str) -> Path:
    """A distribution on sys.path whose module ``module`` declares environment ``name``."""
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (site / f"{module}.py").write_text(source)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[skillopt_ci.environments]\n{name} = {module}:{cls}\n")
    monkeypatch.syspath_prepend(str(site))
    return site


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A distribution on sys.path that declares the ``two-pass`` environment."""
    return install_plugin(tmp_path / "site", monkeypatch, "twopass_plugin", PLUGIN, "two-pass", "TwoPass")


def use_environment(project: Path, environment: object, scorer: dict | None = None) -> None:
    suite = project / "eval_suites/ticket-triage/suite.yaml"
    data = yaml.safe_load(suite.read_text())
    data["environment"] = environment
    if scorer is not None:
        data["scorer"] = scorer
    suite.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_plugin_environment_runs_with_its_trajectory_in_the_results(project, server, plugin, tmp_path):
    use_environment(project, {"type": "two-pass", "fail_on": "val-03"})
    (project / "eval_suites/ticket-triage/rollout_scorer.py").write_text(SCORER)
    use_environment(project, {"type": "two-pass", "fail_on": "val-03"},
                    scorer={"type": "python", "function": "rollout_scorer:score"})
    out = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 0, res.err
    assert server.call_count == 12 * 2 - 1  # two calls per task; val-03 stops after its first
    results = {r["task_id"]: r for r in read_results(out)}
    good = results["val-01"]
    assert [s["kind"] for s in good["trajectory"]] == ["model", "model"]
    assert good["score"] == 1.0 and good["feedback"].startswith("2 model steps")  # the scorer read the steps
    assert good["transcript"] == f"{good['trajectory'][0]['text']}\n{good['trajectory'][1]['text']}"
    # The errored rollout is missing data with its steps kept, not a zero.
    failed = results["val-03"]
    assert failed["score"] is None and failed["error"] == {"kind": "two_pass", "message": "round 2 refused"}
    assert [s["kind"] for s in failed["trajectory"]] == ["model", "error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_errors"] == 1 and summary["errors_by_kind"] == {"two_pass": 1}
    # The environment and its settings are part of the run identity.
    assert json.loads((out / "run.json").read_text())["environment"] == {"type": "two-pass", "rounds": 2, "fail_on": "val-03"}
    use_environment(project, {"type": "two-pass", "rounds": 3})
    again = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert again.code == 2 and "different run" in again.err


def test_a_plugin_environment_option_error_names_the_suite_file(project, plugin):
    use_environment(project, {"type": "two-pass", "rounds": "many"})
    res = run_cli("validate", cwd=project)
    assert res.code == 2
    assert "suite.yaml" in res.err and '"rounds"' in res.err and "environment two-pass" in res.err


def test_an_unknown_environment_lists_the_known_ones(project, plugin):
    use_environment(project, "spaceship")
    res = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert res.code == 2
    assert "unknown environment 'spaceship'" in res.err and "known: chat, tools, interactive, codex" in res.err
    assert res.err.rstrip().split(" (install")[0].endswith(", two-pass")  # plug-ins after the built-ins


def test_the_optimizer_reads_the_environments_rendering():
    result = TaskResult("t1", 0, "question", "42", 0.0, False, feedback="wrong",
                        transcript="python(code='print(6*7)') -> 42")
    text = render_trajectory(result, 1)
    assert "What the agent did" in text and "python(code='print(6*7)') -> 42" in text
    assert text.index("What the agent did") < text.index("The model's output")
    plain = render_trajectory(TaskResult("t1", 0, "question", "42", 0.0, False), 1)
    assert "What the agent did" not in plain


def test_a_built_in_environment_that_cannot_import_is_a_runtime_failure_not_a_traceback(project, monkeypatch):
    from skillopt_ci.envs import registry

    monkeypatch.setitem(registry.BUILTIN, "tools", "skillopt_ci.envs.no_such_module:ToolsEnvironment")
    use_environment(project, {"type": "tools", "tools": ["python"]})
    res = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert res.code == 3 and "Traceback" not in res.err
    assert "built-in environment 'tools' could not be imported" in res.err and "reinstall" in res.err


COUNTING = '''
"""A plug-in environment that does its own "model" work (like an agent CLI) and counts its runs."""
import os
from pathlib import Path

from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs.base import BaseEnvironment


class Counting(BaseEnvironment):
    name = "counting"
    caches_rollouts = True

    async def run(self, request, models):
        with open(os.environ["COUNTING_LOG"], "a") as log:
            log.write(request.task.id + "\\n")
        if request.keep_dir is not None:
            request.keep_dir.mkdir(parents=True, exist_ok=True)
            (request.keep_dir / "note.txt").write_text(f"{request.task.id} by {request.skill.hash[:8]}")
        answer = "account/P3" if "account" in request.skill.body else "question/P3"
        return Rollout(output=answer, steps=(Step("model", text=answer),), files=("note.txt",))
'''


@pytest.fixture
def counting(tmp_path, monkeypatch):
    install_plugin(tmp_path / "site2", monkeypatch, "counting_plugin", COUNTING, "counting", "Counting")
    log = tmp_path / "runs.log"
    monkeypatch.setenv("COUNTING_LOG", str(log))
    return log


def test_rollouts_of_an_environment_that_bypasses_the_response_cache_are_cached_whole(project, counting, tmp_path):
    use_environment(project, "counting")
    first = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "a"), "--quiet", cwd=project)
    assert first.code == 0, first.err
    assert len(counting.read_text().splitlines()) == 12
    again = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "b"), "--quiet", cwd=project)
    assert again.code == 0, again.err
    assert len(counting.read_text().splitlines()) == 12  # nothing ran again
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in "ab")
    assert b["mean"] == a["mean"] and b["cache_hits"] == 12 and a["cache_hits"] == 0
    # The files the rollout kept come back with the cached result.
    assert (tmp_path / "b/files/val-01/0/note.txt").read_text() == (tmp_path / "a/files/val-01/0/note.txt").read_text()
    # Another skill is another rollout; replay-only refuses to run one the cache lacks.
    skill = project / "skills/ticket-triage/SKILL.md"
    skill.write_text(skill.read_text() + "\n- Billing questions are account questions.\n")
    replay = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "c"), "--cache", "replay-only", "--quiet",
                     cwd=project)
    assert replay.code == 3 and "rollout cache miss in replay-only mode" in replay.err
    changed = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "d"), "--quiet", cwd=project)
    assert changed.code == 0 and len(counting.read_text().splitlines()) == 24
