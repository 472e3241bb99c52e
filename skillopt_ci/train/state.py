"""The persisted state of a training run: what lets a killed run resume exactly where it stopped.

``state.json`` is rewritten atomically after every step and phase (a checkpoint); a step that
was interrupted is redone from its start, and its evaluations resume from their own
``results.jsonl``. Everything a later step depends on — versions, the incumbent, the optimizer's
buffer and meta skill, the epoch's edit log, the history — lives here, so a resumed run makes the
same decisions as an uninterrupted one.

Scores are kept as numbers or ``None``, never coerced: a score of 0.0 stays 0.0 across a resume.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.inputs.writable import write_json_atomic

STATE_SCHEMA_VERSION = 1
STATE_FILE = "state.json"

# Fields of a step record that depend on timing or spend, not on the decisions taken.
VOLATILE_FIELDS = ("spend", "stats")


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

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

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
    buffer: dict[str, Any] = field(default_factory=dict)
    meta_skill: str = ""
    epoch_log: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    spent: Spend = field(default_factory=Spend)
    stopped: str | None = None
    steps_per_epoch: int = 0
    epochs_planned: int = 0

    def version(self, number: int) -> Version:
        return self.versions[number]

    @property
    def current(self) -> Version:
        return self.versions[self.incumbent]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["versions"] = [v.to_dict() for v in self.versions]
        data["spent"] = self.spent.to_dict()
        return {"schema_version": STATE_SCHEMA_VERSION, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainState:
        values = {k: v for k, v in data.items() if k != "schema_version"}
        values["versions"] = [Version.from_dict(v) for v in data.get("versions", [])]
        values["spent"] = Spend.from_dict(data.get("spent"))
        return cls(**values)

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
        if data.get("schema_version") != STATE_SCHEMA_VERSION:
            raise InputError("written by another version of skillopt-ci", where=str(path), hint="pass --fresh")
        return cls.from_dict(data)


def stable_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history without the fields that depend on timing or spend (for comparing runs)."""
    return [{k: v for k, v in record.items() if k not in VOLATILE_FIELDS} for record in history]
