"""A noisy simulated world for measuring training quality, independent of the bundled examples.

Tasks come in :data:`CATEGORIES` (six kinds of support case); each kind has one good rule
(:data:`GOOD_RULES`). The frozen target (:class:`NoisyTarget`) answers a task correctly with
probability :data:`P_RIGHT` (0.9) when the skill states its kind's good rule, and :data:`P_WRONG`
(0.1) otherwise. A :data:`HARMFUL_RULES` line drops its victim kind to 0.1 even when that kind's
rule is there; a :data:`USELESS_RULES` line changes nothing. So a perfect skill scores 0.90 in
expectation and the seed skill (no rules) 0.10, and one sample per task on 24 validation tasks
gives lucky (and unlucky) scores by itself.

Each answer is a draw decided by a hash of (skill text, task prompt, draw number), where the draw
number is how many times the server has seen that exact request before: the sample index of a
repeat never reaches the wire, so, as with a real sampling model, the k-th identical request is
the k-th independent draw. Requests served from the response cache never reach the server, so
they keep their first answer. The same sequence of requests therefore gets the same answers; a
run killed with calls in flight, or early stopping cancelling calls the server already answered,
shifts later draws of those requests (so use one :class:`NoisyModels` per run, and concurrency 1
where a run must repeat exactly).

The optimizer (:class:`NoisyOptimizer`) reads the failed trajectories of a reflection prompt and
proposes the good rule of the failed kind the skill lacks that failed most; decided by a hash of
the prompt, it sometimes adds a useless rule and sometimes bundles a harmful rule with the good
one (a harmful edit riding along). When every failed kind already has its rule (the failures
are noise, or a harmful rule), it proposes a useless rule: a candidate identical in effect to the
incumbent. Slow updates and the meta skill are answered as by :class:`OptimizerSim`: lines the
target ignores.

:func:`write_world` writes an ordinary suite (chat environment, exact scorer) and the seed skill,
deterministically per seed; :func:`world_config` points a configuration at a server playing
:data:`noisy_models`.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from skillopt_ci.inputs.config import CacheSettings, Config, ModelSpec, SkillEntry, TrainPolicy
from skillopt_ci.sim.optimizer_sim import OptimizerSim
from skillopt_ci.sim.reflection_prompt import fenced_after, find_prompt, parse_trajectories

TARGET_MODEL = "noisy-target-1"
OPTIMIZER_MODEL = "noisy-optimizer-1"
SKILL_NAME = "case-desk"
P_RIGHT, P_WRONG = 0.9, 0.1
CEILING = P_RIGHT
CATEGORIES = ("billing", "shipping", "returns", "warranty", "accounts", "privacy")
GOOD_RULES = MappingProxyType({
    "billing": "For billing cases, quote the invoice number before any amount.",
    "shipping": "For shipping cases, give the carrier and the tracking status together.",
    "returns": "For returns cases, check the 30-day window before offering a refund.",
    "warranty": "For warranty cases, ask for the serial number and the purchase date.",
    "accounts": "For accounts cases, confirm the account owner's identity first.",
    "privacy": "For privacy cases, cite the data-request procedure by its name.",
})
# harmful rule -> the kind it breaks (it reads as if it were about another kind)
HARMFUL_RULES = MappingProxyType({
    "Treat every case that mentions money as a billing case.": "returns",
    "Answer shipping and warranty cases with the standard apology first.": "warranty",
    "Never ask the customer for identifying details.": "accounts",
})
USELESS_RULES = (
    "Be concise and polite.",
    "Read the whole case before answering.",
    "Use the customer's own words where possible.",
    "Keep answers on a single line.",
    "Stay calm and professional with upset customers.",
)
SEED_SKILL = f"""\
---
name: {SKILL_NAME}
description: Resolve customer cases at the help desk and answer with the case's resolution code. Use for every new case.
---

# Case desk

You resolve customer cases. Read the case, then answer with its resolution code only.

