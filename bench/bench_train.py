"""Early rejection on the demo training: target-model calls spent on validation with early
stopping vs a full pass per candidate. The decisions must be the same; the ratio is the saving.
Credit assignment is off here, so that validation calls are those of candidates only.

Run: python bench/bench_train.py [--epochs 3] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from skillopt_ci.demo import demo_config
from skillopt_ci.inputs.scaffold import example_path
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.sim.server import ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_TARGET, SimulatedModels
from skillopt_ci.train.entry import TrainRequest, run_training
from skillopt_ci.train.state import TrainState


def train_once(early_stop: bool, epochs: int, concurrency: int) -> tuple[list, int, int, float]:
    """(decisions, validation calls for candidates, all target calls, seconds)."""
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(SimulatedModels()) as server:
        config = demo_config(server.openai_base_url, Path(tmp))
        config = dataclasses.replace(config, concurrency=concurrency,
                                     train=dataclasses.replace(config.train, epochs=epochs, acceptance="mean", early_stop=early_stop,
                                                                 credit_assignment=False))
        started = time.perf_counter()
        run_training(config, TrainRequest(skill="ticket-triage", out=Path(tmp) / "run"), log=lambda line: None,
                     session_options={"show_progress": False})
        seconds = time.perf_counter() - started
        state = TrainState.load(Path(tmp) / "run")
        suite = load_suite(example_path("eval_suites/ticket-triage"))
        val_prompts = {suite.render_prompt(t) for t in suite.tasks("val")}
        target = [c for c in server.calls if c.request.model == SIM_TARGET]
        # Counted at the server: rollouts cancelled in flight were sent, so they count.
        val_calls = sum(1 for c in target if c.request.last_user in val_prompts) - len(val_prompts)  # minus the baseline
        target_calls = len(target)
        return [(r.step, r.decision) for r in state.history], val_calls, target_calls, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    import openai  # noqa: F401  (imported once up front so neither timed run pays for it)

    early = train_once(True, args.epochs, args.concurrency)
    full = train_once(False, args.epochs, args.concurrency)
    candidates = sum(1 for _, d in early[0] if d in ("accepted", "rejected"))
    print(f"demo training: {args.epochs} epochs, {len(early[0])} steps, {candidates} candidates scored on validation, "
          f"concurrency {args.concurrency}")
    print(f"  same decisions with and without early stopping: {early[0] == full[0]}")
    print(f"  target calls on validation for candidates: early stop {early[1]}, full pass {full[1]}, "
          f"ratio {early[1] / full[1]:.2f} ({100 * (1 - early[1] / full[1]):.0f}% saved)")
    print(f"  all target-model calls: early stop {early[2]}, full pass {full[2]}, ratio {early[2] / full[2]:.2f}")
    print(f"  wall time: early stop {early[3]:.2f}s, full pass {full[3]:.2f}s")
    at_one = train_once(True, args.epochs, 1)
    print(f"  at concurrency 1 (nothing in flight when scoring stops): validation calls {at_one[1]}, "
          f"ratio {at_one[1] / full[1]:.2f}, same decisions: {at_one[0] == full[0]}")


if __name__ == "__main__":
    main()
