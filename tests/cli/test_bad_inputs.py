"""A catalogue of bad inputs: each case is a command line, a mutation of a working project, the
exit code a user should get and a phrase the first error line must contain.

Every case also asserts no traceback and no secret (the provider keys and a GitHub token set in
the environment) in anything printed or in any file under the test's directory. The project's
model endpoint is unreachable, so a bad input that slipped through would end in exit 3, not 2.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.torture import SECRET_ENV, assert_no_secret, assert_no_traceback, first_error_line

UNREACHABLE = "http://127.0.0.1:9/v1"
SUITE = "eval_suites/ticket-triage"
SKILL = "skills/ticket-triage/SKILL.md"

Mutation = Callable[[Path], None]


# --- mutations -------------------------------------------------------------------------------


def config(dotted: str, value: object) -> Mutation:
    """Set ``dotted`` (``a.b.0.c``) in skillopt.yml."""

    def mutate(root: Path) -> None:
        data = yaml.safe_load((root / "skillopt.yml").read_text())
        *parents, last = dotted.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        (root / "skillopt.yml").write_text(yaml.safe_dump(data, sort_keys=False))

    return mutate


def write(path: str, text: str) -> Mutation:
    def mutate(root: Path) -> None:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)

    return mutate


def append(path: str, text: str) -> Mutation:
    def mutate(root: Path) -> None:
        with open(root / path, "a") as fh:
            fh.write(text)

    return mutate


def edit(path: str, old: str, new: str) -> Mutation:
    def mutate(root: Path) -> None:
        text = (root / path).read_text()
        assert old in text, f"{old!r} not in {path}"
        (root / path).write_text(text.replace(old, new, 1))

    return mutate


def remove(path: str) -> Mutation:
    def mutate(root: Path) -> None:
        target = root / path
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return mutate


def rename_skill_folder(new: str) -> Mutation:
    """Move the skill to folder ``new``, its name then coming from the folder alone."""

    def mutate(root: Path) -> None:
        edit(SKILL, "name: ticket-triage\n", "")(root)
        (root / "skills/ticket-triage").rename(root / "skills" / new)
        config("skills.0.path", f"skills/{new}/SKILL.md")(root)

    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(root: Path) -> None:
        for m in mutations:
            m(root)

    return mutate


def none(root: Path) -> None:
    pass


# --- the catalogue ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    mutate: Mutation
    code: int
    phrase: str  # in the first error line ("" when the expected exit code is 0)
    waits_for: int | None = None  # the issue item whose fix this case needs (xfail until merged)


def case(id: str, args: str, mutate: Mutation, code: int, phrase: str, waits_for: int | None = None):
    return Case(id, tuple(args.split()), mutate, code, phrase, waits_for)


LONG = "x" * 300
CASES = [
    # skillopt.yml
    case("config-version", "validate", config("version", 2), 2, "version"),
    case("config-unknown-key", "validate", config("modells", {}), 2, "modells"),
    case("config-provider", "validate", config("models.target.provider", "gpt"), 2, "models.target.provider"),
    case("config-empty-model", "eval ticket-triage", config("models.target.model", ""), 2, "models.target.model"),
    case("config-timeout-zero", "validate", config("models.target.timeout", 0), 2, "models.target.timeout"),
    case("config-max-retries", "validate", config("models.target.max_retries", -1), 2, "max_retries"),
    case("config-max-retry-wait", "eval ticket-triage", config("models.target.max_retry_wait", "soon"), 2,
         "max_retry_wait"),
    case("config-base-url", "validate", config("models.target.base_url", "ftp://example"), 2, "base_url"),
    case("config-api-key-env", "validate", config("models.target.api_key_env", "1 BAD"), 2, "api_key_env"),
    case("config-concurrency", "validate", config("concurrency", 0), 2, "concurrency"),
    case("config-cache-mode", "validate", config("cache.mode", "sometimes"), 2, "cache.mode"),
    case("config-cache-off-unquoted", "validate", edit("skillopt.yml", "mode: read-write", "mode: off"), 0, ""),
    case("config-budget", "validate", config("budgets", {"max_dollars": -5}), 2, "budgets.max_dollars"),
    case("config-price", "validate", config("pricing.sim-triage-1.input", -1), 2, "pricing"),
    case("config-skill-missing", "validate", config("skills.0.path", "skills/nope/SKILL.md"), 2, "skills/nope"),
    case("config-suite-missing", "validate", config("skills.0.suite", "eval_suites/nope"), 2, "eval_suites/nope"),
    case("config-not-yaml", "validate", write("skillopt.yml", "version: 1\nmodels: {target: [\n"), 2,
         "skillopt.yml"),
    case("config-a-list", "validate", write("skillopt.yml", "- version: 1\n"), 2, "skillopt.yml"),
    case("config-empty", "eval ticket-triage", write("skillopt.yml", ""), 2, "skillopt.yml"),
    case("config-is-a-directory", "validate", both(remove("skillopt.yml"), write("skillopt.yml/x", "")), 2,
         "is a directory"),
    case("config-flag-missing-file", "--config nope.yml validate", none, 2, "nope.yml"),
    case("config-cache-path-unwritable", "eval ticket-triage", config("cache.path", "skillopt.yml/cache.sqlite"),
         2, "cache"),
    # names that end up in branch names, file names and run directories
    case("name-front-matter-double-dot", "validate", edit(SKILL, "name: ticket-triage", "name: rules..x"), 2,
         "rules..x"),
    case("name-config-double-dot", "validate", config("skills.0.name", "rules..x"), 2, "rules..x"),
    case("name-config-lock-suffix", "validate", config("skills.0.name", "rules.lock"), 2, "rules.lock"),
    case("name-config-300-chars", "validate", config("skills.0.name", LONG), 2, "name"),
    case("name-folder-with-space", "validate", rename_skill_folder("my skill"), 2, "my skill"),
    case("name-folder-shell-chars", "validate", rename_skill_folder("x$(id);|&*?"), 2, "x$(id)"),
    # suites
    case("suite-yaml-missing", "validate", remove(f"{SUITE}/suite.yaml"), 2, "suite.yaml"),
    case("suite-unknown-environment", "validate", edit(f"{SUITE}/suite.yaml", "environment: chat",
                                                        "environment: spaceship"), 2, "spaceship"),
    case("suite-unknown-scorer", "validate", edit(f"{SUITE}/suite.yaml", "type: python", "type: vibes"), 2,
         "vibes"),
    case("suite-scorer-function-missing", "eval ticket-triage", edit(f"{SUITE}/suite.yaml", "scorer:score",
                                                                    "scorer:nope"), 2, "nope"),
    case("suite-scorer-syntax-error", "validate", write(f"{SUITE}/scorer.py", "def score(:\n"), 2, "scorer.py"),
    case("suite-repeats-zero", "validate", edit(f"{SUITE}/suite.yaml", "repeats: 1", "repeats: 0"), 2,
         "repeats"),
    case("suite-bad-json-line", "eval ticket-triage", append(f"{SUITE}/val.jsonl", "{not json\n"), 2,
         "val.jsonl:13"),
    case("suite-duplicate-id", "validate", append(f"{SUITE}/val.jsonl", '{"id": "val-01", "input": "x", '
                                                   '"expected": "bug/P2", "metadata": {"plan": "Pro"}}\n'),
         2, "val-01"),
    case("suite-task-without-id", "validate", append(f"{SUITE}/val.jsonl", '{"input": "x", "expected": "bug/P2"}\n'),
         2, "val.jsonl:13"),
    case("suite-leak-between-splits", "validate", append(f"{SUITE}/train.jsonl", '{"id": "val-01", "input": "x", '
                                                          '"expected": "bug/P2", "metadata": {"plan": "Pro"}}\n'),
         2, "val-01"),
    case("suite-empty-split", "validate", write(f"{SUITE}/val.jsonl", ""), 2, "val"),
    case("suite-empty-split-eval", "eval ticket-triage", write(f"{SUITE}/val.jsonl", ""), 2, "val"),
    # skills
    case("skill-file-missing", "eval ticket-triage", remove(SKILL), 2, "SKILL.md"),
    case("skill-bad-front-matter", "validate", edit(SKILL, "name: ticket-triage", "name: [unclosed"), 2,
         "SKILL.md"),
    case("skill-long-description-is-a-warning", "validate",
         edit(SKILL, "description: ", "description: " + "d" * 1100 + " "), 0, ""),
    case("skill-name-differs-from-folder-is-a-warning", "validate",
         edit(SKILL, "name: ticket-triage", "name: triage-tickets"), 0, ""),
    # command lines
    case("eval-unknown-skill", "eval nope", none, 2, "nope"),
    case("eval-unknown-split", "eval ticket-triage --split nope", none, 2, "nope"),
    case("eval-shard-zero", "eval ticket-triage --shard 0/3", none, 2, "0/3"),
    case("eval-shard-past-n", "eval ticket-triage --shard 4/3", none, 2, "4/3"),
    case("eval-shard-not-a-fraction", "eval ticket-triage --shard half", none, 2, "half"),
    case("eval-repeats-zero", "eval ticket-triage --repeats 0", none, 2, "--repeats"),
    case("eval-threshold-above-one", "eval ticket-triage --threshold 2", none, 2, "--threshold"),
    case("eval-model-without-provider", "eval ticket-triage --model gpt-4o", none, 2, "gpt-4o"),
    case("eval-model-without-key", "eval ticket-triage --model azure-openai:my-deployment", none, 2,
         "AZURE_OPENAI_API_KEY"),
    case("eval-out-is-a-file", "eval ticket-triage --out skillopt.yml", none, 2, "skillopt.yml"),
    case("eval-out-not-a-run-dir", "eval ticket-triage --out skills", none, 2, "not a run directory"),
    case("compare-suite-missing", "compare skills/ticket-triage/SKILL.md skills/ticket-triage/SKILL.md "
         "--suite eval_suites/nope", none, 2, "eval_suites/nope"),
    case("compare-skill-missing", f"compare nope.md {SKILL} --suite {SUITE}", none, 2, "nope.md"),
    case("train-unknown-skill", "train --skill nope", none, 2, "nope"),
    case("gate-outside-git", "gate", none, 2, "not a git repository"),
    case("gate-outside-git-with-base", "gate --base HEAD~1", none, 2, "not a git repository"),
    case("report-not-a-run", "report skills --html out.html", none, 2, "skills"),
    case("merge-not-a-run", "merge skills --out merged", none, 2, "skills"),
    case("unknown-command", "evaluate ticket-triage", none, 2, "evaluate"),
]


def evaluated(*runs: str) -> Mutation:
    """Real eval runs (``out`` or ``out@i/n`` for a shard) against the project's live server."""

    def mutate(root: Path) -> None:
        for spec in runs:
            out, _, shard = spec.partition("@")
            args = ["eval", "ticket-triage", "--out", out, "--quiet"] + (["--shard", shard] if shard else [])
            res = run_cli(*args, cwd=root, env=SECRET_ENV)
            assert res.code == 0, res.err

    return mutate


