"""The disk quota of a workspace: a watcher that kills the command when the folder grows too big.

No unprivileged mechanism caps the size of an ordinary folder (a sized tmpfs or a loop device
needs root outside a namespace, and the files must stay on the host for the scorer), so
``DiskWatch`` measures the workspace (allocated blocks of every file, symlinks not followed) every
``INTERVAL_S`` while the command runs and stops it once the folder holds more than its quota.
Bound: the workspace can exceed the quota by what the command writes in one interval plus the
time of one measurement; ``RLIMIT_FSIZE`` (at most the quota) caps any single file, and the
private ``/tmp`` is a tmpfs of its own size.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

INTERVAL_S = 0.05


def usage_bytes(root: Path) -> int:
    """Bytes allocated to the files and folders below ``root`` (hard links counted once)."""
    total, seen = 0, set()
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(folder, name))
                if info.st_nlink > 1:
                    if (info.st_dev, info.st_ino) in seen:
                        continue
                    seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


class DiskWatch:
    """Sets ``exceeded`` (a future) once ``root`` holds more than ``quota_bytes``, or more than it
    held at the start when that was already above the quota (task files may be large)."""

    def __init__(self, root: Path, quota_bytes: int):
        self.root = root
        self.quota = max(quota_bytes, usage_bytes(root))
        self.used = 0
        self.exceeded: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            self.used = await asyncio.to_thread(usage_bytes, self.root)
            if self.used > self.quota:
                self.exceeded.set_result(None)
                return

    def stop(self) -> None:
        self._task.cancel()
