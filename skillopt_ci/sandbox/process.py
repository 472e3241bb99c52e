"""Run one command under limits, as an asyncio subprocess, inside the boundary when there is one.

Under bubblewrap (``isolation() == "bwrap"``) the command sees what ``sandbox.boundary`` builds,
runs as an unprivileged uid of its own when we are root (``sandbox.identity``) and under a
process-count limit, and its workspace is watched against its disk quota (``sandbox.quota``).
Without bubblewrap, ``sandbox.policy`` decides whether it may run at all (``IsolationRefused``).
The child starts a new session (so it leads its own process group) and runs under lowered
rlimits: CPU seconds, address space (``memory_mb``), file size, processes, no core files (set by
util-linux ``prlimit`` before it execs the command, or by the child itself before exec). Its
stdout and stderr are read as they arrive; only ``output_bytes`` per stream are kept and the rest
is read and dropped, so a command printing gigabytes neither blocks on a full pipe nor fills memory.
At the wall-clock limit, at the disk quota, and in every case once the command has ended or the
caller is cancelled, the whole process group gets SIGKILL, and under bwrap so does the PID
namespace's first process, which takes every process of the namespace with it (``setsid`` and
double forks included); ``run_process`` returns only once they are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from skillopt_ci.sandbox import identity
from skillopt_ci.sandbox.binds import NO_BINDS, Binds
from skillopt_ci.sandbox.boundary import bwrap_argv
from skillopt_ci.sandbox.isolation import bwrap_path, isolation, works, wrap
from skillopt_ci.sandbox.paths import SandboxError
from skillopt_ci.sandbox.policy import require_isolation
from skillopt_ci.sandbox.quota import DiskWatch
from skillopt_ci.sandbox.result import DEFAULT_LIMITS, ProcessResult, SandboxLimits

_CACHE: dict[str, str] = {}
# Process groups started and not yet settled: killed at interpreter exit, for a loop stopped by
# KeyboardInterrupt without cancelling its tasks (run_until_complete), whose finally never ran.
RUNNING: set[int] = set()
_DRAIN_AFTER_KILL_S = 2.0


def rlimit_pairs(limits: SandboxLimits, nproc: int | None = None) -> list[tuple[int, tuple[int, int]]]:
    """The child's rlimits as (resource, (soft, hard)), never above this process's hard limits.
    ``nproc`` is its ``RLIMIT_NPROC`` (``identity.process_limit``); None leaves it alone."""
    cpu = max(1, int(limits.cpu_s + 0.999))
    memory, fsize = limits.memory_mb * 1024 * 1024, min(limits.file_mb, limits.disk_mb) * 1024 * 1024
    wanted = (
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one a second later.
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_FSIZE, fsize, fsize),
        (resource.RLIMIT_CORE, 0, 0),
        *(((resource.RLIMIT_NPROC, nproc, nproc),) if nproc is not None else ()),
    )
    pairs = []
    for which, soft, hard in wanted:
        current = resource.getrlimit(which)[1]
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        pairs.append((which, (int(soft), int(hard))))
    return pairs


_PRLIMIT_NAMES = {
    resource.RLIMIT_CPU: "--cpu",
    resource.RLIMIT_AS: "--as",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_CORE: "--core",
    resource.RLIMIT_NPROC: "--nproc",
}


def _limited(argv: list[str], limits: SandboxLimits, nproc: int | None = None,
             ) -> tuple[list[str], Callable[[], None] | None]:
    """``argv`` with its rlimits applied: through util-linux ``prlimit`` when it works here,
    else by a ``preexec_fn`` (which forces a full fork of this process: ~10-20 ms more per
    command in a large interpreter, measured by bench/bench_sandbox.py)."""
    pairs = rlimit_pairs(limits, nproc)
    if prlimit_works():
        options = [f"{_PRLIMIT_NAMES[which]}={soft}:{hard}" for which, (soft, hard) in pairs]
        return [_CACHE["prlimit"], *options, "--", *argv], None

    def set_limits() -> None:
        for which, pair in pairs:
            # A platform that refuses one limit (macOS and RLIMIT_AS) still gets the others.
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, pair)

    return argv, set_limits


def prlimit_works() -> bool:
    if "prlimit_works" not in _CACHE:
        path = shutil.which("prlimit") or ""
        _CACHE["prlimit"] = path
        _CACHE["prlimit_works"] = "yes" if path and works([path, "--core=0:0", "--", "true"]) else ""
    return bool(_CACHE["prlimit_works"])


class _Capture:
    """Keeps the first ``keep`` bytes of a stream and counts the rest."""

    def __init__(self, keep: int):
        self.keep = keep
        self.parts: list[bytes] = []
        self.kept = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - self.kept
        if room > 0:
            piece = chunk[:room]
            self.parts.append(piece)
            self.kept += len(piece)

    def text(self) -> str:
        return b"".join(self.parts).decode("utf-8", errors="replace")


class _Protocol(asyncio.SubprocessProtocol):
    """Captures stdout/stderr as they arrive and signals the exit apart from the pipes' closing.

    ``asyncio.subprocess.Process.wait()`` also waits for the pipes to close, which a background
    child holding them open would stretch to the time limit; the exit alone is what counts here.
    """

    def __init__(self, keep: int, loop: asyncio.AbstractEventLoop, watch: Callable[[bytes], bool] | None = None):
        self.out, self.err = _Capture(keep), _Capture(keep)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.stopped: asyncio.Future[None] = loop.create_future()
        self.watch = watch
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).add(data)
        if fd == 1 and self.watch is not None and not self.stopped.done() and self.watch(data):
            self.stopped.set_result(None)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _check_program(program: str, cwd: Path, env: Mapping[str, str]) -> None:
    """Fail as the bare exec would, before wrappers (prlimit, unshare) turn a missing program
    into their own exit code and message."""
    if "/" in program:
        found = (cwd / program) if not os.path.isabs(program) else Path(program)
        if os.access(found, os.X_OK) and found.is_file():
            return
    elif shutil.which(program, path=env.get("PATH", os.defpath)):
        return
    raise SandboxError(f"{program}: command not found or not executable")


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


_NAMESPACE_INITS: dict[int, list[int]] = {}


def kill_tree(pid: int) -> None:
    """SIGKILL the children of ``pid``, then its group: under bwrap the child is the PID
    namespace's first process, whose death ends every process of the namespace."""
    inits = _children(pid)
    _NAMESPACE_INITS[pid] = inits
    for child in inits:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    kill_group(pid)


