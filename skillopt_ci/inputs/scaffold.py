"""``skillopt-ci init``: copy the example project into a directory, never overwriting anything,
and make git ignore ``.skillopt/`` (run directories and the response cache) in ``.gitignore``,
creating the file or appending one line to it, never twice."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from skillopt_ci.core.errors import InputError

# Package file → where it goes in the user's repository.
_RENAMES = {"workflow.yml": ".github/workflows/skillopt.yml"}
_SKIP = {"__init__.py", "__pycache__"}


def scaffold_files() -> dict[str, bytes]:
    """Relative destination path → content, for every file ``init`` writes."""
    root = resources.files("skillopt_ci.inputs.example")
    files: dict[str, bytes] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name in _SKIP or child.name.endswith(".pyc"):
                continue
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            else:
                files[_RENAMES.get(rel, rel)] = child.read_bytes()

    walk(root, "")
    return files


def example_path(rel: str) -> Path:
    """A path to a file of the bundled example (for the demo), usable as a real file."""
    return Path(str(resources.files("skillopt_ci.inputs.example").joinpath(rel)))


def init_project(target: Path) -> list[str]:
    """Write the example project into ``target``. Refuses (exit 2, nothing written) if any of
    the files already exists. Returns the relative paths written."""
    files = scaffold_files()
    clashes = sorted(rel for rel in files if (target / rel).exists())
    if clashes:
        raise InputError(
            f"refusing to overwrite {len(clashes)} existing file(s): {', '.join(clashes[:5])}",
            where=str(target),
            hint="run init in an empty directory, or move those files away",
        )
    for rel, content in files.items():
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(content)
    return sorted(files) + ([GITIGNORE] if ignore_skillopt(target) else [])


GITIGNORE = ".gitignore"
IGNORED = ".skillopt/"


def ignore_skillopt(target: Path) -> bool:
    """Make ``target/.gitignore`` ignore ``.skillopt/``: create the file or append the line.
    Returns whether the file was written (False when a line already ignores the folder)."""
    path = target / GITIGNORE
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    if any(line.strip().strip("/") in (".skillopt", ".skillopt/*", ".skillopt/**") for line in text.splitlines()):
        return False
    separator = "\n" if text and not text.endswith("\n") else ""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"{separator}{IGNORED}\n")
    return True
