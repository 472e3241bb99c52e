"""Where the tests find the real agent CLIs (Codex, Claude Code).

``agent_bin(name)`` returns the binary ``name`` (``codex``, ``claude``; an environment name such
as ``claude-code`` also works) from ``$SKILLOPT_AGENT_CLIS/node_modules/.bin`` (the folder
``./test.sh`` installs the pinned versions into), else from PATH, and skips the test when neither
has it, so a machine without Node runs everything else.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from skillopt_ci.envs.agent_clis import AGENT_CLIS

SKIP_REASON = "install the pinned agent CLIs: ./test.sh or skillopt-ci install-agents"


def installed_bin_dir() -> Path | None:
    """``$SKILLOPT_AGENT_CLIS/node_modules/.bin`` when the variable is set."""
    folder = os.environ.get("SKILLOPT_AGENT_CLIS")
    return Path(folder) / "node_modules" / ".bin" if folder else None


def agent_bin(name: str) -> Path:
    binary = AGENT_CLIS[name].binary if name in AGENT_CLIS else name
    bin_dir = installed_bin_dir()
    if bin_dir is not None and os.access(bin_dir / binary, os.X_OK):
        return bin_dir / binary  # the pinned versions first
    found = shutil.which(binary)
    if found:
        return Path(found)
    pytest.skip(f"{binary} not found: {SKIP_REASON}")