def _stat(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
            return [int(p) for p in handle.read().split()]
    except (OSError, ValueError):  # a kernel without CONFIG_PROC_CHILDREN: look at every parent
        if not os.path.isdir("/proc/self"):
            return []
        return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()
                and len(fields := _stat(int(e.name))) > 1 and fields[1] == str(pid).encode()]


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X")


def kill_all_running() -> None:
    for pgid in list(RUNNING):
        kill_tree(pgid)
    RUNNING.clear()


def _command(argv: Sequence[str], how: str, cwd: Path, env: Mapping[str, str], limits: SandboxLimits,
             binds: Binds) -> tuple[list[str], Callable[[], None] | None]:
    """The full command line (rlimits, uid, bwrap, ``argv``) and the child's preexec function."""
    argv = [str(a) for a in argv]
    if how != "bwrap":
        return _limited(wrap(argv, how), limits, identity.process_limit(limits.processes, os.getuid()))
    program = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH", os.defpath))
    if program and not os.path.isabs(program):
        program = str(cwd / program)
    home = env.get("HOME")
    if home and os.path.isdir(home) and os.path.realpath(home) != os.path.realpath(cwd):
        binds = binds + Binds.of(read_write=[home])  # a caller-made home (an agent CLI's)
    drop = identity.setpriv()
    uid = identity.command_uid() if drop else os.getuid()
    inner: list[str] = []
    if drop:
        identity.hand_over([cwd, *binds.read_write], uid)
        inner = [*identity.CAP_ADD, "--", *identity.drop_argv(drop, uid)]
    command = bwrap_argv(bwrap_path(), argv, cwd, binds, network=limits.network, tmp_mb=limits.tmp_mb,
                         program=program, inner=inner)
    # as root without setpriv the kernel ignores RLIMIT_NPROC (docs/sandbox.md)
    return _limited(command, limits, identity.process_limit(limits.processes, uid))


