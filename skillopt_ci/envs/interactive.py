"""The ``interactive`` environment: an episode in a world the suite names.

The world is a class (``world: "module:Class"``, a file of the suite directory or an installed
module) built with ``world_options`` once per rollout: ``reset(task) -> observation``,
``step(action) -> (observation, reward, done)``, optional ``close()``. Its calls run on a thread
of the rollout's own (real worlds are slow and synchronous), each within ``step_timeout_s`` and
the episode within ``time_limit_s`` (model calls included); a call past its limit is an errored
rollout of kind ``time_limit`` and its world is abandoned, never closed (see
:mod:`skillopt_ci.envs.world_thread`); a world with a ``kill()`` method (one that runs a process)
gets that call instead, from the rollout's side, when it is abandoned or the rollout is
cancelled in one of its calls. ``reset`` gets the task record; when the task
lists ``files`` (suite files or assets ``@root/path``), it also gets their checked absolute paths
under ``file_paths``.

Each turn the target model gets the skill body as the system message and one user message: the
task prompt, the last ``history`` (action, observation) pairs, the last action and the current
observation, the actions the world admits (when it has an ``admissible_actions()`` method), and
how to answer. ``turn_prompt`` replaces that layout by a template (see
:mod:`skillopt_ci.envs.turn_prompt`) and ``skill_heading`` moves the skill from the system message
to the end of the user message, under that heading. The message is a pure function of the
episode so far, so the response cache replays a whole episode. The action is read from the reply
as :mod:`skillopt_ci.envs.reply_action` says, by ``variant``: ``strict`` (the default) by the
``action`` rule (``tag``: the last ``<action_tag>…</action_tag>``; ``last_line``), with the
``require_tags``, ``reject_cjk`` and ``lowercase`` checks; ``reference`` as the method reads an
ALFWorld reply (every reply sends an action). A reply without a valid action is not sent to the
world: the next observation says why, and the turn counts. The options added after the first
version are left out of ``identity()`` while they keep their defaults, so the run identity (and
the cache) of an existing suite does not change.

The episode ends when the world says ``done``, after ``max_steps`` turns (not an error:
``done=False`` and the reward so far), on a :class:`ProviderError` (an errored rollout, steps
kept), or when the world raises in its constructor, ``reset`` or ``step`` or returns something
that is not ``(str, number, bool)`` (an errored rollout of kind ``environment`` whose message
names the task and the exception). A world that raises :class:`InputError` (its data is missing,
a package it needs is not installed) stops the run with exit 2. ``Rollout.reward`` is the
episode's total reward, ``Rollout.output`` the last action.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.core.messages import Message
from skillopt_ci.core.options import options_to_dict
from skillopt_ci.core.task import task_paths
from skillopt_ci.core.text import clip
from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs import turn_prompt as turns
from skillopt_ci.envs.base import BaseEnvironment, RolloutRequest, keep_image, task_images
from skillopt_ci.envs.reply_action import parse_action as parse_action  # where it used to live
from skillopt_ci.envs.reply_action import read_action, variant_problem
from skillopt_ci.envs.steps_text import render_transcript
from skillopt_ci.envs.world_thread import WorldHung, WorldThread
from skillopt_ci.envs.worlds import load_world_class
from skillopt_ci.inputs.assets import suite_file
from skillopt_ci.inputs.usercode import user_code
from skillopt_ci.models.base import Completion, ModelCaller, call_totals

ACTION_RULES = ("tag", "last_line")
TRANSCRIPT_CHARS = 20_000
TAG_NAME_RE = re.compile(r"^[A-Za-z][\w-]*$")


@dataclass(frozen=True)
class InteractiveOptions:
    world: str  # "module:Class": a file of the suite directory or an installed module
    world_options: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 30
    history: int = 8
    action: str = "tag"
    action_tag: str = "action"
    # Added for benchmark prompts (ALFWorld); the defaults keep the original layout and rules.
    turn_prompt: str = ""  # a template of the whole turn message (envs.turn_prompt); "" = the layout above
    skill_heading: str = ""  # "" = the skill is the system message; else appended to the turn message under it
    require_tags: tuple[str, ...] = ()  # tags the reply must also hold for its action to count
    reject_cjk: bool = False  # a reply holding a CJK character has no action
    lowercase: bool = False  # the action is lowercased before it goes to the world
    step_timeout_s: float = 60.0  # longest a world's call (reset, step, close…) may take
    time_limit_s: float = 1800.0  # longest a whole episode may take, model calls included
    variant: str = "strict"  # strict (the rules above) | reference (the method's ALFWorld reading)


LATER_OPTIONS = {"turn_prompt": "", "skill_heading": "", "require_tags": [], "reject_cjk": False, "lowercase": False,
                 "step_timeout_s": 60.0, "time_limit_s": 1800.0, "variant": "strict"}


class WorldFailure(Exception):
    """The world raised or broke its contract; the message names the task and what happened.
    ``kind``: the errored result's kind (``environment``, or ``time_limit`` for a call that hung)."""

    def __init__(self, message: str, kind: str = "environment"):
        super().__init__(message)
        self.kind = kind


