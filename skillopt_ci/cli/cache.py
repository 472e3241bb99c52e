"""``cache-key``: the key and path under which CI keeps the response cache (actions/cache)."""

from __future__ import annotations

import click

from skillopt_ci.cli.common import State, config_path


@click.command(name="cache-key")
@click.option("--skill", "skills", multiple=True, help="Only these configured skills' suites (repeatable; "
              "names may be separated by spaces or commas). Default: all.")
@click.option("--shard", default="", help="The shard i/n of the job that uses the cache (empty: unsharded).")
@click.pass_obj
def cache_key(state: State, skills: tuple[str, ...], shard: str) -> None:
    """Print key=, restore-key= and path= lines for actions/cache (append them to $GITHUB_OUTPUT).

    The key hashes the config file and the selected skills' suites, plus the shard; save under
    "<key>-<run id>" and restore "<key>-", then "<restore-key>". Empty values: the cache is off."""
    from skillopt_ci.core.errors import InputError
    from skillopt_ci.core.paths import display_path
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.github.cache_key import CacheKey, response_cache_key
    from skillopt_ci.inputs.config import load_config

    path = config_path(state)
    if path is None:
        raise InputError("no skillopt.yml in this directory or above", hint="pass --config")
    config = load_config(path, display=display_path(path))
    names = tuple(n for value in skills for n in value.replace(",", " ").split())
    key = response_cache_key(config, path, names, parse_shard(shard.strip() or None))
    click.echo((key or CacheKey("", "", "")).lines(), nl=False)