## Rules
"""
PROMPT = "Kind: {{ metadata.kind }}\nCase: {{ input }}\n"
KIND_LINE = re.compile(r"^Kind:\s*(\w+)", re.M)
CASE_LINE = re.compile(r"^Case:\s*(\S+)", re.M)
BULLET = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")


def norm(line: str) -> str:
    return " ".join(BULLET.sub("", line).split()).lower().rstrip(".")


_GOOD_BY_NORM = {norm(text): kind for kind, text in GOOD_RULES.items()}
_HARM_BY_NORM = {norm(text): victim for text, victim in HARMFUL_RULES.items()}


@dataclass(frozen=True)
class Effect:
    """What a skill does to the target: the kinds with their rule, the kinds a harmful rule breaks."""

    ruled: frozenset[str]
    broken: frozenset[str]

    def p_right(self, kind: str) -> float:
        return P_RIGHT if kind in self.ruled and kind not in self.broken else P_WRONG


def effect(skill_text: str) -> Effect:
    lines = {norm(line) for line in skill_text.splitlines() if line.strip()}
    return Effect(frozenset(k for n, k in _GOOD_BY_NORM.items() if n in lines),
                  frozenset(v for n, v in _HARM_BY_NORM.items() if n in lines))


def harmful_in(skill_text: str) -> list[str]:
    """The harmful rules a skill states."""
    lines = {norm(line) for line in skill_text.splitlines() if line.strip()}
    return [text for text in HARMFUL_RULES if norm(text) in lines]


def expected_accuracy(skill_text: str, kinds: list[str]) -> float:
    """The true accuracy of a skill on tasks of these kinds (the mean of their probabilities)."""
    e = effect(skill_text)
    return sum(e.p_right(k) for k in kinds) / len(kinds) if kinds else 0.0


def answer_of(kind: str, case: str) -> str:
    return f"{kind}/{case}"


def digest(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big")


class NoisyTarget:
    """The frozen target: a scripted-server policy. Thread-safe; the draw counters are its state."""

    def __init__(self) -> None:
        self._draws: Counter[tuple[str, str]] = Counter()
        self._effects: dict[str, Effect] = {}
        self._lock = threading.Lock()

    def answer(self, skill_text: str, prompt: str, draw: int) -> str:
        """The answer to ``prompt`` under ``skill_text`` at draw ``draw`` (a pure function)."""
        kind = m.group(1) if (m := KIND_LINE.search(prompt)) else ""
        case = m.group(1) if (m := CASE_LINE.search(prompt)) else "?"
        e = self._effects.get(skill_text) or effect(skill_text)
        right = digest(skill_text, prompt, draw) / 2**64 < e.p_right(kind)
        return answer_of(kind, case) if right else f"{kind}/unresolved"

    def __call__(self, request: Any) -> str:
        key = (request.system, request.last_user)
        with self._lock:
            draw = self._draws[key]
            self._draws[key] += 1
            if request.system not in self._effects:
                self._effects[request.system] = effect(request.system)
        return self.answer(request.system, request.last_user, draw)


class NoisyOptimizer:
    """The optimizer: a pure function of the request (thread-safe).

    A failure reflection proposes the good rule of the kind that failed most among those the skill
    lacks (``good_per_reflection`` of them). Of those with a good rule to propose and room for a
    second edit, about one in four also carries a harmful rule (whose victim is not a kind being
    fixed) and about one in four a useless one.
    """

    def __init__(self, harmful_share: int = 25, useless_share: int = 25, good_per_reflection: int = 1):
        self.harmful_share, self.useless_share = harmful_share, useless_share
        self.good_per_reflection = good_per_reflection
        self._other = OptimizerSim(bad_every=0)

    def __call__(self, request: Any) -> str:
        prompt, kind = find_prompt(request)
        if kind == "failure":
            answer = self.reflect_failures(prompt)
        elif kind == "success":
            answer = self.reflect_successes(prompt)
        else:
            return self._other(request)
        return "```json\n" + json.dumps(answer, indent=2) + "\n```"

    def reflect_failures(self, prompt: str) -> dict[str, Any]:
        skill, trajectories = fenced_after(prompt, "## Current skill"), parse_trajectories(prompt)
        if skill is None or not trajectories:
            return {"analysis": "could not find the skill or the trajectories", "edits": []}
        have = effect(skill)
        failed = Counter(m.group(1) for t in trajectories if (m := KIND_LINE.search(t.input)) and m.group(1) in GOOD_RULES)
        needed = [k for k, _ in sorted(failed.items(), key=lambda kv: -kv[1]) if k not in have.ruled]
        limit = _max_edits(prompt)
        roll = digest(prompt)
        edits = [append_rule(GOOD_RULES[k], f"{failed[k]} failed {k} cases") for k in needed][:min(limit, self.good_per_reflection)]
        if edits and roll % 100 < self.harmful_share and limit > 1:
            proposed = set(needed[: len(edits)])
            options = [t for t, victim in HARMFUL_RULES.items() if victim not in proposed and t not in harmful_in(skill)]
            if options:
                bad = options[(roll // 100) % len(options)]
                edits = [*edits[: limit - 1], append_rule(bad, "several failed cases need this")]
        elif limit > 0 and (not edits or (limit > 1 and roll % 100 < self.harmful_share + self.useless_share)):
            useless = _fresh_useless(skill, roll // 100)
            if useless is not None:
                edits = [*edits[: limit - 1], append_rule(useless, "the answers could be clearer")]
        kinds = ", ".join(f"{k} ({n})" for k, n in failed.items()) or "none"
        return {"analysis": f"{len(trajectories)} failed cases by kind: {kinds}; {len(edits)} edits proposed.",
                "edits": edits}

    def reflect_successes(self, prompt: str) -> dict[str, Any]:
        skill = fenced_after(prompt, "## Current skill") or ""
        roll = digest(prompt)
        edits = []
        if roll % 3 == 1 and _max_edits(prompt) > 0 and (useless := _fresh_useless(skill, roll // 3)) is not None:
            edits.append(append_rule(useless, "the successful answers all did this"))
        return {"analysis": "The successful cases follow the rules the skill states.", "edits": edits}


def append_rule(text: str, why: str) -> dict[str, str]:
    return {"op": "append", "text": f"- {text}", "rationale": why}


def _fresh_useless(skill: str, pick: int) -> str | None:
    lines = {norm(line) for line in skill.splitlines() if line.strip()}
    options = [u for u in USELESS_RULES if norm(u) not in lines]
    return options[pick % len(options)] if options else None


def _max_edits(prompt: str) -> int:
    m = re.search(r"Propose at most (\d+) edits", prompt)
    return int(m.group(1)) if m else 3


class NoisyModels:
    """Both models behind one scripted-server policy, routed by model name. Use a fresh instance
    per training run (the target's draw counters are per run)."""

    def __init__(self) -> None:
        self.target = NoisyTarget()
        self.optimizer = NoisyOptimizer()

    def __call__(self, request: Any) -> str:
        return self.optimizer(request) if request.model == OPTIMIZER_MODEL else self.target(request)


noisy_models = NoisyModels()


@dataclass(frozen=True)
class WorldFiles:
    skill: Path  # SKILL.md of the seed skill
    suite: Path  # the suite directory
    kinds: MappingProxyType  # split -> the kind of each task, in file order


def write_world(dest: Path, seed: int, n_train: int = 48, n_val: int = 24, n_test: int = 80) -> WorldFiles:
    """Write the seed skill (``skills/case-desk/SKILL.md``) and the suite (``eval_suites/case-desk``)
    under ``dest``. The kinds are balanced per split and shuffled, and the case codes drawn, from
    ``seed``."""
    rng = random.Random(f"noisy-world:{seed}")
    suite = dest / "eval_suites" / SKILL_NAME
    suite.mkdir(parents=True, exist_ok=True)
    (suite / "suite.yaml").write_text(
        f"name: {SKILL_NAME}\ndescription: Noisy simulated help-desk cases in {len(CATEGORIES)} kinds.\n"
        "prompt: |\n" + "".join(f"  {line}\n" for line in PROMPT.splitlines())
        + "environment: chat\nscorer:\n  type: exact\nrepeats: 1\n", encoding="utf-8")
    codes = iter(rng.sample(range(10000, 99999), n_train + n_val + n_test))
    kinds: dict[str, list[str]] = {}
    for split, n in (("train", n_train), ("val", n_val), ("test", n_test)):
        order = [CATEGORIES[i % len(CATEGORIES)] for i in range(n)]
        rng.shuffle(order)
        kinds[split] = order
        rows = []
        for i, kind in enumerate(order):
            case = f"C{next(codes)}"
            rows.append(json.dumps({"id": f"{split}-{i:03d}", "input": case, "expected": answer_of(kind, case),
                                    "metadata": {"kind": kind}}))
        (suite / f"{split}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    skill = dest / "skills" / SKILL_NAME / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(SEED_SKILL, encoding="utf-8")
    return WorldFiles(skill, suite, MappingProxyType({k: tuple(v) for k, v in kinds.items()}))


def perfect_skill() -> str:
    return SEED_SKILL + "".join(f"- {rule}\n" for rule in GOOD_RULES.values())


def world_config(base_url: str, root: Path, files: WorldFiles, train: TrainPolicy | None = None,
                 concurrency: int = 8) -> Config:
    """A configuration training the seed skill against a server playing :data:`noisy_models`
    (cache off, free models)."""
    def model(role: str, name: str) -> ModelSpec:
        return ModelSpec.from_dict(role, {"provider": "openai-compatible", "model": name, "base_url": base_url,
                                          "params": {"temperature": 1}})

    free = MappingProxyType({"input": 0.0, "output": 0.0})
    return Config(
        root=root, file="(noisy world)",
        models=MappingProxyType({"target": model("target", TARGET_MODEL), "optimizer": model("optimizer", OPTIMIZER_MODEL)}),
        skills=(SkillEntry(SKILL_NAME, files.skill, files.suite),),
        concurrency=concurrency, cache=CacheSettings(mode="off", path=root / "cache.sqlite"), runs_dir=root / "runs",
        pricing=MappingProxyType({TARGET_MODEL: free, OPTIMIZER_MODEL: free}),
        train=train or TrainPolicy(),
    )
