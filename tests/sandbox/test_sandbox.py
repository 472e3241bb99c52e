"""The workspace sandbox: files confined to the workspace, commands under limits, cleanup.

Real subprocesses throughout. The network assertion is skipped (with the reason) on a machine
where neither bubblewrap nor unprivileged user namespaces work.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from skillopt_ci.sandbox import (
    ProcessResult,
    SandboxError,
    SandboxLimits,
    Workspace,
    clean_environment,
    isolation,
    process,
    run_in,
)


@pytest.fixture
def ws():
    workspace = Workspace.create()
    yield workspace
    workspace.cleanup()


def run(workspace: Workspace, argv, **kwargs) -> ProcessResult:
    return asyncio.run(workspace.run(argv, **kwargs))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose; it only waits for its parent to reap it.
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    return True


def running_in(folder: Path) -> list[int]:
    """Host pids of the live processes whose working directory is ``folder`` (also after it was
    deleted). Works whatever PID namespace a wrapper put the command in."""
    if not Path("/proc/self/cwd").exists():
        pytest.skip("needs /proc to find the processes of a workspace")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd").removesuffix(" (deleted)")
        except OSError:
            continue
        if cwd == str(folder) and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_for_pids(path: Path, count: int) -> None:
    for _ in range(1200):
        if path.exists() and len(path.read_text().split()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path.name} never got {count} pids")


# --- creation and task files -------------------------------------------------------------------


def test_create_copies_task_files_into_a_fresh_folder(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.md").write_text("# one\n")
    with Workspace.create({"data.csv": tmp_path / "data.csv", "in/docs": tmp_path / "docs"}) as ws:
        assert ws.path.name.startswith("skillopt-ws-")
        assert ws.read_text("data.csv") == "a,b\n1,2\n"
        assert ws.list_files() == ["data.csv", "in/docs/one.md"]
        assert ws.written_files() == []


def test_a_missing_task_file_is_an_error_naming_it_and_leaves_no_folder(tmp_path, monkeypatch):
    (tmp_path / "there.csv").write_text("x\n")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises(SandboxError) as caught:
        Workspace.create({"there.csv": tmp_path / "there.csv", "data.csv": tmp_path / "nope.csv"})
    assert str(tmp_path / "nope.csv") in str(caught.value)
    assert list(temp.iterdir()) == []


def test_two_workspaces_are_different_folders():
    with Workspace.create() as one, Workspace.create() as two:
        assert one.path != two.path


def test_install_skill_copies_the_folder_and_writes_skill_md(tmp_path, ws):
    skill = tmp_path / "skill"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("old text\n")
    (skill / "scripts" / "run.py").write_text("print('hi')\n")
    ws.install_skill(skill, "skills/demo", "new text\n")
    assert ws.read_text("skills/demo/SKILL.md") == "new text\n"
    assert ws.read_text("skills/demo/scripts/run.py") == "print('hi')\n"
    assert ws.written_files() == []


# --- confinement -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside", "a/../../outside", "~/x"])
def test_paths_outside_the_workspace_are_refused(ws, path):
    with pytest.raises(SandboxError):
        ws.resolve(path)
    with pytest.raises(SandboxError):
        ws.read_text(path)
    with pytest.raises(SandboxError):
        ws.write_text(path, "x")


def test_a_symlink_out_of_the_workspace_is_never_followed(tmp_path, ws):
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret\n")
    os.symlink(secret, ws.path / "link.txt")
    os.symlink(tmp_path, ws.path / "linkdir")
    for path in ("link.txt", "linkdir/secret.txt"):
        with pytest.raises(SandboxError, match="outside"):
            ws.read_text(path)
        with pytest.raises(SandboxError):
            ws.write_text(path, "overwritten")
    assert secret.read_text() == "the secret\n"
    assert ws.list_files() == []
    assert ws.grep("secret") == []
    assert ws.glob("**/*") == []


def test_a_symlink_inside_the_workspace_is_allowed(ws):
    ws.write_text("real/file.txt", "inside\n")
    os.symlink(ws.path / "real", ws.path / "alias")
    assert ws.read_text("alias/file.txt") == "inside\n"
    assert ws.resolve("alias/file.txt") == ws.path / "real" / "file.txt"


def test_a_directory_swapped_for_a_symlink_after_resolving_is_not_followed(tmp_path, ws):
    from skillopt_ci.sandbox.paths import open_confined

    (tmp_path / "f.txt").write_text("outside\n")
    ws.write_text("d/f.txt", "inside\n")
    real = ws.resolve("d/f.txt")
    (ws.path / "d" / "f.txt").unlink()
    (ws.path / "d").rmdir()
    os.symlink(tmp_path, ws.path / "d")
    with pytest.raises(OSError):
        open_confined(ws.path, real, os.O_RDONLY)


# --- file tools --------------------------------------------------------------------------------


def test_write_then_read_list_glob_grep(ws):
    assert ws.write_text("notes/a.txt", "alpha\nbeta\n") == len("alpha\nbeta\n")
    ws.write_text("notes/b.md", "gamma beta\n")
    ws.write_text("top.txt", "nothing\n")
    assert ws.list_files() == ["notes/a.txt", "notes/b.md", "top.txt"]
    assert ws.list_files("notes") == ["notes/a.txt", "notes/b.md"]
    assert ws.glob("**/*.txt") == ["notes/a.txt", "top.txt"]
    assert ws.glob("*.txt") == ["top.txt"]
    assert ws.glob("notes/?.md") == ["notes/b.md"]
    assert ws.grep("beta") == ["notes/a.txt:2: beta", "notes/b.md:1: gamma beta"]
    assert ws.grep(r"^gam", "notes/b.md") == ["notes/b.md:1: gamma beta"]


def test_caps_say_that_the_output_was_cut(ws):
    for i in range(12):
        ws.write_text(f"f{i:02}.txt", "match\n" * 3)
    listed = ws.list_files(max_entries=5)
    assert listed[:5] == [f"f{i:02}.txt" for i in range(5)]
    assert listed[5] == "[cut: showed 5 of 12 files]"
    assert ws.glob("*.txt", max_entries=3)[-1] == "[cut: showed 3 of 12 matches]"
    assert ws.grep("match", max_matches=4)[-1] == "[cut: showed 4 of 36 matching lines]"
    ws.write_text("big.txt", "x" * 1000)
    text = ws.read_text("big.txt", max_chars=100)
    assert text.startswith("x" * 100)
    assert text.endswith("[cut: showed the first 100 characters of 1000 bytes]")


def test_file_tool_errors_are_one_line(ws):
    ws.write_text("d/x.txt", "x")
    for call, fragment in (
        (lambda: ws.read_text("missing.txt"), "no such file"),
        (lambda: ws.read_text("d"), "is a directory"),
        (lambda: ws.grep("(unclosed"), "not a valid regular expression"),
        (lambda: ws.list_files("nothing-here"), "no such folder"),
        (lambda: ws.glob("../*"), "inside"),
    ):
        with pytest.raises(SandboxError) as caught:
            call()
        assert fragment in caught.value.message
        assert "\n" not in str(caught.value)


# --- written files and keep --------------------------------------------------------------------


def test_written_files_reports_new_and_changed_files_only(tmp_path):
    (tmp_path / "same.txt").write_text("same\n")
    (tmp_path / "edit.txt").write_text("before\n")
    (tmp_path / "touch.txt").write_text("touched\n")
    files = {name: tmp_path / name for name in ("same.txt", "edit.txt", "touch.txt")}
    with Workspace.create(files) as ws:
        ws.write_text("edit.txt", "after!\n")
        ws.write_text("new/out.txt", "new\n")
        os.utime(ws.path / "touch.txt", ns=(1, 1))  # same bytes, new mtime: not written
        run(ws, [sys.executable, "-c", "open('made.txt','w').write('m')"], limits=SandboxLimits(network=True))
        assert ws.written_files() == ["edit.txt", "made.txt", "new/out.txt"]


def test_keep_copies_written_files_only_when_they_fit(tmp_path, ws):
    ws.write_text("a.txt", "a" * 100)
    ws.write_text("sub/b.txt", "b" * 100)
    assert ws.keep(tmp_path / "small", max_bytes=150) == []
    assert not (tmp_path / "small").exists()
    assert ws.keep(tmp_path / "kept", max_bytes=200) == ["a.txt", "sub/b.txt"]
    assert (tmp_path / "kept" / "sub" / "b.txt").read_text() == "b" * 100


# --- commands ----------------------------------------------------------------------------------


def test_run_returns_exit_code_and_both_streams(ws):
    result = run(ws, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.timed_out and not result.truncated


def test_run_passes_stdin_and_runs_in_the_workspace(ws):
    ws.write_text("in.txt", "from file\n")
    result = run(ws, ["sh", "-c", "cat in.txt; cat; pwd"], stdin="from stdin\n")
    assert result.stdout == f"from file\nfrom stdin\n{ws.path}\n"


def test_large_stdin_is_fed_and_unread_stdin_is_dropped(ws):
    data = "y" * 3_000_000
    assert run(ws, ["wc", "-c"], stdin=data).stdout.strip() == "3000000"
    assert run(ws, ["true"], stdin=data).exit_code == 0


def test_commands_in_several_workspaces_run_concurrently():
    async def four() -> list[ProcessResult]:
        spaces = [Workspace.create() for _ in range(4)]
        try:
            return await asyncio.gather(
                *(w.run(["sh", "-c", f"echo {i} > n.txt; cat n.txt"]) for i, w in enumerate(spaces))
            )
        finally:
            for w in spaces:
                w.cleanup()

    assert [r.stdout for r in asyncio.run(four())] == ["0\n", "1\n", "2\n", "3\n"]


def test_an_api_key_in_our_environment_is_not_visible_to_the_command(ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-do-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-do-not-leak")
    monkeypatch.setenv("MY_SERVICE_API_URL", "https://internal")
    result = run(ws, ["sh", "-c", "env"])
    assert result.exit_code == 0
    assert "do-not-leak" not in result.stdout
    assert "MY_SERVICE_API_URL" not in result.stdout
    assert f"HOME={ws.path}\n" in result.stdout
    assert f"TMPDIR={ws.path}/.tmp\n" in result.stdout
    assert f"PATH={os.environ['PATH']}\n" in result.stdout


def test_run_in_runs_a_command_in_an_existing_folder_like_a_workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    (tmp_path / "answer.txt").write_text("42\n")
    script = "cat answer.txt; pwd; env; sleep 30"
    result = asyncio.run(run_in(tmp_path, ["sh", "-c", script], limits=SandboxLimits(wall_s=1)))
    assert result.timed_out and result.stdout.startswith(f"42\n{tmp_path.resolve()}\n")
    assert "do-not-leak" not in result.stdout and f"HOME={tmp_path}\n" in result.stdout
    with pytest.raises(SandboxError, match="does not exist"):
        asyncio.run(run_in(tmp_path / "gone", ["true"]))


def test_clean_environment_drops_credential_names(monkeypatch, tmp_path):
    for name in ("ANTHROPIC_API_KEY", "HF_TOKEN", "DB_PASSWORD", "LC_SECRET", "GITHUB_REPOSITORY"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = clean_environment(tmp_path)
    assert env["LC_ALL"] == "C.UTF-8"
    assert not {"ANTHROPIC_API_KEY", "HF_TOKEN", "DB_PASSWORD", "LC_SECRET", "GITHUB_REPOSITORY"} & set(env)
    assert env["HOME"] == str(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("network", [False, True], ids=["isolated", "plain"])
def test_the_time_limit_kills_the_command_and_its_children(ws, network):
    script = textwrap.dedent(
        """
        for i in 1 2 3; do
          ( sleep 300 & echo $! >> pids.txt; wait ) &
          echo $! >> pids.txt
        done
        sleep 300
        """
    )
    result = run(ws, ["sh", "-c", script], limits=SandboxLimits(wall_s=1.0, network=network))
    assert result.timed_out and result.exit_code is None
    assert result.render(200).startswith("killed: time limit 1s")
    assert len(ws.read_text("pids.txt").split()) == 6  # the premise: all children started
    assert running_in(ws.path) == []


def test_a_watch_on_stdout_stops_the_command_and_its_children(ws):
    from skillopt_ci.sandbox.isolation import clean_environment
    from skillopt_ci.sandbox.process import run_process

    seen = []

    def watch(chunk: bytes) -> bool:
        seen.append(chunk)
        return b"line 3" in b"".join(seen)

    script = "sleep 300 & echo $! > pid.txt; for i in $(seq 1 1000); do echo line $i; sleep 0.05; done"
    result = asyncio.run(run_process(["sh", "-c", script], cwd=ws.path, env=clean_environment(ws.path),
                                     limits=SandboxLimits(wall_s=100), watch=watch))
    assert not result.timed_out and result.exit_code is not None and result.exit_code < 0
    assert "line 3" in result.stdout and "line 999" not in result.stdout
    assert running_in(ws.path) == []


def test_background_children_do_not_outlive_a_command_that_ended(ws):
    result = run(ws, ["sh", "-c", "sleep 300 & echo $! > pid.txt; echo started"])
    assert (result.exit_code, result.stdout) == (0, "started\n")
    assert ws.read_text("pid.txt").strip()  # the premise: the child started
    assert running_in(ws.path) == []


@pytest.mark.slow
def test_a_cancelled_run_kills_its_process_group(ws):
    async def cancel_soon() -> None:
        task = asyncio.ensure_future(ws.run(["sh", "-c", "sleep 300 & echo $! > pid.txt; wait"]))
        while not (ws.path / "pid.txt").exists() or not ws.read_text("pid.txt").strip():
            await asyncio.sleep(0.05)
        assert len(running_in(ws.path)) >= 2  # the premise: the shell and its child run
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_soon())
    assert running_in(ws.path) == []


@pytest.mark.slow
def test_a_run_cancelled_while_it_starts_leaves_nothing_behind(ws):
    # asyncio's own answer to a cancel during subprocess_exec waits for the pipes to close,
    # which the background sleep would hold for 300 s.
    async def cancel_early(delay: float, network: bool) -> None:
        task = asyncio.ensure_future(ws.run(["sh", "-c", "sleep 300 & wait"], limits=SandboxLimits(network=network)))
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=60)  # a guard against a hang, not a timing

    async def many() -> None:
        for i in range(40):
            await cancel_early(i * 0.0005, network=i % 2 == 0)

    asyncio.run(many())
    assert running_in(ws.path) == []


@pytest.mark.slow
def test_a_process_that_leaves_the_group_holding_the_pipe_does_not_hang_the_run(ws, unisolated):
    # without a PID namespace nothing can end a process that left the group: the run still returns
    escape = "import os, time; os.setsid(); open('pid.txt', 'w').write(str(os.getpid())); time.sleep(300)"
    script = f'"$0" -c "{escape}" & while [ ! -s pid.txt ]; do sleep 0.05; done; echo done'
    result = run(ws, ["sh", "-c", script, sys.executable], limits=SandboxLimits(network=True))
    pid = int(ws.read_text("pid.txt"))
    try:
        assert pid_alive(pid)  # the premise: it left the group, so it still holds the pipe
        assert (result.exit_code, result.stdout) == (0, "done\n")
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_under_bubblewrap_a_process_that_left_the_group_dies_with_the_command(ws):
    if isolation() != "bwrap":
        pytest.skip(f"bubblewrap does not work on this machine (isolation: {isolation()})")
    escape = "import os, time; os.setsid(); open('pid.txt', 'w').write(str(os.getpid())); time.sleep(300)"
    script = f'"$0" -c "{escape}" & while [ ! -s pid.txt ]; do sleep 0.05; done; echo done'
    result = run(ws, ["sh", "-c", script, sys.executable])
    assert (result.exit_code, result.stdout) == (0, "done\n")
    assert running_in(ws.path) == []


@pytest.mark.slow
def test_a_command_printing_50_mb_is_cut_and_drained(ws):
    code = "import sys\nchunk = b'x' * 65536\nfor _ in range(800): sys.stdout.buffer.write(chunk)"
    result = run(ws, [sys.executable, "-c", code], limits=SandboxLimits(output_bytes=10_000))
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout) == 10_000
    assert result.stdout_bytes == 800 * 65536
    assert "[stdout cut: kept the first 10000 of 52428800 bytes]" in result.render(2000)


@pytest.fixture(params=["prlimit", "preexec"])
def limited_ws(request, ws, monkeypatch):
    """The workspace, with rlimits set by util-linux prlimit (when it works here) or in the child."""
    if request.param == "prlimit":
        if not process.prlimit_works():
            pytest.skip("util-linux prlimit does not work on this machine")
    else:
        process.prlimit_works()
        monkeypatch.setitem(process._CACHE, "prlimit_works", "")
    return ws


def test_the_memory_limit_stops_a_large_allocation(limited_ws):
    code = "x = bytearray(400 * 1024 * 1024); print('allocated')"
    result = run(limited_ws, [sys.executable, "-c", code], limits=SandboxLimits(memory_mb=200))
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr


@pytest.mark.slow
def test_the_cpu_limit_stops_a_busy_loop(limited_ws):
    limits = SandboxLimits(cpu_s=1, wall_s=60)
    result = run(limited_ws, [sys.executable, "-c", "while True: pass"], limits=limits)
    assert not result.timed_out
    assert result.exit_code == -signal.SIGXCPU
    assert result.render(200).startswith("killed by signal SIGXCPU (CPU time limit)")


def test_the_file_size_limit_stops_a_large_write(limited_ws):
    code = "open('big.bin','wb').write(b'x' * (3 * 1024 * 1024))"
    result = run(limited_ws, [sys.executable, "-c", code], limits=SandboxLimits(file_mb=1))
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of the signal killing it.
    assert result.exit_code == 1 and "File too large" in result.stderr
    assert (limited_ws.path / "big.bin").stat().st_size == 1024 * 1024


@pytest.mark.parametrize("network", [False, True], ids=["isolated", "plain"])
def test_a_command_that_does_not_exist_is_a_sandbox_error(ws, network):
    with pytest.raises(SandboxError, match="no-such-command-here: command not found"):
        run(ws, ["no-such-command-here"], limits=SandboxLimits(network=network))
    with pytest.raises(SandboxError, match="the workspace was already cleaned up"):
        ws.cleanup()
        run(ws, ["true"])


def test_the_network_is_cut_when_isolation_works(ws):
    how = isolation()
    assert how in ("bwrap", "unshare", "none")
    if how == "none":
        pytest.skip("neither bubblewrap nor unprivileged user namespaces work on this machine")
    code = "import socket; print(len(socket.if_nameindex()))"
    isolated = run(ws, [sys.executable, "-c", code])
    assert isolated.stdout.strip() == "1"  # only the loopback interface, and it is down
    connect = "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)"
    result = run(ws, [sys.executable, "-c", connect])
    assert result.exit_code != 0 and "unreachable" in result.stderr.lower()


# --- render ------------------------------------------------------------------------------------


def test_render_fits_the_limit_and_keeps_start_and_end():
    result = ProcessResult(
        exit_code=1, stdout="S" * 5000 + "END", stderr="boom\n", timed_out=False,
        truncated=False, wall_s=0.1,
    )
    text = result.render(1000)
    assert len(text) <= 1000
    assert text.startswith("exit code 1\nstdout:\nSSS")
    assert "END" in text and "characters cut" in text and "stderr:\nboom" in text


@pytest.mark.parametrize("limit", [10, 50, 120, 400, 1000, 1599])
def test_render_never_exceeds_its_limit(limit):
    result = ProcessResult(None, "o" * 900, "e" * 700, True, True, 30.0, 30.0, 10**6, 10**6, 900)
    text = result.render(limit)
    assert len(text) <= limit
    if limit >= 400:  # room for the status and the notes: they are never what gets cut
        assert text.startswith("killed: time limit 30s\nstdout:\nooo")
        assert text.endswith("[stderr cut: kept the first 900 of 1000000 bytes]")
        assert "[stdout cut: kept the first 900 of 1000000 bytes]" in text


@pytest.mark.parametrize("size", range(0, 120, 7))
def test_cut_middle_fits_exactly_and_keeps_both_ends(size):
    from skillopt_ci.sandbox.result import cut_middle

    text = "A" + "x" * 998 + "Z"
    cut = cut_middle(text, size)
    assert len(cut) <= size
    if size >= 40:
        assert len(cut) == size and cut.startswith("A") and cut.endswith("Z")
        note = re.search(r"\[\.\.\. (\d+) characters cut \.\.\.\]", cut)
        assert note is not None
        assert int(note.group(1)) == len(text) - (len(cut) - len(note.group(0)) - 2)


# --- cleanup -----------------------------------------------------------------------------------


def test_cleanup_is_idempotent_and_removes_read_only_folders(ws):
    ws.write_text("locked/file.txt", "x")
    os.chmod(ws.path / "locked", 0o500)
    ws.cleanup()
    ws.cleanup()
    assert not ws.path.exists()


def _script_that_keeps_a_workspace(tail: str) -> str:
    return textwrap.dedent(
        f"""
        import sys, time
        from skillopt_ci.sandbox import Workspace
        ws = Workspace.create()
        ws.write_text("x.txt", "x")
        print(ws.path, flush=True)
        {tail}
        """
    )


def test_workspaces_are_removed_at_interpreter_exit():
    done = subprocess.run(
        [sys.executable, "-c", _script_that_keeps_a_workspace("sys.exit(0)")],
        capture_output=True, text=True, timeout=60, check=True,
    )
    path = Path(done.stdout.strip())
    assert path.name.startswith("skillopt-ws-")
    assert not path.exists()


@pytest.mark.slow
def test_workspaces_are_removed_after_ctrl_c():
    proc = subprocess.Popen(
        [sys.executable, "-c", _script_that_keeps_a_workspace("time.sleep(120)")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        path = Path(proc.stdout.readline().strip())
        assert path.is_dir()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err  # the premise: the script died of Ctrl-C
    assert not path.exists()


_RUN_AND_WAIT = """
import asyncio
from skillopt_ci.sandbox import SandboxLimits
command = ws.run(["sh", "-c", "sleep 300 & echo $! > pid.txt; echo started; wait"],
                 limits=SandboxLimits(wall_s=300))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "loop",
    [
        "asyncio.run(command)",  # cancels the task: the run's own cleanup kills the command
        "asyncio.new_event_loop().run_until_complete(command)",  # stops dead: the exit hook does
    ],
    ids=["asyncio.run", "run_until_complete"],
)
def test_ctrl_c_during_a_command_kills_it_and_removes_the_workspace(loop):
    script = _script_that_keeps_a_workspace("") + _RUN_AND_WAIT + loop + "\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        path = Path(proc.stdout.readline().strip())
        wait_for_pids(path / "pid.txt", 1)
        assert len(running_in(path)) >= 2  # the premise: the shell and its child run
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err
    assert not path.exists()
    assert running_in(path) == []


def test_a_kept_text_file_holding_a_secret_is_redacted(tmp_path, ws):
    from skillopt_ci.core.redact import SECRETS

    key = "sk-kept-file-secret-0123456789abcdef"
    SECRETS.add(key)
    ws.write_text("env.txt", f"ANTHROPIC_API_KEY={key}\nok\n")
    (ws.path / "blob.bin").write_bytes(b"\xff\x00" + key.encode())
    assert sorted(ws.keep(tmp_path / "kept", max_bytes=10_000)) == ["blob.bin", "env.txt"]
    kept = (tmp_path / "kept/env.txt").read_text()
    assert key not in kept and kept.endswith("ok\n")
