"""Published split manifests: which upstream ids make up each benchmark's train, val and test.

A manifest folder holds ``split_manifest.json`` (the upstream source and revision, the counts)
and ``train/``, ``val/``, ``test/``, each with one ``items.json`` (a JSON array of entries with an
``id``; some benchmarks add fields, e.g. ALFWorld's ``gamefile``). The reference system's six
manifests ship in the package, byte for byte (``manifests/<name>/``); ``--manifest DIR`` names
another folder of the same layout. A split may be missing or empty (a manifest of test ids only
makes a suite for ``eval`` and ``bench run``; ``train`` then says it needs train and val); a
manifest that names no id at all is refused.

Split membership always comes from the manifest, never from a seeded shuffle: two of the published
splits cannot be rebuilt that way. :func:`pick` matches the upstream rows to the manifest ids and
fails on a missing or duplicated id, naming the id and both files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from skillopt_ci.core.errors import InputError

SPLITS = ("train", "val", "test")
SPLIT_ALIASES = {"valid_seen": "val", "selection": "val", "valid_unseen": "test"}
PUBLISHED = Path(__file__).parent / "manifests"
T = TypeVar("T")


@dataclass(frozen=True)
class ManifestItem:
    """One published entry: its id, the entry as published, and where it is (for errors)."""

    id: str
    fields: Mapping[str, Any]
    where: str


@dataclass(frozen=True)
class Manifest:
    name: str
    splits: Mapping[str, tuple[ManifestItem, ...]]
    meta: Mapping[str, Any]
    source: str

    def ids(self) -> set[str]:
        return {item.id for items in self.splits.values() for item in items}

    def counts(self) -> dict[str, int]:
        return {split: len(items) for split, items in self.splits.items()}

    def split_of(self) -> dict[str, str]:
        return {item.id: split for split, items in self.splits.items() for item in items}


def published_folder(name: str) -> Path:
    """The folder of the published manifest of benchmark ``name`` (inside the package)."""
    found = sorted(p.parent for p in (PUBLISHED / name).glob("*/split_manifest.json"))
    if not found:
        raise InputError(f"no published manifest for benchmark {name!r}")
    return found[0]


def load_manifest(name: str, folder: Path | None = None) -> Manifest:
    """Read a manifest folder (the published one of ``name`` when ``folder`` is ``None``)."""
    root = folder if folder is not None else published_folder(name)
    shown = str(folder) if folder is not None else f"published manifest {root.name}"
    if not root.is_dir():
        raise InputError("manifest folder not found", where=str(root),
                         hint="pass a folder with split_manifest.json and train/ val/ test/ items.json")
    meta_file = root / "split_manifest.json"
    meta = _read_json(meta_file, shown) if meta_file.is_file() else {}
    if not isinstance(meta, dict):
        raise InputError("must be a JSON object", where=f"{shown}/split_manifest.json")
    splits: dict[str, tuple[ManifestItem, ...]] = {}
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        split = SPLIT_ALIASES.get(sub.name, sub.name)
        if split not in SPLITS:
            continue
        files = sorted(sub.glob("*.json"))
        if not files:
            raise InputError(f"no items .json in {sub.name}/", where=shown)
        splits[split] = _items(files[0], f"{shown}/{sub.name}/{files[0].name}")
    if not any(splits.values()):
        raise InputError("the manifest names no ids: no train/, val/ or test/ folder holds an item", where=shown,
                         hint="a manifest folder holds train/, val/ and/or test/, each with an items .json")
    _check_disjoint(splits, shown)
    return Manifest(name=name, splits=MappingProxyType({s: splits.get(s, ()) for s in SPLITS}),
                    meta=MappingProxyType(meta), source=shown)


def _read_json(path: Path, shown: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read JSON: {exc}", where=f"{shown}/{path.name}") from None


def _items(path: Path, shown: str) -> tuple[ManifestItem, ...]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read JSON: {exc}", where=shown) from None
    if not isinstance(data, list):
        raise InputError("must be a JSON array of items with an id", where=shown)
    items = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), (str, int)) or entry.get("id") == "":
            raise InputError(f"item {index} has no id", where=f"{shown}[{index}]")
        items.append(ManifestItem(str(entry["id"]), MappingProxyType(dict(entry)), f"{shown}[{index}]"))
    return tuple(items)


def _check_disjoint(splits: Mapping[str, tuple[ManifestItem, ...]], shown: str) -> None:
    seen: dict[str, ManifestItem] = {}
    for items in splits.values():
        for item in items:
            if item.id in seen:
                raise InputError(f"id {item.id!r} is listed twice (also at {seen[item.id].where})",
                                 where=item.where, hint="a manifest lists each id in one split, once")
            seen[item.id] = item


def pick(manifest: Manifest, rows: Iterable[tuple[str, T, str]], data_source: str) -> dict[str, list[T]]:
    """The upstream rows the manifest names, per split, in manifest order.

    ``rows`` yields ``(id, row, where)`` with ``where`` naming the row in the data (``"train.parquet
    row 17"``). A manifest id found twice in the data, or not at all, is an :class:`InputError`
    naming the id and the files; rows the manifest does not name are skipped."""
    wanted = manifest.ids()
    found: dict[str, tuple[T, str]] = {}
    for row_id, row, where in rows:
        key = str(row_id)
        if key not in wanted:
            continue
        if key in found:
            raise InputError(f"id {key!r} appears twice in the data (also at {found[key][1]})", where=where,
                             hint="the data must hold each id once; check that no file is given twice")
        found[key] = (row, where)
    missing = [item for items in manifest.splits.values() for item in items if item.id not in found]
    if missing:
        first = missing[0]
        split = manifest.split_of()[first.id]
        more = f" (and {len(missing) - 1} more of the manifest's {len(wanted)} ids)" if len(missing) > 1 else ""
        raise InputError(f"id {first.id!r} of the {split} split ({first.where}) is not in the data{more}",
                         where=data_source, hint="import from the full upstream download the manifest was made from, "
                              "or pass --manifest with a manifest folder of the ids you have")
    return {split: [found[item.id][0] for item in items] for split, items in manifest.splits.items()}


def items_or_first(name: str, manifest: Manifest | None, per_split: int) -> dict[str, tuple[ManifestItem, ...]]:
    """The items of ``manifest`` by split, or (when it is None) the first ``per_split`` of each
    split of the published manifest of ``name``: the ids a demo fixture writes records for."""
    if manifest is not None:
        return dict(manifest.splits)
    return {split: items[:per_split] for split, items in load_manifest(name).splits.items()}
