"""What a command sees under bubblewrap: the bwrap argument list of one command.

``bwrap_argv(argv, workspace, binds, network)`` builds, in this order (a later mount wins):

1. ``--ro-bind / /``: the whole system, read-only;
2. a fresh ``/dev``, its own ``/proc``, a private ``/tmp`` (a tmpfs of ``tmp_mb``);
3. a tmpfs over every **hidden** folder (``hidden_folders``): the git checkout around the current
   directory and ``GITHUB_WORKSPACE`` (its ``.git/config`` holds the job token), the runner's
   files (``RUNNER_TEMP``, the folders of ``GITHUB_ENV``, ``GITHUB_OUTPUT``, ``GITHUB_PATH``,
   ``GITHUB_STEP_SUMMARY``, ``GITHUB_EVENT_PATH``), the user's home, ``/run`` and ``/var/run``;
4. read-only again what commands legitimately need and a hidden folder (or ``/tmp``) covers: the
   Python installation (``sys.prefix``, ``sys.base_prefix``, the interpreter's folder), the
   program's own folder (``argv[0]`` resolved), the caller's read-only ``Binds``;
5. read-write: the caller's read-write ``Binds`` (``run_process`` adds the command's ``HOME``
   when the caller set it outside the workspace), then the workspace;
6. new network (unless ``network``), PID, IPC and UTS namespaces, a new session (no TIOCSTI into
   our terminal), death with its parent.

A bind (or the workspace) that is a hidden folder or contains one is refused with
``SandboxError``: binding the home or the checkout would undo the hiding. Hidden folders are
computed for every command from the current directory and environment, because tests and the
Action change them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from skillopt_ci.sandbox.binds import Binds
from skillopt_ci.sandbox.paths import SandboxError

RUNNER_FILES = ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_EVENT_PATH")
NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session")
SYSTEM = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def checkout_root(start: Path) -> Path | None:
    """The top folder of the git repository holding ``start`` (a ``.git`` file or folder), if any."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def hidden_folders(environ: dict[str, str] | None = None) -> list[Path]:
    """The folders a command must not see, real paths, none inside another, ``/`` never."""
    env = os.environ if environ is None else environ
    found: list[Path] = []
    for start in (os.getcwd(), env.get("GITHUB_WORKSPACE", "")):
        root = checkout_root(_real(start)) if start else None
        if root is not None:
            found.append(root)
    if env.get("RUNNER_TEMP"):
        found.append(_real(env["RUNNER_TEMP"]))
    found += [_real(env[name]).parent for name in RUNNER_FILES if env.get(name)]
    found += [_real(home) for home in {env.get("HOME", ""), str(Path.home())} if home]
    found += [_real("/run"), _real("/var/run")]
    return _outermost(p for p in found if p.is_dir() and p != Path("/"))


def _outermost(paths: Iterable[Path]) -> list[Path]:
    kept: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return kept


def _under(path: Path, folders: Sequence[Path]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def _check_bind(path: Path, hidden: Sequence[Path], what: str) -> None:
    if not path.exists():
        raise SandboxError(f"{path}: {what} does not exist")
    exposed = [h for h in hidden if h == path or path in h.parents]
    if exposed:
        raise SandboxError(f"{path}: {what} would expose {exposed[0]}, which commands must not see",
                           hint="bind a folder inside it instead")


def python_folders() -> list[Path]:
    """The Python installation a ``python`` tool runs: the venv, its base and the interpreter."""
    # skillopt_ci's own package too: an editable install keeps it in a checkout, which is hidden
    # (the function-tool runner is ``python -m skillopt_ci.envs.function_runner``).
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [_real(p) for p in {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                               package}]


def bwrap_argv(bwrap: str, argv: Sequence[str], workspace: Path, binds: Binds, *, network: bool,
               tmp_mb: int, program: str | None = None, inner: Sequence[str] = ()) -> list[str]:
    """The full command line: ``bwrap`` with the mounts above, then ``inner`` (bwrap options and a
    prefix of the command: ``identity``'s uid drop), then ``argv``."""
    hidden = hidden_folders()
    workspace = _real(workspace)
    _check_bind(workspace, hidden, "the workspace")
    for path in (*binds.read_only, *binds.read_write):
        _check_bind(path, hidden, "a sandbox bind")
    args = [bwrap, *SYSTEM, "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    for folder in hidden:
        args += ["--tmpfs", str(folder)]
    needed = _outermost([*python_folders(), *([_real(program).parent] if program else [])])
    for path in needed:
        if _under(path, [*hidden, Path("/tmp")]) and not any(path == h or path in h.parents for h in hidden):
            args += _bind("--ro-bind", path, [*hidden, Path("/tmp")])
    if network:
        args += _resolver_binds(hidden)
    for path in binds.read_only:
        args += _bind("--ro-bind", path, [*hidden, Path("/tmp")])
    for path in binds.read_write:
        args += _bind("--bind", path, [*hidden, Path("/tmp")])
    args += [*_bind("--bind", workspace, [*hidden, Path("/tmp")]), "--chdir", str(workspace)]
    args += [*NAMESPACES, *([] if network else ["--unshare-net"])]
    inner = list(inner)
    split = inner.index("--") if "--" in inner else 0
    return [*args, *inner[:split], "--", *inner[split + 1 if inner else 0:], *argv]


def _bind(option: str, path: Path, covered: Sequence[Path]) -> list[str]:
    """``option path path``, after creating (world-traversable) the folders between the tmpfs that
    covers ``path`` and ``path``: bwrap would make them 0700, closed to an unprivileged uid."""
    args: list[str] = []
    top = next((c for c in covered if c in path.parents), None)
    if top is not None:
        for folder in reversed([p for p in path.parents if top in p.parents]):
            args += ["--perms", "0755", "--dir", str(folder)]
    return [*args, option, str(path), str(path)]


def _resolver_binds(hidden: Sequence[Path]) -> list[str]:
    """With the network on, name resolution still works when ``/etc/resolv.conf`` points into
    ``/run`` (systemd-resolved): only that file's folder is bound back, read-only."""
    target = _real("/etc/resolv.conf")
    if target.exists() and _under(target, hidden):
        return _bind("--ro-bind", target.parent, hidden)
    return []
