"""Secrets never leave the process; model text never becomes a workflow command.

End to end: a provider that echoes the request's Authorization header in its 401 errors (as some
do) must not get the key into any file of the run, the HTML report, the console, the job summary,
the step outputs or anything sent to GitHub.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from fakes.github import FakeGitHub
from helpers.action import PR
from helpers.cli import run_cli
from helpers.paths import REPO
from helpers.project import write_project
from helpers.repo import SKILL, make_repo
from skillopt_ci.core.redact import (
    SECRETS,
    SafeStream,
    defuse_commands,
    redact,
    strip_userinfo,
    write_command,
)
from skillopt_ci.inputs.config import ModelSpec
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.server import Fault
from skillopt_ci.sim.triage import TriagePolicy

KEY = "sk-test-SECRET-0123456789abcdef"
TOKEN = "ghs_TESTTOKEN0123456789abcdefXYZ"
INJECTION = "::add-mask::owned\n  ::error title=x::forged annotation\n##[error]forged log line\n::stop-commands::pwn"


def echo_auth(request):
    """A provider whose 401 error text quotes the Authorization header it received."""
    return Fault.status(401, f"Incorrect API key provided: {request.headers.get('authorization')}")


def every_file(root: Path) -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file()
            and ".git" not in p.parts}


def assert_nowhere(secret: str, *texts: str, files: dict[Path, str] | None = None) -> None:
    for text in texts:
        assert secret not in text
    for path, text in (files or {}).items():
        assert secret not in text, f"{secret!r} leaked into {path}"


# --- the redactor itself -------------------------------------------------------------------


def test_registered_values_and_credential_shapes_are_masked():
    SECRETS.add("a-registered-value-42")
    SECRETS.add("short")  # too short to register: it would blank ordinary words
    text = ("key a-registered-value-42; Authorization: Bearer abc.def-123; x-api-key: 9f8e7d; "
            "sk-proj-AbCdEfGhIjKlMnOpQr and ghp_0123456789abcdefghijABCD; short stays")
    out = redact(text)
    assert "a-registered-value-42" not in out and "abc.def-123" not in out and "9f8e7d" not in out
    assert "sk-proj-AbCdEfGhIjKlMnOpQr" not in out and "ghp_0123456789abcdefghijABCD" not in out
    assert "Authorization: Bearer ***" in out and "short stays" in out
    # Token shapes only as whole words: a task id such as "task-…" is not a key.
    assert redact("task-abcdefghijklmnopqrstuvwxyz") == "task-abcdefghijklmnopqrstuvwxyz"


def test_environment_variables_named_as_credentials_are_registered():
    SECRETS.add_env({"ACME_API_KEY": "acme-key-value-1", "DEPLOY_TOKEN": "deploy-token-value-2",
                     "HOME": "/home/someone-long-path"})
    out = redact("acme-key-value-1 deploy-token-value-2 /home/someone-long-path")
    assert out == "*** *** /home/someone-long-path"


def test_userinfo_of_a_base_url_is_a_secret_and_never_stored():
    url = "https://bob:hunter2-password@llm.example.com/v1"
    SECRETS.add_url(url)
    assert "hunter2-password" not in redact(f"failed: {url}")
    assert strip_userinfo(url) == "https://llm.example.com/v1"
    spec = ModelSpec.from_dict("target", {"provider": "openai-compatible", "model": "m", "base_url": url})
    assert spec.to_dict()["base_url"] == "https://llm.example.com/v1"


def test_no_printed_line_is_a_workflow_command():
    out = defuse_commands(INJECTION + "\nplain text with a :: inside and ok")
    for line in out.splitlines():
        assert not line.lstrip().startswith("::")
        assert "##[" not in line
    assert "forged annotation" in out and "plain text with a :: inside and ok" in out


def test_safe_stream_knows_where_lines_start_and_lets_our_own_commands_through():
    raw = io.StringIO()
    stream = SafeStream(raw)
    stream.write("progress ")
    stream.write("::not-at-line-start::x\n")
    stream.write("::error::from a model\n")
    write_command(stream, "::notice::ours\n")
    lines = raw.getvalue().splitlines()
    assert lines[0] == "progress ::not-at-line-start::x"
    assert not lines[1].startswith("::")
    assert lines[2] == "::notice::ours"
    with pytest.raises(TypeError):
        stream.write(b"")  # click probes for binary streams this way


# --- end to end ----------------------------------------------------------------------------


def test_key_echoed_by_the_provider_reaches_no_file_report_or_console(tmp_path):
    with ScriptedModelServer(TriagePolicy()) as server:
        server.fault_plan = lambda r: echo_auth(r) if r.call_index % 6 == 0 else None
        project = write_project(tmp_path / "p", server.openai_base_url, target={"api_key_env": "SIM_API_KEY"})
        out = project / "run"
        env = {"SIM_API_KEY": KEY}
        res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project, env=env)
        assert server.calls and KEY in server.calls[0].request.headers["authorization"]  # the premise
        html = run_cli("report", str(out), "--html", str(tmp_path / "report.html"), cwd=project, env=env)
    assert res.code == 0, res.err
    assert html.code == 0, html.err
    results = (out / "results.jsonl").read_text()
    assert "Incorrect API key provided: Bearer ***" in results  # the error is kept, the key is not
    assert_nowhere(KEY, res.out, res.err, html.out, files=every_file(tmp_path))


def test_base_url_credentials_are_not_stored_in_the_run(tmp_path):
    with ScriptedModelServer(TriagePolicy()) as server:
        url = server.openai_base_url.replace("http://", "http://alice:s3cret-in-url@")
        project = write_project(tmp_path / "p", url)
        res = run_cli("eval", "ticket-triage", "--out", str(project / "run"), "--quiet", "--json", cwd=project)
    assert res.code == 0, res.err
    manifest = json.loads((project / "run" / "run.json").read_text())
    assert "alice" not in manifest["model"]["base_url"]
    assert_nowhere("s3cret-in-url", res.out, res.err, files=every_file(project / "run"))


class InjectingPolicy(TriagePolicy):
    """Answers with workflow commands whenever the skill carries the marker line."""

    def __call__(self, request):
        if "INJECT" in request.system:
            return INJECTION
        return super().__call__(request)


def test_gate_markdown_on_stdout_has_no_workflow_command(tmp_path):
    with ScriptedModelServer(InjectingPolicy()) as server:
        root = make_repo(tmp_path, server.openai_base_url)
        (root / SKILL).write_text((root / SKILL).read_text() + "\nINJECT\n")
        res = run_cli("gate", "--base", "main", "--markdown", "--quiet", cwd=root)
    assert res.code == 1, res.err
    assert "forged annotation" in res.out  # the model's text is shown, as text
    for line in (res.out + res.err).splitlines():
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line


def test_action_sends_no_key_or_token_to_github_or_the_runner_files(tmp_path):
    with FakeGitHub(owner="octo", repo="skills", token=TOKEN) as fake, ScriptedModelServer(TriagePolicy()) as server:
        server.fault_plan = echo_auth
        text = (REPO / SKILL).read_text()
        pr = PR(tmp_path, fake, server, {SKILL: text + "\n- Be brief.\n"}, target={"api_key_env": "SIM_API_KEY"})
        res = pr.run(SIM_API_KEY=KEY)
        bodies = json.dumps([r.body for r in fake.writes()])
        comments = json.dumps(pr.comments())
    assert res.code == 3, res.err
    # The error is reported, redacted before it was escaped (``\*\*\*`` in markdown reads ``***``).
    assert "could not run" in comments and "***" in comments.replace("\\\\*", "*")
    files = every_file(tmp_path)
    for secret in (KEY, TOKEN):
        assert_nowhere(secret, res.out, res.err, bodies, comments, files=files)


def test_training_writes_no_key_when_the_provider_echoes_it(tmp_path):
    from helpers.training import train_project
    from skillopt_ci.sim.sim_models import SimulatedModels

    with ScriptedModelServer(SimulatedModels()) as server:
        server.fault_plan = lambda r: echo_auth(r) if r.call_index % 7 == 3 else None
        project = train_project(tmp_path / "p", server.openai_base_url, train={"epochs": 1},
                                target={"api_key_env": "SIM_API_KEY"})
        data = yaml.safe_load((project / "skillopt.yml").read_text())
        data["models"]["optimizer"]["api_key_env"] = "SIM_API_KEY"
        (project / "skillopt.yml").write_text(yaml.safe_dump(data))
        res = run_cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "run"), cwd=project,
                      env={"SIM_API_KEY": KEY})
        echoed = [c for c in server.calls if c.status == 401]
    assert echoed, "the premise: the provider echoed the key at least once"
    assert "Traceback" not in res.err
    assert (tmp_path / "run" / "summary.json").is_file(), res.err
    assert "Bearer ***" in "".join(every_file(tmp_path / "run").values())  # the errors were recorded, redacted
    assert_nowhere(KEY, res.out, res.err, files=every_file(tmp_path))
