"""Training's acceptance rules: how a step decides that its candidate replaces the incumbent.

``train.acceptance`` names one rule (:data:`RULES`); each is a small class behind
:class:`AcceptanceRule`, and the validation gate (:mod:`skillopt_ci.train.gate`) runs the tests
a rule asks for. The names and the deprecated flags they replace are read in
:mod:`skillopt_ci.inputs.acceptance`; ``docs/decisions.md`` gives each rule's measured error rate.

- ``screened`` (the default): every edit is screened alone on the training failures it was
  proposed for and each fix confirmed against the incumbent (:mod:`skillopt_ci.train.screen`); a
  candidate made only of confirmed edits, or only of deletions, is accepted on validation unless
  it is significantly worse (non-inferiority); any other candidate must show a gain by the
  sequential paired test.
- ``sequential``: no screening of edits alone; every candidate must show a gain by the paired
  test, in up to ``sequential_max_rounds`` rounds on the tasks where the two sides disagree.
- ``honest`` / ``honest-sequential``: the paired test (one look / in rounds) against an incumbent
  re-sampled on every validation task at every comparison, whose estimate is the mean of all its
  samples so far (kept per version in ``state.json``).
- ``mean``: the candidate's mean over one validation pass must beat the incumbent's, with early
  rejection (``train.early_stop``) once it no longer can.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from skillopt_ci.core.edits import Edit, is_deletion
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.sequential import Samples
from skillopt_ci.train.gate_result import GateResult
from skillopt_ci.train.state import Version


class GateTests(Protocol):
    """The tests of the validation gate that a rule chooses among."""

    def judge_mean(self, incumbent: Version, candidate_text: str, step_id: str) -> GateResult: ...

    def judge_paired(self, incumbent: Version, candidate_text: str, step_id: str, samples: Samples | None, *,
                     sequential: bool, honest: bool) -> GateResult: ...

    def judge_noninferior(self, incumbent: Version, candidate_text: str, step_id: str,
                          samples: Samples | None, *, mode: str = ...) -> GateResult: ...


class AcceptanceRule(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def screens_edits_alone(self) -> bool:
        """The screener runs each edit alone and confirms its fixes."""
        ...

    @property
    def honest(self) -> bool:
        """The incumbent is re-sampled at every comparison; the trainer keeps every sample."""
        ...

    def judge(self, gate: GateTests, incumbent: Version, candidate_text: str, step_id: str,
              samples: Samples | None, *, confirmed: bool, deletes_only: bool = False) -> GateResult:
        """The gate's verdict on ``candidate_text`` (``confirmed``: every edit of it was confirmed
        alone in screening; ``deletes_only``: its edits only delete; ``samples``: the incumbent's
        validation samples so far)."""
        ...


CONFIRMED_MODE = "edits confirmed in screening; non-inferiority"
DELETES_MODE = "deletions only; non-inferiority"


@dataclass(frozen=True)
class MeanRule:
    name: str = "mean"
    screens_edits_alone: bool = False
    honest: bool = False

    def judge(self, gate: GateTests, incumbent: Version, candidate_text: str, step_id: str,
              samples: Samples | None, *, confirmed: bool, deletes_only: bool = False) -> GateResult:
        return gate.judge_mean(incumbent, candidate_text, step_id)


@dataclass(frozen=True)
class PairedRule:
    name: str
    sequential: bool
    honest: bool
    screens_edits_alone: bool = False

    def judge(self, gate: GateTests, incumbent: Version, candidate_text: str, step_id: str,
              samples: Samples | None, *, confirmed: bool, deletes_only: bool = False) -> GateResult:
        return gate.judge_paired(incumbent, candidate_text, step_id, samples, sequential=self.sequential,
                                 honest=self.honest)


@dataclass(frozen=True)
class ScreenedRule:
    name: str = "screened"
    screens_edits_alone: bool = True
    honest: bool = False
    otherwise: PairedRule = PairedRule("sequential", sequential=True, honest=False)

    def judge(self, gate: GateTests, incumbent: Version, candidate_text: str, step_id: str,
              samples: Samples | None, *, confirmed: bool, deletes_only: bool = False) -> GateResult:
        if confirmed:
            return gate.judge_noninferior(incumbent, candidate_text, step_id, samples)
        if deletes_only:  # a shorter skill need not show a gain, only not lose
            return gate.judge_noninferior(incumbent, candidate_text, step_id, samples, mode=DELETES_MODE)
        return self.otherwise.judge(gate, incumbent, candidate_text, step_id, samples, confirmed=False)


def only_deletes(edits: Sequence[Edit]) -> bool:
    return bool(edits) and all(is_deletion(e) for e in edits)


RULES: Mapping[str, AcceptanceRule] = {
    "screened": ScreenedRule(),
    "sequential": PairedRule("sequential", sequential=True, honest=False),
    "honest": PairedRule("honest", sequential=False, honest=True),
    "honest-sequential": PairedRule("honest-sequential", sequential=True, honest=True),
    "mean": MeanRule(),
}


def rule_named(name: str) -> AcceptanceRule:
    try:
        return RULES[name]
    except KeyError:
        raise InputError(f"unknown train.acceptance {name!r}; known: {', '.join(RULES)}") from None
