"""Typed records of a training run's history: one :class:`StepRecord` per step or slow update,
one :class:`EpochRecord` per finished epoch.

They live in ``state.json`` (and one a line in ``history.jsonl``, and each step's ``step.json``).
``to_dict`` (:mod:`skillopt_ci.core.codec`) writes exactly the JSON the untyped records had — the
same keys, in the same order, with a key left out where the step never reached it — so the
viewer, the reports and files written before these types existed read the same.
``from_dict(to_dict(x)) == x``.

A decision is a :class:`Decision`, not a sentence: the reason a step gives is for people (and
the optimizer), never for control flow. On disk a decision is its value (``"accepted"`` …).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any

from skillopt_ci.core import codec
from skillopt_ci.core.codec import Record
from skillopt_ci.core.edits import Edit, EditOutcome, is_deletion
from skillopt_ci.train.optimizer import Proposal, SlowUpdateInput


class Decision(str, Enum):
    """What a step did to the incumbent. ``SKIPPED``: nothing reached the gate (no usable edit)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SKIPPED = "skipped"


class StepKind(str, Enum):
    STEP = "step"
    SLOW_UPDATE = "slow_update"
    AUDIT = "audit"  # an accepted rule re-tested at an epoch's end (:mod:`skillopt_ci.train.audit`)


