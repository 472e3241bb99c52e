"""The validation gate of training: whether a candidate skill replaces the incumbent, judged on the
same validation tasks by the run's acceptance rule (ties rejected wherever a gain is asked for).

The ``mean`` rule scores hardest tasks first and, with ``train.early_stop``, stops as soon as the candidate
cannot win any more; the verdict is then :attr:`Verdict.EARLY_REJECTED`, and the reason given is
the same sentence a full pass gives, because what the optimizer is told must not depend on
whether scoring stopped early (or early stopping would change later decisions).

Which test decides is the run's acceptance rule (``train.acceptance``,
:mod:`skillopt_ci.train.acceptance`); the paired rules use the test of
:mod:`skillopt_ci.core.sequential` instead: the incumbent's samples are everything it has had so
far (``samples``, kept in ``state.json`` by the trainer), the honest rules re-sample it on every
validation task at fresh sample indices derived from the step, and the sequential ones add rounds
on the tasks where the two sides disagree. Every sample of a step lands in its own directory under
``steps/<step>/`` (``val`` is the candidate's first round, as in the default gate), so a resumed
step redraws nothing it already has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from skillopt_ci.core.compare import ComparePolicy, compare_results
from skillopt_ci.core.early_stop import accepts, cannot_win
from skillopt_ci.core.records import TaskResult, by_task
from skillopt_ci.core.sequential import (
    Samples,
    fresh_offset,
    look_noninferior,
    merge,
    task_means,
    validate,
)
from skillopt_ci.core.sequential import reason as sequential_reason
from skillopt_ci.core.task import Task
from skillopt_ci.inputs.config import TrainPolicy
from skillopt_ci.train.acceptance import CONFIRMED_MODE, AcceptanceRule, rule_named
from skillopt_ci.train.evaluate import EarlyStop, StageEvaluator
from skillopt_ci.train.gate_result import GateResult, Verdict
from skillopt_ci.train.state import Version


@dataclass
class ValidationGate:
    evaluator: StageEvaluator
    val_tasks: Sequence[Task]
    repeats: int
    policy: TrainPolicy
    compare_policy: ComparePolicy
    incumbent_results: Callable[[Version], list[TaskResult]]
    incumbent_text: Callable[[int], str] | None = None  # a version's skill text (the paired gate samples it)

    rule: AcceptanceRule = field(init=False)

    def __post_init__(self) -> None:
        self.rule = rule_named(self.policy.acceptance)

    def judge(self, incumbent: Version, candidate_text: str, step_id: str,
              samples: Samples | None = None, *, confirmed: bool = False, deletes_only: bool = False) -> GateResult:
        """Score ``candidate_text`` on validation (into ``steps/<step_id>/val``) against ``incumbent``
        by the run's acceptance rule (``samples``: the incumbent's samples so far, for the paired
        gate; ``confirmed``: every edit of the candidate was confirmed alone in screening;
        ``deletes_only``: every edit of it deletes text, so the ``screened`` rule asks it only not
        to lose)."""
        return self.rule.judge(self, incumbent, candidate_text, step_id, samples, confirmed=confirmed,
                               deletes_only=deletes_only)

    def judge_mean(self, incumbent: Version, candidate_text: str, step_id: str) -> GateResult:
        """One pass of the candidate, hardest tasks first, accepted if its mean beats the
        incumbent's; with ``train.early_stop``, stopped as soon as it cannot any more."""
        base = self.incumbent_results(incumbent)
        val_ids = [t.id for t in self.val_tasks]
        measured = [t for t in val_ids if any(r.task_id == t and r.ok for r in base)]
        stop = EarlyStop(cannot_win(incumbent.val_mean, measured, self.repeats, self.policy.min_gain)) \
            if self.policy.early_stop else None
        outcome = self.evaluator.evaluate(candidate_text, "val", f"steps/{step_id}/val", stop_when=stop,
                                          label=f"{step_id} val", tasks=hardest_first(self.val_tasks, base))
        rejected = f"validation does not beat the incumbent's {fmt(incumbent.val_mean)}"
        if stop is not None and stop.fired:
            return GateResult(Verdict.EARLY_REJECTED, rejected, None, incumbent.val_mean)
        comparison = compare_results(base, outcome.results, val_ids, self.compare_policy)
        if comparison.verdict == "inconclusive":
            return GateResult(Verdict.INCONCLUSIVE, f"inconclusive: {comparison.reason}", None, incumbent.val_mean)
        if not accepts(comparison.head_mean, comparison.base_mean, self.policy.min_gain):
            # With early stopping on, a full pass reports what an early stop would: no score.
            val = None if self.policy.early_stop else comparison.head_mean
            shown = val is not None
            return GateResult(Verdict.REJECTED, rejected, val, incumbent.val_mean,
                              comparison.delta if shown else None, comparison.ci if shown else None)
        reason = f"validation {comparison.head_mean:.3f} beats the incumbent's {comparison.base_mean:.3f}"
        return GateResult(Verdict.ACCEPTED, reason, comparison.head_mean, incumbent.val_mean, comparison.delta,
                          comparison.ci, results=tuple(outcome.results))

    def judge_noninferior(self, incumbent: Version, candidate_text: str, step_id: str,
                          samples: Samples | None, *, mode: str = CONFIRMED_MODE) -> GateResult:
        """One pass of the candidate, accepted unless significantly worse than the incumbent
        (:func:`skillopt_ci.core.sequential.look_noninferior`)."""
        ids = [t.id for t in self.val_tasks]
        inc = merge(samples, {}) if samples else as_samples(self.incumbent_results(incumbent))
        first = self.evaluator.evaluate(candidate_text, "val", f"steps/{step_id}/val", label=f"{step_id} val")
        cand = as_samples(first.results)
        alpha = self.policy.sequential_alpha
        look = look_noninferior(cand, inc, ids, alpha=alpha)
        reason = sequential_reason(look, rounds_used=1, mode=mode, alpha=alpha)
        verdict = Verdict.ACCEPTED if look.verdict == "accept" else Verdict.REJECTED
        ci = None if look.lower is None or look.upper is None else (look.lower, look.upper)
        return GateResult(verdict, reason, mean_of(cand, ids), mean_of(inc, ids), look.delta, ci,
                          results=tuple(first.results), candidate_samples=cand, incumbent_samples=inc)

    def judge_paired(self, incumbent: Version, candidate_text: str, step_id: str, samples: Samples | None, *,
                     sequential: bool, honest: bool) -> GateResult:
        """The paired test against ``incumbent``: one look, or in rounds (``sequential``); with
        ``honest``, the incumbent re-sampled first at fresh sample indices."""
        assert self.incumbent_text is not None, "the paired gate needs the incumbent's text"
        ids = [t.id for t in self.val_tasks]
        by_id = {t.id: t for t in self.val_tasks}
        texts = {"candidate": candidate_text, "incumbent": self.incumbent_text(incumbent.number)}
        inc = merge(samples, {}) if samples else as_samples(self.incumbent_results(incumbent))
        if honest:
            again = self.evaluator.evaluate(texts["incumbent"], "val", f"steps/{step_id}/val-incumbent",
                                            sample_offset=fresh_offset(step_id, "incumbent", 1),
                                            label=f"{step_id} val incumbent")
            inc = merge(inc, as_samples(again.results))
        first = self.evaluator.evaluate(candidate_text, "val", f"steps/{step_id}/val", label=f"{step_id} val")

        def sample(side: str, tasks: Sequence[str], round_no: int) -> Samples:
            out = self.evaluator.evaluate(texts[side], "val", f"steps/{step_id}/val-r{round_no}-{side}",
                                          sample_offset=fresh_offset(step_id, side, round_no),
                                          tasks=tuple(by_id[t] for t in tasks), label=f"{step_id} val r{round_no}")
            return as_samples(out.results)

        rounds, alpha = (self.policy.sequential_max_rounds if sequential else 1), self.policy.sequential_alpha
        done = validate(sample, as_samples(first.results), inc, ids, alpha=alpha, rounds=rounds,
                        min_gain=self.policy.min_gain)
        look = done.look
        reason = sequential_reason(look, rounds_used=done.rounds, mode="sequential" if sequential else "paired",
                                   alpha=alpha)
        verdict = Verdict.ACCEPTED if look.verdict == "accept" else Verdict.REJECTED
        ci = None if look.lower is None or look.upper is None else (look.lower, look.upper)
        return GateResult(verdict, reason, mean_of(done.candidate, ids), mean_of(done.incumbent, ids), look.delta,
                          ci, results=tuple(first.results), candidate_samples=done.candidate,
                          incumbent_samples=done.incumbent)


