"""A batch eval interrupted after its batch was submitted resumes by polling that batch: no second
upload, no second batch, no line answered twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from helpers.batch import KEYS, batch_project, journal, summary
from helpers.cli import run_cli

pytestmark = pytest.mark.slow


def wait_for_submission(run, proc, deadline_s: float = 120.0) -> None:
    """Block until the run directory records a submitted batch (the premise), or fail."""
    deadline = time.monotonic() + deadline_s
    while not any(e["event"] == "submitted" for e in journal(run)):
        if proc.poll() is not None:
            pytest.fail(f"eval --batch ended before submitting: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("eval --batch did not record a submitted batch")
        time.sleep(0.05)


def interrupted_batch_eval(project, run, stop: int) -> list[str]:
    """Start ``eval --batch`` in a subprocess, stop it with ``stop`` once its batch is recorded
    (the batch is held in progress meanwhile); returns the command's arguments."""
    args = ["eval", "ticket-triage", "--batch", "--out", str(run), "--quiet"]
    proc = subprocess.Popen([sys.executable, "-m", "skillopt_ci", *args], cwd=project, env={**os.environ, **KEYS},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for_submission(run, proc)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, err
    return args


@pytest.mark.parametrize(("provider", "stop"), [("openai", signal.SIGKILL), ("anthropic", signal.SIGINT),
                                                ("azure-openai", signal.SIGKILL)])
def test_an_interrupted_batch_eval_resumes_without_paying_again(tmp_path, server, provider, stop):
    project = batch_project(tmp_path / "proj", server, provider)
    run = tmp_path / "run"
    server.batches.delay = 3600  # the batch stays in progress until the test lets it end
    args = interrupted_batch_eval(project, run, stop)
    # The premise: the batch was created once and nothing was answered before the interruption.
    assert server.batches.creates == 1 and server.call_count == 12
    assert [e["event"] for e in journal(run)] == ["submitted"]
    assert (run / "results.jsonl").read_text() == ""
    uploads, polls = server.batches.uploads, server.batches.retrieves

    server.batches.delay = 0
    resumed = run_cli(*args, cwd=project, env=KEYS)
    assert resumed.code == 0, resumed.err
    assert "resuming" in resumed.err
    # Nothing more was paid: the same batch was polled and read, nothing uploaded or created.
    assert server.batches.creates == 1 and server.batches.uploads == uploads
    assert server.call_count == 12 and server.batches.retrieves > polls
    s = summary(run)
    assert s["n_results"] == 12 and s["n_errors"] == 0 and s["pricing"] == "batch"
    assert s["mean"] == pytest.approx(0.4583, abs=1e-3)  # what a synchronous eval of this suite scores
    assert [e["event"] for e in journal(run)] == ["submitted", "collected"]


def test_a_batch_the_provider_no_longer_has_is_submitted_again(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    run = tmp_path / "run"
    server.batches.delay = 3600
    args = interrupted_batch_eval(project, run, signal.SIGKILL)
    server.batches.batches.clear()  # gone: expired, deleted, or another account's key
    server.batches.delay = 0
    resumed = run_cli(*args, cwd=project, env=KEYS)
    assert resumed.code == 0, resumed.err
    assert "cannot be resumed" in resumed.err and "submitting its 12 request(s) again" in resumed.err
    assert server.batches.creates == 2 and summary(run)["n_results"] == 12 and summary(run)["n_errors"] == 0
    assert [e["event"] for e in journal(run)] == ["submitted", "abandoned", "submitted", "collected"]
