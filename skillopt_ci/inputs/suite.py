"""Eval suites: ``suite.yaml`` plus task splits (``train``, ``val``, ``test``).

Loading is strict: every task has an id, ids are unique within the suite (an id in two splits is
leakage, an error), every ``{{ placeholder }}`` of the prompt resolves for every task, every file a
task references (``files``, ``images``) exists inside the suite directory, and a bad line is named
by file and line number. The suite hash covers everything a result depends on: ``suite.yaml``,
the split files, the Python files beside them and every file a task references.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import is_junk
from skillopt_ci.core.task import PATH_FIELDS, Task, task_paths
from skillopt_ci.core.template import fill, placeholders
from skillopt_ci.inputs.assets import INDEX_FILE, AssetIndex, is_asset_ref, load_assets
from skillopt_ci.inputs.fork_data import FORK_TASKS_KEY, fork_tasks_problem
from skillopt_ci.inputs.images import HEAD_BYTES, KNOWN, describe_head, image_type
from skillopt_ci.inputs.yamlfile import Problem, load_yaml, schema_problems

SPLITS = ("train", "val", "test")
# What model APIs accept as images (envs.base.IMAGE_TYPES maps them to media types).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
DEFAULT_PROMPT = "{{ input }}"


@dataclass(frozen=True)
class Suite:
    """A loaded suite. ``splits`` maps split name to its tasks in file order."""

    name: str
    path: Path
    display: str
    prompt: str
    scorer: Mapping[str, Any]
    splits: Mapping[str, tuple[Task, ...]]
    hash: str
    environment: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"type": "chat"}))
    repeats: int = 1
    description: str = ""
    split_files: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    assets: AssetIndex = field(default_factory=AssetIndex)
    scorer_line: int | None = None  # the line of suite.yaml's scorer type (for errors about it)

    def tasks(self, split: str) -> tuple[Task, ...]:
        if split not in self.splits:
            have = ", ".join(self.splits) or "none"
            raise InputError(
                f"suite {self.name!r} has no {split!r} split (splits found: {have})",
                where=self.display,
                hint=f"add {split}.jsonl to the suite directory or choose another --split",
            )
        return self.splits[split]

    def render_prompt(self, task: Task) -> str:
        return render_template(self.prompt, task)


def render_template(template: str, task: Task) -> str:
    """Replace each ``{{ path }}`` with the task's field; non-strings are written as JSON."""

    def value(path: str) -> str:
        found = task.get(path)
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return fill(template, value)


def load_suite(path: Path, display: str | None = None) -> Suite:
    """Load a suite directory. Raises :class:`InputError` on the first problem."""
    suite, problems = check_suite(path, display)
    if problems:
        more = f"; {len(problems) - 1} more problem(s): run skillopt-ci validate" if len(problems) > 1 else ""
        raise problems[0].to_error(hint=f"fix the suite{more}" if more else None)
    assert suite is not None
    return suite


def scorer_where(suite: Suite) -> str:
    """Where a suite's scorer is declared, for its errors: ``<suite>/suite.yaml:<line>``."""
    line = f":{suite.scorer_line}" if suite.scorer_line else ""
    return f"{suite.display}/suite.yaml{line}"


def check_suite(path: Path, display: str | None = None) -> tuple[Suite | None, list[Problem]]:
    """Load a suite and return every problem found (empty when it is valid)."""
    shown = display or str(path)
    if not path.is_dir():
        return None, [Problem(shown, "suite directory not found")]
    yaml_file = path / "suite.yaml"
    if not yaml_file.is_file():
        return None, [Problem(shown, "no suite.yaml in the suite directory")]
    doc = load_yaml(yaml_file, f"{shown}/suite.yaml")
    if not isinstance(doc.data, dict):
        return None, [Problem(doc.file, "must be a YAML mapping with at least a scorer")]
    problems = schema_problems(doc, "suite.schema.json")
    schema_ok = not problems
    data: dict[str, Any] = doc.data
    refusal = fork_tasks_problem(data)  # an opt-in that would let a fork's tasks reach code outside the sandbox
    if refusal:
        problems.append(doc.problem((FORK_TASKS_KEY,), refusal))
    # Even when suite.yaml has schema problems, read the tasks so that every problem is listed.
    prompt = given if isinstance(given := data.get("prompt"), str) else DEFAULT_PROMPT
    env = data.get("environment", "chat")
    env = dict(env) if isinstance(env, dict) else {"type": env}
    declared = named if isinstance(named := data.get("splits"), dict) else {}

    files = _split_files(path, declared, shown, problems)
    splits = _read_splits(files, shown, prompt, problems)
    assets = _assets(path, data.get("assets"), shown, problems)
    referenced = _referenced_files(path, splits, problems, assets) + _scorer_files(path, data.get("scorer"))
    problems += _trigger_problems(splits, shown)
    if not files and not problems:
        problems.append(Problem(shown, "no split files found (expected train/val/test .jsonl or .json)"))
    if not schema_ok:
        return None, problems
    suite = Suite(
        name=data.get("name") or path.name,
        path=path,
        display=shown,
        prompt=prompt,
        scorer=MappingProxyType(dict(data["scorer"])),
        splits=MappingProxyType(splits),
        hash=suite_hash(path, files, referenced),
        environment=MappingProxyType(env),
        repeats=int(data.get("repeats", 1)),
        description=data.get("description", ""),
        split_files=MappingProxyType({k: f"{shown}/{v.name}" for k, v in files.items()}),
        assets=assets,
        scorer_line=doc.line_of(("scorer", "type")),
    )
    return suite, problems


