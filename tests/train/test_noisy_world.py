"""The noisy simulated world the training-quality bench measures on: what its target and its
optimizer do, as a reader of the bench's figures relies on, and one training run on it through the
real OpenAI SDK against the scripted server."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.noisy_world import (
    CATEGORIES,
    GOOD_RULES,
    HARMFUL_RULES,
    OPTIMIZER_MODEL,
    SEED_SKILL,
    SKILL_NAME,
    TARGET_MODEL,
    USELESS_RULES,
    NoisyModels,
    NoisyOptimizer,
    NoisyTarget,
    effect,
    expected_accuracy,
    harmful_in,
    perfect_skill,
    world_config,
    write_world,
)
from helpers.project import LEGACY_TRAIN
from skillopt_ci.core.records import TaskResult
from skillopt_ci.engine.evaluation import EvalRequest, run_eval
from skillopt_ci.engine.rundir import RunDir
from skillopt_ci.envs.chat import chat_messages
from skillopt_ci.inputs.config import CacheSettings, TrainPolicy
from skillopt_ci.inputs.suite import load_suite
from skillopt_ci.scorers import build_scorer
from skillopt_ci.sim.server import ScriptedModelServer
from skillopt_ci.train.entry import TrainRequest, run_training
from skillopt_ci.train.optimizer import OptimizerBuffer, ReflectionContext, read_proposal
from skillopt_ci.train.optimizer.reflect import FAILURE, reflection_messages
from skillopt_ci.train.state import TrainState


def system_of(skill_text: str) -> str:
    """The system message the chat environment sends for a skill (what the target reads)."""
    return chat_messages(SimpleNamespace(body=skill_text), "")[0].content


def rollouts(files, skill_text: str, split: str, target: NoisyTarget | None = None) -> list[TaskResult]:
    """One sample per task of ``split``, the target called as the server calls it, scored by the
    suite's own scorer."""
    suite = load_suite(files.suite)
    scorer = build_scorer(dict(suite.scorer), suite.path)
    target = target or NoisyTarget()
    system = system_of(skill_text)
    out = []
    for task in suite.tasks(split):
        prompt = suite.render_prompt(task)
        reply = target(SimpleNamespace(system=system, last_user=prompt, model=TARGET_MODEL))
        score = scorer.score(reply, task)
        out.append(TaskResult(task.id, 0, prompt, reply, score.value, score.passed, score.feedback,
                              expected=task.expected))
    return out


def passed(results: list[TaskResult]) -> int:
    return sum(bool(r.passed) for r in results)


def test_perfect_skill_scores_about_090_and_the_seed_skill_about_010(tmp_path):
    files = write_world(tmp_path, seed=7, n_test=600)
    assert expected_accuracy(perfect_skill(), list(files.kinds["test"])) == pytest.approx(0.9)
    assert expected_accuracy(SEED_SKILL, list(files.kinds["test"])) == pytest.approx(0.1)
    assert passed(rollouts(files, perfect_skill(), "test")) == 537
    assert passed(rollouts(files, SEED_SKILL, "test")) == 73
    assert sorted(set(files.kinds["test"])) == sorted(CATEGORIES)


def test_the_world_is_the_same_for_a_seed_and_differs_between_seeds(tmp_path):
    a, b, c = (write_world(tmp_path / name, seed) for name, seed in (("a", 3), ("b", 3), ("c", 4)))
    assert (a.suite / "val.jsonl").read_text() == (b.suite / "val.jsonl").read_text()
    assert (a.suite / "val.jsonl").read_text() != (c.suite / "val.jsonl").read_text()
    assert [len(load_suite(a.suite).tasks(s)) for s in ("train", "val", "test")] == [48, 24, 80]


def test_a_harmful_rule_drops_its_victim_kind_and_a_useless_one_changes_nothing(tmp_path):
    files = write_world(tmp_path, seed=1, n_test=600)
    rule, victim = next(iter(HARMFUL_RULES.items()))
    harmed = perfect_skill() + f"- {rule}\n"
    results = rollouts(files, harmed, "test")
    by_kind = {k: passed([r for r, kk in zip(results, files.kinds["test"], strict=True) if kk == k]) for k in CATEGORIES}
    assert by_kind == {"billing": 87, "shipping": 92, "returns": 8, "warranty": 92, "accounts": 92, "privacy": 92}
    assert harmful_in(harmed) == [rule]
    assert effect(perfect_skill() + "- Be concise and polite.\n") == effect(perfect_skill())


def test_repeats_are_independent_draws_and_the_same_sequence_repeats_exactly(tmp_path):
    files = write_world(tmp_path, seed=2)
    target = NoisyTarget()
    first = rollouts(files, perfect_skill(), "val", target)
    second = rollouts(files, perfect_skill(), "val", target)  # the same requests again: sample 1
    assert [r.output for r in first] != [r.output for r in second]
    assert sum(a.passed != b.passed for a, b in zip(first, second, strict=True)) == 5
    again = rollouts(files, perfect_skill(), "val", NoisyTarget())
    assert [r.output for r in again] == [r.output for r in first]


def reflect_on(files, skill_text: str, split: str = "train", seed_target: NoisyTarget | None = None) -> list[dict]:
    """The optimizer's edits for the failures of one batch of 8 train tasks, read by the real parser."""
    failures = [r for r in rollouts(files, skill_text, split, seed_target) if not r.passed][:8]
    messages = reflection_messages(FAILURE, failures, ReflectionContext(skill_text, OptimizerBuffer(), "", 3))
    request = SimpleNamespace(model=OPTIMIZER_MODEL, messages=[{"role": m.role, "content": m.content} for m in messages],
                              last_user=messages[-1].content)
    proposal = read_proposal(NoisyOptimizer()(request), 3, source="failure")
    return [e.to_dict() for e in proposal.edits]


