"""Redaction throughput on result lines: every line of ``results.jsonl`` goes through it.

Run: python bench/bench_redact.py [--secrets 3] [--lines 4000]

Registers ``--secrets`` key-shaped values, then times :func:`skillopt_ci.core.redact.redact` on
``results.jsonl`` lines shaped like the real ones: a chat result (about 560 characters, as the
bundled triage suite writes them) and a tools result whose trajectory holds a dozen steps with
newlines, quotes, a URL with percent-escapes and an ``&`` (about 4 KB). None of them holds a
secret (the common case); a last figure is for lines that each hold one, base64-encoded.
Then the console: :class:`~skillopt_ci.core.redact.SafeStream` writing 80-character log lines,
whole and in two pieces (it holds back the end of a write while it may begin a key).
Prints lines per second for each kind.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import time

from skillopt_ci.core.redact import SECRETS, SafeStream, redact


def chat_line(rng: random.Random, i: int) -> str:
    ticket = rng.choice(["The editor freezes when I paste a table from Excel.",
                         "I can't log in since yesterday, it says my password is wrong but I just reset it.",
                         "Search results are broken, they show items from another project."])
    return json.dumps({
        "schema_version": 1, "task_id": f"val-{i:03d}", "repeat": i % 3,
        "prompt": f"Triage this support ticket.\n\nPlan: Pro\nTicket:\n{ticket}\n",
        "output": "question/P3", "score": 0.5, "passed": False,
        "feedback": "category should be bug, not question; priority should be P2, not P3",
        "usage": {"input_tokens": 75, "output_tokens": 1}, "scorer_usage": {"input_tokens": None, "output_tokens": None},
        "cost_usd": 7.7e-05, "latency_s": 0.0525, "cached": False, "finish_reason": "stop", "error": None,
        "expected": "bug/P2"}, ensure_ascii=False) + "\n"


def tools_line(rng: random.Random, i: int) -> str:
    steps = []
    for n in range(12):
        steps.append({"kind": "tool_call", "name": "search", "call_id": f"call_{n}",
                      "text": json.dumps({"query": f"order {rng.randint(1000, 9999)} status & refund", "limit": 5})})
        steps.append({"kind": "tool_result", "name": "search", "call_id": f"call_{n}", "is_error": False,
                      "text": "Found 2 results:\n1. \"Refund policy\" https://help.example.com/a?q=refund%20policy&x=1\n"
                              "2. Order status — shipped on 2026-11-0" + str(n % 9) + "\n"})
    return json.dumps({
        "schema_version": 1, "task_id": f"tools-{i:03d}", "repeat": 0, "prompt": "Answer the customer.\n",
        "output": "Your order shipped yesterday; the refund policy allows 30 days.", "score": 1.0, "passed": True,
        "feedback": "", "usage": {"input_tokens": 2100, "output_tokens": 180}, "cached": False,
        "finish_reason": "stop", "error": None, "trajectory": steps}, ensure_ascii=False) + "\n"


def rate(lines: list[str]) -> float:
    start = time.perf_counter()
    for line in lines:
        redact(line)
    return len(lines) / (time.perf_counter() - start)


def stream_rate(lines: list[str], pieces: int) -> float:
    stream = SafeStream(io.StringIO())
    start = time.perf_counter()
    for line in lines:
        step = -(-len(line) // pieces)
        for at in range(0, len(line), step):
            stream.write(line[at:at + step])
            stream.flush()
    stream.close()
    return len(lines) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--secrets", type=int, default=3)
    parser.add_argument("--lines", type=int, default=4000)
    args = parser.parse_args()
    rng = random.Random(0)
    keys = ["sk-proj-" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
                                 for _ in range(46)) for _ in range(args.secrets)]
    for key in keys:
        SECRETS.add(key)
    chat = [chat_line(rng, i) for i in range(args.lines)]
    tools = [tools_line(rng, i) for i in range(args.lines // 4)]
    leaky = [line.replace("question/P3", base64.b64encode(f"x{keys[0]}y".encode()).decode()) for line in chat]
    assert all(keys[0] not in redact(line) for line in leaky[:10])
    print(f"{args.secrets} secrets registered")
    print(f"chat result lines   ({len(chat[0])} chars):  {rate(chat):>9,.0f} lines/s")
    print(f"tools result lines  ({len(tools[0])} chars): {rate(tools):>9,.0f} lines/s")
    print(f"chat lines holding a base64 key:    {rate(leaky):>9,.0f} lines/s")
    log = [f"ticket-triage: {i}/{args.lines} ({i * 100 // args.lines}%) {i // 10}s elapsed, ~{i % 60}s left\n"
           for i in range(args.lines)]
    print(f"console lines ({len(log[0])} chars), one write each:  {stream_rate(log, 1):>9,.0f} lines/s")
    print(f"console lines, two writes each:          {stream_rate(log, 2):>9,.0f} lines/s")


if __name__ == "__main__":
    main()