def _assets(path: Path, roots: Any, shown: str, problems: list[Problem]) -> AssetIndex:
    try:
        return load_assets(path, roots, shown)
    except InputError as exc:
        problems.append(Problem(exc.where or shown, exc.message))
        return AssetIndex()


def _read_splits(files: Mapping[str, Path], shown: str, prompt: str,
                 problems: list[Problem]) -> dict[str, tuple[Task, ...]]:
    """The tasks of every split file; an empty split, an id seen twice (a duplicate, or leakage
    across splits) and a prompt placeholder a task has no value for are added to ``problems``."""
    splits: dict[str, tuple[Task, ...]] = {}
    first_seen: dict[str, tuple[str, str]] = {}
    for split, file in files.items():
        before = len(problems)
        tasks = _read_tasks(file, f"{shown}/{file.name}", problems)
        if not tasks and len(problems) == before:
            # eval, gate and train refuse an empty split; say so here too (validate lists it).
            problems.append(Problem(f"{shown}/{file.name}", f"the {split!r} split has no tasks; add tasks or delete the file"))
        for task in tasks:
            if task.id in first_seen:
                other_split, other_source = first_seen[task.id]
                kind = "duplicate id" if other_split == split else f"leakage: also in the {other_split} split"
                problems.append(Problem(task.source, f"task id {task.id!r} is also at {other_source} ({kind})"))
            else:
                first_seen[task.id] = (split, task.source)
            problems.extend(_missing_placeholders(prompt, task))
        splits[split] = tasks
    return splits


def _missing_placeholders(prompt: str, task: Task) -> list[Problem]:
    problems = []
    for placeholder in placeholders(prompt):
        try:
            task.get(placeholder)
        except KeyError:
            problems.append(
                Problem(task.source, f"prompt placeholder {{{{ {placeholder} }}}} has no value in task {task.id!r}")
            )
    return problems


