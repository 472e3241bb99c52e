"""The sandbox as a boundary: each attack of a hostile task or model, through the real sandbox.

Every test runs real commands under the real bubblewrap (skipped, with the reason, where it
cannot run here) and asserts what an attacker would have got: a file outside the workspace
changed, a token read, a process still alive, a workspace of another rollout rewritten. The
last tests force "no isolation" on this machine (``SKILLOPT_SANDBOX=none``) to show what is
refused there and what the opt-in allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from fakes.tool_model import ScriptedCaller, call, reply, turn
from helpers.cli import run_cli
from helpers.tools_env import KEYS, PROTOCOLS, make_suite, needs_bwrap, rollout, tools_project
from skillopt_ci.core.errors import EXIT_RUNTIME
from skillopt_ci.sandbox import Binds, SandboxError, SandboxLimits, Workspace, policy
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.protocols import ScriptedReply, ScriptedToolCall

TOKEN = "ghs_boundaryTestToken0123456789abcdefXYZ"
isolation_module = importlib.import_module("skillopt_ci.sandbox.isolation")


@pytest.fixture
def ws():
    workspace = Workspace.create()
    yield workspace
    workspace.cleanup()


def run(workspace: Workspace, script: str, **limits) -> tuple[str, object]:
    result = asyncio.run(workspace.run(["sh", "-c", script], limits=SandboxLimits(**limits)))
    return result.stdout + result.stderr, result


def alive_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


# --- files outside the workspace --------------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("network", [False, True], ids=["isolated", "network"])
def test_a_command_cannot_write_outside_its_workspace_nor_the_runners_env_file(tmp_path, monkeypatch, ws, network):
    runner = tmp_path / "runner" / "file_commands"
    runner.mkdir(parents=True)
    env_file = runner / "set_env_1234"
    env_file.write_text("")
    monkeypatch.setenv("GITHUB_ENV", str(env_file))
    system_probe = Path(sys.prefix) / f"skillopt-probe-{uuid.uuid4().hex}"
    try:
        text, result = run(ws, f"echo 'LD_PRELOAD=/tmp/evil.so' >> {env_file}; touch {system_probe}; "
                               f"echo hi > {tmp_path}/outside.txt; echo inside > mine.txt", network=network)
        assert env_file.read_text() == ""  # later steps of the job would run with it
        assert not system_probe.exists() and not (tmp_path / "outside.txt").exists()
        assert ws.read_text("mine.txt") == "inside\n"  # the premise: the command ran and can write home
    finally:
        system_probe.unlink(missing_ok=True)


@needs_bwrap
def test_the_checkout_and_its_git_config_token_are_hidden(tmp_path, monkeypatch, ws):
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "http.https://github.com/.extraheader",
                    f"AUTHORIZATION: basic {TOKEN}"], check=True)
    (repo / "skillopt.yml").write_text("version: 1 # CONFIG-CONTENT\n")
    assert TOKEN in (repo / ".git/config").read_text()  # the premise: the token is on disk
    monkeypatch.chdir(repo)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(repo))
    text, result = run(ws, f"cat {repo}/.git/config; ls -a {repo}; cat {repo}/skillopt.yml; git -C {repo} config -l")
    assert TOKEN not in text and "extraheader" not in text and "CONFIG-CONTENT" not in text
    assert ".git" not in text.split()  # ls -a shows an empty folder


@needs_bwrap
def test_the_runners_files_and_the_home_folder_are_hidden(tmp_path, monkeypatch, ws):
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    (temp / "secret.txt").write_text(TOKEN)
    (temp / "listed-only-outside").write_text("")
    event = tmp_path / "workflow" / "event.json"
    event.parent.mkdir()
    event.write_text(json.dumps({"token": TOKEN}))
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine github.com password {TOKEN}")
    monkeypatch.setenv("RUNNER_TEMP", str(temp))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("HOME", str(home))
    text, _ = run(ws, f"cat {temp}/secret.txt {event} {home}/.netrc; ls {temp} {home} /run")
    assert TOKEN not in text and "listed-only-outside" not in text


# --- processes --------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("network", [False, True], ids=["isolated", "network"])
@pytest.mark.parametrize("ending", ["exit", "time_limit"])
def test_a_setsid_or_double_forked_daemon_never_outlives_its_command(ws, network, ending):
    marker = f"skillopt-daemon-{uuid.uuid4().hex}"
    wall = 3 if ending == "time_limit" else 30
    delay = wall + 1 if ending == "time_limit" else 2  # the daemons write after the command ended
    late = ws.path / "late.txt"
    daemon = (f"import os, sys, time\nif os.fork(): sys.exit(0)\nos.setsid()\nif os.fork(): sys.exit(0)\n"
              f"open('started', 'w').write('1')\ntime.sleep({delay})\nopen({str(late)!r}, 'w').write('late')\n")
    script = (f"setsid {sys.executable} -c 'import time; time.sleep({delay}); open(\"late.txt\", \"w\")' {marker} & "
              f"{sys.executable} -c \"$0\" {marker}; while [ ! -s started ]; do sleep 0.05; done; echo up")
    if ending == "time_limit":
        script += "; sleep 300"
    limits = SandboxLimits(network=network, wall_s=wall)
    result = asyncio.run(ws.run(["sh", "-c", script, daemon], limits=limits))
    try:
        assert result.stdout == "up\n"  # the premise: the daemon started
        assert result.timed_out == (ending == "time_limit")
        assert alive_with(marker) == []
        time.sleep(delay + 1)  # past the moment the daemons would have written
        assert not late.exists()
    finally:
        kill_all(alive_with(marker))


@needs_bwrap
@pytest.mark.parametrize("network", [False, True], ids=["isolated", "network"])
def test_a_command_cannot_read_the_environment_of_its_parent_or_of_skillopt(network):
    # /proc/<pid>/environ shows what a process was started with: so the key must be in the
    # environment of a real parent process, here a skillopt process started with it
    key = "sk-boundary-parent-key-000000"
    script = "cat /proc/$PPID/environ /proc/1/environ; for f in /proc/[0-9]*/environ; do cat $f; done; echo END"
    driver = textwrap.dedent(f"""
        import asyncio, sys
        from skillopt_ci.sandbox import SandboxLimits, Workspace
        with Workspace.create() as ws:
            result = asyncio.run(ws.run(["sh", "-c", {script!r}], limits=SandboxLimits(network={network})))
        sys.stdout.write(result.stdout + result.stderr)
    """)
    done = subprocess.run([sys.executable, "-c", driver], env={**os.environ, "OPENAI_API_KEY": key},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "END" in done.stdout, done.stderr  # the premise: it ran
    assert key not in done.stdout


def start_sleepers(ws: Workspace, marker: str, processes: int) -> tuple[int, object]:
    """Try to start 300 sleepers (bounded, so that without a limit it does no harm)."""
    code = textwrap.dedent(f"""
        import subprocess, sys
        started = 0
        try:
            for _ in range(300):
                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "{marker}"])
                started += 1
        except OSError as exc:
            print("refused:", exc.strerror)
        print("started", started)
    """)
    result = asyncio.run(ws.run([sys.executable, "-c", code], limits=SandboxLimits(processes=processes, wall_s=30)))
    return int(result.stdout.split("started")[1].split()[0]), result


@needs_bwrap
def test_a_process_count_limit_stops_a_fork_bomb_and_leaves_nothing(ws):
    marker = f"skillopt-bomb-{uuid.uuid4().hex}"
    try:
        started, result = start_sleepers(ws, marker, 32)
        assert "refused: Resource temporarily unavailable" in result.stdout
        assert started < 32
        assert alive_with(marker) == []
    finally:
        kill_all(alive_with(marker))


@needs_bwrap
def test_a_real_fork_bomb_ends_as_a_result(ws):
    marker = f"skillopt-bomb-{uuid.uuid4().hex}"
    if start_sleepers(ws, marker, 16)[0] >= 16:  # the machine must survive the test
        pytest.skip("the process-count limit does not hold here")
    bomb = f"b() {{ b | b & }}; b; sleep 2 # {marker}"
    result = asyncio.run(ws.run(["bash", "-c", bomb], limits=SandboxLimits(processes=64, wall_s=10)))
    try:
        assert "retry: Resource temporarily unavailable" in result.stderr or "fork:" in result.stderr
        assert alive_with(marker) == []
    finally:
        kill_all(alive_with(marker))


# --- other rollouts, disk, network ------------------------------------------------------------


@needs_bwrap
def test_one_rollout_cannot_read_or_rewrite_another_rollouts_workspace(ws):
    other = Workspace.create()
    try:
        other.write_text("answer.txt", "ANSWER-42\n")
        text, _ = run(ws, f"cat {other.path}/answer.txt; echo 0 > {other.path}/answer.txt; ls /tmp")
        assert other.read_text("answer.txt") == "ANSWER-42\n"
        assert "ANSWER-42" not in text and text.count(other.path.name) == 2  # only in the two errors
    finally:
        other.cleanup()


@needs_bwrap
def test_the_disk_quota_stops_a_500_mb_write_and_says_so(ws):
    code = ("import os\nchunk = b'x' * (10 << 20)\nfor i in range(50):\n"
            "    with open(f'fill{i}.bin', 'wb') as f:\n        f.write(chunk); f.flush(); os.fsync(f.fileno())\n"
            "print('wrote 500 MB')")
    result = asyncio.run(ws.run([sys.executable, "-c", code], limits=SandboxLimits(disk_mb=40, wall_s=120)))
    held = sum(p.stat().st_size for p in ws.path.glob("fill*.bin"))
    assert result.disk_exceeded and "wrote 500 MB" not in result.stdout
    assert result.render(300).startswith("killed: disk quota 40 MB")
    assert held < 500 << 20


@needs_bwrap
def test_no_network_not_even_a_unix_socket_of_the_host(tmp_path, ws):
    path = tmp_path / "service.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    tcp = socket.create_server(("127.0.0.1", 0))
    port = tcp.getsockname()[1]
    accepted: list[str] = []

    def serve(sock: socket.socket) -> None:
        sock.settimeout(20)
        try:
            conn, _ = sock.accept()
            accepted.append("yes")
            conn.close()
        except OSError:
            pass

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in (server, tcp)]
    for t in threads:
        t.start()
    code = textwrap.dedent(f"""
        import socket
        for family, address in ((socket.AF_UNIX, {str(path)!r}), (socket.AF_INET, ("127.0.0.1", {port}))):
            try:
                s = socket.socket(family); s.settimeout(3); s.connect(address); print("connected", family)
            except OSError as exc:
                print("refused", family, exc)
    """)
    result = asyncio.run(ws.run([sys.executable, "-c", code]))
    server.close()
    tcp.close()
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("refused") for line in lines), result.stdout
    assert accepted == []


# --- the binds API ----------------------------------------------------------------------------


@needs_bwrap
def test_binds_add_a_read_only_and_a_read_write_folder_but_never_a_hidden_one(tmp_path, ws, monkeypatch):
    tools, sock = tmp_path / "tools", tmp_path / "sock"
    tools.mkdir(mode=0o755)
    sock.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    (tools / "tool.txt").write_text("a tool\n")
    binds = Binds.of(read_only=[tools], read_write=[sock])
    script = f"cat {tools}/tool.txt; echo x > {tools}/new.txt; echo y > {sock}/new.txt"
    result = asyncio.run(ws.run(["sh", "-c", script], binds=binds))
    assert result.stdout == "a tool\n" and "Read-only file system" in result.stderr
    assert not (tools / "new.txt").exists() and (sock / "new.txt").read_text() == "y\n"
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(SandboxError, match="would expose"):
        asyncio.run(ws.run(["true"], binds=Binds.of(read_only=[tmp_path])))


# --- through the tools environment ------------------------------------------------------------


@needs_bwrap
def test_a_tools_rollout_cannot_read_the_token_or_poison_the_job(tmp_path, monkeypatch):
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".git/config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {TOKEN}\n")
    env_file = tmp_path / "runner" / "set_env"
    env_file.parent.mkdir()
    env_file.write_text("")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("GITHUB_ENV", str(env_file))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-boundary-tools-key-0000")
    suite = make_suite(tmp_path)
    attack = (f"cat {repo}/.git/config; echo 'PATH=/tmp/evil' >> {env_file}; "
              "cat /proc/$PPID/environ; (setsid sleep 300 &); echo done")
    model = ScriptedCaller(turn(call("shell", command=attack)), reply("ok"))
    _, result = rollout(suite, model, tools=["shell"])
    result.close()
    (ran,) = [s for s in result.steps if s.kind == "tool_result"]
    assert "done" in ran.text  # the premise: the command ran to its end
    assert TOKEN not in ran.text and "sk-boundary-tools-key" not in ran.text
    assert env_file.read_text() == ""


def _attacker(repo: Path, env_file: Path):
    code = (f"import os\nfor p in [{str(repo / '.git/config')!r}, '/proc/%d/environ' % os.getppid()]:\n"
            "    try: print(open(p, errors='replace').read())\n    except OSError as e: print('no', e)\n"
            f"try: open({str(env_file)!r}, 'a').write('NODE_OPTIONS=--require=/tmp/x.js\\n')\n"
            "except OSError as e: print('no', e)\n")

    def policy(request):
        if not [m for m in request.messages if m["role"] == "tool"]:
            return ScriptedReply("", tool_calls=(ScriptedToolCall("python", {"code": code}),))
        return ScriptedReply("", tool_calls=(ScriptedToolCall("submit_answer", {"answer": "0"}),))

    return policy


def _hostile_project(tmp_path: Path, server: ScriptedModelServer) -> tuple[Path, Path]:
    project = tools_project(tmp_path / "p", PROTOCOLS["chat"](server))
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    with open(project / ".git/config", "a") as handle:
        handle.write(f"[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {TOKEN}\n")
    env_file = tmp_path / "runner" / "set_env"
    env_file.parent.mkdir()
    env_file.write_text("")
    return project, env_file


@needs_bwrap
def test_an_eval_through_the_scripted_server_keeps_the_token_and_the_job_safe(tmp_path):
    repo = tmp_path / "p"
    env_file = tmp_path / "runner" / "set_env"
    with ScriptedModelServer(_attacker(repo, env_file)) as server:
        project, env_file = _hostile_project(tmp_path, server)
        out = tmp_path / "run"
        res = run_cli("eval", "csv-sum", "--out", str(out), "--quiet", cwd=project,
                      env={**KEYS, "GITHUB_ENV": str(env_file), "GITHUB_WORKSPACE": str(project)})
    assert res.code == 0, res.err
    results = (out / "results.jsonl").read_text()
    assert '"python"' in results  # the premise: the attack ran as a tool call
    assert TOKEN not in results and KEYS["OPENAI_API_KEY"] not in results
    assert env_file.read_text() == ""


# --- where no isolation is available ----------------------------------------------------------


@pytest.fixture
def no_isolation(monkeypatch):
    """This machine, made to answer "no isolation" (the probe reads SKILLOPT_SANDBOX once)."""
    monkeypatch.setenv("SKILLOPT_SANDBOX", "none")
    monkeypatch.delenv(policy.OPT_IN, raising=False)
    isolation_module._CACHE.clear()
    policy.reset()
    yield
    monkeypatch.delenv("SKILLOPT_SANDBOX")
    isolation_module._CACHE.clear()
    policy.reset()


def test_without_isolation_untrusted_input_is_refused_even_with_the_opt_in(no_isolation, monkeypatch, tmp_path):
    monkeypatch.setenv(policy.OPT_IN, "1")
    policy.mark_untrusted("a pull request from a fork")
    suite = make_suite(tmp_path)
    model = ScriptedCaller(turn(call("shell", command="echo ran > ran.txt")), reply("ok"))
    with pytest.raises(policy.IsolationRefused, match="untrusted .a pull request from a fork.") as caught:
        rollout(suite, model, tools=["shell"])
    assert caught.value.exit_code == EXIT_RUNTIME and model.received == []
    assert policy.unisolated_note() is None


def test_without_isolation_a_code_running_eval_exits_3_unless_opted_in(no_isolation, tmp_path, monkeypatch):
    with ScriptedModelServer(_attacker(tmp_path / "p", tmp_path / "runner" / "set_env")) as server:
        project, _ = _hostile_project(tmp_path, server)
        refused = run_cli("eval", "csv-sum", "--out", str(tmp_path / "r1"), "--quiet", cwd=project, env=KEYS)
        assert refused.code == EXIT_RUNTIME
        assert "cannot be isolated" in refused.err and policy.OPT_IN in refused.err
        assert server.call_count == 0
        allowed = run_cli("eval", "csv-sum", "--out", str(tmp_path / "r2"), "--quiet", cwd=project,
                          env={**KEYS, policy.OPT_IN: "1"})
    assert allowed.code == 0, allowed.err
    note = policy.unisolated_note()
    assert note is not None and policy.OPT_IN in note and "without a sandbox" in note


def test_without_isolation_verify_and_run_in_are_refused_too(no_isolation, ws):
    with pytest.raises(policy.IsolationRefused, match="the command true: refused"):
        asyncio.run(ws.run(["true"]))
