"""How an evaluation's budgets stop it, and the line that says so.

Contract:
- Budgets are in this process's terms: what the pool spent (true costs, agent CLIs' calls
  included) against ``Budgets`` (training passes what is left of the run's budgets).
- :func:`budget_limits` is what the pool's :class:`~skillopt_ci.models.budget.SpendGuard` holds
  calls to: a call whose estimated cost would pass a dollar or token budget is not sent.
- ``max_target_calls`` counts the calls sent to the ``target`` role's model (rollouts, agent
  CLIs' calls through the forwarder, screening, validation, test; not the optimizer's or the
  judge's). A response the cache answers is not sent and not counted, as its tokens are not.
- :func:`budget_stop` is checked before each rollout is launched; :func:`final_stop` writes the
  stop line once nothing is in flight, so it reports the true spend (the same dollars the
  summary's ``spent_usd`` adds up for a run that started fresh).
"""

from __future__ import annotations

from skillopt_ci.inputs.config import Budgets
from skillopt_ci.models.budget import BudgetReached, Limits, usd
from skillopt_ci.models.pool import ModelPool

UNKEPT_SHOWN_USD = 0.0000005  # below what the line shows


def budget_limits(budgets: Budgets) -> Limits:
    return Limits(max_dollars=budgets.max_dollars, max_tokens=budgets.max_tokens)


def target_calls(pool: ModelPool) -> int:
    """Calls this process sent to the target model (cache hits are not calls)."""
    spend = pool.spend.get("target")
    return spend.calls if spend is not None else 0


def budget_stop(pool: ModelPool, budgets: Budgets, elapsed: float | None, refused: BudgetReached | None = None,
                unkept_usd: float = 0.0, in_flight: int = 0) -> str | None:
    """Which budget, if any, is used up (or refused the call ``refused``), as one line with the
    true spend (``elapsed`` ``None``: the wall time is not looked at); ``unkept_usd`` is what rollouts that kept no result spent (stopped mid-way).
    ``in_flight`` rollouts count one target call each against ``max_target_calls`` (a one-call
    rollout then never passes it; a multi-turn one may, by its later turns)."""
    spent = pool.total_spend()
    tokens = (spent.usage.input_tokens or 0) + (spent.usage.output_tokens or 0)
    if budgets.max_tokens is not None and (tokens >= budgets.max_tokens or (refused and refused.kind == "token")):
        why = f"; {refused.refusal()}" if refused and refused.kind == "token" else ""
        return f"token budget reached ({tokens} of {budgets.max_tokens}{why})"
    if budgets.max_dollars is not None and (spent.cost_usd >= budgets.max_dollars
                                            or (refused and refused.kind == "dollar")):
        why = f"; {refused.refusal()}" if refused and refused.kind == "dollar" else ""
        if unkept_usd >= UNKEPT_SHOWN_USD:
            why += (f"; {usd(unkept_usd)} of it by rollouts stopped mid-way, which kept no result "
                    "(their answers are cached for the resume)")
        return f"dollar budget reached ({usd(spent.cost_usd)} spent of ${budgets.max_dollars}{why})"
    calls = target_calls(pool)
    if budgets.max_target_calls is not None and calls + in_flight >= budgets.max_target_calls:
        return f"target-call budget reached ({calls} of {budgets.max_target_calls} target calls)"
    if budgets.max_wall_seconds is not None and elapsed is not None and elapsed >= budgets.max_wall_seconds:
        return f"wall-time budget reached ({elapsed:.0f}s of {budgets.max_wall_seconds}s)"
    return None


def final_stop(pool: ModelPool, budgets: Budgets, reason: str, refused: BudgetReached | None,
               unkept_usd: float) -> str:
    """The line of a budget stop (``reason``, written when it stopped) once every call has
    returned: a dollar or token stop is written again with what was truly spent (calls in flight
    at the stop have landed since); a wall-time stop stands as it was."""
    return budget_stop(pool, budgets, None, refused, unkept_usd) or reason
