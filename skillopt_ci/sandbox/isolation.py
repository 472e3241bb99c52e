"""How commands are isolated here, and the environment they see.

``isolation()`` answers once per process: ``"bwrap"`` when bubblewrap runs a trivial command with
the whole boundary of ``sandbox.boundary`` (read-only system, private ``/tmp``, its own ``/proc``,
new network, PID, IPC and UTS namespaces), else ``"unshare"`` when ``unshare`` can create an
unprivileged user and network namespace (a network cut only: no boundary), else ``"none"``.
Each answer comes from really running the probe, because a binary on PATH says nothing about
whether the kernel (or AppArmor, on Ubuntu 23.10 and later) lets it work. ``SKILLOPT_SANDBOX=none``
(read at the first probe) makes this machine answer ``"none"``, so both paths can be tested.
Anything but ``"bwrap"`` is *not isolated* for ``sandbox.policy``.

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

_CACHE: dict[str, str] = {}
_PROBE_TIMEOUT_S = 10

FORCE = "SKILLOPT_SANDBOX"
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
    """``"bwrap"``, ``"unshare"`` or ``"none"``: how commands are isolated here (cached)."""
    if "answer" not in _CACHE:
        _CACHE["answer"], _CACHE["why"] = _probe()
    return _CACHE["answer"]


def why_not_isolated() -> str:
    """Why ``isolation()`` is not ``"bwrap"``, in a few words (empty when it is)."""
    isolation()
    return _CACHE["why"]


def bwrap_path() -> str:
    return shutil.which("bwrap") or "bwrap"


def _probe() -> tuple[str, str]:
    if os.environ.get(FORCE, "").strip().lower() == "none":
        return "none", f"{FORCE}=none"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        why = "bubblewrap (bwrap) is not installed"
    elif works(boundary_probe(bwrap)):
        return "bwrap", ""
    elif _without_drop() and works(boundary_probe(bwrap)):
        return "bwrap", ""  # as root: bwrap works, but not as the unprivileged uid
    else:
        why = "bubblewrap cannot create its namespaces (unprivileged user namespaces are off or restricted)"
    unshare = shutil.which("unshare")
    if unshare and works([unshare, *UNSHARE_PREFIX, "--", "true"]):
        return "unshare", why
    return "none", why


def boundary_probe(bwrap: str) -> list[str]:
    """A trivial command under every bwrap option the boundary uses (as the uid commands run as)."""
    from skillopt_ci.sandbox.boundary import NAMESPACES, SYSTEM
    from skillopt_ci.sandbox.identity import _BASE_UID, CAP_ADD, drop_argv, setpriv

    argv = [bwrap, *SYSTEM, "--size", "1048576", "--tmpfs", "/tmp", *NAMESPACES, "--unshare-net"]
    drop = setpriv()
    return [*argv, *CAP_ADD, "--", *drop_argv(drop, _BASE_UID), "true"] if drop else [*argv, "--", "true"]


def _without_drop() -> bool:
    """Stop dropping to an unprivileged uid; True when that changes what the probe runs."""
    from skillopt_ci.sandbox import identity

    if identity.setpriv() is None:
        return False
    identity._CACHE["setpriv"] = ""
    return True


def wrap(argv: Sequence[str], how: str) -> list[str]:
    """``argv`` run through ``unshare`` or nothing (bwrap's command line is ``sandbox.boundary``'s)."""
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