@dataclass
class Episode:
    """The state of one rollout while it runs; ``rollout()`` freezes it."""

    task_id: str
    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)
    pairs: list[tuple[str | None, str]] = field(default_factory=list)  # (action or None, observation)
    initial: str = ""
    observation: str = ""
    admissible: tuple[str, ...] = ()
    objective: str = ""
    turns: int = 0
    reward: float = 0.0
    done: bool = False
    last_action: str = ""
    completions: list[Completion] = field(default_factory=list)
    error: dict[str, str] | None = None
    world: WorldThread | None = None  # where the world's calls run
    deadline: float = math.inf  # monotonic time the episode must end by

    def add(self, kind: str, text: str, **extra: Any) -> None:
        self.steps.append(Step(kind, text, elapsed_s=time.monotonic() - self.started, **extra))

    def observe(self, action: str | None, observation: str, reward: float = 0.0, done: bool = False,
                *, initial: bool = False) -> None:
        if initial:
            self.initial = observation
        else:
            self.pairs.append((action, observation))
        self.observation = observation
        self.reward += reward
        self.done = done
        self.add("observation", observation, reward=reward, done=done)

    def seen_pairs(self) -> list[tuple[str, str | None]]:
        """(observation the model saw, action it answered with) for every turn so far."""
        seen = ([self.initial] + [observation for _, observation in self.pairs])[:len(self.pairs)]
        return [(observation, action) for observation, (action, _) in zip(seen, self.pairs, strict=True)]

    def rollout(self, transcript: str) -> Rollout:
        finish = None if self.error else ("done" if self.done else "max_steps")
        return Rollout(
            output=self.last_action, steps=tuple(self.steps), reward=self.reward, done=self.done,
            **call_totals(self.completions), wall_s=time.monotonic() - self.started, finish_reason=finish,
            error=self.error, transcript=transcript,
        )


