"""Records of a training run's outcome: what the nightly pull request and the reports show.

``TrainingSummary`` is written as ``summary.json`` (``kind: "train"``) at the end of a run; it is
versioned and round-trips through JSON exactly (:mod:`skillopt_ci.core.codec`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from skillopt_ci.core import codec
from skillopt_ci.core.codec import Record
from skillopt_ci.core.edits import Edit
from skillopt_ci.core.records import TriggerCounts

TRAIN_SUMMARY_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class SplitComparison(Record):
    """The current skill (baseline) vs the trained one (best) on one split, paired on the same
    tasks and repeats. ``verdict`` is the paired comparison's: improved, regressed, unchanged or
    inconclusive."""

    split: str
    current: float | None
    trained: float | None
    delta: float | None
    ci: tuple[float, float] | None
    verdict: str
    n_tasks: int


@dataclass(frozen=True)
class AcceptedEdit(Record):
    """An edit that is part of the best skill, with the step that introduced it."""

    step: str
    edit: Edit


@dataclass(frozen=True)
class StepPoint(Record):
    """One point of the validation curve: the step id (``baseline``, ``e0-s3``, ``e1-slow``…), the
    candidate's validation score when it was measured in full (``None`` when scoring stopped
    early or the step was skipped), the incumbent's score after the step, and the decision
    (``baseline``, ``accepted``, ``rejected``, ``skipped``) with its one-line reason, and the
    edits left out of the candidate on the way (screened out alone, pruned by credit assignment),
    each ``{"op", "text", "reason"}``."""

    step: str
    candidate: float | None
    incumbent: float | None
    decision: str
    # Absent when empty: older summaries stay as they were.
    reason: Annotated[str, codec.OMIT_EMPTY] = ""
    left_out: Annotated[tuple[dict[str, str], ...], codec.OMIT_EMPTY] = ()


@dataclass(frozen=True)
class CurvePoint(Record):
    """One point of the best-so-far curve: after ``step``, ``calls`` target calls spent by the run
    (the baseline's validation and the steps so far; 0 per step in runs recorded before calls were
    counted), the incumbent ``version`` and its validation mean ``val``."""

    step: str
    calls: int
    version: int
    val: float | None


@dataclass(frozen=True)
class TrainingSummary(Record):
    JSON_HEAD: ClassVar = {"schema_version": TRAIN_SUMMARY_SCHEMA_VERSION, "kind": "train"}

    skill: dict[str, Any]  # name, path, hash (of the current, baseline skill)
    suite: dict[str, Any]  # name, path, hash
    baseline_hash: str
    best_hash: str
    final_hash: str
    best_version: int
    val: SplitComparison
    test: SplitComparison | None
    final_val: float | None
    final_test: float | None
    accepted_edits: tuple[AcceptedEdit, ...]
    steps_accepted: int
    steps_rejected: int
    steps_skipped: int
    points: tuple[StepPoint, ...]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    wall_time_s: float
    improved: bool
    complete: bool = True
    stopped: str | None = None
    run_dir: str = ""
    tokens_by_stage: dict[str, dict[str, Any]] = field(default_factory=dict)
    # --baseline none: per split ("val", "test"), core.baseline.SkillWorth.to_dict() of the best skill
    no_skill: Annotated[dict[str, dict[str, Any]] | None, codec.OMIT_NONE] = None
    cancelled_rollouts: int = 0  # cut off in flight by early stopping (a provider may still bill them)
    # The best skill so far after every step, against budgets.max_target_calls when it is set.
    best_so_far: Annotated[tuple[CurvePoint, ...], codec.OMIT_EMPTY] = ()
    max_target_calls: Annotated[int | None, codec.OMIT_NONE] = None
    target_calls: Annotated[int, codec.OMIT_EMPTY] = 0  # sent by the whole run (the test included)
    # train.target description or both: what could change, the description before and after
    target: Annotated[str | None, codec.OMIT_NONE] = None
    description: Annotated[dict[str, str] | None, codec.OMIT_NONE] = None  # {"current", "trained"}
    # per split with trigger tasks: {"current": counts, "trained": counts}
    trigger: Annotated[dict[str, dict[str, TriggerCounts]] | None, codec.OMIT_NONE] = None
