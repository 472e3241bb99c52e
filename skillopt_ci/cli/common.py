"""What the commands share: the global options, finding and loading skillopt.yml, and checking
that a run directory can be written before any paid work.

Only click and the core are imported here; everything heavier is imported inside the functions so
that ``skillopt-ci --help`` stays fast.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import click

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.paths import display_path


class State:
    """The group's options, handed to every command that needs the config."""

    def __init__(self, config_path: Path | None):
        self.config_path = config_path


def config_path(state: State) -> Path | None:
    """--config, else the nearest skillopt.yml in . or above; None when there is none. A
    skillopt.yml that is not a file (a directory) is an error, not "no skillopt.yml"."""
    from skillopt_ci.inputs.config import CONFIG_NAME

    if state.config_path is not None:
        if state.config_path.is_dir():
            raise InputError("--config is a directory; it must name a YAML file", where=str(state.config_path))
        if not state.config_path.is_file():
            raise InputError("config file not found", where=str(state.config_path))
        return state.config_path
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
        if candidate.exists():
            raise InputError("is a directory, not a config file", where=display_path(candidate),
                             hint="the config must be a YAML file: move that directory away, or pass --config FILE")
    return None


def load_project_config(state: State, model: str | None = None, base_url: str | None = None) -> Any:
    """The config from --config or skillopt.yml, with --model/--base-url overriding the target."""
    from skillopt_ci.inputs.config import ModelSpec, default_config, load_config

    path = config_path(state)
    override = None
    if model:
        provider, sep, name = model.partition(":")
        if not sep or not name:
            raise InputError(f"--model {model!r} must look like provider:model, e.g. openai:gpt-4o-mini")
        override = ModelSpec.from_dict("target", {"provider": provider, "model": name, "base_url": base_url})
    elif base_url:
        raise InputError("--base-url needs --model provider:model")
    if path is None:
        if override is None:
            raise InputError("no skillopt.yml in this directory or above",
                             hint="run skillopt-ci init, or pass --config, or --model provider:model")
        return default_config(Path.cwd(), override)
    config = load_config(path, display=display_path(path))
    for line in config.warnings:
        click.echo(f"warning: {line}", err=True)
    if override is not None:
        config = replace(config, models=MappingProxyType({**config.models, "target": override}))
    return config


def check_out(config: Any, out: Path | None) -> None:
    """Fail before any paid work when the run directory (--out, else runs_dir) cannot be written."""
    from skillopt_ci.inputs.writable import check_dir

    if out is not None:
        check_dir(out, "--out")
    else:
        check_dir(config.runs_dir, "runs_dir (skillopt.yml)")
