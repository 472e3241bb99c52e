"""The records of a sandboxed command: its limits and its result.

``ProcessResult.render(limit)`` is what a tool shows the model: the exit code (or why the command
was killed), stdout, stderr and a note for every cut, in at most ``limit`` characters. When the
output does not fit, each stream keeps its start and its end and says how much was cut.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one command. ``output_bytes`` is kept per stream; the rest is read and dropped.

    ``processes`` caps the processes (and threads) the command may run at once, ``disk_mb`` what
    its workspace may hold, ``tmp_mb`` its private ``/tmp``; ``network`` leaves the network on
    (everything else of the boundary stays)."""

    wall_s: float = 30.0
    cpu_s: float = 30.0
    memory_mb: int = 1024
    output_bytes: int = 100_000
    file_mb: int = 100
    network: bool = False
    processes: int = 256
    disk_mb: int = 256
    tmp_mb: int = 64


DEFAULT_LIMITS = SandboxLimits()


@dataclass(frozen=True)
class ProcessResult:
    """``exit_code`` is None when the time limit or the disk quota killed the command; negative
    for a signal.

    ``stdout_bytes``/``stderr_bytes`` count everything the command wrote, kept or not.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    wall_s: float
    wall_limit_s: float = 0.0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    kept_bytes: int = 0
    disk_exceeded: bool = False
    disk_limit_mb: int = 0

    def status(self) -> str:
        if self.disk_exceeded:
            return f"killed: disk quota {self.disk_limit_mb} MB (the workspace grew past it)"
        if self.timed_out:
            return f"killed: time limit {self.wall_limit_s:g}s"
        code = self.exit_code
        if code is not None and code < 0:
            return f"killed by signal {_signal_name(-code)}"
        return f"exit code {code}"

    def notes(self) -> list[str]:
        notes = []
        for name, total in (("stdout", self.stdout_bytes), ("stderr", self.stderr_bytes)):
            if self.kept_bytes and total > self.kept_bytes:
                notes.append(f"[{name} cut: kept the first {self.kept_bytes} of {total} bytes]")
        return notes

    def render(self, limit: int) -> str:
        """At most ``limit`` characters: status, stdout, stderr, notes about what was cut."""
        head = self.status()
        notes = self.notes()
        tail = ("\n" + "\n".join(notes)) if notes else ""
        sections = [(n, t) for n, t in (("stdout", self.stdout), ("stderr", self.stderr)) if t]
        if not sections:
            text = head + "\n(no output)" + tail
            return text[:limit]
        labels = sum(len(f"\n{n}:\n") for n, _ in sections)
        budget = max(0, limit - len(head) - len(tail) - labels)
        shares = _share(budget, [len(t) for _, t in sections])
        body = "".join(f"\n{n}:\n{cut_middle(t, s)}" for (n, t), s in zip(sections, shares, strict=True))
        return (head + body + tail)[:limit]


def _share(budget: int, sizes: list[int]) -> list[int]:
    """Split ``budget`` characters between streams: a small stream keeps all of itself."""
    if sum(sizes) <= budget:
        return sizes
    if len(sizes) == 1:
        return [budget]
    small, large = sorted(range(2), key=lambda i: sizes[i])
    out = [0, 0]
    out[small] = min(sizes[small], budget // 2)
    out[large] = budget - out[small]
    return out


def cut_middle(text: str, size: int) -> str:
    """``text`` in at most ``size`` characters: its start and end around a note of the cut."""
    if len(text) <= size:
        return text
    cut = len(text) - size
    while True:  # the note's length depends on the number it states: settles in two rounds
        note = f"\n[... {cut} characters cut ...]\n"
        keep = size - len(note)
        if keep < 2:
            return text[: max(0, size)]
        if len(text) - keep == cut:
            break
        cut = len(text) - keep
    first = keep * 2 // 3
    return text[:first] + note + text[len(text) - (keep - first) :]


def _signal_name(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        return str(number)
    reason = {"SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (file size limit)"}.get(name, "")
    return name + reason
