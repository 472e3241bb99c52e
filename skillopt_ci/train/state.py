"""The persisted state of a training run: what lets a killed run resume exactly where it stopped.

``state.json`` is rewritten atomically after every step and phase (a checkpoint); a step that
was interrupted is redone from its start, and its evaluations resume from their own
``results.jsonl``. Everything a later step depends on — versions, the incumbent, the optimizer's
buffer and meta skill, the epoch's edit log, the history — lives here, so a resumed run makes the
same decisions as an uninterrupted one.

Scores are kept as numbers or ``None``, never coerced: a score of 0.0 stays 0.0 across a resume.

The file is versioned (:data:`STATE_SCHEMA_VERSION`); ``load`` reads the current version and
refuses any other, or a file it cannot read, with one line naming the file and the version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar

from skillopt_ci.core import codec
from skillopt_ci.core.codec import Record
from skillopt_ci.core.errors import InputError
from skillopt_ci.inputs.writable import write_json_atomic
from skillopt_ci.train.history import EditEvidence, EpochRecord, StepRecord
from skillopt_ci.train.optimizer import EpochEdit, OptimizerBuffer

STATE_SCHEMA_VERSION = 1
STATE_FILE = "state.json"


@dataclass(frozen=True)
class Version(Record):
    """A skill version: ``number`` 0 is the skill as it was; ``val_dir`` (relative to the training
    run directory) holds its validation results."""

    number: int
    hash: str
    parent: int | None
    step: str
    val_mean: float | None
    val_dir: str


@dataclass
class Spend(Record):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    wall_time_s: float = 0.0
    # Rollouts cancelled in flight by early stopping (their calls may be billed; no result kept).
    # Kept here, beside the spend, and never in the step history: a resumed run must record the
    # same history as an uninterrupted one, and how many calls a kill cut off is not part of it.
    # Left out when 0: a run that cancelled nothing writes what it always wrote.
    cancelled_rollouts: Annotated[int, codec.OMIT_EMPTY] = 0
    # Calls sent to the target model (budgets.max_target_calls); left out when 0, as above.
    target_calls: Annotated[int, codec.OMIT_EMPTY] = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class TrainState(Record):
    """Mutable while a run works; saved as JSON at every checkpoint."""

    JSON_HEAD: ClassVar = {"schema_version": STATE_SCHEMA_VERSION}

    epoch: int = 0
    step: int = 0
    phase: str = "baseline"  # baseline | steps | epoch_end | test | done
    versions: list[Version] = field(default_factory=list)
    incumbent: int = 0
    epoch_start: int = 0
    buffer: OptimizerBuffer | None = None  # None until the baseline is scored ({} on disk)
    meta_skill: str = ""
    epoch_log: list[EpochEdit] = field(default_factory=list)
    history: list[StepRecord] = field(default_factory=list)
    epochs: list[EpochRecord] = field(default_factory=list)
    spent: Spend = field(default_factory=Spend)
    stopped: str | None = None
    steps_per_epoch: int = 0
    epochs_planned: int = 0
    # Per version, per validation task: every validation sample it has had (the honest acceptance rules).
    # Only runs with an honest acceptance rule have any (older files stay byte for byte).
    val_samples: Annotated[dict[int, dict[str, list[float]]], codec.OMIT_EMPTY] = field(default_factory=dict)
    # Target calls the baseline's validation sent (the start of the best-so-far curve); left out when 0.
    baseline_calls: Annotated[int, codec.OMIT_EMPTY] = 0
    # Per edit an accepted step added (confirmed in screening): the evidence it was accepted on,
    # which the epoch-end audit re-tests. Left out when empty (older files load without it).
    evidence: Annotated[list[EditEvidence], codec.OMIT_EMPTY] = field(default_factory=list)
    # The epoch whose audit is done (checkpointed before the slow update; None: none yet).
    audited_epoch: Annotated[int | None, codec.OMIT_NONE] = None

    def version(self, number: int) -> Version:
        return self.versions[number]

    def unchanged_epochs(self) -> int:
        """How many of the finished epochs, counted back from the last, accepted nothing in a row
        (no step, audit or slow update made a new version)."""
        changed = {r.epoch for r in self.history if r.candidate_version is not None}
        count = 0
        while count < self.epoch and self.epoch - 1 - count not in changed:
            count += 1
        return count

    @property
    def current(self) -> Version:
        return self.versions[self.incumbent]

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "buffer": data["buffer"] or {}}

    @classmethod
    def _json_in(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        return {**data, "buffer": data.get("buffer") or None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TrainState:
        """Raises ``KeyError``/``TypeError``/``ValueError`` for a malformed record (``load`` turns
        them into one line naming the file)."""
        state = codec.load(cls, data)
        state.epochs = [_epoch(e, state.history) for e in state.epochs]
        return state

    def save(self, run_dir: Path) -> None:
        write_json_atomic(run_dir / STATE_FILE, self.to_dict())

    @classmethod
    def load(cls, run_dir: Path) -> TrainState | None:
        path = run_dir / STATE_FILE
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", where=str(path), hint="pass --fresh to start over") from None
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version != STATE_SCHEMA_VERSION:
            raise InputError(f"state schema_version {version!r}: this skillopt-ci reads version {STATE_SCHEMA_VERSION}",
                             where=str(path), hint="pass --fresh to start over")
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"state schema_version {version} could not be read: {type(exc).__name__}: {exc}",
                             where=str(path), hint="pass --fresh to start over") from None


def _epoch(record: EpochRecord, history: list[StepRecord]) -> EpochRecord:
    """An epoch record whose slow update is the history's own record (one object, as when written)."""
    slow = record.slow_update
    if slow is None:
        return record
    same = next((r for r in history if r.step == slow.step and r == slow), slow)
    return EpochRecord(record.epoch, same, record.meta_skill)
