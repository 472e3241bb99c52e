"""A response cache written from a process of its own, for the tests of concurrent writers:
``python -c "from helpers.cache_writer import fill_cache; ..."`` with ``tests/`` as the working folder."""

from __future__ import annotations

from pathlib import Path

from skillopt_ci.models.base import Completion, Message, Usage
from skillopt_ci.models.cache import ResponseCache, cache_key


def fill_cache(path: str, start: int, count: int) -> None:
    cache = ResponseCache(Path(path))
    for i in range(start, start + count):
        key = cache_key("p", "m", {}, [Message("user", str(i))], 0)
        cache.put(key, "p", "m", Completion(text=f"answer {i}", usage=Usage(1, 1)))
    cache.close()
