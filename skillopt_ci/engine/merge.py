"""``skillopt-ci merge``: join the run directories of ``--shard i/n`` jobs into one report.

This module merges eval runs and holds what every merge shares (shard checks, reading a shard's
JSON); :mod:`skillopt_ci.gate.merge` merges gate runs on top of it, one eval merge per side.

The merged report is the one a single run over all tasks would give: results are unioned, and
every statistic (means, intervals, the paired bootstrap with its seed) is recomputed over the
whole split in the suite's task order. Shards must come from the same run (same skills, suite,
split, repeats and model); anything else is refused.

Each shard's ``run.json`` records its shard (``i/n``) and every task of the split, so:
- a directory or a shard given twice, shards of different ``n``, or a run without ``--shard``
  among shards is refused (exit 2);
- a missing shard makes the merged summary incomplete: ``complete: false``, ``missing_tasks``
  lists the tasks no shard held, and the coverage counts them as unmeasured (the CLI exits 3,
  for a gate merge too: a merged gate decides over the whole split, so the skill is
  inconclusive, and a partial merge never passes for the whole split).
Run directories written before the split's task list was recorded merge only when all ``n``
shards are given (their union is then the split); otherwise the missing tasks are unknown and
merge says so (exit 2).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import EvalSummary, TaskResult, summarize
from skillopt_ci.core.shard import Shard, parse_shard
from skillopt_ci.engine.rundir import MANIFEST, RunDir, run_kind

IDENTITY = ("kind", "skill_hash", "suite_hash", "split", "repeats", "model", "environment")


def read_json(path: Path) -> dict[str, Any]:
    """A shard's JSON file; missing or not JSON is bad input naming the file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("missing", where=str(path), hint="is this a finished shard run directory?") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None


def kind_of(directory: Path) -> str:
    """``gate`` or ``eval``: the kinds of run a shard can be."""
    kind = run_kind(directory)
    if kind not in ("gate", "eval"):
        raise InputError("not the run directory of an eval or gate shard (no gate.json, or run.json of an eval)",
                         where=str(directory))
    return kind


def check_shards(dirs: Sequence[Path], shards: Sequence[str | None]) -> list[str]:
    """Refuse a directory or shard given twice, shards of different ``n``, and unsharded runs
    among shards (:class:`InputError`). Returns the shards of the set that were not given."""
    seen: dict[str, Path] = {}
    for d in dirs:
        real = os.path.realpath(d)
        if real in seen:
            raise InputError(f"the same run directory is given twice ({seen[real]} and {d})", where=str(d),
                             hint="pass each shard's directory once")
        seen[real] = d
    if len(dirs) == 1 and shards[0] is None:
        return []
    parsed: list[tuple[Path, Shard]] = []
    for d, text in zip(dirs, shards, strict=True):
        if text is None:
            raise InputError("not a shard: this run was made without --shard", where=str(d),
                             hint="merge joins the directories of --shard i/n jobs")
        try:
            parsed.append((d, parse_shard(text)))
        except InputError:
            raise InputError(f"unreadable shard {text!r} in run.json", where=str(d)) from None
    first_dir, first = parsed[0]
    by_index: dict[int, Path] = {}
    for d, shard in parsed:
        if shard.count != first.count:
            raise InputError(f"shard {shard} is not of the same --shard i/n set as {first_dir} (shard {first}): "
                             f"n differs ({shard.count} and {first.count})",
                             where=str(d), hint="merge the shards of one --shard i/n matrix")
        if shard.index in by_index:
            raise InputError(f"shard {shard} is given twice ({by_index[shard.index]} and {d})", where=str(d),
                             hint="pass each shard once")
        by_index[shard.index] = d
    return [str(Shard(i, first.count)) for i in range(1, first.count + 1) if i not in by_index]