# Cases that start from finished runs (the project's model is a live scripted server).
RUN_CASES = [
    case("merge-duplicate-shard", "merge s1 s1 --out merged", evaluated("s1@1/3"), 2, "shard"),
    case("merge-missing-shard", "merge s1 s2 --out merged", evaluated("s1@1/3", "s2@2/3"), 3, "not merged"),
    case("merge-shards-of-different-splits", "merge s1 s2 --out merged",
         both(evaluated("s1@1/2"),
              lambda root: run_cli("eval", "ticket-triage", "--split", "test", "--shard", "2/2", "--out", "s2",
                                   "--quiet", cwd=root, env=SECRET_ENV)), 2, "s2"),
    case("report-html-is-a-directory", "report run --html skills", evaluated("run"), 2, "skills"),
    case("report-html-unwritable", "report run --html skillopt.yml/report.html", evaluated("run"), 2,
         "skillopt.yml/report.html"),
    case("eval-resume-a-different-run", "eval ticket-triage --split test --out run", evaluated("run"), 2,
         "different run"),
    case("eval-resume-corrupt-manifest", "eval ticket-triage --out run",
         both(evaluated("run"), write("run/run.json", "{not json")), 2, "run.json"),
    case("eval-resume-corrupt-results", "eval ticket-triage --out run",
         both(evaluated("run"), edit("run/results.jsonl", '{"', "{oops")), 2, "results.jsonl:1"),
]


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.xfail(reason=f"item {c.waits_for}", strict=True)) if c.waits_for else c
     for c in RUN_CASES],
    ids=lambda c: c.id,
)
def test_bad_input_on_finished_runs(case, tmp_path, server):
    project = write_project(tmp_path / "proj", server.openai_base_url)
    case.mutate(project)
    res = run_cli(*case.args, cwd=project, env=SECRET_ENV)
    assert_no_traceback(res.out, res.err)
    assert_no_secret(tmp_path, res.out, res.err)
    assert res.code == case.code, res.err
    assert case.phrase in first_error_line(res.err), res.err


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.xfail(reason=f"item {c.waits_for}", strict=True)) if c.waits_for else c
     for c in CASES],
    ids=lambda c: c.id,
)
def test_bad_input(case, tmp_path):
    project = write_project(tmp_path / "proj", UNREACHABLE)
    case.mutate(project)
    res = run_cli(*case.args, cwd=project, env=SECRET_ENV)
    assert_no_traceback(res.out, res.err)
    assert_no_secret(tmp_path, res.out, res.err)
    assert res.code == case.code, res.err
    if case.code:
        line = first_error_line(res.err)
        assert case.phrase in line, res.err


def test_the_catalogue_is_large_and_its_ids_unique():
    every = CASES + RUN_CASES
    assert len(every) >= 40
    assert len({c.id for c in every}) == len(every)
