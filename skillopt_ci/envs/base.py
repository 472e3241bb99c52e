"""The environment seam: an environment turns (skill, task, model caller, sample index, limits)
into a :class:`~skillopt_ci.core.trajectory.Rollout`.

Environments are built like scorers: a class with a ``name`` and an ``Options`` frozen dataclass
(the suite's ``environment:`` mapping, ``type`` aside), constructed as ``cls(options, suite_dir)``.
``identity()`` (name and settings) is part of the run identity (``run.json``) and of the cache
key of every model call the environment makes. ``run`` never raises for something the rollout
did (a provider failure, a tool that crashed, too many turns): that becomes ``Rollout.error``
with the steps kept. It raises :class:`~skillopt_ci.core.errors.InputError` only for a broken
suite (a tool module that does not load) and lets ``asyncio.CancelledError`` through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.messages import ImagePart
from skillopt_ci.core.options import NoOptions, options_to_dict
from skillopt_ci.core.skill import Skill
from skillopt_ci.core.task import Task, task_paths
from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs.steps_text import render_steps
from skillopt_ci.inputs.assets import suite_file
from skillopt_ci.inputs.images import HEAD_BYTES, KNOWN, describe_head, image_type
from skillopt_ci.models.base import ModelCaller
from skillopt_ci.sandbox import SandboxError, Workspace

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp"}


@dataclass(frozen=True)
class RolloutRequest:
    """One rollout to run.

    ``prompt`` is the suite's prompt template filled for ``task``; ``suite_dir`` anchors the
    task's ``files`` and ``images``; ``skill_dir`` is the skill's folder when the skill is an
    Agent Skills folder (``SKILL.md`` plus resources) to install into a workspace; ``keep_dir``
    is where small files the rollout wrote are copied (``None``: keep none); ``image_dir`` is
    where images shown to the model are kept, once each by content (``None``: not kept).
    """

    skill: Skill
    task: Task
    prompt: str
    suite_dir: Path
    sample_index: int = 0
    skill_dir: Path | None = None
    keep_dir: Path | None = None
    image_dir: Path | None = None


class Environment(Protocol):
    name: ClassVar[str]

    def identity(self) -> dict[str, Any]: ...

    async def run(self, request: RolloutRequest, models: ModelCaller) -> Rollout: ...


class BaseEnvironment:
    """What every environment shares: options, the suite directory, and its identity."""

    name: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    records_consults: ClassVar[bool] = False  # its rollouts say whether the agent read the skill (Rollout.consult)

    def __init__(self, options: Any, suite_dir: Path):
        self.options = options
        self.suite_dir = Path(suite_dir)
        self.setup()

    def setup(self) -> None:
        """Check option *meaning* and load what the environment needs; raise ``InputError``."""

    def identity(self) -> dict[str, Any]:
        return {"type": self.name, **options_to_dict(self.options)}

    def check_sizes(self, positive: tuple[str, ...]) -> None:
        """Set ``where`` (the suite's suite.yaml, else its folder) for option errors; raise
        ``InputError`` unless each option in ``positive`` (when set) is above 0 and
        ``keep_files_bytes`` is 0 or more."""
        yaml_file = self.suite_dir / "suite.yaml"
        self.where = str(yaml_file if yaml_file.exists() else self.suite_dir)
        for key in positive:
            value = getattr(self.options, key)
            if value is not None and value <= 0:
                raise InputError(f"environment {self.name}: {key} must be positive, got {value}", where=self.where)
        if self.options.keep_files_bytes < 0:
            raise InputError(f"environment {self.name}: keep_files_bytes must be 0 or more", where=self.where)

    #: Whether the engine caches whole scored rollouts of this environment (keyed by skill, task,
    #: suite, environment identity, model and sample). For environments whose model calls bypass
    #: the response cache (agent CLIs call the model themselves), so an unchanged re-run is free.
    caches_rollouts: ClassVar[bool] = False

    @property
    def max_calls(self) -> int:
        """The most model calls one rollout makes (its ``max_turns`` or ``max_steps`` option),
        for the cost estimate; 1 when the environment has no such option."""
        for option in ("max_turns", "max_steps"):
            value = getattr(self.options, option, None)
            if isinstance(value, int) and value > 0:
                return value
        return 1

    @property
    def is_default(self) -> bool:
        """True for plain ``chat``: run.json and cache keys then stay what they were before
        environments existed."""
        return False

    async def run(self, request: RolloutRequest, models: ModelCaller) -> Rollout:
        raise NotImplementedError


def task_images(task: Task, suite_dir: Path) -> tuple[ImagePart, ...]:
    """The images the task references (its ``images`` field), read from the suite directory."""
    images = []
    for shown, relative in task_paths(task, "images").items():
        path = suite_file(suite_dir, relative, task.source or None)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"task {task.id!r}: cannot read image {shown!r}: {exc.strerror}",
                             where=task.source or None) from None
        media = image_type(data[:HEAD_BYTES])  # what the bytes are, whatever the name says
        if media is None:
            raise InputError(f"task {task.id!r}: image {shown!r} ({path}) is not a {KNOWN} image "
                             f"({describe_head(data[:HEAD_BYTES])})", where=task.source or None,
                             hint="convert it, or fix the path in the task")
        images.append(ImagePart(media, data))
    return tuple(images)


def keep_image(image: ImagePart, image_dir: Path | None) -> str:
    """Store ``image`` under ``image_dir`` by content (once) and return the name a Step records:
    ``images/<sha256><ext>``, relative to the run directory."""
    ext = next((e for e, m in IMAGE_TYPES.items() if m == image.media_type), ".bin")
    name = f"{image.sha256}{ext}"
    if image_dir is not None:
        target = image_dir / name
        if not target.exists():
            image_dir.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{name}.partial")
            partial.write_bytes(image.data)
            partial.replace(target)
    return f"images/{name}"


def task_workspace(request: RolloutRequest, install: Callable[[Workspace], None]) -> Workspace:
    """A fresh sandbox workspace holding the task's ``files``, then ``install`` (putting the skill
    where the agent finds it) run in it. A missing or refused file is an ``InputError`` naming the
    task (or the skill); a failed install removes the workspace."""
    task = request.task
    files = {}
    for dest, relative in task_paths(task, "files").items():
        source = suite_file(request.suite_dir, relative, task.source or None)
        if not source.exists():
            raise InputError(f"task {task.id!r}: file {relative!r} not found in the suite directory",
                             where=task.source or None)
        files[dest] = source
    try:
        workspace = Workspace.create(files)
    except SandboxError as exc:
        raise InputError(f"task {task.id!r}: {exc.message}", where=task.source or None) from None
    try:
        install(workspace)
    except BaseException as exc:
        workspace.cleanup()
        if isinstance(exc, SandboxError):
            raise InputError(f"skill {request.skill.name!r}: {exc.message}", where=request.skill.path or None) from None
        raise
    return workspace


def workspace_rollout(request: RolloutRequest, workspace: Workspace, options: Any, steps: Sequence[Step],
                      ending: str, *, error: dict[str, str] | None = None,
                      release: Callable[[], None] | None = None, **fields: Any) -> Rollout:
    """The rollout of an environment that ran in ``workspace``: the files it wrote (kept under
    ``request.keep_dir`` up to ``options.keep_files_bytes``), its steps and its transcript (to
    ``options.transcript_chars``, ending with the error when there is one, else ``ending``).
    ``release`` (default: removing the workspace) runs when keeping the files fails, and later
    when the engine is done with the rollout."""
    release = release or workspace.cleanup
    try:
        written = tuple(workspace.written_files())
        if request.keep_dir is not None and written:
            workspace.keep(request.keep_dir, options.keep_files_bytes)
    except BaseException:
        release()
        raise
    if error is not None:
        ending = f"[ended: {error['kind']}] {error['message']}"
    return Rollout(steps=tuple(steps), error=error, transcript=render_steps(steps, ending, options.transcript_chars),
                   workspace=workspace.path, files=written, release=release, **fields)
