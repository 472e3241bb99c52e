"""The ``verify`` scorer: a command run in the rollout's final workspace decides pass or fail.

``command`` (a shell command line, run with ``sh -c``) runs in ``rollout.workspace`` through the
sandbox (``sandbox.run_in``): the environment is the sandbox's clean one (no API key, no token),
the wall clock and CPU are limited to ``timeout_s``, the network is cut where the sandbox can.
``files`` lists files or folders of the suite directory (a checker script, expected outputs)
copied into the workspace at the same relative path before the command runs; a missing one is an
``InputError`` when the scorer is built. Exit code 0 is value 1.0 (passed); anything else,
including the time limit, is value 0.0 with the tail of the command's output as feedback.

A rollout without a workspace (``chat``, ``interactive``) cannot be verified: ``ScoringError``
naming the environments that have one. So is a workspace the command cannot be run in.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from skillopt_ci.core.errors import ScoringError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.models.base import ModelCaller
from skillopt_ci.sandbox import SandboxError, SandboxLimits, run_in
from skillopt_ci.sandbox.paths import confine
from skillopt_ci.scorers.base import FEEDBACK_LIMIT, Score, Scorer

WORKSPACE_ENVIRONMENTS = "tools, codex or claude-code"
_OUTPUT_KEEP_BYTES = 64_000


@dataclass(frozen=True)
class VerifyOptions:
    command: str  # run with sh -c in the rollout's workspace; exit 0 passes
    timeout_s: float = 60.0
    files: tuple[str, ...] = ()  # suite-relative files or folders copied into the workspace first


class VerifyScorer(Scorer):
    name = "verify"
    Options = VerifyOptions

    def setup(self) -> None:
        if not self.options.command.strip():
            raise self.error("command must not be empty")
        if not 0 < self.options.timeout_s <= 24 * 3600:
            raise self.error(f"timeout_s must be in (0, 86400], got {self.options.timeout_s}")
        self.sources: list[tuple[str, Path]] = []
        root = self.suite_dir.resolve()
        for relative in self.options.files:
            source = (self.suite_dir / relative).resolve()
            where = str(self.suite_dir / "suite.yaml")
            if Path(relative).is_absolute() or not source.is_relative_to(root) or source == root:
                raise self.error(f'files: "{relative}" must be a path inside the suite directory', where=where)
            if not source.exists():
                raise self.error(f'files: "{relative}" does not exist in the suite directory', where=where)
            self.sources.append((source.relative_to(root).as_posix(), source))

    def score(self, output: str, task: Task) -> Score:
        raise self._no_workspace(task)

    def _no_workspace(self, task: Task) -> ScoringError:
        return ScoringError(f'scorer "verify" needs an environment with a workspace '
                            f'({WORKSPACE_ENVIRONMENTS}); task "{task.id}" was run without one')

    async def ascore_rollout(self, rollout: Rollout, task: Task, models: ModelCaller | None = None) -> Score:
        workspace = rollout.workspace
        if workspace is None:
            raise self._no_workspace(task)
        timeout = self.options.timeout_s
        limits = SandboxLimits(wall_s=timeout, cpu_s=timeout, output_bytes=_OUTPUT_KEEP_BYTES)
        try:
            await asyncio.to_thread(self._copy_files, Path(workspace))
            result = await run_in(Path(workspace), ["sh", "-c", self.options.command], limits=limits)
        except (SandboxError, OSError) as exc:
            raise ScoringError(f'scorer "verify": cannot run {quote(self.options.command, 60)} '
                               f'for task "{task.id}": {exc}') from exc
        command = quote(self.options.command, 60)
        if result.exit_code == 0 and not result.timed_out:
            return Score.binary(True, f"verify {command} passed")
        head = f"verify {command} failed ({result.status()})"
        return Score.binary(False, head + tail(result.stdout + result.stderr, FEEDBACK_LIMIT - len(head) - 2))

    def _copy_files(self, workspace: Path) -> None:
        root = Path(os.path.realpath(workspace))
        for relative, source in self.sources:
            target = confine(root, relative)  # a symlink the agent planted cannot lead the copy out
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copyfile(source, target)


def tail(output: str, limit: int) -> str:
    """``": <the last lines of output>"`` in at most ``limit`` characters; "" when there is none."""
    text = " | ".join(line.strip() for line in output.strip().splitlines() if line.strip())
    if not text or limit < 8:
        return ""
    if len(text) > limit - 2:
        text = "…" + text[len(text) - (limit - 3):]
    return ": " + text
