"""The text world (``tests/data/textworld``) under the ``interactive`` environment: its tasks,
requests, the environment and a ModelCaller that plays it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from helpers.paths import DATA
from helpers.textworld import reply
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.interactive import InteractiveEnvironment
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.models.base import Completion, Usage

SUITE = DATA / "textworld"


BASE_SKILL = "---\nname: text-adventurer\ndescription: Plays text adventures.\n---\nYou play text adventures.\n"


def tasks(split: str) -> list[Task]:
    lines = (SUITE / f"{split}.jsonl").read_text().splitlines()
    return [Task(id=r["id"], input=r["input"], fields=r, source=f"{split}.jsonl:{i}")
            for i, r in enumerate(map(json.loads, lines), 1)]


def request(task: Task, skill: str = BASE_SKILL, sample_index: int = 0) -> RolloutRequest:
    prompt = yaml.safe_load((SUITE / "suite.yaml").read_text())["prompt"].replace("{{ input }}", task.input)
    return RolloutRequest(skill=parse_skill(skill), task=task, prompt=prompt, suite_dir=SUITE,
                          sample_index=sample_index)


def environment(suite_dir: Path = SUITE, **options) -> InteractiveEnvironment:
    spec = {"type": "interactive", "world": "helpers.textworld:TextWorld", **options}
    env = build_environment(spec, suite_dir, where=str(suite_dir / "suite.yaml"))
    assert isinstance(env, InteractiveEnvironment)
    return env


class FakeCaller:
    """A ModelCaller: answers each call from ``replies`` (strings or exceptions) or, when
    ``replies`` is None, with the text world's player policy; records every call."""

    def __init__(self, replies: list | None = None):
        self.replies = list(replies) if replies is not None else None
        self.calls: list[dict] = []

    async def complete(self, role, messages, sample_index=0, *, tools=(), context=None):
        self.calls.append({"role": role, "messages": messages, "sample_index": sample_index, "context": context})
        if self.replies is None:
            system = next((m.text for m in messages if m.role == "system"), "")
            text = reply(system, messages[-1].text)
        else:
            scripted = self.replies.pop(0) if self.replies else "<action>look</action>"
            if isinstance(scripted, BaseException):
                raise scripted
            text = scripted
        return Completion(text, usage=Usage(10, 2), latency_s=0.5, cost_usd=0.001)


def run(env: InteractiveEnvironment, req: RolloutRequest, caller: FakeCaller) -> Rollout:
    return asyncio.run(env.run(req, caller))


def write_world(tmp_path: Path, body: str) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "world.py").write_text(body)
    return suite
