"""Simulated training worlds whose properties vary, for a bench that cannot be tuned to one world.

:mod:`helpers.noisy_world` is one world: six kinds, a target at 0.9 on a kind whose rule the skill
states and 0.1 otherwise, and an optimizer that always proposes the right rule for the kind that
failed most and never reads the rejection memory. A :class:`World` is the same kind of help desk
with each of those assumptions made a setting:

- ``kinds``: how many kinds of case (more than a minibatch of 8 holds, at 12);
- ``p_covered`` / ``p_uncovered``: the target's accuracy on a kind whose rule the skill states, and
  on one it does not (the base rate); the ceiling is ``p_covered``;
- ``right_fix``: how often a failure reflection proposes the right rule for a failed kind; the
  rest of the time it proposes a near miss for that kind (a rule about it that changes nothing);
- ``obey_memory``: how often it heeds the rejection memory shown in the prompt ("## Memory of this
  epoch"): 0 ignores it, 1 never re-proposes a rule the memory says not to repeat (its "measured
  and lost" section, as a careful optimizer reads it), 0.5 skips such a rule half the time;
- ``literal_memory``: the pessimistic reader: it heeds *every* rule the memory quotes, also those
  it says may be proposed again;
- ``latent_harm``: harmful rules are only proposed against kinds the skill does not cover yet, so
  validation cannot see them until the victim's own rule arrives (and then that rule fixes nothing);
- ``success_fix``: how often a success reflection proposes the rule of a kind that passed by luck;
- ``fixes_per_reflection``: how many failed kinds one failure reflection proposes a rule for (at
  most the prompt's edit limit);
- ``harmful_share``: the share (in %) of failure reflections that carry a harmful rule, riding
  along with a fix, or (``harm_alone``) also alone when no fix is proposed;
- ``aa``: every proposal is useless (an A/A world; with ``p_covered == p_uncovered`` the skill
  changes nothing at all, so every accepted step accepted a useless edit).

Every decision is a hash of the request and the world (no state but the target's draw counters,
as in :mod:`helpers.noisy_world`), so a world is deterministic for a seed. :data:`WORLDS` names the
configurations the bench runs; :func:`write_world` and :func:`world_config` set one up.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from helpers.noisy_world import (
    CASE_LINE,
    KIND_LINE,
    PROMPT,
    SEED_SKILL,
    SKILL_NAME,
    WorldFiles,
    answer_of,
    append_rule,
    digest,
    norm,
)
from skillopt_ci.sim.optimizer_sim import OptimizerSim
from skillopt_ci.sim.reflection_prompt import (
    between,
    fenced_after,
    find_prompt,
    max_edits,
    parse_trajectories,
)
from skillopt_ci.train.optimizer.buffer import REFUTED_HEADING, UNPROVEN_HEADING

TARGET_MODEL = "noisy-target-1"
OPTIMIZER_MODEL = "noisy-optimizer-1"
KIND_ACTIONS = MappingProxyType({
    "billing": "quote the invoice number before any amount",
    "shipping": "give the carrier and the tracking status together",
    "returns": "check the 30-day window before offering a refund",
    "warranty": "ask for the serial number and the purchase date",
    "accounts": "confirm the account owner's identity first",
    "privacy": "cite the data-request procedure by its name",
    "outages": "name the affected region and the status page",
    "contracts": "read the renewal date from the contract record",
    "discounts": "check the promotion code against its expiry date",
    "repairs": "book the repair slot before quoting a price",
    "exports": "state the export format and the file size limit",
    "security": "escalate to the security desk with the login history",
})
NEAR_MISSES = (
    "restate the customer's question before answering",
    "keep the answer under two sentences",
    "thank the customer for their patience first",
)
USELESS = tuple(f"{lead} {tail}." for lead in ("Be", "Stay", "Remain", "Keep being")
                for tail in ("concise and polite", "calm with upset customers", "professional in tone",
                             "consistent in wording", "careful with spelling"))
MEMORY_START, MEMORY_END = "## Memory of this epoch", "## What has helped before"


def chance(*parts: object) -> float:
    """A uniform draw in [0, 1) decided by ``parts``."""
    return digest(*parts) / 2**64


@dataclass(frozen=True)
class Effect:
    """What a skill does to the target: the kinds with their rule, the kinds a harmful rule breaks."""

    ruled: frozenset[str]
    broken: frozenset[str]


@dataclass(frozen=True)
class World:
    """One named, seeded configuration (see the module docstring for what each setting means)."""

    name: str
    about: str
    kinds: int = 6
    p_covered: float = 0.9
    p_uncovered: float = 0.1
    right_fix: float = 1.0
    obey_memory: float = 0.0
    literal_memory: bool = False
    latent_harm: bool = False
    harmful_share: int = 25
    useless_share: int = 25
    success_fix: float = 0.0
    fixes_per_reflection: int = 1
    harm_alone: bool = False
    aa: bool = False
    n_train: int = 48
    n_val: int = 24
    n_test: int = 80

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(KIND_ACTIONS)[: self.kinds]

    @property
    def ceiling(self) -> float:
        return self.p_covered

    @property
    def good_rules(self) -> dict[str, str]:
        return {k: f"For {k} cases, {KIND_ACTIONS[k]}." for k in self.categories}

    @property
    def harmful_rules(self) -> dict[str, str]:
        """Harmful rule -> the kind it breaks: one for every other kind, reading as if it were about
        the kind before it."""
        cats = self.categories
        return {f"Treat every {cats[i - 1]} case as urgent, whatever else it mentions.": cats[i]
                for i in range(1, len(cats), 2)}

    def near_miss(self, kind: str, pick: int) -> str:
        return f"For {kind} cases, {NEAR_MISSES[pick % len(NEAR_MISSES)]}."

    def effect(self, skill_text: str) -> Effect:
        lines = {norm(line) for line in skill_text.splitlines() if line.strip()}
        return Effect(frozenset(k for k, rule in self.good_rules.items() if norm(rule) in lines),
                      frozenset(v for rule, v in self.harmful_rules.items() if norm(rule) in lines))

    def p_right(self, e: Effect, kind: str) -> float:
        return self.p_covered if kind in e.ruled and kind not in e.broken else self.p_uncovered

    def harmful_in(self, skill_text: str) -> list[str]:
        lines = {norm(line) for line in skill_text.splitlines() if line.strip()}
        return [rule for rule in self.harmful_rules if norm(rule) in lines]

    def expected_accuracy(self, skill_text: str, kinds: list[str]) -> float:
        e = self.effect(skill_text)
        return sum(self.p_right(e, k) for k in kinds) / len(kinds) if kinds else 0.0

    def perfect_skill(self) -> str:
        return SEED_SKILL + "".join(f"- {rule}\n" for rule in self.good_rules.values())


class WorldTarget:
    """The frozen target of a world: the k-th identical request is the k-th independent draw."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._draws: Counter[tuple[str, str]] = Counter()
        self._effects: dict[str, Effect] = {}
        self._lock = threading.Lock()

    def answer(self, skill_text: str, prompt: str, draw: int) -> str:
        kind = m.group(1) if (m := KIND_LINE.search(prompt)) else ""
        case = m.group(1) if (m := CASE_LINE.search(prompt)) else "?"
        e = self._effects.get(skill_text) or self.world.effect(skill_text)
        right = chance(self.world.name, skill_text, prompt, draw) < self.world.p_right(e, kind)
        return answer_of(kind, case) if right else f"{kind}/unresolved"

    def __call__(self, request: Any) -> str:
        key = (request.system, request.last_user)
        with self._lock:
            draw = self._draws[key]
            self._draws[key] += 1
            if request.system not in self._effects:
                self._effects[request.system] = self.world.effect(request.system)
        return self.answer(request.system, request.last_user, draw)


