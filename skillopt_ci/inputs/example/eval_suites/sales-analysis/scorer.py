"""Scorer for the sales-analysis suite: the answer is a number, right within a cent.

Each task's data has traps a naive analysis falls into (its ``metadata.traps``): duplicate
order ids, refunded orders, amounts in cents, amounts in other currencies. When an answer is
wrong, the scorer recomputes the answer with each combination of traps ignored and, when one
matches, says which mistakes were made, so an optimizer reading the failure can learn the rule.
"""

import csv
import re
from itertools import combinations
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAPS = ("duplicates", "refunds", "cents", "currency")
FEEDBACK = {
    "duplicates": "duplicate order ids were counted more than once",
    "refunds": "refunded orders were counted",
    "cents": "amount_cents was read as dollars, but it is in cents",
    "currency": "amounts in other currencies were added without converting them to USD",
}
NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def read_table(suite_dir, files):
    """The task's sales rows (dicts, file order) and the exchange rates, if the task has them."""
    with open(Path(suite_dir) / files["sales.csv"], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rates = {}
    if "rates.csv" in files:
        with open(Path(suite_dir) / files["rates.csv"], newline="", encoding="utf-8") as handle:
            rates = {r["currency"]: float(r["usd_per_unit"]) for r in csv.DictReader(handle)}
    return rows, rates


def answer(table, metadata, handled):
    """The answer to the task's question when only the traps in ``handled`` are taken care of."""
    rows, rates = table
    if "duplicates" in handled:
        seen = set()
        rows = [r for r in rows if not (r["order_id"] in seen or seen.add(r["order_id"]))]
    if "refunds" in handled:
        rows = [r for r in rows if r["status"] != "refunded"]
    if metadata.get("region"):
        rows = [r for r in rows if r["region"] == metadata["region"]]
    amounts = []
    for r in rows:
        value = float(r["amount_cents"]) / (100 if "cents" in handled else 1) if "amount_cents" in r else float(r["amount"])
        if "currency" in handled and r.get("currency"):
            value *= rates[r["currency"]]
        amounts.append(value)
    metric = metadata["metric"]
    if metric == "count":
        return len(amounts)
    if metric == "average":
        return round(sum(amounts) / len(amounts), 2)
    return round(sum(amounts), 2)


def parse_number(output):
    match = NUMBER_RE.search(output.replace("$", ""))
    return float(match.group(0).replace(",", "")) if match else None


def shown(number):
    return f"{number:.2f}".rstrip("0").rstrip(".")


def close(a, b):
    return abs(a - b) <= max(0.01, 1e-6 * abs(b))


def score(output, task):
    expected = float(task.expected)
    got = parse_number(output)
    if got is None:
        return {"value": 0.0, "passed": False,
                "feedback": f'the answer must be a number (here {task.expected}), got "{output.strip()[:80]}"'}
    if close(got, expected):
        return {"value": 1.0, "passed": True, "feedback": "correct"}
    table = read_table(HERE, task.fields["files"])
    traps = task.metadata.get("traps", [])
    for k in range(1, len(traps) + 1):  # the fewest mistakes that explain the answer
        for missed in combinations(traps, k):
            if close(answer(table, task.metadata, set(TRAPS) - set(missed)), got):
                mistakes = "; ".join(FEEDBACK[t] for t in missed)
                return {"value": 0.0, "passed": False, "feedback": f"expected {task.expected}, got {shown(got)}: {mistakes}"}
    return {"value": 0.0, "passed": False,
            "feedback": f"expected {task.expected}, got {shown(got)}; no known data problem explains the difference"}
