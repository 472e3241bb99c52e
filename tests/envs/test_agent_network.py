"""A hostile task against the real agent CLIs: the agent runs a command that tries to reach a
service on the host's 127.0.0.1 and on the host's outside address. Under bubblewrap the CLI has
no network at all (it reaches the model only through the in-sandbox relay and the forwarder), so
both connections fail, the service sees nothing, and the rollout still completes and is scored.
Also the forwarder's per-rollout call cap (``max_model_calls``) against both real CLIs."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import threading
from pathlib import Path

import pytest
import yaml

from helpers.agent_bins import agent_bin
from helpers.agents import AgentScript
from helpers.claude_project import FAKE_KEY, claude_project
from helpers.cli import run_cli
from helpers.codex_project import KEY, codex_project
from skillopt_ci.models.forwarder import shared_forwarder
from skillopt_ci.sandbox.isolation import isolation
from skillopt_ci.sim import ScriptedModelServer

PROBE = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        print("probe", target, "CONNECTED")
    except OSError as exc:
        print("probe", target, "blocked:", exc.strerror or exc)
"""


class Listener:
    """A TCP service on every address of the host (a port of its own), counting who connects."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.peers: list[tuple[str, int]] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                client, peer = self.sock.accept()
            except OSError:
                return
            self.peers.append(peer)
            client.close()

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        self._thread.join(timeout=5)


def outside_address() -> str | None:
    """This host's address on its default route (a UDP ``connect`` sends nothing), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def probe_command(listener: Listener) -> tuple[str, list[str]]:
    """The agent's command and the targets it tries: the service on 127.0.0.1 and on the outside
    address, and the forwarder's own TCP port on the host (past the relay)."""
    forwarder_port = shared_forwarder().url.rsplit(":", 1)[1]
    targets = [f"127.0.0.1:{listener.port}", f"127.0.0.1:{forwarder_port}"]
    outside = outside_address()
    if outside is not None:
        targets.append(f"{outside}:{listener.port}")
    command = " ".join(shlex.quote(part) for part in (sys.executable, "-c", PROBE, *targets))
    return command, targets


@pytest.fixture
def bubblewrap():
    if isolation() != "bwrap":
        pytest.skip("bubblewrap cannot isolate commands on this machine")


def tool_output(result: dict, name: str) -> str:
    return "\n".join(s.get("text", "") for s in result["trajectory"] if s["kind"] == "tool_result" and s["name"] == name)


def assert_every_probe_blocked(results: list[dict], tool: str, targets: list[str], listener: Listener) -> None:
    for result in results:
        output = tool_output(result, tool)
        assert all(f"probe {target} blocked:" in output for target in targets), output
        assert "CONNECTED" not in output
    assert listener.peers == []  # the host's service never saw a connection


def test_codex_cannot_reach_the_hosts_services_and_the_rollout_is_still_scored(tmp_path, bubblewrap):
    with Listener() as listener:
        command, targets = probe_command(listener)
        with ScriptedModelServer(AgentScript(command=command)) as server:
            root = codex_project(tmp_path / "p", server.openai_base_url, agent_bin("codex"))
            out = tmp_path / "run"
            res = run_cli("eval", "greeter", "--out", str(out), "--quiet", cwd=root, env={"OPENAI_API_KEY": KEY})
            results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        assert_every_probe_blocked(results, "exec_command", targets, listener)
    # Every rollout went on past the blocked command, wrote its answer and was scored by verify
    # (the plain skill states no house style: 0 for each, and a gate result, not an error).
    assert res.code == 0, res.out + res.err
    assert len(results) == 6 and all(r["error"] is None and r["score"] == 0.0 for r in results), results
    assert all(r["files"] == ["answer.txt"] for r in results)
    assert "not in the house style" in results[0]["feedback"]


def test_claude_code_cannot_reach_the_hosts_services_and_the_rollout_is_still_scored(tmp_path, bubblewrap):
    with Listener() as listener:
        command, targets = probe_command(listener)
        with ScriptedModelServer(AgentScript(command=command)) as server:
            project = claude_project(tmp_path / "p", server, str(agent_bin("claude")))
            out = tmp_path / "run"
            res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=project,
                          env={"ANTHROPIC_API_KEY": FAKE_KEY})
            results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        assert_every_probe_blocked(results, "Bash", targets, listener)
    assert res.code == 0, res.out + res.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean"] == 1.0 and summary["n_errors"] == 0
    assert (out / "files/v1/0/answer.txt").read_text().strip() == "GOOD MORNING!"


# -- the forwarder's per-rollout call cap ------------------------------------------------------

def set_environment(suite_file: Path, **options) -> None:
    suite = yaml.safe_load(suite_file.read_text())
    suite["environment"].update(options)
    suite_file.write_text(yaml.safe_dump(suite, sort_keys=False))


def capped_results(out: Path) -> list[dict]:
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert results and all(r["error"]["kind"] == "max_turns" for r in results), results
    return results


def test_codex_past_max_model_calls_is_refused_at_the_forwarder_and_ends_as_max_turns(tmp_path):
    with ScriptedModelServer(AgentScript()) as server:
        root = codex_project(tmp_path / "p", server.openai_base_url, agent_bin("codex"))
        set_environment(root / "eval_suites/greeter/suite.yaml", max_model_calls=2)
        out = tmp_path / "run"
        res = run_cli("eval", "greeter", "--out", str(out), "--quiet", cwd=root, env={"OPENAI_API_KEY": KEY})
        results = capped_results(out)
        # The script needs 4 calls per rollout: only 2 of each reached the provider.
        assert server.call_count == 2 * len(results)
    assert res.code == 3, res.out + res.err  # every rollout errored: nothing measured
    message = results[0]["error"]["message"]
    assert message == "codex was stopped: it asked for more than 2 model calls (max_model_calls = 2)"
    assert any("429" in s.get("text", "") for s in results[0]["trajectory"] if s["kind"] == "error")


def test_claude_code_past_max_model_calls_gets_the_forwarders_refusal_and_ends_as_max_turns(tmp_path):
    with ScriptedModelServer(AgentScript()) as server:
        project = claude_project(tmp_path / "p", server, str(agent_bin("claude")), max_model_calls=2)
        out = tmp_path / "run"
        res = run_cli("eval", "shout", "--out", str(out), "--quiet", cwd=project, env={"ANTHROPIC_API_KEY": FAKE_KEY})
        results = capped_results(out)
        assert server.call_count == 2 * len(results)
    assert res.code == 3, res.out + res.err
    assert results[0]["error"]["message"] == ("claude was stopped: it asked for more than 2 model calls "
                                              "(max_model_calls = 2)")
    # The CLI itself reported the forwarder's answer, which names the cap.
    errors = [s["text"] for s in results[0]["trajectory"] if s["kind"] == "error"]
    assert any("429" in text and "has made its 2 model calls" in text for text in errors), errors
