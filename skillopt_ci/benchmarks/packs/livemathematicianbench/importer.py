"""LiveMathematicianBench (raw monthly files ``qa_YYYYMM_final.json``) as a multiple-choice chat suite.

``--from`` is a folder holding the monthly files at any depth (the dataset's ``data/<month>/``
layout) or one file. Each file is a JSON array of items ``{no, month, paper_link, theorem,
sketch, theorem_type, mcq: {question, correct_choice: {label, text}, choices: [...]}}``; the item
id is ``"<month>:<no>"``.

The raw files always give the correct option separately, labelled ``A``, and list only the others
(``B``–``E``) in ``choices``. Kept that way, answering "A" would score 100 %. So the importer puts
the correct option back, orders the options by label, and shuffles them per item with
``random.Random(s)``, ``s`` = the first 16 hex digits of ``sha256("<seed>:<item id>")`` (seed
:data:`SEED`, the reference system's evaluation seed), then relabels them ``A``, ``B``, … in
their new order. The expected label is where the correct option landed. Scorer ``livemath``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.draft import SuiteDraft, chat_suite
from skillopt_ci.benchmarks.manifest import Manifest, pick
from skillopt_ci.benchmarks.packs.livemathematicianbench import PACK
from skillopt_ci.core.errors import InputError

SEED = 42
FILE_NAME = re.compile(r"^qa_\d{6}_final(\..+)?\.json$")
PROMPT = """## Question
{{ input }}

## Choices
{{ options }}

Choose the one correct option. Give only its label inside <answer></answer>.
"""


def item_seed(seed: int, item_id: str) -> int:
    """The shuffle seed of one item: the first 16 hex digits of sha256("<seed>:<item id>")."""
    return int(hashlib.sha256(f"{seed}:{item_id}".encode()).hexdigest()[:16], 16)


def shuffled_options(options: list[dict[str, str]], correct: str, seed: int, item_id: str) -> tuple[list[dict[str, str]], str]:
    """``options`` (label order) shuffled for the item and relabelled A, B, …; with the new label of
    the option labelled ``correct``."""
    order = sorted(options, key=lambda o: o["label"])
    random.Random(item_seed(seed, item_id)).shuffle(order)
    relabelled = [{"label": chr(ord("A") + i), "text": o["text"]} for i, o in enumerate(order)]
    expected = next(new["label"] for new, old in zip(relabelled, order, strict=True) if old["label"] == correct)
    return relabelled, expected


def _choice(value: Any, where: str, what: str) -> dict[str, str]:
    if not (isinstance(value, dict) and isinstance(value.get("label"), str) and isinstance(value.get("text"), str)):
        raise InputError(f"{what} must be an object with a label and a text", where=where)
    return {"label": value["label"].strip(), "text": value["text"]}


def task_record(item: dict[str, Any], where: str, seed: int = SEED) -> dict[str, Any]:
    """One suite task from a raw item: the options rebuilt and shuffled (see the module docstring)."""
    item_id = f"{item['month']}:{item['no']}"
    mcq = item.get("mcq")
    if not isinstance(mcq, dict) or not isinstance(mcq.get("question"), str) or not isinstance(mcq.get("choices"), list):
        raise InputError(f"item {item_id!r}: mcq must hold a question and a list of choices", where=where)
    correct = _choice(mcq.get("correct_choice"), where, f"item {item_id!r}: mcq.correct_choice")
    others = [_choice(c, where, f"item {item_id!r}: mcq.choices[{i}]") for i, c in enumerate(mcq["choices"])]
    labels = [correct["label"], *(c["label"] for c in others)]
    if len(set(labels)) != len(labels):
        raise InputError(f"item {item_id!r}: option labels repeat ({', '.join(labels)}); the raw files list the "
                         "correct option apart from the others", where=where)
    options, expected = shuffled_options([correct, *others], correct["label"], seed, item_id)
    return {
        "id": item_id,
        "input": mcq["question"].strip(),
        "options": "\n".join(f"{o['label']}. {o['text'].strip()}" for o in options),
        "choices": options,
        "expected": expected,
        "theorem": item.get("theorem", ""),
        "sketch": item.get("sketch", ""),
        "metadata": {"month": str(item["month"]), "no": item["no"], "paper_link": item.get("paper_link", ""),
                     "theorem_type": item.get("theorem_type", []), "shuffle_seed": seed},
    }


def _files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    return sorted(p for p in source.rglob("*.json") if FILE_NAME.match(p.name))


def _items(files: list[Path]):
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read JSON: {exc}", where=str(path)) from None
        if not isinstance(data, list):
            raise InputError("must hold a JSON array of items", where=str(path))
        for index, item in enumerate(data):
            where = f"{path}[{index}]"
            if not isinstance(item, dict) or "month" not in item or "no" not in item:
                raise InputError("an item needs month and no (its id is <month>:<no>)", where=where)
            yield f"{item['month']}:{item['no']}", (item, where), where


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    files = _files(source)
    if not files:
        raise InputError("no qa_YYYYMM_final.json files here", where=str(source), hint=PACK.data_help)
    seen = 0

    def counted():
        nonlocal seen
        for entry in _items(files):
            seen += 1
            yield entry

    picked = pick(manifest, counted(), str(source))
    tasks = {split: [task_record(item, where) for item, where in rows] for split, rows in picked.items()}
    return SuiteDraft(
        name=PACK.name,
        suite=chat_suite("LiveMathematicianBench: pick the strongest provable statement about a recent theorem "
                         "(multiple choice, options shuffled per item).", PROMPT, "livemath"),
        tasks=tasks,
        notes=[f"{len(manifest.ids()):,} of {seen:,} items used ({len(files)} file(s)); options shuffled per item "
               f"with seed {SEED}"],
    )
