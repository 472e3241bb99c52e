"""One run directory as one JSON document (a *bundle*): what the HTML report embeds and what the
live viewer serves. Pure reads of the run directory; never writes.

Every kind of run gives the same shape, so one front end renders them all::

    {schema_version, kind: eval|gate|train, title, source, generated_at,
     live: {in_progress, phase, step, done, total, latest},
     summary,                      # summary.json (eval, train) or gate.json (gate)
     skills: {key: text},          # skill texts referenced by evaluations and versions
     evaluations: [{id, label, split, skill, side, step, summary, results: [result...]}],
     images: {key: {name, src, media_type, bytes} | {name, note}},   # see viewer.steps
     train: {versions, history, epochs, points, candidates: {step: skill key}} | null,
     limits: {text_chars, truncated}}

A result of an environment beyond ``chat`` also carries ``trajectory`` (its steps, see
:mod:`skillopt_ci.viewer.steps`), ``reward``, ``transcript`` and ``files``; a chat result has none
of these keys. Long texts (prompts, outputs, expected answers, step texts) are cut at
``text_chars`` with a visible note and counted in ``limits.truncated``; the run directory keeps
them whole. Everything here is data from
models and task files: the front end must treat every string as text, never as markup.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.paths import display_path
from skillopt_ci.core.redact import redact
from skillopt_ci.engine.rundir import run_kind
from skillopt_ci.viewer.steps import ImageStore, result_extras

BUNDLE_SCHEMA_VERSION = 1
TEXT_CHARS = 4000
TRUNCATION_NOTE = "\n… [truncated in this report; the whole text is in the run directory]"


def read_json(path: Path) -> Any:
    """The JSON in ``path``; None when it is missing or not JSON (a run still being written)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


class _Builder:
    def __init__(self, run: Path, text_chars: int):
        self.run = run
        self.text_chars = text_chars
        self.truncated = 0
        self.skills: dict[str, str] = {}
        self.images = ImageStore(run)

    def cut(self, value: Any) -> Any:
        """A long text cut for the report, redacted first: a cut through a key would leave a
        prefix of it that the report's redaction could no longer recognise."""
        if isinstance(value, str) and len(value) > self.text_chars:
            self.truncated += 1
            return redact(value)[: self.text_chars] + TRUNCATION_NOTE
        if isinstance(value, (dict, list)):
            text = json.dumps(value, ensure_ascii=False)
            if len(text) > self.text_chars:
                self.truncated += 1
                return redact(text)[: self.text_chars] + TRUNCATION_NOTE
        return value

    def results(self, run_dir: Path) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        path = run_dir / "results.jsonl"
        if not path.exists():
            return out
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill: the runner drops it on resume too
            latest[(r["task_id"], r["repeat"])] = r
        for r in latest.values():
            out.append({
                "task_id": r["task_id"], "repeat": r["repeat"], "prompt": self.cut(r.get("prompt", "")),
                "output": self.cut(r.get("output")), "expected": self.cut(r.get("expected")),
                "score": r.get("score"), "passed": r.get("passed"), "feedback": self.cut(r.get("feedback", "")),
                "usage": r.get("usage"), "scorer_usage": r.get("scorer_usage"), "latency_s": r.get("latency_s"),
                "cost_usd": r.get("cost_usd"), "cached": r.get("cached"), "error": r.get("error"),
                "finish_reason": r.get("finish_reason"), **result_extras(r, self.cut, self.images, run_dir),
            })
        return out

    def skill(self, key: str, path: Path) -> str | None:
        if path.is_file():
            self.skills[key] = path.read_text(encoding="utf-8")
            return key
        return None

    def evaluation(self, run_dir: Path, eval_id: str, label: str, *, skill_key: str | None = None,
                   side: str | None = None, step: str | None = None) -> dict[str, Any] | None:
        if not (run_dir / "run.json").is_file():
            return None
        manifest = read_json(run_dir / "run.json") or {}
        key = skill_key or self.skill(f"eval:{eval_id}", run_dir / "skill.md")
        return {"id": eval_id, "label": label, "split": manifest.get("split"), "skill": key, "side": side,
                "step": step, "summary": read_json(run_dir / "summary.json"), "results": self.results(run_dir)}


