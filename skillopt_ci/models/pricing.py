"""Dollar cost of a call from a price table (USD per million tokens).

The built-in table holds list prices published by the providers for common models; the
``pricing:`` section of ``skillopt.yml`` extends and overrides it. A model we have no price for
has an *unknown* cost (``None``), never a cost of zero — except a model served from this very
machine (a loopback base URL: 127.0.0.0/8, ``localhost``, ``::1``), which costs nothing
(:data:`LOCAL_PRICE`; see :func:`is_loopback`).

Both OpenAI (Azure's global batch deployments too) and Anthropic charge half the list price for
requests sent through their batch APIs: ``price_for(..., batch=True)`` is that price, unless the
``pricing:`` entry names its own ``batch_input`` / ``batch_output``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from skillopt_ci.models.base import Usage

# (input, output) USD per 1M tokens, standard tier, no caching or batch discounts.
BUILTIN_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-3-5-haiku": (0.80, 4.00),
}

LOCAL_PRICE: tuple[float, float] = (0.0, 0.0)
BATCH_DISCOUNT = 0.5  # the batch APIs' price is half the list price (OpenAI and Anthropic alike)

# Dated snapshots and aliases share their family's price: gpt-4o-2024-08-06, claude-sonnet-4-5-20250929.
_SNAPSHOT_SUFFIX = re.compile(r"^-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def price_for(model: str, overrides: Mapping[str, Mapping[str, float]] | None = None, *,
              batch: bool = False) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or ``None`` when unknown; with ``batch``,
    the batch APIs' price (the entry's ``batch_input``/``batch_output``, else half the list price)."""
    table: dict[str, Mapping[str, float]] = {k: {"input": i, "output": o} for k, (i, o) in BUILTIN_PRICES.items()}
    table.update(overrides or {})
    name = model if model in table else next((n for n in sorted(table, key=len, reverse=True)
                                              if model.startswith(n) and _SNAPSHOT_SUFFIX.match(model[len(n):])), None)
    if name is None:
        return None
    price = table[name]
    listed = (float(price["input"]), float(price["output"]))
    if not batch:
        return listed
    return (float(price.get("batch_input", listed[0] * BATCH_DISCOUNT)),
            float(price.get("batch_output", listed[1] * BATCH_DISCOUNT)))


def cost_of(usage: Usage, price: tuple[float, float] | None) -> float | None:
    """Cost of one call; unknown when the price or a token count is unknown."""
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    return (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1_000_000


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` points at this machine: a 127.0.0.0/8 or ::1 address, or ``localhost``."""
    if not url:
        return False
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
