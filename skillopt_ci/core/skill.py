"""Skills: markdown documents with optional YAML front matter and protected regions.

A protected region is the text between ``<!-- skillopt:protected:start NAME -->`` and
``<!-- skillopt:protected:end NAME -->`` (``NAME`` optional). Step edits may not touch it; only
the slow update may rewrite its named block. Parsing is pure; :func:`load_skill` is the only I/O.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
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

    ``hash`` is the sha256 of ``text`` (what the file holds byte for byte after decoding), so
    two skills with the same hash behave the same for the target model.
    """

    text: str
    body: str
    front_matter: dict[str, Any] = field(default_factory=dict)
    protected: tuple[ProtectedRegion, ...] = ()
    path: str = ""
    warnings: tuple[str, ...] = ()  # soft deviations from the Agent Skills spec (usable, but worth fixing)

    @property
    def name(self) -> str:
        declared = self.front_matter.get("name")
        if isinstance(declared, str) and declared:
            return declared
        p = Path(self.path)
        return p.parent.name if p.name.upper() == "SKILL.MD" and p.parent.name else p.stem

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


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
    """Read and parse a skill file. ``display`` is the path shown in messages (default: as given)."""
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
    return parse_skill(text, path=shown)
