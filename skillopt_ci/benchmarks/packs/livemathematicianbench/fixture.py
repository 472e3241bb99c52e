"""LiveMathematicianBench fixture: raw monthly files (``data/<month>/qa_<month>_final.json``) in the
upstream shape, the correct option apart as "A", and a simulated solver.

Each synthetic item asks for a sum; the correct option states it and four others state wrong
sums or defer ("a stronger result can be proven"). The solver works the sum out and answers the
option's label when the sum is even, the option's text when it is odd and divisible by 3, and
otherwise slips by one (it picks the option stating the sum plus one): wrong on a third of the
tasks. The tests' own always-"A" policy shows what the shuffle is for.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from skillopt_ci.benchmarks.manifest import Manifest, items_or_first
from skillopt_ci.sim.protocols import ScriptedRequest

PER_SPLIT = 3
_ASK = re.compile(r"What is \$(\d+) \+ (\d+)\$")
_OPTION = re.compile(r"^([A-E])\. (.*)$", re.MULTILINE)


def item(month: str, no: int, n: int) -> dict:
    """The synthetic raw item ``<month>:<no>`` (``n`` varies its numbers)."""
    a, b = 10 + n, 3 + (n * 7) % 11
    wrong = [a + b + 1, a + b - 2, a * b]
    return {
        "no": no, "month": month, "paper_link": f"http://arxiv.org/abs/{month[2:]}.{no:05d}v1",
        "theorem": f"${a} + {b} = {a + b}$.", "sketch": "Count.", "theorem_type": ["Equality or Bound"],
        "mcq": {
            "question": f"What is ${a} + {b}$? Choose the strongest true statement.",
            "correct_choice": {"label": "A", "text": f"The sum is ${a + b}$."},
            "choices": [{"label": label, "text": f"The sum is ${w}$."} for label, w in zip("BCD", wrong, strict=True)]
            + [{"label": "E", "text": "One of the remaining options is correct, but a stronger result can be proven."}],
            "meta": {"false_labels": ["B", "C", "D", "E"]},
        },
    }


def _entries(manifest: Manifest | None) -> list[tuple[str, int]]:
    out = []
    for items in items_or_first("livemathematicianbench", manifest, PER_SPLIT).values():
        for entry in items:
            month, _, no = entry.id.partition(":")
            out.append((month, int(no)))
    return out


def write_fixture(dest: Path, manifest: Manifest | None = None) -> Path:
    """One raw item per manifest id (a few per published split when ``manifest`` is None), plus one
    no manifest names, grouped into monthly files; return the folder holding ``data/``."""
    months: dict[str, list[dict]] = defaultdict(list)
    entries = [*_entries(manifest), ("202511", 9999)]
    for n, (month, no) in enumerate(entries):
        months[month].append(item(month, no, n))
    root = dest / "livemathematicianbench"
    for month, items in months.items():
        folder = root / "data" / month
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"qa_{month}_final.json").write_text(json.dumps(items, indent=1), encoding="utf-8")
    return root


def policy(request: ScriptedRequest) -> str:
    prompt = request.last_user
    asked = _ASK.search(prompt)
    options = dict(_OPTION.findall(prompt))
    if asked is None:
        return "<answer>A</answer>"
    total = int(asked[1]) + int(asked[2])
    label = next((k for k, text in options.items() if text == f"The sum is ${total}$."), "A")
    if total % 2 == 0:
        return f"Adding gives {total}.\n<answer>{label}</answer>"
    if total % 3 == 0:
        return f"<answer>{options.get(label, label)}</answer>"
    slip = next((k for k, text in options.items() if text == f"The sum is ${total + 1}$."), "A")
    return f"Carrying the one gives {total + 1}.\n<answer>{slip}</answer>"
