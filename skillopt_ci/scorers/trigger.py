"""The ``trigger`` scorer: did the agent use the skill exactly when the request calls for it?

A trigger task carries ``should_trigger: true`` (a request the skill is for) or ``false`` (a
near-miss it should leave alone). The score reads the rollout's ``consult`` record
(:mod:`skillopt_ci.core.consult`), not the output text: 1 when the agent consulted the skill and
should have, or left it alone and should have; else 0, with feedback the optimizer can use.

A task with ``should_trigger: false`` is always scored this way, whatever the suite's scorer (its
work is not the skill's business); a task with ``should_trigger: true`` is scored by the suite's
scorer, so one task can test both the triggering and the work. Only environments that record
consults (``catalogue``, ``codex``, ``claude-code``) can run trigger tasks; any other is a suite error.
"""

from __future__ import annotations

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.inputs.suite import Suite
from skillopt_ci.models.base import ModelCaller
from skillopt_ci.scorers.base import Score, Scorer

FIELD = "should_trigger"


class TriggerScorer(Scorer):
    name = "trigger"

    def score(self, output: str, task: Task) -> Score:
        raise self._no_consult(task)

    def _no_consult(self, task: Task) -> InputError:
        return self.error("needs an environment that records whether the agent consulted the skill "
                          f'(catalogue, codex, claude-code); task "{task.id}" was run without one', where=task.source or None)

    async def ascore_rollout(self, rollout: Rollout, task: Task, models: ModelCaller | None = None) -> Score:
        wanted = task.should_trigger
        if wanted is None:
            raise self.error(f'task "{task.id}" has no "{FIELD}": true or false', where=task.source or None)
        if rollout.consult is None:
            raise self._no_consult(task)
        return trigger_score(wanted, rollout.consult.consulted)


def trigger_score(wanted: bool, consulted: bool) -> Score:
    if wanted and consulted:
        return Score.binary(True, "used the skill, as the request calls for")
    if not wanted and not consulted:
        return Score.binary(True, "left the skill alone, as it should for this request")
    if wanted:
        return Score.binary(False, "did not use the skill although the request is one it is for: the description "
                                   "did not make the agent reach for it")
    return Score.binary(False, "used the skill for a request it is not for: the description claims too much")


def trigger_problem(suite: Suite, environment: str, records_consults: bool) -> str | None:
    """What keeps a suite's trigger tasks from running, said before anything is spent: an
    environment that cannot see consults, or a ``trigger`` scorer on a task without
    ``should_trigger``."""
    tasks = [t for split in suite.splits.values() for t in split]
    scorer_type = str(suite.scorer.get("type"))
    triggers = [t for t in tasks if t.should_trigger is not None]
    if (triggers or scorer_type == TriggerScorer.name) and not records_consults:
        return (f"trigger tasks (should_trigger) need an environment that records whether the agent consulted the "
                f"skill (catalogue, codex, claude-code); environment {environment!r} does not")
    if scorer_type == TriggerScorer.name:
        missing = [t for t in tasks if t.should_trigger is None]
        if missing:
            return (f'scorer "trigger" needs "{FIELD}": true or false on every task; {len(missing)} have none '
                    f"(first: {missing[0].id!r} at {missing[0].source})")
    return None
