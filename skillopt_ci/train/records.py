"""Records of a training run's outcome: what the nightly pull request and the reports show.

``TrainingSummary`` is written as ``summary.json`` (``kind: "train"``) at the end of a run; it is
versioned and round-trips through JSON exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from skillopt_ci.core.edits import Edit

TRAIN_SUMMARY_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class SplitComparison:
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

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ci"] = list(self.ci) if self.ci else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SplitComparison:
        return cls(data["split"], data["current"], data["trained"], data["delta"],
                   tuple(data["ci"]) if data.get("ci") else None, data["verdict"], data["n_tasks"])


@dataclass(frozen=True)
class AcceptedEdit:
    """An edit that is part of the best skill, with the step that introduced it."""

    step: str
    edit: Edit

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "edit": self.edit.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AcceptedEdit:
        return cls(data["step"], Edit.from_dict(data["edit"]))


@dataclass(frozen=True)
class StepPoint:
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
    reason: str = ""
    left_out: tuple[dict[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key, empty in (("reason", ""), ("left_out", ())):
            if not data[key] or data[key] == empty:  # absent when empty: older summaries stay as they were
                data.pop(key)
        if "left_out" in data:
            data["left_out"] = [dict(x) for x in self.left_out]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepPoint:
        return cls(data["step"], data["candidate"], data["incumbent"], data["decision"], data.get("reason", ""),
                   tuple(dict(x) for x in data.get("left_out", ())))


@dataclass(frozen=True)
class TrainingSummary:
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
    no_skill: dict[str, dict[str, Any]] | None = None
    cancelled_rollouts: int = 0  # cut off in flight by early stopping (a provider may still bill them)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items()}
        if self.no_skill is None:
            data.pop("no_skill")
        data["val"] = self.val.to_dict()
        data["test"] = self.test.to_dict() if self.test else None
        data["accepted_edits"] = [e.to_dict() for e in self.accepted_edits]
        data["points"] = [p.to_dict() for p in self.points]
        return {"schema_version": TRAIN_SUMMARY_SCHEMA_VERSION, "kind": "train", **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingSummary:
        values = {k: v for k, v in data.items() if k not in ("schema_version", "kind")}
        values["val"] = SplitComparison.from_dict(data["val"])
        values["test"] = SplitComparison.from_dict(data["test"]) if data.get("test") else None
        values["accepted_edits"] = tuple(AcceptedEdit.from_dict(e) for e in data["accepted_edits"])
        values["points"] = tuple(StepPoint.from_dict(p) for p in data["points"])
        return cls(**values)