class InteractiveEnvironment(BaseEnvironment):
    name = "interactive"
    Options = InteractiveOptions

    def setup(self) -> None:
        where = str(self.suite_dir / "suite.yaml")
        o = self.options
        if o.max_steps < 1:
            raise InputError(f'option "max_steps" of environment interactive must be at least 1, got {o.max_steps}',
                             where=where)
        if o.history < 0:
            raise InputError(f'option "history" of environment interactive must be 0 or more, got {o.history}',
                             where=where)
        for key in ("step_timeout_s", "time_limit_s"):
            value = getattr(o, key)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise InputError(f'option "{key}" of environment interactive must be a number of seconds '
                                 f"above 0, got {value!r}", where=where)
        if problem := variant_problem(o.variant, o.action, o.action_tag):
            raise InputError(problem, where=where)
        if o.action not in ACTION_RULES:
            raise InputError(f'option "action" of environment interactive must be one of '
                             f"{', '.join(ACTION_RULES)}, got {o.action!r}", where=where)
        if not TAG_NAME_RE.match(o.action_tag):
            raise InputError(f'option "action_tag" of environment interactive must be a tag name '
                             f"such as action, got {o.action_tag!r}", where=where)
        for tag in o.require_tags:
            if not TAG_NAME_RE.match(tag):
                raise InputError(f'option "require_tags" of environment interactive must list tag names '
                                 f"such as think, got {tag!r}", where=where)
        unknown = turns.unknown_placeholders(o.turn_prompt)
        if unknown:
            raise InputError(f'option "turn_prompt" of environment interactive has unknown placeholder(s) '
                             f"{', '.join(unknown)}; known: {', '.join(turns.TURN_PLACEHOLDERS)}", where=where)
        self.world_class = load_world_class(o.world, self.suite_dir, where, "world")

    def identity(self) -> dict[str, Any]:
        values = options_to_dict(self.options)
        for key, default in LATER_OPTIONS.items():
            if values.get(key) == default:
                del values[key]
        return {"type": self.name, **values}

    async def run(self, request: RolloutRequest, models: ModelCaller) -> Rollout:
        episode = Episode(request.task.id, world=WorldThread(f"world {request.task.id}"))
        episode.deadline = episode.started + self.options.time_limit_s
        world: list[Any] = []  # the world once built, for the close below
        try:
            await asyncio.wait_for(self._episode(request, models, episode, world), self.options.time_limit_s)
        except asyncio.TimeoutError:
            message = (f"task {episode.task_id!r}: the episode did not finish within "
                       f"time_limit_s = {self.options.time_limit_s:g} s")
            episode.error = {"kind": "time_limit", "message": message}
            episode.add("error", message)
        except ProviderError as exc:
            episode.error = {"kind": exc.kind, "message": exc.message}
            episode.add("error", f"{exc.kind}: {exc.message}")
        except WorldFailure as exc:
            episode.error = {"kind": exc.kind, "message": str(exc)}
            episode.add("error", str(exc))
        except BaseException:  # cancelled: leave the close to the world's thread and let it through
            self._post_close(world[0] if world else None, episode)
            raise
        await self._close(world[0] if world else None, episode)
        return episode.rollout(render_transcript(request.prompt, episode.steps, TRANSCRIPT_CHARS))

    async def _episode(self, request: RolloutRequest, models: ModelCaller, episode: Episode, built: list[Any]) -> None:
        images = task_images(request.task, request.suite_dir)
        world = await self._world_call(episode, "constructor", self.world_class, **self.options.world_options)
        built.append(world)
        fields = await asyncio.to_thread(task_record, request)
        first = await self._world_call(episode, "reset", world.reset, fields)
        if not isinstance(first, str):
            raise WorldFailure(f"task {episode.task_id!r}: the world's reset returned "
                               f"{type(first).__name__}, not an observation string")
        episode.observe(None, first, initial=True)
        await self._world_info(world, episode, objective=True)
        if images:  # shown from the first turn on: the viewer puts them at the first observation
            names = tuple(keep_image(image, request.image_dir) for image in images)
            episode.steps[-1] = dataclasses.replace(episode.steps[-1], images=names)
        while not episode.done and episode.turns < self.options.max_steps:
            await self._turn(world, request, models, episode, images)

    async def _turn(self, world: Any, request: RolloutRequest, models: ModelCaller, episode: Episode,
                    images: tuple[Any, ...]) -> None:
        messages = self.messages(request, episode, images)
        completion = await models.complete("target", messages, sample_index=request.sample_index,
                                           context=self.identity())
        episode.completions.append(completion)
        episode.turns += 1
        episode.add("model", completion.text, usage=completion.usage)
        o = self.options
        action, problem = read_action(completion.text, variant=o.variant, rule=o.action, tag=o.action_tag,
                                      require_tags=o.require_tags, reject_cjk=o.reject_cjk, lowercase=o.lowercase)
        if action is None:
            episode.observe(None, f"{problem} {self.instruction()}")
            return
        episode.last_action = action
        episode.add("action", action)
        result = await self._world_call(episode, "step", world.step, action)
        episode.observe(action, *_check_step(result, episode.task_id))
        await self._world_info(world, episode)

    async def _world_info(self, world: Any, episode: Episode, objective: bool = False) -> None:
        """Ask the world's optional ``admissible_actions()`` (and, after reset, ``objective()``)."""
        if callable(getattr(world, "admissible_actions", None)):
            found = await self._world_call(episode, "admissible_actions", world.admissible_actions)
            if not (isinstance(found, (list, tuple)) and all(isinstance(a, str) for a in found)):
                raise WorldFailure(f"task {episode.task_id!r}: the world's admissible_actions returned "
                                   f"{clip(repr(found), 80)}; expected a list of strings")
            episode.admissible = tuple(found)
        if objective and callable(getattr(world, "objective", None)):
            found = await self._world_call(episode, "objective", world.objective)
            if not isinstance(found, str):
                raise WorldFailure(f"task {episode.task_id!r}: the world's objective returned "
                                   f"{type(found).__name__}, not a string")
            episode.objective = found

    async def _world_call(self, episode: Episode, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn`` on the episode's world thread, within the step limit and what is left of the episode's."""
        assert episode.world is not None
        limit = min(self.options.step_timeout_s, episode.deadline - time.monotonic())
        try:
            return await episode.world.call(limit, what, _guarded, fn, *args, **kwargs)
        except WorldHung as exc:
            raise WorldFailure(f"task {episode.task_id!r}: {exc} (step_timeout_s = {self.options.step_timeout_s:g} s); "
                               "the world was abandoned", kind="time_limit") from None
        except InputError:  # the world's data or package is missing: the user's to fix, exit 2
            raise
        except Exception as exc:
            raise WorldFailure(f"task {episode.task_id!r}: the world's {what} raised "
                               f"{type(exc).__name__}: {clip(str(exc), 200)}") from exc

    async def _close(self, world: Any, episode: Episode) -> None:
        """Call the world's ``close`` if it has one, on its thread and within the step limit; a
        failing close is recorded as a step. An abandoned world is not closed (its thread is busy)."""
        thread = episode.world
        assert thread is not None
        close = getattr(world, "close", None)
        if not callable(close):
            thread.stop()
            return
        if thread.hung is not None:
            episode.add("error", f"the world's close was not called: its {thread.hung} had not returned")
            _kill(world)
            return
        try:
            await thread.call(self.options.step_timeout_s, "close", _guarded, close)
        except WorldHung as exc:
            episode.add("error", str(exc))
        except Exception as exc:  # the episode is over; a failing close is noted, not fatal
            episode.add("error", f"the world's close raised {type(exc).__name__}: {clip(str(exc), 200)}")
        thread.stop()

    def _post_close(self, world: Any, episode: Episode) -> None:
        """On cancellation: the world's ``close`` on its thread, waited for at most the step limit."""
        assert episode.world is not None
        if episode.world.hung is not None:  # cancelled inside a world call: its thread is busy
            _kill(world)
            return
        close = getattr(world, "close", None)
        episode.world.finish(close if callable(close) else (lambda: None), self.options.step_timeout_s)

    def instruction(self) -> str:
        o = self.options
        return turns.instruction(o.action, o.action_tag, o.require_tags, o.reject_cjk)

    def messages(self, request: RolloutRequest, episode: Episode, images: tuple[Any, ...] = ()) -> list[Message]:
        """The turn's messages: a pure function of the prompt and the episode so far."""
        o = self.options
        if o.turn_prompt:
            text = turns.render_turn(
                o.turn_prompt, prompt=request.prompt, objective=episode.objective, step=episode.turns,
                max_steps=o.max_steps, pairs=episode.seen_pairs(), history=o.history,
                observation=episode.observation, admissible=episode.admissible, instruction_line=self.instruction())
        else:
            text = self._default_text(request, episode)
        system = request.skill.body.strip()
        if o.skill_heading and system:
            text, system = f"{text.rstrip()}\n\n{o.skill_heading}\n{system}", ""
        user = Message("user", (text, *images) if images else text)
        return [Message("system", system), user] if system else [user]

    def _default_text(self, request: RolloutRequest, episode: Episode) -> str:
        parts = [request.prompt.rstrip()]
        earlier = episode.pairs[:-1]
        shown = earlier[-self.options.history:] if self.options.history else []
        if shown:
            lines = [f"Earlier steps (the last {len(shown)} of {len(earlier)}):"]
            for action, observation in shown:
                lines += [f"> {action if action is not None else '(no action)'}", observation]
            parts.append("\n".join(lines))
        current = "Current observation:\n" + episode.observation
        if episode.pairs:
            action = episode.pairs[-1][0]
            current = f"Last action: {action if action is not None else '(no action)'}\n{current}"
        parts.append(current)
        if episode.admissible:
            parts.append("Admissible actions:\n" + "\n".join(episode.admissible))
        parts.append(self.instruction())
        return "\n\n".join(parts)


def task_record(request: RolloutRequest) -> dict[str, Any]:
    """The record ``reset`` gets: the task's fields and, when the task lists ``files``, their
    checked absolute paths under ``file_paths`` ({path as listed in the workspace: path}); an
    asset's sha256 is checked against ``assets.json`` (a changed or missing file: InputError)."""
    fields = dict(request.task.fields)
    listed = task_paths(request.task, "files")
    if listed:
        where = request.task.source or None
        fields["file_paths"] = {dest: str(suite_file(request.suite_dir, rel, where)) for dest, rel in listed.items()}
    return fields


def _check_step(result: Any, task_id: str) -> tuple[str, float, bool]:
    ok = (isinstance(result, tuple) and len(result) == 3 and isinstance(result[0], str)
          and isinstance(result[1], (int, float)) and not isinstance(result[1], bool)
          and math.isfinite(result[1]) and isinstance(result[2], bool))
    if not ok:
        raise WorldFailure(f"task {task_id!r}: the world's step returned {clip(repr(result), 80)}; "
                           "expected (observation: str, reward: number, done: bool)")
    return result[0], float(result[1]), result[2]


def _kill(world: Any) -> None:
    """An abandoned world's optional ``kill()``, called from this thread; what it raises is dropped."""
    kill = getattr(world, "kill", None)
    if callable(kill):
        with contextlib.suppress(Exception):
            kill()


def _guarded(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call world code: its ``sys.exit()`` is an error of the world (``UserExit``), never the
    end of the run."""
    with user_code():
        return fn(*args, **kwargs)
