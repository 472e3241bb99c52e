"""Both simulated models of the bundled example behind one scripted-server policy.

Requests for ``sim-optimizer-1`` go to the simulated optimizer (:mod:`optimizer_sim`); every
other model name is the target: a request that offers the catalogue's ``Skill`` tool goes to
the simulated skill picker (:mod:`trigger_sim`), one that offers other tools (the sales-analysis example, a
``tools`` suite) goes to the simulated analyst (:mod:`analyst`), any other to the simulated
ticket-triage target (:mod:`triage`). Run them in their
own process with ``python -m skillopt_ci.sim.server --policy
skillopt_ci.sim.sim_models:simulated_models``.
"""

from __future__ import annotations

from typing import Any

from skillopt_ci.sim.analyst import AnalystPolicy
from skillopt_ci.sim.optimizer_sim import OptimizerSim
from skillopt_ci.sim.triage import TriagePolicy
from skillopt_ci.sim.trigger_sim import CatalogueTarget, offers_skill_tool

SIM_TARGET = "sim-triage-1"
SIM_OPTIMIZER = "sim-optimizer-1"


class SimulatedModels:
    """Route by model name. ``flip`` makes the target noisy; ``malformed`` makes the optimizer
    answer prose instead of JSON."""

    def __init__(self, *, flip: float = 0.0, seed: int = 0, malformed: bool = False):
        self.target = TriagePolicy(flip=flip, seed=seed)
        self.optimizer = OptimizerSim(malformed=malformed)
        self.analyst = AnalystPolicy()
        self.catalogue = CatalogueTarget()

    def __call__(self, request: Any) -> Any:
        if request.model == SIM_OPTIMIZER:
            return self.optimizer(request)
        if offers_skill_tool(request):
            return self.catalogue(request)
        if getattr(request, "tools", None):
            return self.analyst(request)
        return self.target(request)


simulated_models = SimulatedModels()
