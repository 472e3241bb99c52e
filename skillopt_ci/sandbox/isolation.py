"""Network isolation of sandboxed commands, and the environment they see.

``isolation()`` answers once per process how commands can be cut off from the network here:
``"bwrap"`` when bubblewrap runs a trivial command with ``--unshare-net``, else ``"unshare"`` when
``unshare`` can create an unprivileged user and network namespace (many kernels and containers
disable that), else ``"none"``. Each answer comes from really running the probe, because a binary
on PATH says nothing about whether the kernel lets it work.

bwrap also gives the command its own PID namespace (with a reaper as PID 1), so when the sandbox
kills bwrap every process the command started dies with it, even one that left the process group;
under unshare (exec'd in place) and without isolation the process-group kill is what there is.

``clean_environment`` builds the command's environment from an allow-list (PATH, locale, time
zone, terminal, virtualenv), never from the caller's whole environment, so no API key, token or
CI credential reaches a command under a name nobody thought to deny.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from skillopt_ci.sandbox.binds import NO_BINDS, Binds

_CACHE: dict[str, str] = {}
_PROBE_TIMEOUT_S = 10

BWRAP_PREFIX = ("--dev-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent")
# No PID namespace for unshare: the command would be its PID 1, which ignores signals it has no
# handler for (SIGXCPU at the CPU limit, Ctrl-C in a shell script); bwrap puts a reaper there.
UNSHARE_PREFIX = ("--user", "--map-root-user", "--net")

SCRATCH = ".tmp"
_ALLOWED = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL", "VIRTUAL_ENV"}
_ALLOWED_PREFIXES = ("LC_",)
_DENIED = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|_API_|^GITHUB_", re.I)


def works(argv: Sequence[str]) -> bool:
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def isolation() -> str:
    """``"bwrap"``, ``"unshare"`` or ``"none"``: how commands are network-isolated here (cached)."""
    if "answer" not in _CACHE:
        _CACHE["answer"] = _probe()
    return _CACHE["answer"]


def _probe() -> str:
    bwrap = shutil.which("bwrap")
    if bwrap and works([bwrap, *BWRAP_PREFIX, "--", "true"]):
        return "bwrap"
    unshare = shutil.which("unshare")
    if unshare and works([unshare, *UNSHARE_PREFIX, "--", "true"]):
        return "unshare"
    return "none"


def wrap(argv: Sequence[str], how: str, binds: Binds = NO_BINDS) -> list[str]:
    """``argv`` run through the wrapper ``how`` (a value of ``isolation()``), seeing ``binds``."""
    if how == "bwrap":
        extra = [arg for path in binds.read_only for arg in ("--ro-bind", str(path), str(path))]
        extra += [arg for path in binds.read_write for arg in ("--bind", str(path), str(path))]
        return [shutil.which("bwrap") or "bwrap", *BWRAP_PREFIX, *extra, "--", *argv]
    if how == "unshare":
        return [shutil.which("unshare") or "unshare", *UNSHARE_PREFIX, "--", *argv]
    return list(argv)


def allowed_name(name: str) -> bool:
    if _DENIED.search(name):
        return False
    return name in _ALLOWED or name.startswith(_ALLOWED_PREFIXES)


def clean_environment(workspace: Path) -> dict[str, str]:
    """The environment of a sandboxed command: allow-listed variables of this process (PATH,
    locale, TZ, TERM, USER, SHELL, VIRTUAL_ENV) minus any whose name looks like a credential
    (ends in KEY, TOKEN, SECRET, PASSWORD; contains _API_; starts with GITHUB_), with HOME set to
    the workspace and TMPDIR to its scratch folder."""
    env = {name: value for name, value in os.environ.items() if allowed_name(name)}
    env.setdefault("PATH", os.defpath)
    scratch = str(Path(workspace) / SCRATCH)
    env.update(
        HOME=str(workspace),
        TMPDIR=scratch,
        TMP=scratch,
        TEMP=scratch,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONIOENCODING="utf-8",
    )
    return env
