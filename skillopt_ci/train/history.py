"""Typed records of a training run's history: one :class:`StepRecord` per step or slow update,
one :class:`EpochRecord` per finished epoch.

They live in ``state.json`` (and one a line in ``history.jsonl``, and each step's ``step.json``).
``to_dict`` writes exactly the JSON the untyped records had — the same keys, in the same order,
with a key left out where the step never reached it — so the viewer, the reports and files
written before these types existed read the same. ``from_dict(to_dict(x)) == x``.

A decision is a :class:`Decision`, not a sentence: the reason a step gives is for people (and
the optimizer), never for control flow. On disk a decision is its value (``"accepted"`` …).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from skillopt_ci.core.edits import Edit, EditOutcome
from skillopt_ci.train.optimizer import Proposal, SlowUpdateInput


class Decision(str, Enum):
    """What a step did to the incumbent. ``SKIPPED``: nothing reached the gate (no usable edit)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SKIPPED = "skipped"


class StepKind(str, Enum):
    STEP = "step"
    SLOW_UPDATE = "slow_update"


@dataclass(frozen=True)
class StageSpend:
    """Tokens and cost one stage (rollout, reflect, validation) of a step used; ``cost_usd`` is
    ``None`` when a price is unknown. Also used as a running total (a meter reading)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0

    def minus(self, before: StageSpend) -> StageSpend:
        cost = None if self.cost_usd is None or before.cost_usd is None else round(self.cost_usd - before.cost_usd, 6)
        return StageSpend(self.input_tokens - before.input_tokens, self.output_tokens - before.output_tokens, cost)

    def to_dict(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": self.cost_usd}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageSpend:
        return cls(int(data["input_tokens"]), int(data["output_tokens"]), data["cost_usd"])


@dataclass(frozen=True)
class Rollout:
    """The incumbent's mean on the step's train batch and the tasks it failed."""

    mean: float | None
    failures: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "failures": list(self.failures)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rollout:
        return cls(data["mean"], tuple(data["failures"]))


@dataclass(frozen=True)
class DroppedEdit:
    edit: Edit
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"edit": self.edit.to_dict(), "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DroppedEdit:
        return cls(Edit.from_dict(dict(data["edit"])), str(data["reason"]))


@dataclass(frozen=True)
class CreditNote:
    """Credit assignment on an accepted step (see :mod:`skillopt_ci.core.credit`): ``pruned`` when
    the step keeps only ``kept``, ``full`` when it keeps every edit. ``trials`` are kept as the
    credit module wrote them."""

    tasks: tuple[str, ...]
    trials: tuple[dict[str, Any], ...]
    removed: tuple[DroppedEdit, ...]
    used: str
    pruned_val: float | None
    kept: tuple[Edit, ...]

    @property
    def pruned(self) -> bool:
        return self.used == "pruned"

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": list(self.tasks), "trials": [dict(t) for t in self.trials],
                "removed": [r.to_dict() for r in self.removed], "used": self.used, "pruned_val": self.pruned_val,
                "kept": [e.to_dict() for e in self.kept]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CreditNote:
        return cls(tuple(data["tasks"]), tuple(dict(t) for t in data["trials"]),
                   tuple(DroppedEdit.from_dict(r) for r in data["removed"]), str(data["used"]), data["pruned_val"],
                   tuple(Edit.from_dict(dict(e)) for e in data["kept"]))


@dataclass(frozen=True)
class ScreenedEdit:
    """One edit screened alone on the training failures it was proposed for (and the successes):
    how many it improved and broke, whether it was kept, and why, in one line."""

    edit: Edit
    failures: tuple[str, ...]
    fixed: int
    broken: int
    kept: bool
    reason: str
    # The confirmation runs on the tasks it fixed: improvements and non-improvements (None: not run).
    confirmed: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"edit": self.edit.to_dict(), "failures": list(self.failures), "fixed": self.fixed,
               "broken": self.broken, "kept": self.kept, "reason": self.reason}
        if self.confirmed is not None:
            out["confirmed"] = list(self.confirmed)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScreenedEdit:
        confirmed = data.get("confirmed")
        return cls(Edit.from_dict(dict(data["edit"])), tuple(data["failures"]), int(data["fixed"]),
                   int(data["broken"]), bool(data["kept"]), str(data["reason"]),
                   None if confirmed is None else (int(confirmed[0]), int(confirmed[1])))


@dataclass(frozen=True)
class ScreenNote:
    """Screening before validation (see :mod:`skillopt_ci.train.screen`): the rollout's failures
    and the successes re-run with fresh samples (``sample_offset``), the candidate's counts
    (``None`` when only edits were screened), each edit screened alone, and the verdict."""

    failures: tuple[str, ...]
    successes: tuple[str, ...]
    sample_offset: int
    fixed: int | None
    broken: int | None
    edits: tuple[ScreenedEdit, ...]
    passed: bool
    reason: str

    @property
    def dropped(self) -> list[ScreenedEdit]:
        return [e for e in self.edits if not e.kept]

    @property
    def confirmed(self) -> bool:
        """Every kept edit was confirmed alone (so each carries its own evidence)."""
        kept = [e for e in self.edits if e.kept]
        return self.passed and bool(kept) and all(e.confirmed is not None for e in kept)

    def to_dict(self) -> dict[str, Any]:
        return {"failures": list(self.failures), "successes": list(self.successes),
                "sample_offset": self.sample_offset, "fixed": self.fixed, "broken": self.broken,
                "edits": [e.to_dict() for e in self.edits], "passed": self.passed, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScreenNote:
        return cls(tuple(data["failures"]), tuple(data["successes"]), int(data["sample_offset"]), data["fixed"],
                   data["broken"], tuple(ScreenedEdit.from_dict(e) for e in data["edits"]), bool(data["passed"]),
                   str(data["reason"]))


@dataclass(frozen=True)
class StepOutcome:
    """How a step ended: the decision, its reason, the scores and the spend per stage.
    ``delta``/``ci`` exist only for a step that reached the gate."""

    decision: Decision
    reason: str
    candidate_val: float | None
    incumbent_val: float | None
    incumbent_version_after: int
    spend: Mapping[str, StageSpend]
    early_stopped: bool | None = None  # None: not gated (the stats are empty)
    delta: float | None = None
    ci: tuple[float, float] | None = None

    @property
    def gated(self) -> bool:
        return self.decision is not Decision.SKIPPED


@dataclass(frozen=True)
class StepRecord:
    """One history entry. A step (``kind`` step) fills the rollout/proposal fields; a slow update
    fills ``categories``/``analysis``. ``outcome`` is ``None`` while the step is still working
    (its ``step.json`` then holds what it has so far)."""

    step: str
    kind: StepKind
    epoch: int
    incumbent_version: int
    batch: tuple[str, ...] | None = None
    rollout: Rollout | None = None
    proposals: tuple[Proposal, ...] | None = None
    merged: tuple[Edit, ...] | None = None
    selected: tuple[Edit, ...] | None = None
    edit_budget: int | None = None
    categories: SlowUpdateInput | None = None
    analysis: str | None = None
    applied: tuple[EditOutcome, ...] | None = None
    credit: CreditNote | None = None
    screen: ScreenNote | None = None
    candidate_version: int | None = None
    outcome: StepOutcome | None = None

    @property
    def decision(self) -> Decision | None:
        return self.outcome.decision if self.outcome else None

    @property
    def reason(self) -> str:
        return self.outcome.reason if self.outcome else ""

    def kept_edits(self) -> list[Edit]:
        """The edits an accepted step added to the skill: those applied, less any that screening
        or credit assignment dropped."""
        if self.credit is not None and self.credit.pruned:
            return list(self.credit.kept)
        dropped = [e.edit for e in self.screen.dropped] if self.screen is not None else []
        return [o.edit for o in self.applied or () if o.applied and o.edit not in dropped]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"step": self.step, "kind": self.kind.value, "epoch": self.epoch}
        if self.batch is not None:
            data["batch"] = list(self.batch)
        data["incumbent_version"] = self.incumbent_version
        optional = (("rollout", self.rollout and self.rollout.to_dict()),
                    ("proposals", _dicts(self.proposals)), ("merged", _dicts(self.merged)),
                    ("selected", _dicts(self.selected)), ("edit_budget", self.edit_budget),
                    ("categories", self.categories and self.categories.to_dict()), ("analysis", self.analysis),
                    ("applied", _dicts(self.applied)), ("screen", self.screen and self.screen.to_dict()),
                    ("credit", self.credit and self.credit.to_dict()),
                    ("candidate_version", self.candidate_version))
        data.update((k, v) for k, v in optional if v is not None)
        if self.outcome is not None:
            data.update(_outcome_dict(self.outcome))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepRecord:
        def many(key: str, parse: Any) -> tuple | None:
            return None if key not in data else tuple(parse(dict(x)) for x in data[key])

        return cls(
            step=str(data["step"]), kind=StepKind(data["kind"]), epoch=int(data["epoch"]),
            incumbent_version=int(data["incumbent_version"]),
            batch=tuple(data["batch"]) if "batch" in data else None,
            rollout=Rollout.from_dict(data["rollout"]) if "rollout" in data else None,
            proposals=many("proposals", Proposal.from_dict), merged=many("merged", Edit.from_dict),
            selected=many("selected", Edit.from_dict), edit_budget=data.get("edit_budget"),
            categories=SlowUpdateInput.from_dict(data["categories"]) if "categories" in data else None,
            analysis=data.get("analysis"), applied=many("applied", EditOutcome.from_dict),
            credit=CreditNote.from_dict(data["credit"]) if "credit" in data else None,
            screen=ScreenNote.from_dict(data["screen"]) if "screen" in data else None,
            candidate_version=data.get("candidate_version"),
            outcome=_outcome_from(data) if "decision" in data else None,
        )


def _dicts(items: tuple | None) -> list[dict[str, Any]] | None:
    return None if items is None else [x.to_dict() for x in items]


def _outcome_dict(o: StepOutcome) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if o.gated:
        data.update(delta=o.delta, ci=list(o.ci) if o.ci else None)
    data.update(decision=o.decision.value, reason=o.reason, candidate_val=o.candidate_val,
                incumbent_val=o.incumbent_val, incumbent_version_after=o.incumbent_version_after,
                spend={stage: s.to_dict() for stage, s in o.spend.items()},
                stats={} if o.early_stopped is None else {"early_stopped": o.early_stopped})
    return data


def _outcome_from(data: Mapping[str, Any]) -> StepOutcome:
    stats = data.get("stats") or {}
    return StepOutcome(
        decision=Decision(data["decision"]), reason=str(data["reason"]), candidate_val=data["candidate_val"],
        incumbent_val=data["incumbent_val"], incumbent_version_after=int(data["incumbent_version_after"]),
        spend={stage: StageSpend.from_dict(s) for stage, s in (data.get("spend") or {}).items()},
        early_stopped=stats.get("early_stopped"), delta=data.get("delta"),
        ci=tuple(data["ci"]) if data.get("ci") else None,
    )


@dataclass(frozen=True)
class MetaSkillNote:
    """The meta skill after an epoch, or the error that kept the old one."""

    text: str
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "error": self.error}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetaSkillNote:
        return cls(str(data["text"]), data.get("error"))


@dataclass(frozen=True)
class EpochRecord:
    """What happened at the end of an epoch: the slow update (the same record as in the history,
    or ``None`` when none ran) and the meta skill update (``None`` when none ran)."""

    epoch: int
    slow_update: StepRecord | None = None
    meta_skill: MetaSkillNote | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "slow_update": self.slow_update.to_dict() if self.slow_update else None,
                "meta_skill": self.meta_skill.to_dict() if self.meta_skill else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpochRecord:
        slow, meta = data.get("slow_update"), data.get("meta_skill")
        return cls(int(data["epoch"]), StepRecord.from_dict(slow) if slow else None,
                   MetaSkillNote.from_dict(meta) if meta else None)


VOLATILE_FIELDS = ("spend", "stats")  # depend on timing or spend, not on the decisions taken


def stable_history(history: list[StepRecord]) -> list[dict[str, Any]]:
    """The history as JSON without the fields that depend on timing or spend (to compare runs)."""
    return [{k: v for k, v in r.to_dict().items() if k not in VOLATILE_FIELDS} for r in history]
