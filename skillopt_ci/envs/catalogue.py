"""The ``catalogue`` environment: progressive disclosure, as the agents do it, on any provider.

In Codex and Claude Code a skill's body is not in the context until the agent decides to read
it; the model sees a list of names and descriptions. This environment reproduces that without an
agent CLI, so triggering can be measured (and trained) on every provider the ``tools``
environment runs on (OpenAI chat and Responses, Azure, Anthropic, compatible servers), cached and
batched like any rollout:

- the system message lists the available skills in Claude Code's shape ("The following skills
  are available for use with the Skill tool:" then ``- name: description`` lines): the skill
  under test and the suite's ``skills`` (other skills installed next to it, so near-misses
  compete), sorted by name so the position does not say which one is under test;
- the model may call ``Skill`` with ``{"skill": name}``; the result is that skill's body (with
  the folder it lives in), and the task then goes on as in the ``tools`` environment, with
  ``tools`` (none by default: a chat with one tool) and its limits;
- the rollout's ``consult`` says whether (and at which step) the skill under test was loaded
  (:mod:`skillopt_ci.core.consult`), so ``should_trigger`` tasks and the ``trigger`` scorer
  work here as with the agent CLIs. The skill-off baseline lists the other skills only.

``skills`` are paths relative to the suite directory, to a ``SKILL.md`` or its folder; a missing
or malformed one, one that leaves the suite directory (an absolute path, ``..``, a symbolic link
out: a fork's suite must not send the host's files to the model), or one whose name is the skill
under test's or another's, is an input error.
Their texts join the environment's identity, so a changed sibling is a new cache key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillopt_ci.core.consult import find_consult
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.messages import Message, ToolCall, ToolSpec
from skillopt_ci.core.records import Consult
from skillopt_ci.core.skill import Skill, load_skill
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.toolbox import Tool, ToolResult
from skillopt_ci.envs.tools import ToolsEnvironment, ToolsOptions, _Progress
from skillopt_ci.sandbox import Workspace

TOOL = "Skill"
HEADER = "The following skills are available for use with the Skill tool:"
GUIDANCE = ("When a request is one a skill is for, call the Skill tool with its name before you answer; its "
            "instructions are returned to you. Do not load a skill a request is not for.")
SPEC = ToolSpec(TOOL, "Load one of the available skills by name; returns its instructions.",
                {"type": "object", "properties": {"skill": {"type": "string", "description": "the skill's name"}},
                 "required": ["skill"], "additionalProperties": False})


@dataclass(frozen=True)
class CatalogueOptions(ToolsOptions):
    tools: Any = ()  # the tools besides Skill (as the tools environment's); none: a chat with one tool
    skills: Any = ()  # other skills listed next to the one under test: SKILL.md paths or folders


class CatalogueEnvironment(ToolsEnvironment):
    name = "catalogue"
    Options = CatalogueOptions
    records_consults = True

    def setup(self) -> None:
        super().setup()
        paths = self.options.skills
        if isinstance(paths, str) or not all(isinstance(p, str) and p.strip() for p in paths or ()):
            raise InputError("environment catalogue: skills must be a list of paths to SKILL.md files or skill "
                             "folders, relative to the suite directory", where=self.where)
        self.siblings: dict[str, Skill] = {}
        root = self.suite_dir.resolve()
        for relative in paths:
            path = (root / relative).resolve()  # a link out of the suite is followed here, then refused
            if Path(relative).is_absolute() or ".." in Path(relative).parts or not path.is_relative_to(root):
                raise InputError(f"environment catalogue: skills: {relative!r} leaves the suite directory; list "
                                 "skills inside it (their text is sent to the model)", where=self.where)
            path = path / "SKILL.md" if path.is_dir() else path
            try:
                skill = load_skill(path, display=relative)
            except InputError as exc:
                raise InputError(f"environment catalogue: skills: {relative}: {exc.message} (paths are relative to "
                                 "the suite directory)", where=self.where) from None
            if skill.name in self.siblings:
                raise InputError(f"environment catalogue: skills: two skills are named {skill.name!r}", where=self.where)
            self.siblings[skill.name] = skill
        if TOOL in self.tools:
            raise InputError(f"environment catalogue: the tool name {TOOL!r} is the catalogue's own", where=self.where)
        self.specs = (SPEC, *self.specs)
        self._identity["skills"] = {n: hashlib.sha256(s.text.encode()).hexdigest() for n, s in sorted(self.siblings.items())}

    def _tools(self) -> tuple[dict[str, Tool], dict[str, Path]]:
        return super()._tools() if self.options.tools else ({}, {})  # none besides Skill: a chat with one tool

    def _available(self, request: RolloutRequest) -> dict[str, Skill]:
        skill = request.skill
        if getattr(skill, "absent", False):
            return dict(self.siblings)
        if skill.name in self.siblings:
            raise InputError(f"environment catalogue: skills lists another skill named {skill.name!r}, the name of "
                             "the skill under test", where=self.where)
        return {**self.siblings, skill.name: skill}

    def _messages(self, request: RolloutRequest, progress: _Progress) -> list[Message]:
        messages = super()._messages(request, progress)
        listing = "\n".join(f"- {name}: {_description(skill)}" for name, skill in sorted(self._available(request).items()))
        system = Message("system", f"{HEADER}\n\n{listing}\n\n{GUIDANCE}")
        return [system, *(m for m in messages if m.role != "system")]  # the body only when the model loads it

    async def _call(self, call: ToolCall, request: RolloutRequest, workspace: Workspace, deadline: float) -> ToolResult:
        if call.name != TOOL:
            return await super()._call(call, request, workspace, deadline)
        try:
            name = call.parsed_arguments().get("skill")
        except ValueError as exc:
            return ToolResult(f"{TOOL}: {exc}", True)
        available = self._available(request)
        skill = available.get(name.strip()) if isinstance(name, str) else None
        if skill is None:
            return ToolResult(f"no skill named {name!r}; the skills are: {', '.join(sorted(available))}", True)
        return ToolResult(f"Base directory for this skill: skills/{skill.name}\n\n{skill.body.strip()}", False)

    def _rollout(self, request: RolloutRequest, workspace: Workspace, progress: _Progress) -> Rollout:
        rollout = super()._rollout(request, workspace, progress)
        skill = request.skill
        consult = Consult(False) if getattr(skill, "absent", False) else \
            find_consult(progress.steps, f"skills/{skill.name}", skill.name)
        return replace(rollout, consult=consult)


def _description(skill: Skill) -> str:
    description = skill.front_matter.get("description")
    return " ".join(str(description).split()) if description else "(no description)"
