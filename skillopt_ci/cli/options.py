"""The options several commands share, declared once: the same flag means the same thing, with
the same help text, wherever it appears (``tests/golden/cli_help.txt`` pins every command's help)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from skillopt_ci.core.cache_modes import CACHE_MODES

F = TypeVar("F", bound=Callable[..., Any])

quiet = click.option("--quiet", is_flag=True, help="No progress output.")
strict = click.option("--strict", is_flag=True,
                      help="Treat warnings (soft Agent Skills deviations, oversized inputs) as errors.")
assume_yes = click.option("--yes", "assume_yes", is_flag=True,
                          help="Run even when the estimated cost exceeds the budget left.")
wait = click.option("--wait", is_flag=True,
                    help="If another process is writing to the run directory, wait for it instead of failing.")
fresh = click.option("--fresh", is_flag=True, help="Discard an existing run in the output directory and start over.")
model = click.option("--model", help="Target model as provider:model, overriding skillopt.yml.")


def cache_mode(help: str | None = None) -> Callable[[F], F]:
    return click.option("--cache", "cache_mode", type=click.Choice(CACHE_MODES), help=help)


def base_url(help: str = "Base URL for --model (OpenAI-compatible servers).") -> Callable[[F], F]:
    return click.option("--base-url", help=help)


def run_guards(f: F) -> F:
    """``--quiet --strict --yes --wait``, in that order: the flags of every command that spends."""
    for option in (wait, assume_yes, strict, quiet):
        f = option(f)
    return f
