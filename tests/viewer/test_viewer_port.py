"""``view --port``: the viewer listens on the port asked for, and a busy port is exit 2 naming it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_view_listens_on_the_port_asked_for_and_a_busy_port_is_reported(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "skillopt_ci", "view", str(tmp_path), "--port", str(port)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    viewer = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        first = viewer.stderr.readline()
        assert f"skillopt-ci viewer on http://127.0.0.1:{port}/" in first, first
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as page:
            assert page.status == 200
        second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in second.stderr
    finally:
        viewer.kill()
        viewer.wait(timeout=30)
