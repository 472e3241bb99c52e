"""Shared by the model-layer tests: a pool on one model spec, a real PNG, and the model spec of
each protocol pointed at a scripted server."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path
from types import MappingProxyType

from skillopt_ci.inputs.config import Config, ModelSpec
from skillopt_ci.models.cache import ResponseCache
from skillopt_ci.models.pool import ModelPool
from skillopt_ci.sim import ScriptedModelServer


def tiny_png(rgb: tuple[int, int, int] = (255, 0, 0)) -> bytes:
    """A valid 1x1 PNG of one colour."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" + bytes(rgb)))
            + chunk(b"IEND", b""))


def make_pool(tmp_path: Path, spec: dict, env: dict, mode: str = "off") -> ModelPool:
    model = ModelSpec.from_dict("target", {"max_retries": 0, **spec})
    cfg = Config(root=tmp_path, file="skillopt.yml", models=MappingProxyType({"target": model}))
    return ModelPool(cfg, ResponseCache(tmp_path / "cache.sqlite", mode), env=env, retry_base_delay=0.01)


def run_calls(pool: ModelPool, *calls: dict):
    """Each call's keyword arguments go to ``pool.complete("target", ...)``; returns the results.
    A call may be a function of the previous results (for a second turn)."""

    async def go():
        done = []
        try:
            for call in calls:
                kwargs = call(done) if callable(call) else call
                done.append(await pool.complete("target", **kwargs))
        finally:
            await pool.aclose()
        return done

    return asyncio.run(go())


def protocol_setup(protocol: str, srv: ScriptedModelServer) -> tuple[dict, dict]:
    """(model spec, environment) that makes the pool speak ``protocol`` to ``srv``."""
    if protocol == "openai":
        return {"provider": "openai", "model": "gpt-4o-mini"}, {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": srv.openai_base_url}
    if protocol == "responses":
        return ({"provider": "openai", "model": "gpt-5-mini", "api": "responses"},
                {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": srv.openai_base_url})
    if protocol == "azure":
        return ({"provider": "azure-openai", "model": "my-deployment"},
                {"AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_ENDPOINT": srv.azure_endpoint})
    if protocol == "anthropic":
        return ({"provider": "anthropic", "model": "claude-haiku-4-5"},
                {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": srv.anthropic_base_url})
    raise ValueError(protocol)
