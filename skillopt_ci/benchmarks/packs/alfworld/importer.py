"""ALFWorld importer: the published path manifest + the user's ALFWorld data folder -> a suite.

``--from`` is the folder ``alfworld-download`` filled (what ``ALFWORLD_DATA`` names; it holds
``json_2.1.1/``). The manifest is runnable as it is: each entry names its game file relative to
that folder (``json_2.1.1/<split>/<task>/trial_…/game.tw-pddl``) and its ``task_type``; the
importer keeps both, checks that every game file exists (the first missing one is exit 2 naming
its id and path, with how many more are missing), and lists each game as an asset
``@alfworld/<gamefile>`` (sha256 and size in ``assets.json``; the games are not copied). The
suite names the data root ``${ALFWORLD_DATA}`` when ``--from`` is the folder that variable names,
else the absolute path given, so a suite imported from ``$ALFWORLD_DATA`` moves with the variable.

Each task is one episode of the ``interactive`` environment in :class:`AlfworldWorld
<skillopt_ci.envs.alfworld.AlfworldWorld>` (the real ``alfworld`` package for real games), with
the reference system's per-step prompt (:func:`skillopt_ci.envs.alfworld.environment`), 50
steps, scored by ``reward``: 1 when the game is won within the steps, else 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.draft import SuiteDraft, asset
from skillopt_ci.benchmarks.manifest import Manifest, ManifestItem
from skillopt_ci.benchmarks.packs.alfworld import PACK
from skillopt_ci.core.errors import InputError
from skillopt_ci.envs.alfworld import PROMPT, environment

ROOT = "alfworld"
VARIABLE = "ALFWORLD_DATA"


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    if not source.is_dir():
        raise InputError("--from must be the ALFWorld data folder, not a file", where=str(source), hint=PACK.data_help)
    items = [(split, item) for split, entries in manifest.splits.items() for item in entries]
    games = {item.id: _gamefile(item) for _, item in items}
    missing = [(split, item) for split, item in items if not (source / games[item.id]).is_file()]
    if missing:
        split, item = missing[0]
        more = f" (and {len(missing) - 1} more of the manifest's {len(items)} games)" if len(missing) > 1 else ""
        raise InputError(f"game file of {item.id!r} ({split} split) not found: {source / games[item.id]}{more}",
                         where=str(source), hint="pass the folder alfworld-download filled (ALFWORLD_DATA), "
                                                 "holding json_2.1.1/")
    draft = SuiteDraft(
        name=PACK.name,
        suite={"description": "ALFWorld (text): household tasks played in TextWorld, won within 50 steps.",
               "prompt": PROMPT, "environment": environment(), "scorer": {"type": "reward", "threshold": 1.0}},
        tasks={}, asset_roots={ROOT: root_name(source)})
    for split, entries in manifest.splits.items():
        draft.tasks[split] = [_task(item, games[item.id], source, draft) for item in entries]
    types = sorted({str(item.fields.get("task_type")) for _, item in items})
    draft.notes.append(f"{len(items)} games referenced under {draft.asset_roots[ROOT]} ({len(types)} task types); "
                       'running them needs the alfworld package: pip install "skillopt-ci[alfworld]"')
    return draft


def _gamefile(item: ManifestItem) -> str:
    gamefile = item.fields.get("gamefile")
    if not isinstance(gamefile, str) or not gamefile.endswith("game.tw-pddl"):
        raise InputError(f"manifest item {item.id!r} has no gamefile (a path ending in game.tw-pddl)",
                         where=item.where)
    parts = Path(gamefile).parts
    if Path(gamefile).is_absolute() or ".." in parts:
        raise InputError(f"manifest item {item.id!r}: gamefile must be relative to ALFWORLD_DATA, got {gamefile!r}",
                         where=item.where)
    return gamefile


def _task(item: ManifestItem, gamefile: str, source: Path, draft: SuiteDraft) -> dict[str, Any]:
    ref = f"@{ROOT}/{gamefile}"
    draft.assets[ref] = asset(source / gamefile)
    task_type = item.fields.get("task_type")
    return {"id": item.id, "input": gamefile, "gamefile": gamefile, "task_type": task_type, "files": [ref],
            "metadata": {"task_type": task_type}}


def root_name(source: Path) -> str:
    """``${ALFWORLD_DATA}`` when ``source`` is the folder the variable names, else its absolute path."""
    named = os.environ.get(VARIABLE)
    absolute = source.resolve()
    if named and Path(named).expanduser().resolve() == absolute:
        return "${" + VARIABLE + "}"
    return str(absolute)
