"""Skills: markdown documents with optional YAML front matter and protected regions.

A protected region is the text between ``<!-- skillopt:protected:start NAME -->`` and
``<!-- skillopt:protected:end NAME -->`` (``NAME`` optional). Step edits may not touch it; only
the slow update may rewrite its named block. Parsing is pure; :func:`load_skill` and
:func:`folder_resources` are the only I/O.

A skill is a lone markdown file or an Agent Skills folder: ``SKILL.md`` plus other files
(``scripts/``, ``references/``, assets). The folder's other files are the skill's *resources*,
hashed with its text, so the whole folder is the skill's identity; the optimizer edits the text
only (:meth:`Skill.with_text`), so a candidate keeps its parent's folder and resources.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.names import NAME_RULE, name_problem

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(\r?\n|\Z)", re.DOTALL | re.MULTILINE)
PROTECTED_RE = re.compile(
    r"<!--\s*skillopt:protected:(?P<kind>start|end)(?:\s+(?P<name>[A-Za-z0-9_.-]+))?\s*-->"
)
_WORD_RE = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")
SKILL_FILE = "SKILL.md"
# Version-control and tool caches: not part of what a skill is, and they change on their own.
JUNK_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
JUNK_FILES = frozenset({".DS_Store", "Thumbs.db"})
JUNK_SUFFIXES = (".pyc", ".pyo")
MAX_RESOURCES = 10_000  # far beyond any real skill; stops a SKILL.md at a repository's top hashing it all
NO_SKILL_NAME = "no skill"  # how the skill-off baseline (``--baseline none``) is named everywhere


@dataclass(frozen=True)
class ProtectedRegion:
    """A protected span of the skill text: ``start``/``end`` are offsets into ``Skill.text``
    covering the markers themselves."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class Skill:
    """A skill document as deployed. ``text`` is the whole file; ``body`` is it without front matter.

    ``folder`` is the skill's folder (absolute) when the skill is ``SKILL.md`` in a folder that
    holds other files; ``resources`` are those files as sorted (relative POSIX path, sha256)
    pairs. Both are empty for a lone file.

    ``hash`` identifies what an agent gets: the sha256 of ``text`` when there are no resources
    (so a lone file's hash is its text's), else a sha256 over the text's digest and every
    (path, digest) pair. Two skills with the same hash behave the same.
    """

    text: str
    body: str
    front_matter: dict[str, Any] = field(default_factory=dict)
    protected: tuple[ProtectedRegion, ...] = ()
    path: str = ""
    warnings: tuple[str, ...] = ()  # soft deviations from the Agent Skills spec (usable, but worth fixing)
    folder: Path | None = None
    resources: tuple[tuple[str, str], ...] = ()
    absent: bool = False  # the skill-off baseline: the agent gets no skill at all (see no_skill)

    @property
    def name(self) -> str:
        if self.absent:
            return NO_SKILL_NAME
        declared = self.front_matter.get("name")
        if isinstance(declared, str) and declared:
            return declared
        p = Path(self.path)
        return p.parent.name if p.name.upper() == "SKILL.MD" and p.parent.name else p.stem

    @property
    def hash(self) -> str:
        if self.absent:  # not the digest of any text, so never equal to a real skill's hash
            return hashlib.sha256(b"skillopt-ci:no-skill\0").hexdigest()
        return skill_hash(self.text, self.resources)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)

    def with_text(self, text: str, *, path: str | None = None) -> Skill:
        """A candidate with ``text`` as its ``SKILL.md``: parsed like any skill (raises
        :class:`InputError` the same way), keeping this skill's folder and resources."""
        parsed = parse_skill(text, path=self.path if path is None else path)
        return replace(parsed, folder=self.folder, resources=self.resources)

    def identity(self) -> dict[str, Any]:
        """What run summaries record about the skill: name, path, hash, tokens, and for a
        folder skill its ``resources`` as ``[{"path", "sha256"}]``."""
        out: dict[str, Any] = {"name": self.name, "path": self.path, "hash": self.hash, "tokens": self.tokens}
        if self.resources:
            out["resources"] = [{"path": rel, "sha256": digest} for rel, digest in self.resources]
        return out


def no_skill() -> Skill:
    """The skill-off baseline: empty text, no folder. Environments send no system message and
    install nothing for it; its ``name`` is :data:`NO_SKILL_NAME` and its ``hash`` is its own."""
    return Skill(text="", body="", absent=True)


