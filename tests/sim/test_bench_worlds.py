"""The bench's worlds (tests/helpers/worlds.py) do what their settings say, read through the real
reflection prompt and the real proposal parser; no training run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers.worlds import (
    AA_WORLDS,
    OPTIMIZER_MODEL,
    SEED_SKILL,
    TARGET_MODEL,
    WORLDS,
    World,
    WorldModels,
    WorldOptimizer,
    WorldTarget,
    write_world,
)
from skillopt_ci.core.edits import Edit
from skillopt_ci.core.records import TaskResult
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.train.optimizer import (
    OptimizerBuffer,
    ReflectionContext,
    classify_rejection,
    read_proposal,
)
from skillopt_ci.train.optimizer.reflect import FAILURE, reflection_messages


def failures_of(world: World, kinds: list[str], tag: str) -> list[TaskResult]:
    """Failed trajectories of tasks of these kinds, as a rollout records them."""
    out = []
    for i, kind in enumerate(kinds):
        case = f"C{tag}{i:03d}"
        out.append(TaskResult(f"train-{tag}-{i}", 0, f"Kind: {kind}\nCase: {case}\n", f"{kind}/unresolved", 0.0, False,
                              "expected a different answer", expected=f"{kind}/{case}"))
    return out


def proposed(world: World, skill: str, kinds: list[str], tag: str, buffer: OptimizerBuffer | None = None,
             limit: int = 3) -> list[str]:
    """The rule texts one failure reflection of ``world``'s optimizer proposes."""
    ctx = ReflectionContext(skill, buffer or OptimizerBuffer(), "", limit)
    messages = reflection_messages(FAILURE, failures_of(world, kinds, tag), ctx)
    request = SimpleNamespace(model=OPTIMIZER_MODEL, messages=[{"role": m.role, "content": m.content} for m in messages],
                              last_user=messages[-1].content)
    proposal = read_proposal(WorldOptimizer(world)(request), limit, source="failure")
    return [e.text.removeprefix("- ") for e in proposal.edits]


def test_a_world_is_the_same_for_a_seed_and_differs_between_seeds(tmp_path):
    world = WORLDS["independent"]
    a, b, c = (write_world(world, tmp_path / name, seed) for name, seed in (("a", 3), ("b", 3), ("c", 4)))
    assert (a.suite / "train.jsonl").read_text() == (b.suite / "train.jsonl").read_text()
    assert (a.suite / "train.jsonl").read_text() != (c.suite / "train.jsonl").read_text()
    assert sorted(set(a.kinds["train"])) == sorted(world.categories) and len(world.categories) > 8
    suite = load_suite(a.suite)
    prompts = [suite.render_prompt(t) for t in suite.tasks("val")]
    first, second = WorldModels(world), WorldModels(world)
    request = lambda p: SimpleNamespace(model=TARGET_MODEL, system=SEED_SKILL, last_user=p, messages=[])  # noqa: E731
    assert [first(request(p)) for p in prompts] == [second(request(p)) for p in prompts]
    tags = [str(i) for i in range(5)]
    assert [proposed(world, SEED_SKILL, ["billing", "shipping"], t) for t in tags] == \
           [proposed(world, SEED_SKILL, ["billing", "shipping"], t) for t in tags]


@pytest.mark.parametrize(("right_fix", "low", "high"), [(1.0, 200, 200), (0.5, 80, 120), (0.25, 30, 70)])
def test_the_optimizer_proposes_the_right_fix_at_its_rate(right_fix, low, high):
    world = World("rate", "", right_fix=right_fix, harmful_share=0, useless_share=0)
    right = sum(proposed(world, SEED_SKILL, ["billing"], str(i)) == [world.good_rules["billing"]] for i in range(200))
    assert low <= right <= high
    misses = {text for i in range(40) for text in proposed(world, SEED_SKILL, ["billing"], str(i))}
    assert all(text.startswith("For billing cases,") for text in misses)


