"""What an agent CLI's output says, read without running anything: the line-delimited JSON
events of its stdout (:func:`json_events`), each with the time its line arrived, the steps they
make stamped with it (:func:`stamp`), and :class:`Parsed`, what every CLI's parser returns. Pure."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from skillopt_ci.core.records import Usage
from skillopt_ci.core.trajectory import Step


@dataclass
class Parsed:
    """What the CLI's output says: ``failed`` is the failure event's message (``None``: none)."""

    steps: list[Step] = field(default_factory=list)
    output: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    failed: str | None = None
    failed_kind: str = "agent_failed"  # "max_turns" when the CLI stopped at its own turn limit
    turns: int = 0
    finish_reason: str | None = None  # why the CLI says it stopped, in its words (None: it did not say)


def json_events(stdout: str, times: Sequence[float] = ()) -> Iterator[tuple[dict[str, Any], float]]:
    """The JSON objects of a CLI's line-delimited output, each with the time its line arrived
    (seconds since the CLI started, from :class:`TurnWatch`; 0 when unknown)."""
    for index, line in enumerate(stdout.split("\n")):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event, times[index] if index < len(times) else 0.0


def stamp(steps: list[Step], since: int, elapsed: float) -> None:
    """Give the steps added from index ``since`` on the arrival time of the event that made them."""
    for index in range(since, len(steps)):
        steps[index] = replace(steps[index], elapsed_s=elapsed)
