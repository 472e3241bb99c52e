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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.inputs.writable import write_json_atomic
from skillopt_ci.train.history import EpochRecord, StepRecord
from skillopt_ci.train.optimizer import EpochEdit, OptimizerBuffer

STATE_SCHEMA_VERSION = 1
STATE_FILE = "state.json"


@dataclass(frozen=True)
class Version:
    """A skill version: ``number`` 0 is the skill as it was; ``val_dir`` (relative to the training
    run directory) holds its validation results."""

    number: int
    hash: str
    parent: int | None
    step: str
    val_mean: float | None
    val_dir: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Version:
        return cls(**data)


@dataclass
class Spend:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    wall_time_s: float = 0.0
    # Rollouts cancelled in flight by early stopping (their calls may be billed; no result kept).
    # Kept here, beside the spend, and never in the step history: a resumed run must record the
    # same history as an uninterrupted one, and how many calls a kill cut off is not part of it.
    cancelled_rollouts: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.cancelled_rollouts:  # a run that cancelled nothing writes what it always wrote
            data.pop("cancelled_rollouts")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Spend:
        return cls(**(data or {}))


@dataclass
class TrainState:
    """Mutable while a run works; saved as JSON at every checkpoint."""

    epoch: int = 0
    step: int = 0
    phase: str = "baseline"  # baseline | steps | epoch_end | test | done
    versions: list[Version] = field(default_factory=list)
    incumbent: int = 0
    epoch_start: int = 0
    buffer: OptimizerBuffer | None = None  # None until the baseline is scored
    meta_skill: str = ""
    epoch_log: list[EpochEdit] = field(default_factory=list)
    history: list[StepRecord] = field(default_factory=list)
    epochs: list[EpochRecord] = field(default_factory=list)
    spent: Spend = field(default_factory=Spend)
    stopped: str | None = None
    steps_per_epoch: int = 0
    epochs_planned: int = 0
    # Per version, per validation task: every validation sample it has had (the honest acceptance rules).
    val_samples: dict[int, dict[str, list[float]]] = field(default_factory=dict)

    def version(self, number: int) -> Version:
        return self.versions[number]

    @property
    def current(self) -> Version:
        return self.versions[self.incumbent]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema_version": STATE_SCHEMA_VERSION, "epoch": self.epoch, "step": self.step, "phase": self.phase,
            "versions": [v.to_dict() for v in self.versions], "incumbent": self.incumbent,
            "epoch_start": self.epoch_start, "buffer": self.buffer.to_dict() if self.buffer else {},
            "meta_skill": self.meta_skill, "epoch_log": [e.to_dict() for e in self.epoch_log],
            "history": [r.to_dict() for r in self.history], "epochs": [e.to_dict() for e in self.epochs],
            "spent": self.spent.to_dict(), "stopped": self.stopped, "steps_per_epoch": self.steps_per_epoch,
            "epochs_planned": self.epochs_planned,
        }
        if self.val_samples:  # only runs with an honest acceptance rule have any (older files stay byte for byte)
            data["val_samples"] = {str(v): samples for v, samples in self.val_samples.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainState:
        """Raises ``KeyError``/``TypeError``/``ValueError`` for a malformed record (``load`` turns
        them into one line naming the file)."""
        history = [StepRecord.from_dict(r) for r in data.get("history", [])]
        return cls(
            epoch=int(data["epoch"]), step=int(data["step"]), phase=str(data["phase"]),
            versions=[Version.from_dict(v) for v in data.get("versions", [])],
            incumbent=int(data["incumbent"]), epoch_start=int(data["epoch_start"]),
            buffer=OptimizerBuffer.from_dict(data["buffer"]) if data.get("buffer") else None,
            meta_skill=str(data.get("meta_skill", "")),
            epoch_log=[EpochEdit.from_dict(e) for e in data.get("epoch_log", [])],
            history=history, epochs=[_epoch(e, history) for e in data.get("epochs", [])],
            spent=Spend.from_dict(data.get("spent")), stopped=data.get("stopped"),
            steps_per_epoch=int(data.get("steps_per_epoch", 0)), epochs_planned=int(data.get("epochs_planned", 0)),
            val_samples={int(v): {str(t): [float(x) for x in xs] for t, xs in samples.items()}
                         for v, samples in data.get("val_samples", {}).items()},
        )

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


def _epoch(data: dict[str, Any], history: list[StepRecord]) -> EpochRecord:
    """An epoch record whose slow update is the history's own record (one object, as when written)."""
    record = EpochRecord.from_dict(data)
    slow = record.slow_update
    if slow is None:
        return record
    same = next((r for r in history if r.step == slow.step and r == slow), slow)
    return EpochRecord(record.epoch, same, record.meta_skill)
