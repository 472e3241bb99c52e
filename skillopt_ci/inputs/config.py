"""``skillopt.yml``: YAML → JSON Schema validation → one typed, frozen config object.

Paths in the config are relative to the config file's directory. Secrets never live in the
config; keys come from environment variables (see :mod:`skillopt_ci.models.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from pkgutil import resolve_name
from types import MappingProxyType
from typing import Any

from skillopt_ci.core.codec import Record
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.names import NAME_RULE, name_problem
from skillopt_ci.core.redact import strip_userinfo
from skillopt_ci.core.registry import Registry
from skillopt_ci.inputs.acceptance import DEFAULT as ACCEPTANCE_DEFAULT
from skillopt_ci.inputs.acceptance import read_legacy
from skillopt_ci.inputs.yamlfile import Problem, YamlDoc, load_yaml, schema_problems

CONFIG_NAME = "skillopt.yml"


@dataclass(frozen=True)
class ModelSpec:
    """One model by role. ``params`` are sent with every call."""

    role: str
    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    api_version: str | None = None
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float = 120.0
    max_retries: int = 4
    max_retry_wait: float = 300.0  # seconds; caps every wait between retries, Retry-After included
    api: str = "chat"  # "responses": the OpenAI Responses API (for a provider that speaks it)
    structured_output: str = "auto"  # how a JSON reply is asked for: models/structured.py

    @classmethod
    def from_dict(cls, role: str, data: Mapping[str, Any]) -> ModelSpec:
        return cls(
            role=role,
            provider=data["provider"],
            model=data["model"],
            base_url=data.get("base_url"),
            api_key_env=data.get("api_key_env"),
            api_version=data.get("api_version"),
            params=MappingProxyType(dict(data.get("params") or {})),
            timeout=float(data.get("timeout", 120.0)),
            max_retries=int(data.get("max_retries", 4)),
            max_retry_wait=float(data.get("max_retry_wait", 300.0)),
            api=str(data.get("api", "chat")),
            structured_output=str(data.get("structured_output", "auto")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything but secrets: keys are only named, never stored, and user-info in the base URL
        (``https://user:password@host``) is left out."""
        out: dict[str, Any] = {"provider": self.provider, "model": self.model, "params": dict(self.params)}
        for key in ("base_url", "api_key_env", "api_version"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if "base_url" in out:
            out["base_url"] = strip_userinfo(out["base_url"])
        if self.api != "chat":  # left out by default, so snapshots of chat models are unchanged
            out["api"] = self.api
        if self.structured_output != "auto":
            out["structured_output"] = self.structured_output
        return out


@dataclass(frozen=True)
class SkillEntry:
    name: str
    path: Path
    suite: Path


@dataclass(frozen=True)
class CacheSettings:
    mode: str = "read-write"
    path: Path = Path(".skillopt/cache.sqlite")


@dataclass(frozen=True)
class Budgets:
    max_tokens: int | None = None
    max_dollars: float | None = None
    max_wall_seconds: float | None = None
    max_target_calls: int | None = None  # target-model calls sent (a cache hit is not sent, so not counted)


@dataclass(frozen=True)
class BatchSettings:
    """How ``eval --batch`` collects requests into provider batches and waits for them
    (:mod:`skillopt_ci.models.batch`)."""

    quiet_seconds: float = 2.0
    poll_seconds: float = 5.0
    max_poll_seconds: float = 60.0
    max_requests: int = 50_000


@dataclass(frozen=True)
class Limits:
    """Sizes above which inputs get a warning (``limits:``), in estimated tokens."""

    skill_tokens: int = 8000
    prompt_tokens: int = 8000


@dataclass(frozen=True)
class GatePolicy(Record):
    """The ``gate:`` section. See config.schema.json for what each field means."""

    split: str = "val"
    repeats: int | None = None
    margin: float = 0.0
    detect: float | None = None  # the drop the gate should be able to see (validate warns if not)
    confidence: float = 0.95
    min_coverage: float = 0.8
    min_score: float | None = None
    fail_on: tuple[str, ...] = ("regressed",)
    override_label: str = "skillopt:allow-regression"
    resamples: int = 2000
    seed: int = 0


@dataclass(frozen=True)
class TrainPolicy(Record):
    """The ``train:`` section. See config.schema.json for what each field means."""

    epochs: int = 4  # at most (see patience): 4 with patience 1 was best on the worst bench worlds (docs/decisions.md)
    batch_size: int = 8
    group_size: int = 1  # trajectories per reflection call: 1 was best on the worst bench world (docs/decisions.md)
    max_edits_per_reflection: int = 3
    budget_schedule: str = "cosine"
    budget_start: int = 4
    budget_end: int = 2
    min_gain: float = 0.0
    repeats: int | None = None
    max_edit_chars: int = 800
    max_skill_tokens: int = 4000
    slow_update: bool = True
    meta_skill: bool = True
    early_stop: bool = True
    credit_assignment: bool = True
    test_margin: float = 0.05
    seed: int = 0
    labels: tuple[str, ...] = ("skillopt", "automated")
    acceptance: str = ACCEPTANCE_DEFAULT  # the rule that accepts a candidate (skillopt_ci.train.acceptance)
    sequential_alpha: float = 0.05
    sequential_max_rounds: int = 4
    screening: bool = False
    credit_confidence: float | None = None
    audit: bool = True  # re-test accepted rules at each epoch's end (skillopt_ci.train.audit)
    patience: int | None = 2  # epochs in a row that change nothing before training stops (None: run them all)
    target: str = "body"  # what edits may change: body, description or both (core.edits.PARTS)

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts of the skill step edits may change (:class:`~skillopt_ci.core.edits.EditCaps`)."""
        return ("body", "description") if self.target == "both" else (self.target,)

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("target") == "body":  # a body run is identified as it always was (run directories resume)
            del data["target"]
        return data

    @classmethod
    def _json_in(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        budget = data.get("edit_budget") or {}  # the config's edit_budget: {schedule, start, end}
        return {**data, **{f"budget_{key}": budget[key] for key in ("schedule", "start", "end") if key in budget}}


@dataclass(frozen=True)
class Config:
    root: Path
    file: str
    models: Mapping[str, ModelSpec]
    skills: tuple[SkillEntry, ...] = ()
    concurrency: int = 8
    adaptive_concurrency: bool = True  # lower it on rate limits, raise it back on success (models/limiter.py)
    batch: BatchSettings = BatchSettings()
    cache: CacheSettings = CacheSettings()
    runs_dir: Path = Path(".skillopt/runs")
    budgets: Budgets = Budgets()
    limits: Limits = Limits()
    pricing: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    max_error_rate: float = 0.5
    min_attempts: int = 10
    gate: GatePolicy = GatePolicy()
    train: TrainPolicy = TrainPolicy()
    warnings: tuple[str, ...] = ()  # usable but deprecated settings, one line each (load_config)

    def skill(self, name: str) -> SkillEntry | None:
        for entry in self.skills:
            if entry.name == name:
                return entry
        return None


def load_config(path: Path, display: str | None = None) -> Config:
    """Load and validate a config file. Raises :class:`InputError` on the first problem
    (``skillopt-ci validate`` lists them all)."""
    config, problems = check_config(path, display)
    errors = [p for p in problems if not p.is_warning]
    if errors:
        more = f"; {len(errors) - 1} more problem(s): run skillopt-ci validate" if len(errors) > 1 else ""
        raise errors[0].to_error(hint=f"fix the config{more}")
    assert config is not None
    return replace(config, warnings=tuple(str(p) for p in problems))


def check_config(path: Path, display: str | None = None) -> tuple[Config | None, list[Problem]]:
    """Validate a config file and return it with every problem found (empty when valid)."""
    doc = load_yaml(path, display or str(path))
    return config_from_doc(doc, path.resolve().parent)


def config_from_doc(doc: YamlDoc, root: Path) -> tuple[Config | None, list[Problem]]:
    if doc.data is None:
        return None, [Problem(doc.file, "is empty; run skillopt-ci init for an example")]
    problems = schema_problems(doc, "config.schema.json")
    if problems:
        return None, problems
    data: dict[str, Any] = doc.data
    models = {role: ModelSpec.from_dict(role, spec) for role, spec in data["models"].items()}
    for role, spec in models.items():
        if spec.provider not in PROVIDERS:
            problems.append(doc.problem(("models", role, "provider"), PROVIDERS.unknown(spec.provider).message))
        elif message := api_problem(spec):
            problems.append(doc.problem(("models", role, "api"), message))
    skills = _skill_entries(doc, data.get("skills") or [], root, problems)
    cache = data.get("cache") or {}
    run_eval = data.get("eval") or {}
    # An unquoted `mode: off` is the boolean false in YAML 1.1; it means what it says.
    cache_mode = "off" if cache.get("mode") is False else cache.get("mode", "read-write")
    train, notes = read_legacy(data.get("train") or {})
    problems.extend(replace(doc.problem(("train", key), message), level="warning") for key, message in notes)
    config = Config(
        root=root,
        file=doc.file,
        models=MappingProxyType(models),
        skills=tuple(skills),
        concurrency=int(data.get("concurrency", 8)),
        adaptive_concurrency=bool(data.get("adaptive_concurrency", True)),
        batch=BatchSettings(**(data.get("batch") or {})),
        cache=CacheSettings(mode=cache_mode, path=root / cache.get("path", ".skillopt/cache.sqlite")),
        runs_dir=root / data.get("runs_dir", ".skillopt/runs"),
        budgets=Budgets(**(data.get("budgets") or {})),
        limits=Limits(**(data.get("limits") or {})),
        pricing=MappingProxyType({k: MappingProxyType(v) for k, v in (data.get("pricing") or {}).items()}),
        max_error_rate=float(run_eval.get("max_error_rate", 0.5)),
        min_attempts=int(run_eval.get("min_attempts", 10)),
        gate=GatePolicy.from_dict(data.get("gate") or {}),
        train=TrainPolicy.from_dict(train),
    )
    return config, problems


# Model providers by name, each a skillopt_ci.models.registry.Provider: the built-ins registered as a
# plug-in registers one in the skillopt_ci.providers entry-point group (docs/extending.md). Here,
# in the inputs layer, because validation needs the names; a record is imported when it is loaded.
PROVIDER = "skillopt_ci.models.registry:Provider"  # loaded with any record: its module imports it
PROVIDERS = Registry("provider", "skillopt_ci.providers", {
    "openai": "skillopt_ci.models.registry:OPENAI",
    "azure-openai": "skillopt_ci.models.registry:AZURE_OPENAI",
    "anthropic": "skillopt_ci.models.registry:ANTHROPIC",
    "openai-compatible": "skillopt_ci.models.registry:OPENAI_COMPATIBLE",
}, lambda found: None if isinstance(found, resolve_name(PROVIDER)) else f"is not a {PROVIDER.replace(':', '.')}")


def api_problem(spec: ModelSpec) -> str | None:
    """Why ``spec.api`` (or its ``structured_output``) cannot be used with its provider, or ``None``.
    The provider's record is loaded only for a spec that asks for either."""
    if spec.api == "responses" and not PROVIDERS.load(spec.provider).responses:
        speakers = [name for name, other in PROVIDERS.items() if other.responses]
        return (f"api: responses is the OpenAI Responses API; the {spec.provider} provider does not speak it "
                f"(use it with {', '.join(speakers)}, or remove api)")
    if spec.structured_output in ("json_schema", "json_object") and not PROVIDERS.load(spec.provider).json_formats:
        return (f"structured_output: {spec.structured_output} is an OpenAI response format; the {spec.provider} "
                "provider answers in a schema through a forced tool call (use auto or tool)")
    return None


def _skill_entries(doc: YamlDoc, items: list[dict[str, Any]], root: Path, problems: list[Problem]) -> list[SkillEntry]:
    """The ``skills:`` list; a missing file or suite, an unsafe name and a name used twice are
    added to ``problems`` (each at its ``skills[i]`` path)."""
    skills: list[SkillEntry] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        skill_path = root / item["path"]
        suite_path = root / item["suite"]
        if not skill_path.exists():
            problems.append(doc.problem(("skills", i, "path"), f"no such file {item['path']!r}"))
        elif skill_path.is_dir() and not (skill_path / "SKILL.md").is_file():
            problems.append(doc.problem(("skills", i, "path"), f"{item['path']!r} is a folder without SKILL.md"))
        if not suite_path.is_dir():
            problems.append(doc.problem(("skills", i, "suite"), f"no such directory {item['suite']!r}"))
        elif not (suite_path / "suite.yaml").is_file():
            problems.append(doc.problem(("skills", i, "suite"), f"{item['suite']!r} has no suite.yaml"))
        name = item.get("name") or _default_skill_name(skill_path)
        unsafe = name_problem(name)
        if unsafe:
            where, origin = (("skills", i, "name"), "") if item.get("name") else (("skills", i, "path"), " (taken from the path)")
            problems.append(doc.problem(where, f"skill name {name!r:.80}{origin} {unsafe}: skill names become branch "
                                               f"and directory names, so {NAME_RULE}; set name:"))
        elif name.lower() in seen:
            other = seen[name.lower()]
            problems.append(doc.problem(("skills", i), f"skill name {name!r} is used twice (also skills[{other}]; "
                                                       "names differing only in case count as the same); set name:"))
        seen.setdefault(name.lower(), i)
        if skill_path.is_dir():
            skill_path = skill_path / "SKILL.md"
        skills.append(SkillEntry(name=name, path=skill_path, suite=suite_path))
    return skills


def _default_skill_name(path: Path) -> str:
    """The front matter name if readable, else the folder of a SKILL.md, else the file stem."""
    from skillopt_ci.core.skill import load_skill

    try:
        return load_skill(path).name
    except InputError:
        return path.parent.name if path.name.upper() == "SKILL.MD" else path.stem


def default_config(root: Path, model: ModelSpec) -> Config:
    """A config for ad-hoc use without ``skillopt.yml`` (``eval --model provider:name``)."""
    return Config(
        root=root,
        file="(command line)",
        models=MappingProxyType({"target": model}),
        cache=CacheSettings(path=root / ".skillopt/cache.sqlite"),
        runs_dir=root / ".skillopt/runs",
    )