def as_samples(results: Sequence[TaskResult]) -> dict[str, list[float]]:
    """Per task, the scores of its valid rollouts in repeat order (errored rollouts are missing data)."""
    ordered = sorted((r for r in results if r.ok), key=lambda r: (r.task_id, r.repeat))
    return {t: [float(r.score) for r in rs] for t, rs in by_task(ordered).items()}  # type: ignore[arg-type]  # r.ok: its score is not None


def mean_of(samples: Mapping[str, Sequence[float]], task_ids: Sequence[str]) -> float | None:
    means = task_means(samples, task_ids)
    return sum(means.values()) / len(means) if means else None


def hardest_first(tasks: Sequence[Task], incumbent: list[TaskResult]) -> tuple[Task, ...]:
    """Validation tasks, the ones the incumbent does worst on first. A candidate that fails them
    too has used up its margin at once: a tie with the incumbent (the most common rejection) is
    known after those tasks instead of after all of them. The order changes no score and no
    decision."""
    score: dict[str, float] = {}
    for r in incumbent:
        if r.ok:
            score[r.task_id] = score.get(r.task_id, 0.0) + float(r.score)  # type: ignore[arg-type]  # r.ok: its score is not None
    return tuple(sorted(tasks, key=lambda t: score.get(t.id, 0.0)))


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
