"""Model providers: what one is (:class:`Provider`), the four built-ins, and the way from a
:class:`ModelSpec` to its endpoint and backend. Providers are found by name in
:data:`skillopt_ci.inputs.config.PROVIDERS` (plug-ins too); SDKs are imported only when a
backend is built.

Keys are read only from environment variables (the provider's, or the one named by
``api_key_env``); they are never written to a config snapshot, log or report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.redact import SECRETS
from skillopt_ci.inputs.config import PROVIDERS, ModelSpec, api_problem
from skillopt_ci.models.anthropic_backend import AnthropicBackend
from skillopt_ci.models.base import Backend
from skillopt_ci.models.batch_anthropic import AnthropicBatch
from skillopt_ci.models.batch_openai import OpenAIBatch
from skillopt_ci.models.batch_protocol import BatchClient
from skillopt_ci.models.endpoint import Endpoint
from skillopt_ci.models.openai_backend import OpenAIBackend
from skillopt_ci.models.responses_backend import ResponsesBackend

DEFAULT_AZURE_API_VERSION = "2024-10-21"
DEFAULT_AZURE_RESPONSES_API_VERSION = "2025-04-01-preview"  # the Responses API needs a preview version
KEYLESS = "not-needed"  # local OpenAI-compatible servers (Ollama, vLLM) ignore the key but the SDK wants one


@dataclass(frozen=True)
class Provider:
    """One model provider, registered by name. ``key_env`` holds its key (``api_key_env``
    overrides it) and ``key_what`` names it when it is missing; ``keyless``: the key may be left
    out, unless ``api_key_env`` names one. ``url_env`` holds its base URL (``base_url`` overrides
    it); ``url_what``, when given, makes the URL required. ``api_versions``: the default API
    version by ``api``, for a provider that versions its API (Azure; ``OPENAI_API_VERSION``
    overrides it).

    ``backend`` builds a :class:`Backend` from an :class:`Endpoint` and ``timeout=``;
    ``responses`` the same for ``api: responses`` (``None``: the provider does not speak the
    Responses API); ``batch`` builds its batch client on the backend (``None``: no batch API).
    The backends import their SDK when built. ``json_formats`` is false for a provider that asks
    for a JSON reply through a forced tool call only (Anthropic)."""

    key_env: str
    key_what: str
    url_env: str
    backend: Callable[..., Backend]
    responses: Callable[..., Backend] | None = None
    batch: Callable[[Any], BatchClient] | None = None
    url_what: str | None = None
    keyless: bool = False
    api_versions: Mapping[str, str] = field(default_factory=dict)
    json_formats: bool = True

    def endpoint(self, spec: ModelSpec, env: Mapping[str, str]) -> Endpoint:
        """Where ``spec`` is called; :class:`InputError` saying which variable to set."""
        def need(var: str, what: str) -> str:
            value = env.get(var, "").strip()
            if not value:
                raise InputError(f"{what} is not set: export {var}=…", where=f"models.{spec.role}",
                                 hint=f"the {spec.provider} provider reads it from the environment; "
                                      "keys never go in skillopt.yml")
            return value

        key = None if self.keyless else need(spec.api_key_env or self.key_env, self.key_what)
        url = spec.base_url or (need(self.url_env, self.url_what) if self.url_what else env.get(self.url_env) or None)
        if key is None:
            key = need(spec.api_key_env, self.key_what) if spec.api_key_env else env.get(self.key_env, "").strip()
        version = (spec.api_version or env.get("OPENAI_API_VERSION") or self.api_versions[spec.api]) if self.api_versions else None
        return Endpoint(spec.provider, spec.model, key or KEYLESS, url, version, api=spec.api)


OPENAI = Provider("OPENAI_API_KEY", "the OpenAI API key", "OPENAI_BASE_URL", OpenAIBackend, ResponsesBackend,
                  OpenAIBatch)
AZURE_OPENAI = Provider("AZURE_OPENAI_API_KEY", "the Azure OpenAI API key", "AZURE_OPENAI_ENDPOINT", OpenAIBackend,
                        ResponsesBackend, OpenAIBatch, url_what="the Azure OpenAI endpoint",
                        api_versions={"chat": DEFAULT_AZURE_API_VERSION, "responses": DEFAULT_AZURE_RESPONSES_API_VERSION})
ANTHROPIC = Provider("ANTHROPIC_API_KEY", "the Anthropic API key", "ANTHROPIC_BASE_URL", AnthropicBackend,
                     batch=AnthropicBatch, json_formats=False)
OPENAI_COMPATIBLE = Provider("OPENAI_API_KEY", "the API key", "OPENAI_BASE_URL", OpenAIBackend, ResponsesBackend,
                             keyless=True, url_what="the server URL (base_url in skillopt.yml or OPENAI_BASE_URL)")

_LOADED: dict[str, Provider] = {}  # every call's price asks for its provider: look each up once


def provider_of(spec: ModelSpec) -> Provider:
    """The provider ``spec`` names; the registry's ``unknown provider`` error when there is none."""
    found = _LOADED.get(spec.provider)
    if found is None:
        found = _LOADED[spec.provider] = PROVIDERS.load(spec.provider, where=f"models.{spec.role}.provider")
    return found


def resolve_endpoint(spec: ModelSpec, env: Mapping[str, str] | None = None) -> Endpoint:
    """Find the key and URL for ``spec``. Raises :class:`InputError` saying which variable to set.
    The key and any user-info in the URL are registered as secrets (never written out)."""
    provider = provider_of(spec)
    unusable = api_problem(spec)
    if unusable:
        raise InputError(unusable, where=f"models.{spec.role}.api")
    endpoint = provider.endpoint(spec, os.environ if env is None else env)
    SECRETS.add(endpoint.api_key)
    SECRETS.add_url(endpoint.base_url)
    return endpoint


def base_url_of(spec: ModelSpec, env: Mapping[str, str] | None = None) -> str | None:
    """The URL ``spec`` would call (configured, else the provider's environment variable), without
    needing its key; ``None`` means the provider's public endpoint."""
    if spec.base_url:
        return spec.base_url
    return (os.environ if env is None else env).get(provider_of(spec).url_env, "").strip() or None


def create_backend(spec: ModelSpec, env: Mapping[str, str] | None = None) -> Backend:
    """Build the backend for ``spec``; imports the provider SDK only now."""
    endpoint = resolve_endpoint(spec, env)
    provider = provider_of(spec)  # api_problem refused api: responses for a provider without it
    factory = (provider.responses if endpoint.api == "responses" else None) or provider.backend
    return factory(endpoint, timeout=spec.timeout)
