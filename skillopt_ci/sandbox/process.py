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

    async def read(self, stream: asyncio.StreamReader) -> None:
        while True:
            chunk = await stream.read(_CHUNK)
            if not chunk:
                return
            self.total += len(chunk)
            room = self.keep - self.kept
            if room > 0:
                piece = chunk[:room]
                self.parts.append(piece)
                self.kept += len(piece)

    def text(self) -> str:
        return b"".join(self.parts).decode("utf-8", errors="replace")


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.close()


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
    try:
        proc = await asyncio.create_subprocess_exec(
            *wrap([str(a) for a in argv], limits.network),
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limit_setter(limits),
        )
    except OSError as exc:
        raise SandboxError(f"{argv[0]}: cannot start the command: {exc.strerror or exc}") from exc
    out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
    assert proc.stdout is not None and proc.stderr is not None
    tasks = [asyncio.ensure_future(out.read(proc.stdout)), asyncio.ensure_future(err.read(proc.stderr))]
    if stdin is not None:
        tasks.append(asyncio.ensure_future(_feed(proc, stdin.encode("utf-8"))))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout=limits.wall_s)
        except asyncio.TimeoutError:
            timed_out = True
    finally:
        kill_group(proc.pid)
        await _settle(proc, tasks)
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
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


async def _settle(proc: asyncio.subprocess.Process, tasks: list[asyncio.Future]) -> None:
    """Reap the killed command and finish reading its pipes; a pipe still held open by a process
    outside the group is given up after a short wait rather than waited on forever."""
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()
    _, pending = await asyncio.wait(tasks, timeout=_DRAIN_AFTER_KILL_S)
    for task in pending:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()
