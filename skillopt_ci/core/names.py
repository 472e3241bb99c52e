"""Names that end up in branch names, file names and run-directory paths.

Contract:
- :func:`name_problem` is the rule a skill name must meet (checked up front by ``validate`` and by
  every command that loads the config): 1-64 characters of letters, digits, ``.``, ``_`` and
  ``-``, starting with a letter or digit, no ``..``, not ending in ``.`` or ``.lock``. Such a name
  is a valid git ref component and a portable file name as it is.
- :func:`slug` turns *any* text into such a component. It returns a valid name unchanged;
  when it had to change something it appends ``-`` and 8 hex digits of the original's sha256, so
  two different inputs never share a slug (``my skill`` and ``my-skill`` stay apart).
- Every branch and run-directory name built from a user-supplied name goes through :func:`slug`
  (:func:`run_dir_name`, :func:`training_branch`). Pure functions, no I/O.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 64
NAME_RULE = (
    "use 1-64 characters of letters, digits, '.', '_' and '-', starting with a letter or digit, "
    "without '..' and not ending in '.' or '.lock'"
)
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._-]+")


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a skill name (used in branch and file names), or ``None``."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long"
    if not _NAME_RE.fullmatch(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))})
        return f"contains {''.join(bad)!r}" if bad else "must start with a letter or digit"
    if ".." in name:
        return "contains '..'"
    if name.endswith((".", ".lock")):
        return f"ends in {'.lock' if name.endswith('.lock') else '.'!r}"
    return None


def slug(text: str, max_len: int = MAX_NAME) -> str:
    """``text`` as one safe path/ref component (see the module docstring); deterministic."""
    if name_problem(text) is None and len(text) <= max_len:
        return text
    core = _UNSAFE_RE.sub("-", text)
    core = re.sub(r"\.{2,}", ".", core)
    core = re.sub(r"-{2,}", "-", core)
    core = core[: max(1, max_len - 9)].strip(".-_")
    while core.endswith(".lock"):
        core = core[: -len(".lock")].rstrip(".-_")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{core}-{digest}" if core else digest


def run_dir_name(*parts: str) -> str:
    """A run-directory name from parts (each slugged, then joined with ``-``), at most ~200 bytes."""
    return "-".join(slug(p) for p in parts if p)


def training_branch(skill_name: str) -> str:
    """The branch a training pull request is proposed from: ``skillopt/train/<skill>``."""
    return f"skillopt/train/{slug(skill_name)}"