def _split_ids(dirs: Sequence[Path], manifests: Sequence[dict[str, Any]], missing_shards: Sequence[str],
               given: Sequence[str] | None) -> list[str]:
    """Every task of the split: from the gate, from run.json, or (older runs) the union of a
    complete set of shards."""
    if given:
        return list(given)
    recorded = [m.get("split_task_ids") for m in manifests]
    if all(m.get("shard") is None for m in manifests):
        return _ordered_ids([m["task_ids"] for m in manifests])
    known = [r for r in recorded if r is not None]
    if len(known) == len(recorded):
        for d, r in zip(dirs, known, strict=True):
            if r != known[0]:
                raise InputError(f"shard lists other tasks for the split than {dirs[0]}", where=str(d / MANIFEST))
        return list(known[0])
    if not missing_shards:
        return _ordered_ids([m["task_ids"] for m in manifests])
    old = next(d for d, r in zip(dirs, recorded, strict=True) if r is None)
    raise InputError(
        f"shard {', '.join(missing_shards)} is missing, and run.json does not list the split's tasks "
        "(written by an older skillopt-ci), so the missing tasks are unknown",
        where=str(old / MANIFEST), hint="pass every shard, or re-run the shards with this version")


def merge_eval_runs(dirs: Sequence[Path], out: Path,
                    split_ids: Sequence[str] | None = None) -> tuple[EvalSummary, list[TaskResult]]:
    """Union the results of eval shards into ``out`` and summarize them as one run over the whole
    split (``split_ids``, else what the shards recorded)."""
    manifests = [read_json(d / MANIFEST) for d in dirs]
    first = manifests[0]
    for d, m in zip(dirs, manifests, strict=True):
        differ = [k for k in IDENTITY if m.get(k) != first.get(k)]
        if differ:
            raise InputError(f"shard is from a different run ({', '.join(differ)} differ from {dirs[0]})", where=str(d))
    missing_shards = check_shards(dirs, [m.get("shard") for m in manifests])
    summaries = [EvalSummary.from_dict(read_json(d / "summary.json")) for d in dirs]
    results = _union_results(dirs)
    task_ids = _split_ids(dirs, manifests, missing_shards, split_ids)
    held = {i for m in manifests for i in m["task_ids"]}
    missing = [i for i in task_ids if i not in held]
    stopped = next((s.stopped for s in summaries if s.stopped), None)
    if missing:
        stopped = (f"shard {', '.join(missing_shards) or '?'} not merged: {len(missing)} of {len(task_ids)} tasks "
                   "have no results")
    ref = summaries[0]
    summary = summarize(
        results, task_ids, skill=ref.skill, suite=ref.suite, split=ref.split, model=ref.model, repeats=ref.repeats,
        wall_time_s=sum(s.wall_time_s for s in summaries),
        complete=all(s.complete for s in summaries) and not missing,
        stopped=stopped, tool_version=ref.tool_version,
    )
    # Shards priced alike (all at the batch price) keep that note; a mix says nothing it cannot back.
    pricing = {s.pricing for s in summaries}
    summary = replace(summary, missing_tasks=missing, pricing=pricing.pop() if len(pricing) == 1 else None)
    manifest = {**{k: first[k] for k in IDENTITY if k in first}, "shard": None, "task_ids": task_ids}
    run = RunDir(out)
    run.open(manifest, fresh=True)
    run.append_results(results)
    shutil.copyfile(dirs[0] / "skill.md", out / "skill.md")
    for d in dirs:
        _copy_kept(d, out)
    run.write_json("summary.json", summary.to_dict())
    return summary, results


def _copy_kept(shard: Path, out: Path) -> None:
    """The files and images a shard's rollouts kept (``files/``, ``images/``) join the merged run,
    so its report shows them too. Images are named by content; kept files by task and repeat,
    which no two shards share."""
    for folder in ("files", "images"):
        if (shard / folder).is_dir():
            shutil.copytree(shard / folder, out / folder, dirs_exist_ok=True)


def _union_results(dirs: Sequence[Path]) -> list[TaskResult]:
    seen: dict[tuple[str, int], TaskResult] = {}
    for d in dirs:
        for r in RunDir(d).load_results():
            key = (r.task_id, r.repeat)
            if key in seen and seen[key].ok and r.ok and seen[key] != r:
                raise InputError(f"task {r.task_id!r} repeat {r.repeat} appears in two shards", where=str(d))
            if key not in seen or r.ok:
                seen[key] = r
    return list(seen.values())


def _ordered_ids(id_lists: Sequence[Sequence[str]]) -> list[str]:
    return list(dict.fromkeys(i for chunk in id_lists for i in chunk))
