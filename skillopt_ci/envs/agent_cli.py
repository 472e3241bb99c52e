"""The shared base of the agent-CLI environments (``codex``, ``claude-code``): a real agent CLI
runs headless in a fresh workspace with the skill installed where the agent discovers it.

One rollout: a sandbox workspace holding the task's ``files``; the skill folder (or a folder with
only ``SKILL.md``) installed at ``install_dir(name)``; optionally the skill body also as
``instructions_name`` (``AGENTS.md`` / ``CLAUDE.md``) when ``instructions_file`` is set; a fresh
home/config folder OUTSIDE the workspace (so the CLI's config, logs and key never land among the
files a scorer sees); then the CLI, started with a clean environment (``sandbox.clean_environment``)
plus exactly the variables ``prepare_home`` returns, under a wall-clock limit of ``time_limit_s``
at which it and every process in its group are killed. The steps, the final message and the
usage come from the CLI's JSON output (``parse``). ``verify``, when set, runs in the final
workspace after the agent and is recorded as a ``verify`` tool call and result.

Errored rollouts (steps kept, the CLI's stderr tail, redacted, in the message): ``agent_missing``
(the binary cannot be started), ``time_limit``, ``agent_failed`` (a non-zero exit or a failure
event), ``max_turns`` (more turns in the event stream than ``max_turns``: killed as they arrive,
for a CLI whose ``is_turn`` recognises them; or the CLI's own turn limit), ``connection`` (the
CLI says twice that it cannot reach the model and would wait on: ``unreachable``).

Subclass hooks: ``install_dir(skill_name)``, ``instructions_name``, ``providers`` (which endpoint
providers the CLI can talk to), ``upstream(endpoint)`` (the provider URL the CLI would call),
``prepare_home(home, endpoint) -> env vars``, ``argv(prompt, workspace, endpoint)``,
``parse(stdout) -> Parsed``. The model endpoint is the pool's ``endpoint("target")``, but the
hooks never see its key: they get it with a per-rollout credential of the forwarder
(:mod:`skillopt_ci.envs.agent_access`) as ``api_key`` and the forwarder's URL as ``base_url``;
the credential is revoked as soon as the CLI has ended. Under bubblewrap the CLI has no network:
that URL is the relay's on the sandbox's own loopback, in front of the forwarder's Unix socket;
without bubblewrap (the unisolated opt-in) it keeps the host's network and the forwarder's TCP
port. The forwarder passes on at most ``max_calls`` (``max_model_calls``, else ``max_turns``)
model calls per rollout and refuses the rest; a refusal ends the rollout as ``max_turns``. The
calls and tokens the forwarder saw (else the CLI's own report) and the CLI's cost, when it
reports one, are counted with ``record_external("target", ...)`` so budgets stop a run.
``identity()`` holds the CLI version (``<binary> --version`` at setup), so the run identity and
the rollout cache key change with it; ``max_model_calls`` joins it only when set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from skillopt_ci.core.consult import find_consult
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import Consult
from skillopt_ci.core.redact import redact
from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs.agent_access import AgentAccess, host_network, open_access
from skillopt_ci.envs.agent_clis import AGENT_CLIS
from skillopt_ci.envs.agent_output import Parsed
from skillopt_ci.envs.base import BaseEnvironment, RolloutRequest, task_workspace, workspace_rollout
from skillopt_ci.envs.turn_watch import TurnWatch
from skillopt_ci.models.base import ModelCaller
from skillopt_ci.models.forwarder import Grant
from skillopt_ci.sandbox import Binds, SandboxError, SandboxLimits, Workspace, clean_environment
from skillopt_ci.sandbox.isolation import SCRATCH
from skillopt_ci.sandbox.process import run_process
from skillopt_ci.sandbox.workspace import remove_tree

STDERR_TAIL = 2_000
HOME_PREFIX = "skillopt-agent-home-"


@dataclass(frozen=True)
class AgentOptions:
    binary: str = ""  # a path or a name on PATH; "" is the pinned CLI's binary name
    max_turns: int = 20
    time_limit_s: float = 300.0
    instructions_file: bool = False
    keep_files_bytes: int = 262_144
    verify: str | None = None
    verify_timeout_s: float = 60.0
    memory_mb: int = 65_536  # address space: node and the CLIs' native binaries reserve a lot of it
    output_bytes: int = 4_000_000  # of the CLI's JSON event stream kept per rollout
    transcript_chars: int = 20_000
    max_model_calls: int | None = None  # forwarded per rollout; None: max_turns


class AgentEnvironment(BaseEnvironment):
    """Runs an agent CLI per rollout; see the module docstring."""

    records_consults = True

    Options: ClassVar[type] = AgentOptions
    caches_rollouts: ClassVar[bool] = True
    instructions_name: ClassVar[str] = "AGENTS.md"
    providers: ClassVar[tuple[str, ...]] = ()

    # -- subclass hooks -------------------------------------------------------------------------
    def install_dir(self, skill_name: str) -> str:
        raise NotImplementedError

    def prepare_home(self, home: Path, endpoint: Any) -> dict[str, str]:
        raise NotImplementedError

    def argv(self, prompt: str, workspace: Path, endpoint: Any) -> list[str]:
        raise NotImplementedError

    def parse(self, stdout: str, times: Sequence[float] = ()) -> Parsed:
        raise NotImplementedError

    def upstream(self, endpoint: Any) -> str | None:
        """The provider base URL the CLI would call (``None``: the provider's public one); the
        forwarder sends the CLI's requests there, with the real key."""
        return endpoint.base_url

    def is_turn(self, line: str) -> bool:
        """Whether one line of the CLI's stdout is a turn counted against ``max_turns`` (the
        rollout is killed past it). False here: a CLI that enforces the limit itself."""
        return False

    def unreachable(self, line: str) -> str | None:
        """The message when one line of the CLI's stdout says it could not reach the model and
        is waiting to retry, else ``None``. The second such line stops the rollout as a
        ``connection`` error (a CLI may wait minutes for a network). ``None`` here."""
        return None

    # -- setup ----------------------------------------------------------------------------------
    @property
    def cli(self):
        return AGENT_CLIS[self.name]

    def setup(self) -> None:
        self.check_sizes(("max_turns", "time_limit_s", "verify_timeout_s", "memory_mb", "output_bytes",
                          "transcript_chars", "max_model_calls"))
        self.binary = self.find_binary()
        self.version = self.read_version()
        self._identity = {**super().identity(), "cli_version": self.version}
        if self.options.max_model_calls is None:  # unset: the identity (and cached rollouts) of suites that never set it
            self._identity.pop("max_model_calls")

    def find_binary(self) -> str:
        """The binary's absolute path; ``InputError`` with the install command when it is absent."""
        wanted = self.options.binary or self.cli.binary
        if os.sep in wanted:
            path = Path(wanted).expanduser()
            if not path.is_absolute():
                path = self.suite_dir / path
            found = str(path) if path.is_file() and os.access(path, os.X_OK) else None
        else:
            found = shutil.which(wanted)
        if found is None:
            raise InputError(
                f"environment {self.name}: the agent CLI {wanted!r} was not found"
                + ("" if os.sep in wanted else " on PATH")
                + f"; install it with `skillopt-ci install-agents` or {self.cli.install_command}",
                where=self.where,
            )
        return os.path.realpath(found)

    def install_binds(self) -> Binds:
        """The CLI's installation, read-only inside the sandbox: the whole ``node_modules`` an npm
        install put it in (Codex starts a native binary from a sibling package), else its folder."""
        binary = Path(self.binary)
        root = next((p for p in binary.parents if p.name == "node_modules"), binary.parent)
        return Binds.of(read_only=[root])

    def read_version(self) -> str:
        try:
            done = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(f"environment {self.name}: {self.binary} --version failed: {exc}", where=self.where,
                             hint=f"reinstall it: {self.cli.install_command}") from None
        text = (done.stdout.strip() or done.stderr.strip()).splitlines()
        if done.returncode != 0 or not text:
            raise InputError(f"environment {self.name}: {self.binary} --version exited with {done.returncode}",
                             where=self.where, hint=f"reinstall it: {self.cli.install_command}")
        return text[0].strip()

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    @property
    def max_calls(self) -> int:
        """The model calls the forwarder passes on per rollout: ``max_model_calls``, else
        ``max_turns`` (each CLI makes one call per turn; Codex's call past the limit is refused
        rather than paid for and then killed)."""
        return self.options.max_model_calls or self.options.max_turns

    def endpoint(self, models: ModelCaller) -> Any:
        """The target model's endpoint; ``InputError`` when the caller or provider cannot serve the CLI."""
        lookup = getattr(models, "endpoint", None)
        if lookup is None:
            raise InputError(f"environment {self.name}: the model caller cannot tell the CLI where the model is",
                             where=self.where, hint="run it through skillopt-ci (the model pool)")
        endpoint = lookup("target")
        if self.providers and endpoint.provider not in self.providers:
            raise InputError(
                f"environment {self.name} needs a target model with provider {' or '.join(self.providers)}, "
                f"got {endpoint.provider!r}", where="models.target.provider")
        return endpoint

    # -- one rollout ----------------------------------------------------------------------------
    async def run(self, request: RolloutRequest, models: ModelCaller) -> Rollout:
        started = time.monotonic()
        endpoint = self.endpoint(models)
        workspace = task_workspace(request, lambda ws: self._install(request, ws))
        home = Path(tempfile.mkdtemp(prefix=HOME_PREFIX))

        def release() -> None:
            workspace.cleanup()
            remove_tree(home)

        try:
            access = open_access(endpoint, self.upstream(endpoint), network=await host_network(),
                                 max_calls=self.max_calls)
            try:
                parsed, error, wall = await self._agent(request, workspace, home, access)
            finally:
                access.close()  # the CLI has ended: its credential is worthless from here on
            self._count(parsed, models, access.grant)
            if self.options.verify:
                parsed.steps.extend(await self._verify(workspace, started))
        except BaseException:
            release()
            raise
        if error is not None:
            parsed.steps.append(Step("error", text=f"{error['kind']}: {error['message']}", is_error=True,
                                     elapsed_s=time.monotonic() - started))
        return workspace_rollout(request, workspace, self.options, parsed.steps, f"[final answer] {parsed.output[:4_000]}",
                                 error=error, release=release, output=parsed.output, usage=parsed.usage,
                                 cost_usd=parsed.cost_usd, latency_s=wall, wall_s=time.monotonic() - started,
                                 finish_reason=_finish_reason(parsed, error), consult=self._consult(request, parsed))

    def _consult(self, request: RolloutRequest, parsed: Parsed) -> Consult:
        """Whether the agent consulted the installed skill (never, when none was installed)."""
        skill = request.skill
        if getattr(skill, "absent", False):
            return Consult(False)  # the skill-off baseline: nothing to consult
        return find_consult(parsed.steps, self.install_dir(skill.name), skill.name)

    def _install(self, request: RolloutRequest, workspace: Workspace) -> None:
        skill = request.skill
        if getattr(skill, "absent", False):
            return  # the skill-off baseline: no skill installed, no instructions file
        if self.options.instructions_file:  # before install_skill, whose snapshot then counts it as given
            workspace.write_text(self.instructions_name, skill.body)
        folder = getattr(skill, "folder", None) or request.skill_dir
        if folder is not None:
            workspace.install_skill(Path(folder), self.install_dir(skill.name), skill_document(skill))
            return
        with tempfile.TemporaryDirectory(prefix="skillopt-skill-") as empty:
            workspace.install_skill(Path(empty), self.install_dir(skill.name), skill_document(skill))

    async def _agent(self, request: RolloutRequest, workspace: Workspace, home: Path,
                     access: AgentAccess) -> tuple[Parsed, dict[str, str] | None, float]:
        """Run the CLI; returns what it did, the rollout's error (``None``: it finished) and its wall time."""
        opts = self.options
        endpoint = access.endpoint  # the forwarder's URL and a per-rollout credential: no key
        env = clean_environment(workspace.path)
        env.update(self.prepare_home(home, endpoint))
        limits = SandboxLimits(wall_s=opts.time_limit_s, cpu_s=opts.time_limit_s * 4, memory_mb=opts.memory_mb,
                               output_bytes=opts.output_bytes, file_mb=1024, network=access.network)
        (workspace.path / SCRATCH).mkdir(exist_ok=True)
        watch = TurnWatch(opts.max_turns, self.is_turn, self.unreachable)
        try:
            argv = access.wrap(self.argv(request.prompt, workspace.path, endpoint))  # behind the relay, or as is
            result = await run_process(argv, cwd=workspace.path, env=env, stdin=None, limits=limits, watch=watch,
                                       binds=self.install_binds() + access.binds)
        except SandboxError as exc:
            return Parsed(), {"kind": "agent_missing", "message": redact(exc.message)}, 0.0
        parsed = self.parse(result.stdout, watch.times)
        tail = _tail(result.stderr)
        error = None
        if access.grant.refused:
            error = {"kind": "max_turns", "message": f"{self.cli.binary} was stopped: it asked for more than "
                                                     f"{self.max_calls} model calls ({self._cap_name()})"}
        elif watch.gave_up is not None:
            error = {"kind": "connection", "message": f"{self.cli.binary} was stopped: {redact(watch.gave_up)}"}
        elif watch.tripped:
            error = {"kind": "max_turns", "message": f"{self.cli.binary} was stopped after more than max_turns = "
                                                     f"{opts.max_turns} turns"}
        elif result.timed_out:
            error = {"kind": "time_limit", "message": f"{self.cli.binary} did not finish within time_limit_s = "
                                                      f"{opts.time_limit_s:g} s (killed with its children){tail}"}
        elif parsed.failed is not None:
            error = {"kind": parsed.failed_kind, "message": redact(parsed.failed) + tail}
        elif result.exit_code != 0:
            error = {"kind": "agent_failed", "message": f"{self.cli.binary} {result.status()}{tail}"}
        return parsed, error, result.wall_s

    def _cap_name(self) -> str:
        opts = self.options
        return f"max_model_calls = {opts.max_model_calls}" if opts.max_model_calls else f"max_turns = {opts.max_turns}"

    def _count(self, parsed: Parsed, models: ModelCaller, grant: Grant) -> None:
        """The rollout's spend: the calls and tokens the forwarder saw go to the provider (they
        include calls of a CLI killed before it could report them), else the CLI's own report;
        the CLI's own cost figure when it gave one, else the tokens priced."""
        if grant.usage_reported:
            parsed.usage = grant.usage
        record = getattr(models, "record_external", None)
        has_usage = parsed.usage.input_tokens is not None or parsed.usage.output_tokens is not None
        if record is not None and (has_usage or parsed.cost_usd is not None):
            parsed.cost_usd = record("target", parsed.usage, parsed.cost_usd, calls=max(grant.calls, 1))

    async def _verify(self, workspace: Workspace, started: float) -> list[Step]:
        command = str(self.options.verify)
        wall = self.options.verify_timeout_s
        calls = [Step("tool_call", name="verify", arguments=json.dumps({"command": command}),
                      call_id="verify", elapsed_s=time.monotonic() - started)]
        try:
            result = await workspace.run(["sh", "-c", command], limits=SandboxLimits(wall_s=wall, cpu_s=wall))
        except SandboxError as exc:
            text, failed = exc.message, True
        else:
            text, failed = result.render(8_000), result.exit_code != 0
        calls.append(Step("tool_result", name="verify", call_id="verify", text=redact(text), is_error=failed,
                          elapsed_s=time.monotonic() - started))
        return calls


def skill_document(skill: Any) -> str:
    """The ``SKILL.md`` to install: the skill's text, with a ``name`` and a ``description`` added
    to its front matter when it lacks them (the agents list a skill only by those two)."""
    front = skill.front_matter or {}
    missing = []
    if not front.get("name"):
        missing.append(f"name: {json.dumps(skill.name)}")
    if not front.get("description"):
        lines = [line.strip().lstrip("#").strip() for line in skill.body.splitlines()]
        first = next((line for line in lines if line), f"The {skill.name} skill.")
        missing.append(f"description: {json.dumps(first[:300])}")
    if not missing:
        return skill.text
    added = "".join(f"{line}\n" for line in missing)
    if front and skill.text.startswith("---"):
        head, _, rest = skill.text.partition("\n")
        return f"{head}\n{added}{rest}"
    return f"---\n{added}---\n{skill.text}"


def _tail(stderr: str) -> str:
    text = stderr.strip()
    if not text:
        return ""
    if len(text) > STDERR_TAIL:
        text = "…" + text[-STDERR_TAIL:]
    return "\nstderr (tail):\n" + redact(text)


def _finish_reason(parsed: Parsed, error: dict[str, str] | None) -> str:
    """The CLI's own reason when it ended the run itself (Claude Code: ``completed``, ``max_turns``,
    ``api_error``…), else ``error`` for a rollout that failed and ``stop`` for one that finished."""
    if parsed.finish_reason and (error is None or parsed.failed is not None):
        return parsed.finish_reason
    return "error" if error else "stop"
