"""Installing the pinned agent CLIs (``envs.agent_clis``) with npm, for ``skillopt-ci install-agents``.

``needed_clis(config)`` reads the ``environment`` of every configured skill's suite (only its
``suite.yaml``: a suite with other problems still says which CLI it runs; the eval, gate or
train that follows reports those problems) and returns the agent CLIs they use, in the order of
``AGENT_CLIS``. ``install(prefix, clis)`` runs ``npm install --prefix PREFIX --no-audit --no-fund
<package@version>...`` once for all of them, unless every one is already in
``PREFIX/node_modules/.bin`` and reports its pinned version (``<binary> --version``), so a cached
folder is reused without touching the registry. npm missing from PATH is an ``InputError`` with
what to install; npm failing, or a binary reporting another version after the install, is a
``RuntimeFailure``. npm's own output goes to stderr.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skillopt_ci.core.errors import InputError, RuntimeFailure
from skillopt_ci.envs.agent_clis import AGENT_CLIS, AgentCli
from skillopt_ci.inputs.config import Config
from skillopt_ci.inputs.yamlfile import load_yaml

NPM_HINT = ("install Node.js 18 or later with npm (https://nodejs.org; in a workflow: "
            "actions/setup-node), then run this again")
_VERSION_TIMEOUT_S = 60


@dataclass(frozen=True)
class Installed:
    """The outcome: where the binaries are, and whether npm ran (False: the folder was reused)."""

    bin_dir: Path
    clis: tuple[AgentCli, ...]
    ran_npm: bool


def default_prefix() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "skillopt-ci" / "agents"


def select(only: str | None) -> tuple[AgentCli, ...]:
    if only is None:
        return tuple(AGENT_CLIS.values())
    if only not in AGENT_CLIS:
        raise InputError(f"--only {only!r}: choose one of {', '.join(AGENT_CLIS)}")
    return (AGENT_CLIS[only],)


def suite_environment(suite_dir: Path) -> str | None:
    """The environment type a suite's ``suite.yaml`` names ("chat" when it names none); None when
    the file cannot be read."""
    try:
        data = load_yaml(suite_dir / "suite.yaml").data
    except (InputError, OSError):
        return None
    if not isinstance(data, dict):
        return None
    env = data.get("environment", "chat")
    kind = env.get("type") if isinstance(env, dict) else env
    return kind if isinstance(kind, str) else None


def needed_clis(config: Config, candidates: Sequence[AgentCli]) -> tuple[AgentCli, ...]:
    """The ``candidates`` whose environment some configured skill's suite uses."""
    used = {suite_environment(entry.suite) for entry in config.skills}
    return tuple(cli for cli in candidates if cli.environment in used)


def npm_argv(npm: str, prefix: Path, clis: Sequence[AgentCli]) -> list[str]:
    return [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *(c.npm_spec for c in clis)]


def reported_version(binary: Path) -> str | None:
    """The first ``x.y.z`` in ``<binary> --version``; None when it cannot be run."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=_VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\d+\.\d+\.\d+(?:[-+][\w.]+)?", done.stdout + done.stderr)
    return found.group(0) if done.returncode == 0 and found else None


def up_to_date(bin_dir: Path, clis: Sequence[AgentCli]) -> bool:
    return all(reported_version(bin_dir / c.binary) == c.version for c in clis)


def install(prefix: Path, clis: Sequence[AgentCli]) -> Installed:
    """Install ``clis`` into ``prefix`` (see the module docstring); returns where they are."""
    prefix = Path(prefix).absolute()
    bin_dir = prefix / "node_modules" / ".bin"
    if up_to_date(bin_dir, clis):
        return Installed(bin_dir, tuple(clis), ran_npm=False)
    npm = shutil.which("npm")
    if npm is None:
        raise InputError("npm is not on PATH; the agent CLIs are npm packages", hint=NPM_HINT)
    prefix.mkdir(parents=True, exist_ok=True)
    argv = npm_argv(npm, prefix, clis)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=2, check=False)  # npm talks on stderr
    except OSError as exc:
        raise RuntimeFailure(f"npm could not be started: {exc}") from exc
    if done.returncode != 0:
        raise RuntimeFailure(f"npm install exited with code {done.returncode} (its output is above)",
                             hint=f"run it yourself to see why: {' '.join(argv[1:])}")
    for cli in clis:
        version = reported_version(bin_dir / cli.binary)
        if version != cli.version:
            got = f"reports {version}" if version else "does not run"
            raise RuntimeFailure(f"{bin_dir / cli.binary} {got} after the install, expected {cli.version}")
    return Installed(bin_dir, tuple(clis), ran_npm=True)