def build_bundle(run: Path, *, text_chars: int = TEXT_CHARS) -> dict[str, Any]:
    """The bundle of the run directory ``run``. Raises :class:`InputError` if it is not one."""
    kind = run_kind(run)
    if kind is None:
        raise InputError("not a run directory (no gate.json, or run.json of an eval or training run)", where=str(run))
    b = _Builder(run, text_chars)
    bundle: dict[str, Any] = {"schema_version": BUNDLE_SCHEMA_VERSION, "kind": kind, "source": display_path(run),
                              "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "train": None}
    if kind == "eval":
        summary = read_json(run / "summary.json")
        bundle["summary"] = summary
        ev = b.evaluation(run, ".", "evaluation")
        bundle["evaluations"] = [ev] if ev else []
        skill_name = (summary or {}).get("skill", {}).get("name") or run.name
        bundle["title"] = f"eval: {skill_name}"
        bundle["live"] = _eval_live(run, summary, ev)
    elif kind == "gate":
        gate = read_json(run / "gate.json") or {}
        bundle["summary"] = gate
        evaluations = [b.evaluation(run / skill["name"] / side, f"{skill['name']}/{side}", f"{skill['name']} {side}",
                                    side=side) for skill in gate.get("skills", []) for side in ("base", "head")]
        bundle["evaluations"] = [ev for ev in evaluations if ev]
        bundle["title"] = f"{'compare' if gate.get('mode') == 'compare' else 'gate'}: {gate.get('verdict', '')}"
        bundle["live"] = {"in_progress": False, "phase": "done", "step": None, "done": 0, "total": 0, "latest": None}
    else:
        bundle.update(_train(b, run))
    bundle["skills"] = b.skills
    bundle["images"] = b.images.images
    bundle["limits"] = {"text_chars": text_chars, "truncated": b.truncated}
    return bundle


def _eval_live(run: Path, summary: Any, ev: dict[str, Any] | None) -> dict[str, Any]:
    manifest = read_json(run / "run.json") or {}
    total = len(manifest.get("task_ids") or []) * int(manifest.get("repeats") or 1)
    done = len(ev["results"]) if ev else 0
    return {"in_progress": summary is None, "phase": "done" if summary else "evaluating", "step": None,
            "done": done, "total": total, "latest": None}


def _train(b: _Builder, run: Path) -> dict[str, Any]:
    state = read_json(run / "state.json") or {}
    summary = read_json(run / "summary.json")
    versions = state.get("versions", [])
    for v in versions:
        b.skill(f"v{v['number']:03d}", run / "skills" / f"v{v['number']:03d}.md")
    history = state.get("history", [])
    candidates: dict[str, str] = {}
    found = [b.evaluation(run / "versions/v000/val", "versions/v000/val", "baseline on val", skill_key="v000",
                          step="baseline")]  # with None where a run directory is not (yet) there
    for record in history:
        step = record["step"]
        key = b.skill(f"candidate:{step}", run / "steps" / step / "candidate.md")
        if key:
            candidates[step] = key
        incumbent = f"v{record.get('incumbent_version', 0):03d}"
        for part, label in (("rollout", "rollout on train"), ("val", "candidate on val"),
                            ("previous", "previous epoch's skill on train"), ("current", "current skill on train")):
            found.append(b.evaluation(run / "steps" / step / part, f"steps/{step}/{part}", f"{step} {label}",
                                      skill_key=key if part == "val" else incumbent, step=step))
        # screening's runs, credit assignment's trials, the paired gate's further rounds, the audit's runs
        extra = [(d, f"{part}/{d.name}", f"{what}: {d.name}") for part, what in (("screen", "screening"), ("credit", "credit"))
                 for d in sorted((run / "steps" / step / part).glob("*"))]
        extra += [(d, d.name, f"validation {d.name.removeprefix('val-')}")
                  for d in sorted((run / "steps" / step).glob("val-*"))]
        extra += [(d, d.name, f"audit re-confirmation {d.name.removeprefix('confirm-')}")  # train/audit.py
                  for d in sorted((run / "steps" / step).glob("confirm-*"))]
        found += [b.evaluation(path, f"steps/{step}/{rel}", f"{step} {label}", step=step) for path, rel, label in extra]
    found += [b.evaluation(test_dir, f"versions/{test_dir.parent.name}/test", f"{test_dir.parent.name} on test",
                           skill_key=test_dir.parent.name, step="test")
              for test_dir in sorted((run / "versions").glob("v*/test"))]
    points = (summary or {}).get("points") or _points(versions, history)
    phase = state.get("phase", "baseline")
    latest = history[-1] if history else None
    in_progress = summary is None or train_in_progress(run, phase)
    steps_total = int(state.get("steps_per_epoch") or 0) * int(state.get("epochs_planned") or 0) or None
    steps_done = sum(1 for r in history if r.get("kind") == "step")
    return {
        "title": f"train: {(summary or {}).get('skill', {}).get('name') or run.name}",
        "summary": summary,
        "evaluations": [ev for ev in found if ev],
        "train": {"versions": versions, "history": [{k: b.cut(v) if k in ("analysis",) else v for k, v in r.items()}
                                                    for r in history],
                  "epochs": state.get("epochs", []), "points": points, "candidates": candidates,
                  "phase": phase, "epoch": state.get("epoch"), "incumbent": state.get("incumbent"),
                  "stopped": state.get("stopped"), "spent": state.get("spent"),
                  "baseline_calls": state.get("baseline_calls", 0)},
        "live": {"in_progress": in_progress, "phase": phase, "step": latest["step"] if latest else None,
                 "done": steps_done, "total": steps_total,
                 "latest": {k: latest.get(k) for k in ("step", "decision", "reason", "incumbent_val")} if latest else None},
    }


def train_in_progress(run: Path, phase: str | None) -> bool:
    """Whether a training run is still being written. A run that stopped early (a budget, a
    runtime failure) is not: its session wrote summary.json after its last checkpoint, while a
    working session rewrites state.json after every stage."""
    if phase == "done":
        return not (run / "summary.json").exists()
    try:
        return (run / "summary.json").stat().st_mtime_ns < (run / "state.json").stat().st_mtime_ns
    except OSError:
        return True


def _points(versions: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not versions:
        return []
    points = [{"step": "baseline", "candidate": versions[0]["val_mean"], "incumbent": versions[0]["val_mean"],
               "decision": "baseline"}]
    points += [{"step": r["step"], "candidate": r.get("candidate_val"), "incumbent": r.get("incumbent_val"),
                "decision": r["decision"]} for r in history]
    return points


def find_runs(root: Path, *, max_depth: int = 3) -> Iterator[tuple[Path, str]]:
    """Run directories under ``root`` (top-level ones: evaluations inside a gate or a training
    run are part of it, not runs of their own), newest first."""
    found: list[tuple[float, Path, str]] = []

    def walk(folder: Path, depth: int) -> None:
        kind = run_kind(folder)
        if kind is not None:
            marker = folder / ("gate.json" if kind == "gate" else "run.json")
            found.append((marker.stat().st_mtime, folder, kind))
            return
        if depth >= max_depth:
            return
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return
        for child in children:
            walk(child, depth + 1)

    walk(root, 0)
    for _, path, kind in sorted(found, key=lambda item: -item[0]):
        yield path, kind