def listed_in(memory: str, rule: str) -> bool:
    """Whether the rejection memory of a prompt quotes ``rule``."""
    return norm(rule) in " ".join(memory.split()).lower()


class WorldOptimizer:
    """The optimizer of a world: a pure function of the request (thread-safe)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._other = OptimizerSim(bad_every=0)

    def __call__(self, request: Any) -> str:
        prompt, kind = find_prompt(request)
        if kind not in ("failure", "success"):
            return self._other(request)
        skill = fenced_after(prompt, "## Current skill")
        trajectories = parse_trajectories(prompt)
        if skill is None or not trajectories:
            answer: dict[str, Any] = {"analysis": "could not find the skill or the trajectories", "edits": []}
        else:
            kinds = Counter(m.group(1) for t in trajectories
                            if (m := KIND_LINE.search(t.input)) and m.group(1) in self.world.categories)
            reflect = self.reflect_failures if kind == "failure" else self.reflect_successes
            answer = reflect(prompt, skill, kinds)
        return "```json\n" + json.dumps(answer, indent=2) + "\n```"

    def heeds(self, prompt: str, rule: str) -> bool:
        """Whether this reflection leaves ``rule`` out because the memory says not to repeat it
        (with ``literal_memory``: because the memory quotes it at all)."""
        memory = between(prompt, MEMORY_START, MEMORY_END)
        if not self.world.literal_memory:
            memory = between(memory, REFUTED_HEADING, UNPROVEN_HEADING)
        return listed_in(memory, rule) and chance(self.world.name, "obey", prompt, rule) < self.world.obey_memory

    def fixes(self, prompt: str, skill: str, kinds: Counter[str]) -> list[tuple[str, str]]:
        """(kind, rule) for each failed kind the skill lacks, most failures first: its right rule
        with probability ``right_fix``, else a near miss; rules the memory makes it skip left out."""
        have = self.world.effect(skill).ruled
        out = []
        for k, _ in sorted(kinds.items(), key=lambda kv: -kv[1]):
            if k in have:
                continue
            if chance(self.world.name, "fix", prompt, k) < self.world.right_fix:
                rule = self.world.good_rules[k]
            else:
                rule = self.world.near_miss(k, digest(self.world.name, "miss", prompt, k))
            if norm(rule) not in {norm(line) for line in skill.splitlines()} and not self.heeds(prompt, rule):
                out.append((k, rule))
        return out

    def reflect_failures(self, prompt: str, skill: str, kinds: Counter[str]) -> dict[str, Any]:
        limit, roll = max_edits(prompt), digest(self.world.name, prompt)
        fixes = [] if self.world.aa else self.fixes(prompt, skill, kinds)[: min(limit, self.world.fixes_per_reflection)]
        edits = [append_rule(rule, f"{kinds[k]} failed {k} cases") for k, rule in fixes]
        harm = (edits and limit > 1) or (self.world.harm_alone and limit > 0)
        if harm and roll % 100 < self.world.harmful_share and (bad := self.harmful(prompt, skill, fixes)):
            edits = [*edits[: limit - 1], append_rule(bad, "several failed cases need this")]
        elif (limit > 0 and (not edits or (limit > 1 and roll % 100 < self.world.harmful_share + self.world.useless_share))
              and (useless := self.fresh_useless(prompt, skill, roll // 100)) is not None):
            edits = [*edits[: limit - 1], append_rule(useless, "the answers could be clearer")]
        shown = ", ".join(f"{k} ({n})" for k, n in kinds.items()) or "none"
        return {"analysis": f"Failed cases by kind: {shown}; {len(edits)} edits proposed.", "edits": edits}

    def harmful(self, prompt: str, skill: str, fixes: list[tuple[str, str]]) -> str | None:
        have, fixing = self.world.effect(skill).ruled, {k for k, _ in fixes}
        options = [rule for rule, victim in self.world.harmful_rules.items()
                   if victim not in fixing and rule not in self.world.harmful_in(skill)
                   and not (self.world.latent_harm and victim in have) and not self.heeds(prompt, rule)]
        return options[digest(self.world.name, "harm", prompt) % len(options)] if options else None

    def reflect_successes(self, prompt: str, skill: str, kinds: Counter[str]) -> dict[str, Any]:
        roll = digest(self.world.name, "success", prompt)
        edits = []
        have = self.world.effect(skill).ruled
        lucky = [k for k in kinds if k not in have]
        if (not self.world.aa and lucky and max_edits(prompt) > 0
                and chance(self.world.name, "success-fix", prompt) < self.world.success_fix):
            rule = self.world.good_rules[lucky[0]]
            if not self.heeds(prompt, rule):
                edits.append(append_rule(rule, f"the successful {lucky[0]} cases did this"))
        elif roll % 3 == 1 and max_edits(prompt) > 0 and (useless := self.fresh_useless(prompt, skill, roll // 3)):
            edits.append(append_rule(useless, "the successful answers all did this"))
        return {"analysis": "The successful cases follow the rules the skill states.", "edits": edits}

    def fresh_useless(self, prompt: str, skill: str, pick: int) -> str | None:
        lines = {norm(line) for line in skill.splitlines() if line.strip()}
        options = [u for u in USELESS if norm(u) not in lines and not self.heeds(prompt, u)]
        return options[pick % len(options)] if options else None


class WorldModels:
    """Both models of a world behind one scripted-server policy; one instance per training run."""

    def __init__(self, world: World) -> None:
        self.target = WorldTarget(world)
        self.optimizer = WorldOptimizer(world)

    def __call__(self, request: Any) -> str:
        return self.optimizer(request) if request.model == OPTIMIZER_MODEL else self.target(request)


def write_world(world: World, dest: Path, seed: int) -> WorldFiles:
    """The seed skill (``skills/case-desk/SKILL.md``) and the suite (``eval_suites/case-desk``) under
    ``dest``: kinds balanced per split and shuffled, case codes drawn, from (world, seed)."""
    rng = random.Random(f"{world.name}:{seed}")
    cats = world.categories
    suite = dest / "eval_suites" / SKILL_NAME
    suite.mkdir(parents=True, exist_ok=True)
    (suite / "suite.yaml").write_text(
        f"name: {SKILL_NAME}\ndescription: Simulated help-desk cases in {len(cats)} kinds ({world.name}).\n"
        "prompt: |\n" + "".join(f"  {line}\n" for line in PROMPT.splitlines())
        + "environment: chat\nscorer:\n  type: exact\nrepeats: 1\n", encoding="utf-8")
    codes = iter(rng.sample(range(10000, 99999), world.n_train + world.n_val + world.n_test))
    kinds: dict[str, tuple[str, ...]] = {}
    for split, n in (("train", world.n_train), ("val", world.n_val), ("test", world.n_test)):
        order = [cats[i % len(cats)] for i in range(n)]
        rng.shuffle(order)
        kinds[split] = tuple(order)
        rows = []
        for i, kind in enumerate(order):
            case = f"C{next(codes)}"
            rows.append(json.dumps({"id": f"{split}-{i:03d}", "input": case, "expected": answer_of(kind, case),
                                    "metadata": {"kind": kind}}))
        (suite / f"{split}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    skill = dest / "skills" / SKILL_NAME / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(SEED_SKILL, encoding="utf-8")
    return WorldFiles(skill, suite, MappingProxyType(kinds))


def _aa(p: float) -> World:
    return World(f"aa-{p:.1f}", f"A/A: every edit useless, every task passes with probability {p:.1f}",
                 p_covered=p, p_uncovered=p, aa=True)


# The bench's worlds. "independent" is the independent world; each other one moves one
# property away from the noisy world's (6 kinds, 0.9/0.1, the right fix always, memory ignored).
WORLDS: dict[str, World] = {w.name: w for w in (
    World("independent", "12 kinds, right fix 6 in 10, heeds the memory 1 time in 2, latent harm 6 reflections "
          "in 10, success reflections propose rules, 40 train cases", kinds=12, right_fix=0.6, obey_memory=0.5,
          latent_harm=True, harmful_share=60, harm_alone=True, success_fix=0.3, fixes_per_reflection=3, n_train=40),
    World("fix-0.5", "the right fix half the time", right_fix=0.5),
    World("fix-0.25", "the right fix one time in four", right_fix=0.25),
    World("memory-strict", "the right fix half the time; never re-proposes a rule the memory says was measured "
          "and lost", right_fix=0.5, obey_memory=1.0),
    World("memory-literal", "the right fix half the time; never re-proposes any rule the memory quotes, even one "
          "it says may be proposed again", right_fix=0.5, obey_memory=1.0, literal_memory=True),
    World("latent-harm", "harmful rules break only kinds not covered yet, proposed 4 times in 10",
          latent_harm=True, harmful_share=40),
    World("base-0.3", "target 0.9 on a covered kind, 0.3 on an uncovered one", p_uncovered=0.3),
    World("base-0.5", "target 0.9 on a covered kind, 0.5 on an uncovered one", p_uncovered=0.5),
    World("ceiling-0.6", "a weak target: 0.6 on a covered kind, 0.3 on an uncovered one", p_covered=0.6,
          p_uncovered=0.3),
    World("kinds-12", "12 kinds (a minibatch of 8 holds at most 8)", kinds=12),
)}
AA_WORLDS: dict[str, World] = {w.name: w for w in map(_aa, (0.1, 0.3, 0.5, 0.7, 0.9))}