@dataclass(frozen=True)
class StageSpend(Record):
    """Tokens, cost and target-model calls one stage (rollout, reflect, validation) of a step
    used; ``cost_usd`` is ``None`` when a price is unknown. Also used as a running total (a meter
    reading). ``target_calls`` counts calls sent (a cached answer is not a call); files written
    before it existed load with 0, and it is left out when 0."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    target_calls: Annotated[int, codec.OMIT_EMPTY] = 0

    def minus(self, before: StageSpend) -> StageSpend:
        cost = None if self.cost_usd is None or before.cost_usd is None else round(self.cost_usd - before.cost_usd, 6)
        return StageSpend(self.input_tokens - before.input_tokens, self.output_tokens - before.output_tokens, cost,
                          self.target_calls - before.target_calls)



@dataclass(frozen=True)
class Rollout(Record):
    """The incumbent's mean on the step's train batch and the tasks it failed."""

    mean: float | None
    failures: tuple[str, ...]


@dataclass(frozen=True)
class DroppedEdit(Record):
    edit: Edit
    reason: str


@dataclass(frozen=True)
class CreditNote(Record):
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


@dataclass(frozen=True)
class ScreenedEdit(Record):
    """One edit screened alone on the training failures it was proposed for (and the successes):
    how many it improved and broke, whether it was kept, and why, in one line.

    ``pairs`` is ``None`` exactly when the edit was never run paired against the incumbent;
    otherwise it is ``(wins, losses)`` over the discordant pairs of its confirmation (the edit
    and the incumbent at the same fresh sample index, exactly one side scoring higher), so
    ``losses > wins`` means "measured and lost". ``confirmed`` is what screening before the
    discordant-pair test wrote (paired wins and non-wins); it is only read from old files."""

    edit: Edit
    failures: tuple[str, ...]
    fixed: int
    broken: int
    kept: bool
    reason: str
    confirmed: Annotated[tuple[int, int] | None, codec.OMIT_NONE] = None
    pairs: Annotated[tuple[int, int] | None, codec.OMIT_NONE] = None

    @property
    def paired(self) -> tuple[int, int] | None:
        """The paired counts, whichever screening wrote them (``pairs``, or an old file's ``confirmed``)."""
        return self.pairs if self.pairs is not None else self.confirmed


@dataclass(frozen=True)
class ScreenNote(Record):
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
        """Every kept edit was confirmed alone (so each carries its own evidence: a kept edit was run
        paired only when it was confirmed) or is a deletion (judged on validation alone), and at least
        one was confirmed."""
        kept = [e for e in self.edits if e.kept]
        paired = [e.paired is not None for e in kept]
        return self.passed and any(paired) and all(p or is_deletion(e.edit) for p, e in zip(paired, kept, strict=True))


@dataclass(frozen=True)
class StepOutcome(Record):
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
class StepRecord(Record):
    """One history entry. A step (``kind`` step) fills the rollout/proposal fields; a slow update
    fills ``categories``/``analysis``. ``outcome`` is ``None`` while the step is still working
    (its ``step.json`` then holds what it has so far)."""

    step: str
    kind: StepKind
    epoch: int
    batch: Annotated[tuple[str, ...] | None, codec.OMIT_NONE] = field(default=None, kw_only=True)
    incumbent_version: int
    rollout: Annotated[Rollout | None, codec.OMIT_NONE] = None
    proposals: Annotated[tuple[Proposal, ...] | None, codec.OMIT_NONE] = None
    merged: Annotated[tuple[Edit, ...] | None, codec.OMIT_NONE] = None
    selected: Annotated[tuple[Edit, ...] | None, codec.OMIT_NONE] = None
    edit_budget: Annotated[int | None, codec.OMIT_NONE] = None
    categories: Annotated[SlowUpdateInput | None, codec.OMIT_NONE] = None
    analysis: Annotated[str | None, codec.OMIT_NONE] = None
    applied: Annotated[tuple[EditOutcome, ...] | None, codec.OMIT_NONE] = None
    screen: Annotated[ScreenNote | None, codec.OMIT_NONE] = None
    credit: Annotated[CreditNote | None, codec.OMIT_NONE] = None
    audit: Annotated[AuditNote | None, codec.OMIT_NONE] = None
    candidate_version: Annotated[int | None, codec.OMIT_NONE] = None
    outcome: Annotated[StepOutcome | None, codec.OMIT_NONE] = None  # on disk, its fields sit at the top level

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

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        outcome = data.pop("outcome", None)
        if outcome is None or self.outcome is None:
            return data
        gated = {"delta": outcome.pop("delta"), "ci": outcome.pop("ci") or None}
        early = outcome.pop("early_stopped")
        return {**data, **(gated if self.outcome.gated else {}), **outcome,
                "stats": {} if early is None else {"early_stopped": early}}

    @classmethod
    def _json_in(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        if "decision" not in data:
            return data
        keys = ("decision", "reason", "candidate_val", "incumbent_val", "incumbent_version_after")
        outcome = {k: data[k] for k in keys}
        outcome.update(spend=data.get("spend") or {}, early_stopped=(data.get("stats") or {}).get("early_stopped"),
                       delta=data.get("delta"), ci=data.get("ci") or None)
        return {**data, "outcome": outcome}


@dataclass(frozen=True)
class MetaSkillNote(Record):
    """The meta skill after an epoch, or the error that kept the old one."""

    text: str
    error: str | None = None


@dataclass(frozen=True)
class EpochRecord(Record):
    """What happened at the end of an epoch: the slow update (the same record as in the history,
    or ``None`` when none ran) and the meta skill update (``None`` when none ran)."""

    epoch: int
    slow_update: StepRecord | None = None
    meta_skill: MetaSkillNote | None = None


@dataclass(frozen=True)
class EditEvidence(Record):
    """An edit an accepted step added, with the evidence it was accepted on: the step, its place
    among the step's screened edits (``index``), the training tasks it fixed alone (``tasks``)
    and its paired confirmation counts (re-runs it won against the incumbent, and did not).
    ``audits`` counts the epoch-end audits that kept it, ``reconfirmed`` says one of them
    re-confirmed it on its evidence (it is not audited again); ``removed_by`` names the audit
    step that took it out."""

    step: str
    index: int
    edit: Edit
    tasks: tuple[str, ...]
    wins: int
    losses: int
    audits: Annotated[int, codec.OMIT_EMPTY] = 0
    reconfirmed: Annotated[bool, codec.OMIT_EMPTY] = False
    removed_by: Annotated[str | None, codec.OMIT_NONE] = None


@dataclass(frozen=True)
class AuditNote(Record):
    """One accepted rule audited at an epoch's end (:mod:`skillopt_ci.train.audit`): the step
    that added it, the paired re-confirmation on its evidence tasks (the incumbent with it against
    without it: pairs won, lost), and, when validation was asked, both sides' means there and the
    discordant pairs (better, worse without it) with the one-sided sign-test p of "better"."""

    step: str
    edit: Edit
    tasks: tuple[str, ...]
    wins: int
    losses: int
    reconfirmed: bool
    removed: bool
    with_val: Annotated[float | None, codec.OMIT_NONE] = None
    without_val: Annotated[float | None, codec.OMIT_NONE] = None
    better: Annotated[int | None, codec.OMIT_NONE] = None
    worse: Annotated[int | None, codec.OMIT_NONE] = None
    p_better: Annotated[float | None, codec.OMIT_NONE] = None
