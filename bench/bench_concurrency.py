"""Adaptive concurrency against a rate-limited provider: completed calls per second and 429s for
fixed concurrencies and the adaptive limit, next to the ideal the limit allows.

Run: python bench/bench_concurrency.py [--calls 300] [--rpm 600] [--tpm 15600] [--latency-ms 300]

The scripted server holds each answer ``--latency-ms`` and enforces token buckets of requests and
tokens per minute (one second of burst, so a short run is limited as a long one would be), with
OpenAI's rate-limit headers and ``retry-after`` on its 429s. Each row sends ``--calls`` chat calls
(a call still refused after 50 retries counts as failed) through the real model pool and OpenAI SDK (retries on, the response cache off). The ideal is the
rate limit's own throughput (the lower of requests/s and tokens/s ÷ tokens per call).
Target: adaptive ≥ 90 % of the ideal, with fewer 429s than every fixed setting that reaches 80 %.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.models.base import Message
from skillopt_ci.models.cache import ResponseCache
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.ratelimit import RateLimit

PROMPT = "Classify this ticket: the login page is down for everyone"  # 10 tokens
MAX_TOKENS = 16


def run(calls: int, concurrency: int, adaptive: bool, args: argparse.Namespace) -> tuple[float, int, int, int]:
    """(completed calls per second, 429s, calls that failed after their retries, lowest limit)."""
    limit = RateLimit(args.rpm, args.tpm, burst_s=1.0)
    with ScriptedModelServer(lambda request: "bug/P2", latency=args.latency_ms / 1000, rate_limit=limit) as server, \
            tempfile.TemporaryDirectory() as tmp:
        spec = ModelSpec.from_dict("target", {"provider": "openai-compatible", "model": "m", "max_retries": 50,
                                              "base_url": server.openai_base_url,
                                              "params": {"max_tokens": MAX_TOKENS}})
        config = Config(root=Path(tmp), file="skillopt.yml", models=MappingProxyType({"target": spec}),
                        concurrency=concurrency, adaptive_concurrency=adaptive)
        pool = ModelPool(config, ResponseCache(Path(tmp) / "c.sqlite", "off"), env={"OPENAI_API_KEY": "k"},
                         retry_base_delay=0.05)

        async def go() -> list:
            try:
                return await asyncio.gather(*(pool.complete("target", [Message("user", f"{PROMPT} #{i}")])
                                              for i in range(calls)), return_exceptions=True)
            finally:
                await pool.aclose()

        started = time.perf_counter()
        failed = sum(isinstance(r, BaseException) for r in asyncio.run(go()))
        seconds = time.perf_counter() - started
    return (calls - failed) / seconds, limit.limited, failed, pool.limiter.lowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rpm", type=float, default=600)
    parser.add_argument("--tpm", type=float, default=15_600)
    parser.add_argument("--latency-ms", type=float, default=300)
    args = parser.parse_args()
    tokens = len(PROMPT.split()) + 1 + MAX_TOKENS
    ideal = min(args.rpm / 60, args.tpm / 60 / tokens)
    print(f"{args.calls} calls, {args.rpm:g} requests/min, {args.tpm:g} tokens/min ({tokens} per call), "
          f"{args.latency_ms:g} ms per answer: ideal {ideal:.2f} calls/s")
    print(f"{'concurrency':<22} {'calls/s':>8} {'of ideal':>9} {'429s':>6} {'failed':>7}")
    rows = []
    for concurrency, adaptive in ((4, False), (16, False), (64, False), (64, True)):
        rate, limited, failed, lowest = run(args.calls, concurrency, adaptive, args)
        name = f"adaptive (≤{concurrency}, min {lowest})" if adaptive else f"fixed {concurrency}"
        rows.append((adaptive, rate / ideal, limited))
        print(f"{name:<22} {rate:>8.2f} {rate / ideal:>9.0%} {limited:>6} {failed:>7}")
    adaptive_share, adaptive_429 = next((s, n) for a, s, n in rows if a)
    rivals = [n for a, s, n in rows if not a and s >= 0.8]
    met = adaptive_share >= 0.9 and all(adaptive_429 < n for n in rivals)
    print(f"target (≥ 90 % of ideal, fewer 429s than every fixed setting at ≥ 80 %): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