async def _start(argv: Sequence[str], how: str, cwd: Path, env: Mapping[str, str], stdin: str | None,
                 limits: SandboxLimits, watch: Callable[[bytes], bool] | None = None,
                 binds: Binds = NO_BINDS) -> tuple[asyncio.SubprocessTransport, _Protocol]:
    loop = asyncio.get_running_loop()
    command, preexec = await asyncio.to_thread(_command, argv, how, cwd, env, limits, binds)
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(limits.output_bytes, loop, watch),
            *command,
            cwd=str(cwd),
            env=dict(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec,
        )
    except OSError as exc:
        raise SandboxError(f"{argv[0]}: cannot start the command: {exc.strerror or exc}") from exc
    if stdin is not None:
        pipe = transport.get_pipe_transport(0)
        if isinstance(pipe, asyncio.WriteTransport):  # written as the child reads; a child that exits early just drops it
            pipe.write(stdin.encode("utf-8"))
            pipe.close()
    return transport, protocol


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: str | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
    watch: Callable[[bytes], bool] | None = None,
    binds: Binds = NO_BINDS,
) -> ProcessResult:
    """Run ``argv`` in ``cwd`` under ``limits``; see the module docstring for what is killed when.

    ``cwd`` is the command's workspace: under isolation the one folder it may write besides
    ``binds`` (``sandbox.binds``: extra read-only and read-write paths, e.g. an agent CLI's
    install folder or a folder with a Unix socket).
    ``watch`` sees each chunk of stdout as it arrives; when it returns True the command is killed
    like at the time limit (an agent CLI past its turn limit), and the caller knows why."""
    if not argv:
        raise SandboxError("no command given")
    _check_program(str(argv[0]), cwd, env)
    started = time.monotonic()
    if "probed" not in _CACHE:  # the first command's probes run real commands: not on the loop
        await asyncio.to_thread(lambda: (isolation(), prlimit_works()))
        _CACHE["probed"] = "yes"
    how = isolation()
    if how != "bwrap":
        require_isolation(f"the command {Path(str(argv[0])).name}")
        how = "none" if limits.network else how
    transport, protocol = await _start_shielded(_start(argv, how, cwd, env, stdin, limits, watch, binds))
    disk = DiskWatch(cwd, limits.disk_mb * 1024 * 1024) if how == "bwrap" else None
    try:
        waits = [protocol.exited, protocol.stopped, *([disk.exceeded] if disk else [])]
        done, _ = await asyncio.wait(waits, timeout=limits.wall_s, return_when=asyncio.FIRST_COMPLETED)
        timed_out = not done
        over = disk is not None and disk.exceeded.done()
    finally:
        if disk is not None:
            disk.stop()
        kill_tree(transport.get_pid())
        await _settle(transport, protocol)
    out, err = protocol.out, protocol.err
    return ProcessResult(
        exit_code=None if timed_out or over else _exit_code(transport.get_returncode(), how),
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=out.total > out.kept or err.total > err.kept,
        wall_s=time.monotonic() - started,
        wall_limit_s=limits.wall_s,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        kept_bytes=limits.output_bytes,
        disk_exceeded=over,
        disk_limit_mb=limits.disk_mb,
    )


async def _start_shielded(starting) -> tuple[asyncio.SubprocessTransport, _Protocol]:
    """Start the command even if the caller is cancelled meanwhile, then kill it and re-raise.

    asyncio answers a cancellation during ``subprocess_exec`` by killing the one child and waiting
    for its pipes to close, which a grandchild holding them delays for as long as it lives."""
    task = asyncio.ensure_future(starting)
    try:
        transport, protocol = await asyncio.shield(task)
        RUNNING.add(transport.get_pid())
        return transport, protocol
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            transport, protocol = await task
            kill_tree(transport.get_pid())
            await _settle(transport, protocol)
        raise


def _exit_code(code: int | None, how: str) -> int | None:
    """bwrap reports a command killed by signal N as exit code 128 + N; make it -N as without
    bwrap (a command that itself exits with 129..192 under bwrap reads as a signal too)."""
    if how == "bwrap" and code is not None and 128 < code <= 128 + 64:
        return 128 - code
    return code


async def _settle(transport: asyncio.SubprocessTransport, protocol: _Protocol) -> None:
    """Reap the killed command and let its pipes drain; a pipe still held open by a process
    outside the group is given up after a short wait rather than waited on forever."""
    await asyncio.wait([protocol.exited], timeout=_DRAIN_AFTER_KILL_S)
    await _group_gone(transport.get_pid())
    for init in _NAMESPACE_INITS.pop(transport.get_pid(), []):
        # its exit waits for every process of the namespace: once it is a zombie, all are gone
        deadline = time.monotonic() + _DRAIN_AFTER_KILL_S
        while time.monotonic() < deadline and _alive(init):
            await asyncio.sleep(0.005)
    RUNNING.discard(transport.get_pid())
    await asyncio.wait([protocol.closed], timeout=_DRAIN_AFTER_KILL_S)
    transport.close()


async def _group_gone(pgid: int) -> None:
    """Wait (briefly) until the killed group has no live member, so that when ``run`` returns no
    process of the command is still running: SIGKILL is delivered asynchronously."""
    deadline = time.monotonic() + _DRAIN_AFTER_KILL_S
    while time.monotonic() < deadline and _group_has_live_member(pgid):
        await asyncio.sleep(0.005)


def _group_has_live_member(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is alive and not a zombie. Killed orphans stay zombies
    until init reaps them, which may take a while; without /proc, SIGKILL is trusted."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if not os.path.isdir("/proc/self"):
        return False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
