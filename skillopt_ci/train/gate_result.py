"""What the validation gate of training decides about a candidate: a :class:`Verdict` and its
:class:`GateResult` (the scores, the paired delta and interval, the samples the trainer keeps)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from skillopt_ci.core.records import TaskResult
from skillopt_ci.train.history import Decision


class Verdict(str, Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    EARLY_REJECTED = "early-rejected"
    INCONCLUSIVE = "inconclusive"

    @property
    def decision(self) -> Decision:
        return Decision.ACCEPTED if self is Verdict.ACCEPTED else Decision.REJECTED


@dataclass(frozen=True)
class GateResult:
    verdict: Verdict
    reason: str
    candidate_val: float | None
    incumbent_val: float | None
    delta: float | None = None
    ci: tuple[float, float] | None = None
    results: tuple[TaskResult, ...] = ()  # the candidate's validation results (in memory only, for credit)
    # The paired gate's samples per task after the decision (in memory; the trainer keeps them).
    candidate_samples: dict[str, list[float]] | None = None
    incumbent_samples: dict[str, list[float]] | None = None

    @property
    def accepted(self) -> bool:
        return self.verdict is Verdict.ACCEPTED

    @property
    def early_stopped(self) -> bool:
        return self.verdict is Verdict.EARLY_REJECTED