def test_the_optimizer_proposes_the_rule_of_a_failed_kind(tmp_path):
    files = write_world(tmp_path, seed=5)
    edits = reflect_on(files, SEED_SKILL)
    texts = [e["text"].removeprefix("- ") for e in edits]
    assert texts[0] in GOOD_RULES.values()
    kinds = [k for k, rule in GOOD_RULES.items() if rule == texts[0]]
    assert all(e["op"] == "append" for e in edits)
    assert kinds and kinds[0] in CATEGORIES


def test_the_optimizer_sometimes_bundles_a_harmful_rule_with_a_good_one(tmp_path):
    bundles = useless = 0
    for seed in range(40):
        files = write_world(tmp_path / str(seed), seed)
        texts = [e["text"].removeprefix("- ") for e in reflect_on(files, SEED_SKILL)]
        good = [t for t in texts if t in GOOD_RULES.values()]
        assert len(good) == 1
        bundles += any(t in HARMFUL_RULES for t in texts)
        useless += len(texts) == 2 and not any(t in HARMFUL_RULES for t in texts)
    assert (bundles, useless) == (7, 10)  # decided by hashes of the prompt: its wording moves them


def test_with_every_failed_kind_ruled_the_optimizer_proposes_a_change_of_no_effect(tmp_path):
    files = write_world(tmp_path, seed=6)
    edits = reflect_on(files, perfect_skill())
    assert len(edits) == 1
    assert effect(perfect_skill() + edits[0]["text"] + "\n") == effect(perfect_skill())


def short_run(tmp_path: Path, policy: TrainPolicy):
    files = write_world(tmp_path, seed=0)
    with ScriptedModelServer(NoisyModels()) as server:
        config = world_config(server.openai_base_url, tmp_path, files, policy, concurrency=1)
        outcome = run_training(config, TrainRequest(skill=SKILL_NAME, out=tmp_path / "run"), log=lambda line: None,
                               session_options={"show_progress": False})
    return outcome


def test_one_short_training_run_on_the_world_through_the_openai_sdk(tmp_path: Path):
    files = write_world(tmp_path, seed=0)
    models = NoisyModels()
    with ScriptedModelServer(models) as server:
        config = world_config(server.openai_base_url, tmp_path, files, TrainPolicy(epochs=1, seed=0, group_size=8, **LEGACY_TRAIN),
                              concurrency=1)
        outcome = run_training(config, TrainRequest(skill=SKILL_NAME, out=tmp_path / "run"), log=lambda line: None,
                               session_options={"show_progress": False})
        calls = list(server.calls)
    summary = outcome.summary
    assert summary.complete
    assert summary.steps_accepted + summary.steps_rejected + summary.steps_skipped == 7
    assert {c.request.protocol for c in calls} == {"openai"}
    assert {c.request.model for c in calls} == {TARGET_MODEL, OPTIMIZER_MODEL}
    # the legacy gate learns every kind's rule in one epoch here (whether a harmful rule rides in with
    # a good one is decided by hashes of the prompts, so it varies with their wording)
    assert (summary.steps_accepted, effect(outcome.best_text).ruled) == (6, frozenset(CATEGORIES))
    assert harmful_in(outcome.best_text) == []
    assert summary.test is not None and summary.test.trained == 0.9


def test_the_defaults_confirm_each_rule_and_keep_the_harmful_one_out(tmp_path: Path):
    """Same world and seed, two epochs: every kind gets its rule, no harmful rule gets in, and the
    useless rules are screened out before validation."""
    outcome = short_run(tmp_path, TrainPolicy(epochs=2, seed=0))
    assert effect(outcome.best_text).ruled == frozenset(CATEGORIES)
    assert harmful_in(outcome.best_text) == [] and effect(outcome.best_text) == effect(perfect_skill())
    assert outcome.summary.cancelled_rollouts == 0  # nothing was cut off in flight
    dropped = [e for r in TrainState.load(tmp_path / "run").history if r.screen for e in r.screen.dropped]
    assert {e.edit.text.removeprefix("- ") for e in dropped} & set(USELESS_RULES)


def test_an_eval_with_repeats_draws_real_samples_and_the_cache_keeps_them(tmp_path: Path):
    files = write_world(tmp_path, seed=4)
    skill = tmp_path / "perfect" / "SKILL.md"
    skill.parent.mkdir()
    skill.write_text(perfect_skill(), encoding="utf-8")
    with ScriptedModelServer(NoisyModels()) as server:
        config = world_config(server.openai_base_url, tmp_path, files, concurrency=1)
        config = dataclasses.replace(config, cache=CacheSettings(mode="read-write", path=tmp_path / "cache.sqlite"))
        request = EvalRequest(skill=skill, suite=files.suite, split="val", repeats=3, out=tmp_path / "eval",
                              assume_yes=True)
        run_eval(config, request, stream=io.StringIO(), show_progress=False)
        first = RunDir(tmp_path / "eval").load_results()
        sent = len(server.calls)
        run_eval(config, dataclasses.replace(request, out=tmp_path / "again"), stream=io.StringIO(), show_progress=False)
        again = RunDir(tmp_path / "again").load_results()
        assert len(server.calls) == sent == 72  # the second eval was served from the cache
    by_task: dict[str, set[bool]] = {}
    for r in first:
        by_task.setdefault(r.task_id, set()).add(bool(r.passed))
    assert sum(len(v) == 2 for v in by_task.values()) == 8  # tasks whose repeats disagree
    assert sorted((r.task_id, r.repeat, r.output) for r in again) == sorted((r.task_id, r.repeat, r.output) for r in first)