def test_a_strict_optimizer_never_reproposes_a_rule_the_memory_refutes_and_one_that_ignores_it_does():
    strict = World("strict", "", obey_memory=1.0, harmful_share=0, useless_share=0)
    ignoring = World("ignoring", "", obey_memory=0.0, harmful_share=0, useless_share=0)
    rule = strict.good_rules["billing"]
    lost = classify_rejection("validation does not beat", validated=True, candidate_val=0.5, incumbent_val=0.6)
    buffer = OptimizerBuffer().with_rejected([Edit("append", text=f"- {rule}")], lost)
    assert all(proposed(strict, SEED_SKILL, ["billing"], str(i)) == [rule] for i in range(20))  # no memory yet
    assert not any(rule in proposed(strict, SEED_SKILL, ["billing", "billing"], str(i), buffer) for i in range(50))
    assert all(proposed(ignoring, SEED_SKILL, ["billing"], str(i), buffer) == [rule] for i in range(20))
    half = World("half", "", obey_memory=0.5, harmful_share=0, useless_share=0)
    heeded = sum(rule not in proposed(half, SEED_SKILL, ["billing"], str(i), buffer) for i in range(100))
    assert 30 <= heeded <= 70


def test_a_careful_optimizer_reproposes_an_unproven_rule_and_a_literal_one_does_not():
    careful = WORLDS["memory-strict"]
    literal = WORLDS["memory-literal"]
    assert literal.literal_memory and literal.obey_memory == 1.0 and literal.right_fix == 0.5
    rule = careful.good_rules["billing"]
    buffer = OptimizerBuffer().with_rejected([Edit("append", text=f"- {rule}")],
                                             classify_rejection("screened out alone: fixed none of 1 training failures"))
    again = sum(rule in proposed(careful, SEED_SKILL, ["billing"], str(i), buffer) for i in range(100))
    assert 30 <= again <= 70  # its right-fix rate, as with no memory at all
    assert not any(rule in proposed(literal, SEED_SKILL, ["billing"], str(i), buffer) for i in range(100))


def test_latent_harm_only_targets_kinds_the_skill_does_not_cover_yet():
    world = World("latent", "", latent_harm=True, harmful_share=100, useless_share=0, fixes_per_reflection=1)
    covered = [k for rule, k in world.harmful_rules.items()][:2]
    skill = SEED_SKILL + "".join(f"- {world.good_rules[k]}\n" for k in covered)
    seen = set()
    for i in range(60):
        for text in proposed(world, skill, ["billing", "privacy"], str(i)):
            if text in world.harmful_rules:
                seen.add(world.harmful_rules[text])
    assert seen and not seen & set(covered)
    harmed = world.perfect_skill() + f"- {next(iter(world.harmful_rules))}\n"
    assert world.expected_accuracy(harmed, list(world.categories)) < world.ceiling
    assert world.expected_accuracy(SEED_SKILL + f"- {next(iter(world.harmful_rules))}\n", list(world.categories)) == \
        pytest.approx(world.p_uncovered)  # invisible while its victim is uncovered


def test_in_an_aa_world_every_proposal_is_useless_and_the_target_ignores_the_skill(tmp_path):
    world = AA_WORLDS["aa-0.5"]
    for i in range(20):
        for text in proposed(world, SEED_SKILL, ["billing", "shipping", "returns"], str(i)):
            assert world.effect(SEED_SKILL + f"- {text}\n") == world.effect(SEED_SKILL)
    assert world.expected_accuracy(world.perfect_skill(), list(world.categories)) == pytest.approx(0.5)
    files = write_world(world, tmp_path, 1)
    target = WorldTarget(world)
    suite = load_suite(files.suite)
    passes = sum(target(SimpleNamespace(system=SEED_SKILL, last_user=suite.render_prompt(t))).endswith(t.input)
                 for _ in range(5) for t in suite.tasks("test"))
    assert 160 <= passes <= 240  # 400 draws at 0.5
