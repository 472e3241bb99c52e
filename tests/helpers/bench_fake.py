"""A fake benchmark for the ``bench run`` and ``demo --benchmark`` tests, registered only in the
tests: an importer (``read``), a fixture module (``write_fixture``, ``policy``) and a published
manifest, in the shapes the real six use.

Upstream format: ``rows.jsonl`` of ``{"qid", "q", "a"}``. A question whose id ends in an even
digit is marked "(easy)" and the policy answers it right; every other answer is wrong. Every reply
costs 1,000 input and 500 output tokens.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

from skillopt_ci.benchmarks.draft import SuiteDraft
from skillopt_ci.benchmarks.manifest import Manifest, load_manifest, pick
from skillopt_ci.core.errors import InputError
from skillopt_ci.sim import ScriptedReply, ScriptedRequest

NAME = "fakeqa"
TITLE = "Fake QA"
EXTRAS: tuple[str, ...] = ()
DATA_HELP = "--from the folder holding rows.jsonl"
IN_TOKENS, OUT_TOKENS = 1000, 500


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    rows_file = source / "rows.jsonl"
    if not rows_file.is_file():
        raise InputError("no rows.jsonl", where=str(source), hint=DATA_HELP)
    rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    picked = pick(manifest, ((r["qid"], r, f"{rows_file} row {i}") for i, r in enumerate(rows)), str(rows_file))
    tasks = {split: [{"id": r["qid"], "input": r["q"], "expected": r["a"]} for r in items]
             for split, items in picked.items()}
    return SuiteDraft(name=manifest.name, suite={"prompt": "{{ input }}", "scorer": {"type": "exact"}}, tasks=tasks)


def write_fixture(dest: Path, manifest: Manifest | None = None) -> Path:
    manifest = manifest or load_manifest(NAME)
    dest.mkdir(parents=True, exist_ok=True)
    rows = []
    for items in manifest.splits.values():
        for item in items:
            easy = " (easy)" if item.id[-1] in "02468" else ""
            rows.append({"qid": item.id, "q": f"What is {item.id}?{easy}", "a": f"answer {item.id}"})
    (dest / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dest


def policy(request: ScriptedRequest) -> ScriptedReply:
    question = request.messages[-1]["content"]
    qid = question.removeprefix("What is ").split("?")[0]
    text = f"answer {qid}" if "(easy)" in question else "I do not know"
    return ScriptedReply(text, input_tokens=IN_TOKENS, output_tokens=OUT_TOKENS)


def write_manifest(root: Path, name: str, splits: dict[str, list[str]]) -> Path:
    """A published-manifest folder for ``name`` under ``root`` (the layout the package ships)."""
    folder = root / name / f"{name}_split"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "split_manifest.json").write_text(json.dumps({"benchmark": name}))
    for split, ids in splits.items():
        (folder / split).mkdir(exist_ok=True)
        (folder / split / "items.json").write_text(json.dumps([{"id": i} for i in ids]))
    return folder


def register(monkeypatch, published: Path, name: str = NAME, title: str = TITLE) -> ModuleType:
    """Register a benchmark ``name`` backed by this module (and its fixture module) for one test;
    its published manifests are looked up under ``published``."""
    from skillopt_ci import benchmarks
    from skillopt_ci.benchmarks import manifest

    module = ModuleType(f"bench_fake_{name}")
    module.__dict__.update({k: v for k, v in vars(sys.modules[__name__]).items() if not k.startswith("__")})
    module.NAME, module.TITLE, module.FIXTURE = name, title, module.__name__  # its own fixture
    module.write_fixture = lambda dest, manifest=None: write_fixture(dest, manifest or load_manifest(name))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(benchmarks.BENCHMARKS, name, module.__name__)
    monkeypatch.setattr(manifest, "PUBLISHED", published)
    return module


def read_with_assets(source: Path, manifest: Manifest) -> SuiteDraft:
    """``read``, with every task's data file referenced where it lies under a root named by a
    variable (as ALFWorld's game files are under ``${ALFWORLD_DATA}``)."""
    from skillopt_ci.benchmarks.draft import asset

    draft = read(source, manifest)
    draft.asset_roots["data"] = "${FAKEQA_DATA}"
    draft.assets["@data/rows.jsonl"] = asset(source / "rows.jsonl")
    for tasks in draft.tasks.values():
        for task in tasks:
            task["files"] = ["@data/rows.jsonl"]
    return draft
