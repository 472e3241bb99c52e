"""Run one command under limits, as an asyncio subprocess.

The child starts a new session (so it leads its own process group) and, before exec, lowers its
rlimits: CPU seconds, address space (``memory_mb``), file size, and no core files. Its stdout and
stderr are read concurrently in chunks; only ``output_bytes`` per stream are kept and the rest is
read and dropped, so a command printing gigabytes neither blocks on a full pipe nor fills memory.
At the wall-clock limit, and in every case once the command has ended or the caller is cancelled,
the whole process group gets SIGKILL: nothing the command started in its group outlives it (and
under bwrap its PID namespace dies with it, so neither does anything that left the group).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from skillopt_ci.sandbox.isolation import wrap
from skillopt_ci.sandbox.paths import SandboxError
from skillopt_ci.sandbox.result import DEFAULT_LIMITS, ProcessResult, SandboxLimits

_CHUNK = 65536
_DRAIN_AFTER_KILL_S = 2.0


def _limit_setter(limits: SandboxLimits):
    """The child's rlimits, computed here in the parent; the child only calls setrlimit."""
    cpu = max(1, int(limits.cpu_s + 0.999))
    wanted = (
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one a second later.
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024, limits.memory_mb * 1024 * 1024),
        (resource.RLIMIT_FSIZE, limits.file_mb * 1024 * 1024, limits.file_mb * 1024 * 1024),
        (resource.RLIMIT_CORE, 0, 0),
    )
    pairs = []
    for which, soft, hard in wanted:
        current = resource.getrlimit(which)[1]
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        pairs.append((which, (int(soft), int(hard))))

    def set_limits() -> None:
        for which, pair in pairs:
            resource.setrlimit(which, pair)

    return set_limits


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

    def __init__(self, keep: int, loop: asyncio.AbstractEventLoop):
        self.out, self.err = _Capture(keep), _Capture(keep)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _start(argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdin: str | None,
                 limits: SandboxLimits) -> tuple[asyncio.SubprocessTransport, _Protocol]:
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(limits.output_bytes, loop),
            *wrap([str(a) for a in argv], limits.network),
            cwd=str(cwd),
            env=dict(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limit_setter(limits),
        )
    except OSError as exc:
        raise SandboxError(f"{argv[0]}: cannot start the command: {exc.strerror or exc}") from exc
    if stdin is not None:
        pipe = transport.get_pipe_transport(0)
        if pipe is not None:  # written as the child reads; a child that exits early just drops it
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
) -> ProcessResult:
    """Run ``argv`` in ``cwd`` under ``limits``; see the module docstring for what is killed when."""
    if not argv:
        raise SandboxError("no command given")
    started = time.monotonic()
    transport, protocol = await _start(argv, cwd, env, stdin, limits)
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(protocol.exited), timeout=limits.wall_s)
        except asyncio.TimeoutError:
            timed_out = True
    finally:
        kill_group(transport.get_pid())
        await _settle(transport, protocol)
    out, err = protocol.out, protocol.err
    return ProcessResult(
        exit_code=None if timed_out else transport.get_returncode(),
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=out.total > out.kept or err.total > err.kept,
        wall_s=time.monotonic() - started,
        wall_limit_s=limits.wall_s,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        kept_bytes=limits.output_bytes,
    )


async def _settle(transport: asyncio.SubprocessTransport, protocol: _Protocol) -> None:
    """Reap the killed command and let its pipes drain; a pipe still held open by a process
    outside the group is given up after a short wait rather than waited on forever."""
    await asyncio.wait([protocol.exited], timeout=_DRAIN_AFTER_KILL_S)
    await asyncio.wait([protocol.closed], timeout=_DRAIN_AFTER_KILL_S)
    transport.close()
