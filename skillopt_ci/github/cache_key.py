"""The ``actions/cache`` key and path of the response cache (``skillopt-ci cache-key``).

The key names what the cached responses were made for: a hash of the config file and of the
content hashes of the selected skills' suites (all configured skills when none is named), plus
the shard (``shard2of4``), so each job of a matrix restores the responses of its own slice. The
skills' text is left out on purpose: responses are keyed by their messages inside the cache, so
a cache made for the base skill serves the head's unchanged prompts too.

An ``actions/cache`` key is written once, so a job saves under ``<key>-<run id>-<attempt>`` and
restores the newest of ``<key>-`` (its shard's) then ``<restore-key>`` (any shard's, same config
and suites). Pure but for reading the config file and the suites.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skillopt_ci.core.shard import Shard
from skillopt_ci.inputs.config import Config
from skillopt_ci.inputs.suite import load_suite

PREFIX = "skillopt-responses-v1"


@dataclass(frozen=True)
class CacheKey:
    key: str  # this shard's key (append the run id to save)
    restore_key: str  # the prefix of every shard's keys for the same config and suites
    path: str  # the cache file, relative to the working directory when inside it

    def lines(self) -> str:
        """``name=value`` lines for ``$GITHUB_OUTPUT``."""
        return f"key={self.key}\nrestore-key={self.restore_key}\npath={self.path}\n"


def response_cache_key(config: Config, config_file: Path, names: Sequence[str] = (),
                       shard: Shard | None = None, cwd: Path | None = None) -> CacheKey | None:
    """The key of ``config``'s response cache, or None when the cache is off."""
    from skillopt_ci.github.context import selected_skills

    if config.cache.mode == "off":
        return None
    digest = hashlib.sha256(config_file.read_bytes())
    suites = sorted({entry.suite.resolve() for entry in selected_skills(config, tuple(names))})
    for suite in suites:
        digest.update(load_suite(suite).hash.encode())
    base = f"{PREFIX}-{digest.hexdigest()[:20]}-"
    key = base + (f"shard{shard.index}of{shard.count}" if shard else "all")
    path = config.cache.path.resolve()
    here = (cwd or Path.cwd()).resolve()
    shown = os.path.relpath(path, here) if path.is_relative_to(here) else str(path)
    return CacheKey(key, base, shown)
