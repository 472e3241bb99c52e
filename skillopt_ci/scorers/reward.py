"""The ``reward`` scorer: the score an interactive environment's world gave the episode.

It reads the rollout, not the output text: ``value`` is the episode's total reward clipped to
[0, 1]; ``passed`` is ``done and reward >= threshold``. The feedback says whether the goal was
reached, in how many turns, and for an unfinished episode the last action, what the world
answered and how often the action was repeated (a loop is the usual sign of a missing rule).
A rollout without a reward (an environment that gives none) is a suite error.
"""

from __future__ import annotations

from dataclasses import dataclass

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import quote
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.models.base import ModelCaller
from skillopt_ci.scorers.base import Score, Scorer


@dataclass(frozen=True)
class RewardOptions:
    threshold: float = 1.0  # total reward an episode needs (with done) to pass


class RewardScorer(Scorer):
    name = "reward"
    Options = RewardOptions

    def setup(self) -> None:
        if not -1e12 < self.options.threshold < 1e12:
            raise self.error(f"threshold must be a finite number, got {self.options.threshold}")

    def _no_reward(self, task: Task) -> InputError:
        return self.error("needs an environment that gives a reward (environment: interactive); "
                          f'task "{task.id}" was run without one', where=task.source or None)

    def score(self, output: str, task: Task) -> Score:
        raise self._no_reward(task)

    async def ascore_rollout(self, rollout: Rollout, task: Task, models: ModelCaller | None = None) -> Score:
        if rollout.reward is None:
            raise self._no_reward(task)
        reward = float(rollout.reward)
        value = min(1.0, max(0.0, reward))
        passed = bool(rollout.done) and reward >= self.options.threshold
        return Score(value, passed, feedback(rollout, reward, self.options.threshold))


def feedback(rollout: Rollout, reward: float, threshold: float) -> str:
    count = sum(1 for s in rollout.steps if s.kind == "model")
    turns = f"{count} turn{'' if count == 1 else 's'}"
    if rollout.done:
        if reward >= threshold:
            return f"goal reached: reward {reward:g} in {turns}"
        return f"episode ended with reward {reward:g}, below {threshold:g}, after {turns}"
    text = f"goal not reached: reward {reward:g} after {turns}"
    actions = [s.text for s in rollout.steps if s.kind == "action"]
    if not actions:
        return text + "; no action was found in any reply"
    last = actions[-1]
    repeats = next((i for i, a in enumerate(reversed(actions)) if a != last), len(actions))
    answer = next((s.text for s in reversed(rollout.steps) if s.kind == "observation"), "")
    text += f"; last action {quote(last, 40)}"
    if repeats > 1:
        text += f" (repeated {repeats} times)"
    return text + f" got {quote(answer.splitlines()[0] if answer else '', 80)}"