def skill_hash(text: str, resources: tuple[tuple[str, str], ...] = ()) -> str:
    """The identity of a skill's text plus its resources (see :class:`Skill`)."""
    text_digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if not resources:
        return text_digest
    digest = hashlib.sha256(b"skill-folder\0" + text_digest.encode() + b"\n")
    for rel, sha in resources:
        digest.update(rel.encode("utf-8") + b"\0" + sha.encode() + b"\n")
    return digest.hexdigest()


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of BPE tokens, within ~15% of common tokenizers on English prose.

    Words cost one token per four letters (rounded up), digits one per three, every other
    non-space character one. Deterministic and dependency-free: it is used for caps and
    reports, never for billing (billing uses the provider's counts).
    """
    total = 0
    for piece in _WORD_RE.findall(text):
        if piece[0].isalpha():
            total += math.ceil(len(piece) / 4)
        elif piece[0].isdigit():
            total += math.ceil(len(piece) / 3)
        else:
            total += 1
    return total


def parse_skill(text: str, *, path: str = "") -> Skill:
    """Parse a skill document. Raises :class:`InputError` naming ``path`` (and line) on bad
    front matter, a ``name`` unusable in branch and file names, or unbalanced markers.

    Deviations from the Agent Skills specification that agent tools tolerate (a long
    description, a name that differs from its folder or breaks the spec's lowercase rule) do not
    raise: they are listed in ``Skill.warnings``.
    """
    where = path or "<skill>"
    if "\x00" in text:
        raise InputError("not a text file (contains NUL bytes)", where=where)
    front: dict[str, Any] = {}
    body = text
    match = FRONT_MATTER_RE.match(text)
    if text.startswith("---") and match is None:
        raise InputError("front matter starts with '---' but has no closing '---' line", where=f"{where}:1")
    if match:
        try:
            loaded = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            at = f"{where}:{line + 2}" if line is not None else where
            raise InputError(f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}", where=at) from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise InputError("front matter must be a YAML mapping (key: value lines)", where=f"{where}:2")
        front = loaded
        body = text[match.end():]
    errors, warnings = front_matter_checks(front, path)
    if errors:
        raise InputError(errors[0], where=f"{where}:1", hint="see the Agent Skills specification")
    return Skill(text=text, body=body, front_matter=front, protected=find_protected(text, where), path=path,
                 warnings=tuple(warnings))


def front_matter_checks(front: dict[str, Any], path: str = "") -> tuple[list[str], list[str]]:
    """(errors, warnings) for the Agent Skills ``name`` and ``description``, checked when present.

    Errors are what would break us or an agent tool: a name unusable in branch and file names
    (see :mod:`skillopt_ci.core.names`), a description that is not text. Warnings are the spec's
    softer rules that published skills break while agent tools still load them.
    """
    errors: list[str] = []
    warnings: list[str] = []
    if "name" in front:
        name = front["name"]
        unsafe = name_problem(name) if isinstance(name, str) else "is not a string"
        if unsafe:
            errors.append(f"front matter name {name!r:.80} {unsafe}: {NAME_RULE}")
        else:
            if not NAME_RE.match(name):
                warnings.append(f"front matter name {name!r} breaks the Agent Skills rule: lowercase a-z, 0-9 and "
                                "single hyphens, not starting or ending with a hyphen")
            folder = Path(path).parent.name if path and Path(path).name.upper() == "SKILL.MD" else ""
            if folder and folder != name:
                warnings.append(f"front matter name {name!r} differs from its folder {folder!r} "
                                "(the Agent Skills spec wants them equal)")
    if "description" in front:
        desc = front["description"]
        if not isinstance(desc, str) or not desc.strip():
            errors.append("front matter description must be a non-empty string")
        elif len(desc) > 1024:
            warnings.append(f"front matter description is {len(desc)} characters; the Agent Skills limit is 1024")
    return errors, warnings


def find_protected(text: str, where: str = "<skill>") -> tuple[ProtectedRegion, ...]:
    """Locate protected regions; markers must pair up, in order, without nesting."""
    regions: list[ProtectedRegion] = []
    open_at: tuple[int, str] | None = None
    for m in PROTECTED_RE.finditer(text):
        name = m.group("name") or ""
        line = text.count("\n", 0, m.start()) + 1
        if m.group("kind") == "start":
            if open_at is not None:
                raise InputError("protected region opened twice without an end marker", where=f"{where}:{line}")
            open_at = (m.start(), name)
        else:
            if open_at is None:
                raise InputError("protected end marker without a start marker", where=f"{where}:{line}")
            if name and open_at[1] and name != open_at[1]:
                raise InputError(
                    f"protected end marker {name!r} closes region {open_at[1]!r}", where=f"{where}:{line}"
                )
            regions.append(ProtectedRegion(name=open_at[1] or name, start=open_at[0], end=m.end()))
            open_at = None
    if open_at is not None:
        line = text.count("\n", 0, open_at[0]) + 1
        raise InputError("protected region has no end marker", where=f"{where}:{line}")
    return tuple(regions)


def load_skill(path: str | Path, *, display: str | None = None) -> Skill:
    """Read and parse a skill file. ``display`` is the path shown in messages (default: as given).

    A ``SKILL.md`` (or a directory holding one) whose folder has other files is a folder skill:
    ``folder`` and ``resources`` are filled by :func:`folder_resources`."""
    p = Path(path)
    shown = display or str(path)
    if not p.exists():
        raise InputError("skill file not found", where=shown, hint="check the path")
    if p.is_dir():
        candidate = p / "SKILL.md"
        if candidate.is_file():
            return load_skill(candidate, display=str(Path(shown) / "SKILL.md"))
        raise InputError("is a directory without a SKILL.md", where=shown)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", where=shown) from None
    skill = parse_skill(text, path=shown)
    if p.name != SKILL_FILE:
        return skill
    folder = p.parent.resolve()
    resources = folder_resources(folder, display=str(Path(shown).parent))
    return replace(skill, folder=folder, resources=resources) if resources else skill


def is_junk(name: str, *, directory: bool) -> bool:
    """A version-control or cache entry that is never part of a skill folder."""
    if directory:
        return name in JUNK_DIRS
    return name in JUNK_FILES or name.endswith(JUNK_SUFFIXES)


def folder_resources(folder: Path, *, display: str | None = None) -> tuple[tuple[str, str], ...]:
    """(relative POSIX path, sha256) of every file under ``folder`` except its top ``SKILL.md``
    and junk (:func:`is_junk`), sorted by path.

    A symbolic link is followed when it stays inside the folder; one that points outside it (or
    nowhere) is an :class:`InputError` naming it, since the skill would not be self-contained.
    Linked directories are not walked twice: their files are counted where they really are.
    """
    root = folder.resolve()
    shown = display or str(folder)
    found: list[tuple[str, str]] = []
    for current, dirs, files in os.walk(root):
        here = Path(current)
        # _check_link raises for a link out of the folder; links to directories inside are skipped.
        dirs[:] = sorted(d for d in dirs if not is_junk(d, directory=True) and not _check_link(here / d, root, shown))
        for name in files:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if rel == SKILL_FILE or is_junk(name, directory=False):
                continue
            _check_link(path, root, shown)
            if not path.is_file():
                continue  # sockets, fifos: not content
            if len(found) >= MAX_RESOURCES:
                raise InputError(f"the skill folder has more than {MAX_RESOURCES} files", where=shown,
                                 hint="a skill folder holds SKILL.md and its own resources only; "
                                      "is SKILL.md at the top of a larger tree?")
            found.append((rel, _file_digest(path, f"{shown}/{rel}")))
    return tuple(sorted(found))


def _check_link(path: Path, root: Path, shown: str) -> bool:
    """True when ``path`` is a symbolic link (to somewhere inside ``root``); raises for a link
    that leaves ``root`` or points nowhere."""
    if not path.is_symlink():
        return False
    rel = path.relative_to(root).as_posix()
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise InputError("symbolic link points nowhere", where=f"{shown}/{rel}",
                         hint="remove it or make it a regular file") from None
    if target != root and root not in target.parents:
        raise InputError(f"symbolic link points outside the skill folder (to {target})", where=f"{shown}/{rel}",
                         hint="copy the file into the skill folder: the folder must be self-contained")
    return True


def _file_digest(path: Path, shown: str) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise InputError(f"cannot read skill file: {exc.strerror}", where=shown) from None
    return digest.hexdigest()