def _split_files(path: Path, declared: dict[str, str], shown: str, problems: list[Problem]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for split in SPLITS:
        if isinstance(declared.get(split), str):
            candidate = path / declared[split]
            if not candidate.is_file():
                problems.append(Problem(f"{shown}/suite.yaml", f"no such file {declared[split]!r}", f"splits.{split}"))
                continue
            files[split] = candidate
            continue
        found = [path / f"{split}{ext}" for ext in (".jsonl", ".json") if (path / f"{split}{ext}").is_file()]
        if len(found) > 1:
            problems.append(Problem(shown, f"both {split}.jsonl and {split}.json exist; keep one"))
        if found:
            files[split] = found[0]
    return files


def _read_tasks(file: Path, shown: str, problems: list[Problem]) -> tuple[Task, ...]:
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(shown, f"not UTF-8 text (byte {exc.start})"))
        return ()
    records: list[tuple[str, Any]] = []
    if file.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(Problem(f"{shown}:{exc.lineno}", f"not valid JSON: {exc.msg}"))
            return ()
        if not isinstance(data, list):
            problems.append(Problem(shown, "a .json split must hold a list of task objects"))
            return ()
        records = [(f"{shown}[{i}]", item) for i, item in enumerate(data)]
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((f"{shown}:{lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                problems.append(Problem(f"{shown}:{lineno}", f"not valid JSON: {exc.msg} (column {exc.colno})"))
    tasks = []
    for source, item in records:
        task = _task(item, source, problems)
        if task is not None:
            tasks.append(task)
    return tuple(tasks)


def _task(item: Any, source: str, problems: list[Problem]) -> Task | None:
    if not isinstance(item, dict):
        problems.append(Problem(source, f"a task must be a JSON object, got {type(item).__name__}"))
        return None
    task_id = item.get("id")
    if isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or str(task_id).strip() == "":
        problems.append(Problem(source, "task has no \"id\" (a non-empty string or integer)"))
        return None
    if "input" not in item:
        problems.append(Problem(source, f"task {task_id!r} has no \"input\""))
        return None
    if "should_trigger" in item and not isinstance(item["should_trigger"], bool):
        problems.append(Problem(source, f"task {task_id!r}: \"should_trigger\" must be true or false, "
                                        f"got {json.dumps(item['should_trigger'])}"))
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        problems.append(Problem(source, f"task {task_id!r}: \"metadata\" must be an object"))
        metadata = {}
    return Task(
        id=str(task_id), input=item["input"], expected=item.get("expected"), metadata=metadata, fields=item, source=source
    )


def _trigger_problems(splits: Mapping[str, tuple[Task, ...]], shown: str) -> list[Problem]:
    """Trigger tasks need both kinds: requests the skill is for and near-misses it is not for
    (with one kind only, a skill that always or never triggers scores perfectly)."""
    kinds = {t.should_trigger for tasks in splits.values() for t in tasks} - {None}
    if len(kinds) != 1:
        return []
    (given,) = kinds
    missing = "false (requests the skill is not for)" if given else "true (requests the skill is for)"
    return [Problem(shown, f"every trigger task says should_trigger: {str(given).lower()}; add tasks with "
                           f"should_trigger: {missing}, or a skill that always (never) triggers scores perfectly")]


def _referenced_files(path: Path, splits: Mapping[str, tuple[Task, ...]], problems: list[Problem],
                      assets: AssetIndex) -> list[Path]:
    """Every file the tasks reference through ``files`` or ``images`` (a referenced directory
    counts as the files under it); a bad reference is added to ``problems`` at the task's line.
    An asset (``@root/path``) is checked against ``assets.json`` and not read: its recorded hash
    is in the suite hash through that file."""
    root = path.resolve()
    found: set[Path] = set()
    for tasks in splits.values():
        for task in tasks:
            for key in PATH_FIELDS:
                try:
                    paths = task_paths(task, key)
                except InputError as exc:
                    problems.append(Problem(task.source, exc.message))
                    continue
                for dest, relative in paths.items():
                    if is_asset_ref(relative):
                        problem = assets.problem(relative)
                        if problem:
                            problems.append(Problem(task.source, f"task {task.id!r}: {problem}"))
                        continue
                    problem = _reference_problem(root, task, key, dest, relative)
                    if problem:
                        problems.append(Problem(task.source, problem))
                    else:
                        found.update(_files_under(root / relative))
    return sorted(found)


def _scorer_files(path: Path, scorer: Any) -> list[Path]:
    """The files a ``verify`` scorer copies into the workspace (its ``files`` option), so that a
    changed checker changes the suite hash and with it every cached scored rollout. Problems with
    them are the scorer's to report."""
    if not isinstance(scorer, dict) or scorer.get("type") != "verify" or not isinstance(scorer.get("files"), list):
        return []
    root = path.resolve()
    found: list[Path] = []
    for relative in scorer["files"]:
        target = (root / str(relative)).resolve()
        if target != root and root in target.parents and target.exists():
            found.extend(_files_under(target))
    return found


def _reference_problem(root: Path, task: Task, key: str, dest: str, relative: str) -> str | None:
    """Why a task's reference is unusable, or ``None``."""
    where = f"task {task.id!r}: {key} {relative!r}"
    for shown in dict.fromkeys((dest, relative)):
        if not shown.strip():
            return f"task {task.id!r}: {key} has an empty path"
        if Path(shown).is_absolute() or shown.startswith(("/", "\\")) or ".." in Path(shown).parts:
            return f"task {task.id!r}: {key} path {shown!r} leaves the suite directory; use a path relative to it"
    target = root / relative
    try:
        resolved = target.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"{where} does not exist in the suite directory"
    if resolved != root and root not in resolved.parents:
        return f"{where} leaves the suite directory (a symbolic link to {resolved}); copy the file into it"
    if key == "images" and not resolved.is_file():
        return f"{where} is not a file"
    if key == "images" and target.suffix.lower() not in IMAGE_SUFFIXES:
        return f"{where} is not PNG, JPEG, GIF or WebP (what model APIs accept); convert it"
    if key == "images":
        return _image_problem(where, resolved)
    return None


def _image_problem(where: str, path: Path) -> str | None:
    """Why a file named as an image is none a model API takes (its bytes, not its name), or ``None``."""
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError as exc:
        return f"{where} cannot be read: {exc.strerror}"
    if image_type(head) is None:
        return f"{where} is not a {KNOWN} image ({describe_head(head)}); convert it or fix the path"
    return None


def _files_under(target: Path) -> list[Path]:
    if not target.is_dir():
        return [target]
    out = []
    for file in sorted(target.rglob("*")):
        parts = file.relative_to(target).parts
        if file.is_file() and not any(is_junk(p, directory=True) for p in parts[:-1]) \
                and not is_junk(parts[-1], directory=False):
            out.append(file)
    return out


def suite_hash(path: Path, split_files: Mapping[str, Path], referenced: Sequence[Path] = ()) -> str:
    """sha256 over suite.yaml, the split files, any Python code beside them, then every file the
    tasks reference (named by its path in the suite directory, so a moved image counts too).
    Without references the hash is what it was before tasks could reference files."""
    digest = hashlib.sha256()
    index = [path / INDEX_FILE] if (path / INDEX_FILE).is_file() else []
    parts = sorted(set([path / "suite.yaml", *split_files.values(), *sorted(path.glob("*.py")), *index]))
    for part in parts:
        digest.update(part.name.encode() + b"\0")
        digest.update(part.read_bytes() + b"\0")
    root, seen = path.resolve(), {p.resolve() for p in parts}
    for file in sorted({f.resolve() for f in referenced} - seen):
        digest.update(b"file:" + file.relative_to(root).as_posix().encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()
