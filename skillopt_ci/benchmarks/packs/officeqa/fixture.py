"""A tiny OfficeQA in the upstream layout, and a simulated target that answers it with the tools.

``write_fixture(dest)`` writes what the Hugging Face download of ``databricks/officeqa`` holds:
``officeqa_full.csv`` (uid, question, answer, source_docs, source_files, difficulty; a multi-file
cell separated by ``\\r\\n``) and three small, made-up bulletins under
``treasury_bulletins_parsed/transformed/``. Each bulletin has a table of budget receipts and
expenditures by fiscal year. Without a manifest it writes a few questions whose uids are the
first ones of each split of the published manifest (plus one the manifest does not name); with a
manifest, one question per manifest id. None of it is real OfficeQA data.

``policy`` plays the target on the scripted model server, using only the tools: ``glob`` the
documents, ``grep`` every candidate file for the year's table row, ``read`` the lines around the
hit, then answer with the first number after the year. That number is the receipts column, so it
is right on receipts questions and wrong on expenditures questions.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.manifest import Manifest, load_manifest
from skillopt_ci.sim.protocols import ScriptedReply, ScriptedRequest, ScriptedToolCall

DOCS = "treasury_bulletins_parsed/transformed"
COLUMNS = ("uid", "question", "answer", "source_docs", "source_files", "difficulty")
BULLETINS = {  # file -> (month, year, fiscal years in its table)
    "treasury_bulletin_1944_01.txt": ("january", 1944, range(1939, 1944)),
    "treasury_bulletin_1950_02.txt": ("february", 1950, range(1945, 1950)),
    "treasury_bulletin_1982_08.txt": ("august", 1982, range(1977, 1982)),
}
KINDS = ("receipts", "expenditures")
_YEAR = re.compile(r"fiscal year (\d{4})")


def receipts(year: int) -> int:
    return 5_000 + 1_234 * (year - 1939) + 7 * (year % 13)


def expenditures(year: int) -> int:
    return 9_000 + 2_345 * (year - 1939) + 11 * (year % 7)


def bulletin_text(name: str) -> str:
    month, year, years = BULLETINS[name]
    lines = ["TREASURY BULLETIN", f"{month.capitalize()} {year}", "",
             "Office of the Secretary of the Treasury", ""]
    lines += [f"Section {n}. Notes on the operations of the Treasury, paragraph {n}." for n in range(1, 31)]
    lines += ["", "Table 1. Budget receipts and expenditures (In millions of dollars)",
              "| Fiscal year | Receipts | Expenditures |", "| --- | --- | --- |"]
    lines += [f"| {y} | {receipts(y):,} | {expenditures(y):,} |" for y in years]
    lines += ["", "Source: Daily Treasury Statement.", ""]
    lines += [f"Appendix line {n}: no figures here." for n in range(1, 21)]
    return "\n".join(lines) + "\n"


def _question(uid: str, index: int, multi: bool) -> dict[str, str]:
    names = list(BULLETINS)
    kind = KINDS[index % 2]
    if multi:
        files = [names[index % 3], names[(index + 1) % 3]]
        where = files[1]
    else:
        files = [names[index % 3]]
        where = files[0]
    month, year, years = BULLETINS[where]
    fiscal = list(years)[index % len(years)]
    value = receipts(fiscal) if kind == "receipts" else expenditures(fiscal)
    docs = [f"https://fraser.stlouisfed.org/title/treasury-bulletin-407/{BULLETINS[f][0]}-{BULLETINS[f][1]}?page=3"
            for f in files]
    return {"uid": uid,
            "question": f"According to the Treasury Bulletin, what were total budget {kind} in fiscal year "
                        f"{fiscal}, in millions of dollars?",
            "answer": f"{value:,}", "source_docs": "\r\n".join(docs), "source_files": "\r\n".join(files),
            "difficulty": "hard" if multi else "easy"}


def _is_multi(fields: Any) -> bool:
    return len(str(fields.get("source_files", "")).splitlines()) > 1


def write_fixture(dest: Path, manifest: Manifest | None = None) -> Path:
    """Write the fixture under ``dest`` and return the folder to pass to ``--from``."""
    dest.mkdir(parents=True, exist_ok=True)
    docs = dest / DOCS
    docs.mkdir(parents=True, exist_ok=True)
    for name in BULLETINS:
        (docs / name).write_text(bulletin_text(name), encoding="utf-8")
    if manifest is None:
        published = load_manifest("officeqa")
        items = [*published.splits["train"][:3], *published.splits["val"][:2], *published.splits["test"][:2]]
    else:
        items = [item for split in manifest.splits.values() for item in split]
    rows = [_question(item.id, n, _is_multi(item.fields)) for n, item in enumerate(items)]
    if manifest is None:
        rows.append(_question("UID9999", len(rows), False))  # a question no split names
    with (dest / "officeqa_full.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return dest


def small_manifest(dest: Path) -> Path:
    """A manifest folder naming exactly the ids ``write_fixture(dest)`` writes without a manifest
    (the first entries of each published split, as published)."""
    published = load_manifest("officeqa")
    for split, count in (("train", 3), ("val", 2), ("test", 2)):
        (dest / split).mkdir(parents=True, exist_ok=True)
        entries = [dict(item.fields) for item in published.splits[split][:count]]
        (dest / split / "items.json").write_text(json.dumps(entries, indent=2), encoding="utf-8")
    (dest / "split_manifest.json").write_text(json.dumps({"benchmark": "OfficeQA", "counts": {"train": 3, "val": 2,
                                                          "test": 2}}), encoding="utf-8")
    return dest


# --- the simulated target --------------------------------------------------------------------------


def _call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name, arguments)


def _prompt(request: ScriptedRequest) -> str:
    return next((m["content"] for m in request.messages if m["role"] == "user"), "")


def _rounds(request: ScriptedRequest) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "assistant" and m.get("tool_calls")]


def _grep_hit(request: ScriptedRequest) -> tuple[str, int] | None:
    """(file, line) of the first grep result with a hit, the file read from the call it answers."""
    asked = {c["id"]: json.loads(c["arguments"]) for c in _rounds(request)[-1]["tool_calls"]}
    for result in request.tool_results:
        found = re.match(r"(\d+): ", result["content"])
        if found and result["tool_call_id"] in asked and not result.get("is_error"):
            return asked[result["tool_call_id"]]["path"], int(found.group(1))
    return None


def policy(request: ScriptedRequest) -> str | ScriptedReply:
    prompt = _prompt(request)
    year = _YEAR.search(prompt)
    files = re.findall(r"^- (treasury_bulletin_\S+\.txt)$", prompt, re.M)
    if year is None or not files:
        return "I cannot tell what to look for.\n<answer>Unable to determine</answer>"
    row = f"| {year.group(1)} |"
    rounds = len(_rounds(request))
    if rounds == 0:
        return ScriptedReply("Let me list the documents.", tool_calls=(_call("glob", pattern="treasury_bulletin_*.txt"),))
    if rounds == 1:
        return ScriptedReply("", tool_calls=tuple(_call("grep", pattern=row, path=f) for f in files))
    if rounds == 2:
        hit = _grep_hit(request)
        if hit is None:
            return f"No document has a row for {row}.\n<answer>Unable to determine</answer>"
        return ScriptedReply("", tool_calls=(_call("read", path=hit[0], start=max(1, hit[1] - 2), limit=5),))
    shown = request.tool_results[0]["content"] if request.tool_results else ""
    line = next((x for x in shown.splitlines() if row in x), "")
    numbers = re.findall(r"\d[\d,]*", line.split(row, 1)[-1])
    if not numbers:
        return "<answer>Unable to determine</answer>"
    return f"The table row reads: {line.strip()}\n<answer>{numbers[0]}</answer>"
