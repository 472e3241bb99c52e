"""Extension through entry points, one registry for every kind (``skillopt_ci.core.registry``): a
tiny installed distribution (a ``.dist-info`` with ``entry_points.txt`` on ``sys.path``) adds a
scorer, a benchmark, a benchmark pack (one folder: importer, scorer, environment) or a model
provider, which the real CLI then uses by name like a built-in. The environment plug-in is shown in
``tests/envs/test_envs.py`` (``two-pass``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import bench_toy
from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.registry import Registry, subclass_of
from skillopt_ci.inputs.config import PROVIDERS
from skillopt_ci.scorers import SCORERS
from skillopt_ci.scorers.base import Scorer

SHOUTING = '''
from dataclasses import dataclass

from skillopt_ci.scorers.base import Score, Scorer


@dataclass(frozen=True)
class ShoutOptions:
    weight: float = 1.0


class ShoutScorer(Scorer):
    """Right when the output, upper-cased, equals the expected answer upper-cased."""

    name = "shout"
    Options = ShoutOptions

    def score(self, output, task):
        right = output.strip().upper() == str(task.expected).strip().upper()
        return Score(self.options.weight if right else 0.0, right, "loud and clear" if right else "say it again")
'''


SIMPLE_LLM = '''
from skillopt_ci.models.openai_backend import OpenAIBackend
from skillopt_ci.models.registry import Provider

# The OpenAI wire under another name, with its own key and server URL variables.
SIMPLE = Provider("SIMPLE_LLM_KEY", "the Simple LLM key", "SIMPLE_LLM_URL", OpenAIBackend,
                  url_what="the Simple LLM server URL")
'''


def install(site: Path, monkeypatch, module: str, source: str | None, group: str, line: str) -> None:
    """A distribution named after ``module`` whose ``entry_points.txt`` declares ``line`` in ``group``."""
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    if source is not None:
        (site / f"{module}.py").write_text(source)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{line}\n")
    monkeypatch.syspath_prepend(str(site))


def test_a_plugin_scorer_is_used_by_name_in_a_suite(tmp_path, monkeypatch, server):
    install(tmp_path / "site", monkeypatch, "shout_plugin", SHOUTING, "skillopt_ci.scorers", "shout = shout_plugin:ShoutScorer")
    assert SCORERS.names()[-1] == "shout" and "shout" in SCORERS
    project = write_project(tmp_path / "p", server.openai_base_url)
    suite = project / "eval_suites/ticket-triage/suite.yaml"
    data = yaml.safe_load(suite.read_text())
    data["scorer"] = {"type": "shout", "weight": 0.5}
    suite.write_text(yaml.safe_dump(data, sort_keys=False))
    assert run_cli("validate", cwd=project).code == 0
    out = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 0, res.err
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["score"] for r in results} <= {0.0, 0.5} and any(r["score"] == 0.5 for r in results)
    assert {r["feedback"] for r in results} <= {"loud and clear", "say it again"}
    # Its options are checked like a built-in's.
    data["scorer"] = {"type": "shout", "volume": 11}
    suite.write_text(yaml.safe_dump(data, sort_keys=False))
    bad = run_cli("validate", cwd=project)
    assert bad.code == 2 and "volume" in bad.err and "weight" in bad.err


def test_a_plugin_benchmark_imports_like_a_built_in(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "toy_bench_dist", None, "skillopt_ci.benchmarks", "toy = helpers.bench_toy")
    manifest = bench_toy.write_manifest(tmp_path / "manifest", {"train": ["t1"], "val": ["v1"], "test": ["e1"]})
    data = bench_toy.write_data(tmp_path / "data", ["t1", "v1", "e1"])
    res = run_cli("bench", "import", "toy", "--from", str(data), "--manifest", str(manifest),
                  "--out", str(tmp_path / "suite"))
    assert res.code == 0, res.err
    assert "imported Toy into" in res.out and "1 train / 1 val / 1 test" in res.out
    unknown = run_cli("bench", "import", "nosuch", "--from", str(data))
    assert unknown.code == 2 and "known: searchqa, docvqa" in unknown.err and unknown.err.rstrip().endswith(
        "officeqa, toy (install the package that provides it (entry-point group skillopt_ci.benchmarks))")


ECHO_PACK = {
    "__init__.py": '''
"""Echo: a benchmark as one folder. Its record names everything lazily."""
from skillopt_ci.benchmarks.pack import Pack

PACK = Pack("echo", "Echo", "--from a folder with rows.json", "echo_pack.importer:read",
            scorers={"echo-match": "echo_pack.scorer:EchoMatch"},
            environments={"echo-chat": "echo_pack.env:EchoChat"})
''',
    "importer.py": '''
import json

from skillopt_ci.benchmarks.draft import SuiteDraft
from skillopt_ci.benchmarks.manifest import pick


def read(source, manifest):
    rows = json.loads((source / "rows.json").read_text())
    picked = pick(manifest, ((r["qid"], r, f"row {i}") for i, r in enumerate(rows)), "rows.json")
    tasks = {split: [{"id": r["qid"], "input": r["q"], "expected": r["a"]} for r in items]
             for split, items in picked.items()}
    return SuiteDraft(name="echo", tasks=tasks, suite={
        "prompt": "{{ input }}", "environment": "echo-chat", "scorer": {"type": "echo-match"}})
''',
    "scorer.py": '''
from skillopt_ci.scorers.base import Score, Scorer


class EchoMatch(Scorer):
    name = "echo-match"

    def score(self, output, task):
        right = output.strip().lower() == str(task.expected).lower()
        return Score(float(right), right, "echoed" if right else f"not {task.expected!r}")
''',
    "env.py": '''
from skillopt_ci.envs import BaseEnvironment, Message, Rollout, Step


class EchoChat(BaseEnvironment):
    name = "echo-chat"

    async def run(self, request, models):
        completion = await models.complete("target", [Message("user", request.prompt)],
                                           sample_index=request.sample_index)
        return Rollout(output=completion.text, steps=(Step("model", text="echo-chat asked once"),),
                       usage=completion.usage)
''',
}


def echo_policy(request) -> str:
    """Right on the train and test questions, wrong on the validation one."""
    question = request.messages[-1]["content"]
    return "wrong" if "v1" in question else question.replace("question", "answer")


def test_a_plugin_pack_adds_its_benchmark_scorer_and_environment(tmp_path, monkeypatch):
    from skillopt_ci.envs.registry import ENVIRONMENTS
    from skillopt_ci.sim.server import ScriptedModelServer

    site = tmp_path / "site"
    (site / "echo_pack").mkdir(parents=True)
    for name, source in ECHO_PACK.items():
        (site / "echo_pack" / name).write_text(source)
    install(site, monkeypatch, "echo_pack_dist", None, "skillopt_ci.benchmarks", "echo = echo_pack:PACK")
    assert SCORERS.names()[-1] == "echo-match" and ENVIRONMENTS.names()[-1] == "echo-chat"
    manifest = bench_toy.write_manifest(tmp_path / "manifest", {"train": ["t1"], "val": ["v1", "v2"], "test": ["e1"]})
    data = bench_toy.write_data(tmp_path / "data", ["t1", "v1", "v2", "e1"])
    project = tmp_path / "project"
    res = run_cli("bench", "import", "echo", "--from", str(data), "--manifest", str(manifest),
                  "--out", str(project / "eval_suites" / "echo"))
    assert res.code == 0, res.err
    assert "imported Echo into" in res.out and "1 train / 2 val / 1 test" in res.out
    (project / "skills" / "echo").mkdir(parents=True)
    (project / "skills" / "echo" / "SKILL.md").write_text("# Echo\n\nAnswer with the answer.\n")
    with ScriptedModelServer(echo_policy) as server:
        (project / "skillopt.yml").write_text(yaml.safe_dump({
            "version": 1, "skills": [{"path": "skills/echo/SKILL.md", "suite": "eval_suites/echo"}],
            "models": {"target": {"provider": "openai-compatible", "model": "sim-echo", "base_url": server.openai_base_url}},
            "cache": {"mode": "off"}}))
        out = tmp_path / "run"
        res = run_cli("eval", "echo", "--split", "val", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 0, res.err
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert {k: (r["score"], r["feedback"]) for k, r in results.items()} == {
        "v1": (0.0, "not 'answer v1'"), "v2": (1.0, "echoed")}
    assert server.call_count == 2
    # The pack's environment ran each rollout (its step, its name in the run's identity).
    assert [s["text"] for s in results["v1"]["trajectory"]] == ["echo-chat asked once"]
    assert json.loads((out / "run.json").read_text())["environment"] == {"type": "echo-chat"}


def test_a_plugin_that_fails_to_import_names_itself(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "broken_plugin", "raise RuntimeError('half-installed')\n",
            "skillopt_ci.scorers", "broken = broken_plugin:Broken")
    with pytest.raises(InputError, match=r"scorer 'broken' \(broken_plugin:Broken\) failed to load: "
                                         r"RuntimeError: half-installed"):
        SCORERS.load("broken")


def test_a_plugin_of_the_wrong_kind_is_refused(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "wrong_plugin", "class NotAScorer:\n    pass\n",
            "skillopt_ci.scorers", "wrong = wrong_plugin:NotAScorer")
    with pytest.raises(InputError, match="scorer 'wrong' is not a skillopt_ci.scorers.base.Scorer subclass"):
        SCORERS.load("wrong")


def test_a_built_in_wins_over_a_plugin_of_the_same_name(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "impostor", SHOUTING, "skillopt_ci.scorers", "exact = impostor:ShoutScorer")
    assert SCORERS.names().count("exact") == 1
    assert SCORERS.load("exact").__module__ == "skillopt_ci.scorers.text"


def test_every_registry_reads_the_same():
    registry = Registry("widget", "skillopt_ci.widgets", {"a": "skillopt_ci.scorers.text:Exact"}, subclass_of(Scorer))
    assert registry.names() == ["a"] and list(registry) == ["a"]
    with pytest.raises(InputError) as info:
        registry.load("b", where="x.yaml")
    assert info.value.message == "unknown widget 'b'; known: a" and info.value.where == "x.yaml"


def simple_llm_project(tmp_path: Path, monkeypatch, base_url: str) -> Path:
    """The example project with its target on the ``simple-llm`` provider, installed as a plug-in,
    and no base_url in skillopt.yml (the provider's own variable gives it)."""
    install(tmp_path / "site", monkeypatch, "simple_llm", SIMPLE_LLM, "skillopt_ci.providers",
            "simple-llm = simple_llm:SIMPLE")
    project = write_project(tmp_path / "p", base_url, target={"provider": "simple-llm"})
    config = yaml.safe_load((project / "skillopt.yml").read_text())
    del config["models"]["target"]["base_url"]
    (project / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return project


def test_a_plugin_provider_is_called_by_name_in_skillopt_yml(tmp_path, monkeypatch, server):
    project = simple_llm_project(tmp_path, monkeypatch, server.openai_base_url)
    assert PROVIDERS.names() == ["openai", "azure-openai", "anthropic", "openai-compatible", "simple-llm"]
    assert run_cli("validate", cwd=project).code == 0
    out = tmp_path / "run"
    env = {"SIMPLE_LLM_KEY": "sk-simple-not-a-key-0000", "SIMPLE_LLM_URL": server.openai_base_url}
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project, env=env)
    assert res.code == 0, res.err
    # The same simulated target as through the built-in openai-compatible provider (tests/test_eval.py).
    assert "ticket-triage" in res.out and "0.458" in res.out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["provider"] == "simple-llm" and summary["n_results"] == 12 and summary["n_errors"] == 0
    assert {call.request.headers["authorization"] for call in server.calls} == {"Bearer sk-simple-not-a-key-0000"}
    assert {call.request.protocol for call in server.calls} == {"openai"}


def test_a_plugin_provider_says_which_of_its_variables_is_missing(tmp_path, monkeypatch, server):
    project = simple_llm_project(tmp_path, monkeypatch, server.openai_base_url)
    no_key = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert no_key.code == 2 and "the Simple LLM key is not set: export SIMPLE_LLM_KEY=…" in no_key.err
    assert "the simple-llm provider reads it from the environment" in no_key.err
    no_url = run_cli("eval", "ticket-triage", "--quiet", cwd=project, env={"SIMPLE_LLM_KEY": "sk-simple-0000"})
    assert no_url.code == 2 and "the Simple LLM server URL is not set: export SIMPLE_LLM_URL=…" in no_url.err
    # It has no batch API and speaks no Responses API, and says so like a built-in without them.
    env = {"SIMPLE_LLM_KEY": "sk-simple-0000", "SIMPLE_LLM_URL": server.openai_base_url}
    batch = run_cli("eval", "ticket-triage", "--batch", "--quiet", cwd=project, env=env)
    assert batch.code == 2 and ("the simple-llm provider has no batch API (--batch works with openai, "
                                "azure-openai, anthropic)") in batch.err
    config = yaml.safe_load((project / "skillopt.yml").read_text())
    config["models"]["target"]["api"] = "responses"
    (project / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    responses = run_cli("validate", cwd=project)
    assert responses.code == 2 and ("the simple-llm provider does not speak it (use it with openai, azure-openai, "
                                    "openai-compatible, or remove api)") in responses.err
    assert server.call_count == 0


def test_an_unknown_provider_is_named_at_its_line_with_the_plugins(tmp_path, monkeypatch, server):
    project = simple_llm_project(tmp_path, monkeypatch, server.openai_base_url)
    text = (project / "skillopt.yml").read_text()
    (project / "skillopt.yml").write_text(text.replace("provider: simple-llm", "provider: simple-lm"))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "provider: simple-llm" in row)
    for command in ("validate", "eval"):
        res = run_cli(command, *(("ticket-triage",) if command == "eval" else ()), cwd=project)
        assert res.code == 2
        assert (f"skillopt.yml:{line}: models.target.provider: unknown provider 'simple-lm'; known: openai, "
                "azure-openai, anthropic, openai-compatible, simple-llm") in res.err


def test_the_config_schema_names_every_built_in_provider():
    from skillopt_ci.inputs.yamlfile import load_schema

    text = load_schema("config.schema.json")["$defs"]["model"]["properties"]["provider"]["description"]
    assert text.split("(", 1)[1].split(")", 1)[0].split(", ") == list(PROVIDERS.builtin)


def test_a_plugin_provider_of_the_wrong_kind_is_refused(tmp_path, monkeypatch):
    install(tmp_path / "site", monkeypatch, "wrong_provider", "SIMPLE = {'key_env': 'X'}\n",
            "skillopt_ci.providers", "wrong = wrong_provider:SIMPLE")
    with pytest.raises(InputError, match="provider 'wrong' is not a skillopt_ci.models.registry.Provider"):
        PROVIDERS.load("wrong")
