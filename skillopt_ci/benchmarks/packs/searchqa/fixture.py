"""SearchQA fixture: rows in the Hugging Face layout of ``lucadiliello/searchqa`` (parquet, or JSON
Lines with ``fmt="jsonl"``) and a simulated reader.

Each row asks in which city a made-up festival is held; the context states it in one document.
By the row's place in its split: the first has a short context, the second a context longer than
the 6,000-character cut with the fact in its last document (so the import cuts it away), the third
asks for the "town" (the reader then answers "the town of X": exact match 0, token F1 0.5).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from skillopt_ci.benchmarks.manifest import Manifest, items_or_first
from skillopt_ci.sim.protocols import ScriptedRequest

CITIES = ("Lyon", "Porto", "Ghent", "Tartu", "Bergen", "Split", "Kraków", "Bilbao", "Graz", "Turku", "Malmö", "Cork")
PER_SPLIT = 3
_FACT = re.compile(r"The festival of ([\w-]+) is held every year in ([^.]+)\.")


def _filler(j: int) -> str:
    text = " ".join(f"Snippet {j}.{k} describes an unrelated event with a long and winding history." for k in range(8))
    return f"[DOC] [TLE] Notes {j} [PAR] {text}"


def row(key: str, n: int, place: int) -> dict:
    """The synthetic row number ``n`` (``place``: its index in its split)."""
    name, city = f"Lantern-{n}", CITIES[n % len(CITIES)]
    fact = f"[DOC] [TLE] Festival of {name} [PAR] The festival of {name} is held every year in {city}."
    docs = [fact, _filler(1)]
    if place % 3 == 1:
        docs = [_filler(j) for j in range(12)] + [fact]
    noun = "town" if place % 3 == 2 else "city"
    answers = [city, f"{city} (city)"] if n % 2 else [city]
    return {"key": key, "question": f"In which {noun} is the festival of {name} held?",
            "context": " ".join(docs), "answers": answers, "labels": [{"start": [0], "end": [1]}]}


def write_fixture(dest: Path, manifest: Manifest | None = None, fmt: str = "parquet") -> Path:
    """Write the rows (one per manifest id, or a few per published split) and two rows no manifest
    names into ``dest/searchqa/data/``; return ``dest/searchqa``."""
    rows, n = [], 0
    for items in items_or_first("searchqa", manifest, PER_SPLIT).values():
        for place, item in enumerate(items):
            rows.append(row(item.id, n, place))
            n += 1
    unused = [row(f"{'f' * 31}{k}", n + k, 0) for k in range(2)]
    root = dest / "searchqa"
    (root / "data").mkdir(parents=True, exist_ok=True)
    files = {"train-00000-of-00001": unused, "validation-00000-of-00001": rows}
    for stem, part in files.items():
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(part), root / "data" / f"{stem}.parquet")
        else:
            (root / "data" / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    return root


def policy(request: ScriptedRequest) -> str:
    """Read the context: answer the city the festival's document names, "the town of X" when asked
    for a town, and "unknown" when the document is not in the (cut) context."""
    prompt = request.last_user
    asked = re.search(r"festival of ([\w-]+) held", prompt)
    facts = dict(_FACT.findall(prompt))
    if asked is None or asked[1] not in facts:
        return "The context does not say.\n<answer>unknown</answer>"
    city = facts[asked[1]]
    answer = f"the town of {city}" if "which town" in prompt.lower() else city
    return f"The document on the festival names it.\n<answer>{answer}</answer>"
