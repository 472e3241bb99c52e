"""From a :class:`ModelSpec` to a backend: credentials from the environment, SDKs imported lazily.

Keys are read only from environment variables (the standard ones, or the one named by
``api_key_env``); they are never written to a config snapshot, log or report.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.redact import SECRETS
from skillopt_ci.inputs.config import ModelSpec, api_problem
from skillopt_ci.models.base import Backend
from skillopt_ci.models.endpoint import Endpoint

DEFAULT_AZURE_API_VERSION = "2024-10-21"
DEFAULT_AZURE_RESPONSES_API_VERSION = "2025-04-01-preview"  # the Responses API needs a preview version
KEYLESS = "not-needed"  # local OpenAI-compatible servers (Ollama, vLLM) ignore the key but the SDK wants one


def resolve_endpoint(spec: ModelSpec, env: Mapping[str, str] | None = None) -> Endpoint:
    """Find the key and URL for ``spec``. Raises :class:`InputError` saying which variable to set.
    The key and any user-info in the URL are registered as secrets (never written out)."""
    endpoint = _resolve(spec, env)
    SECRETS.add(endpoint.api_key)
    SECRETS.add_url(endpoint.base_url)
    return endpoint


def _resolve(spec: ModelSpec, env: Mapping[str, str] | None) -> Endpoint:
    env = os.environ if env is None else env
    where = f"models.{spec.role}"
    unusable = api_problem(spec)
    if unusable:
        raise InputError(unusable, where=f"{where}.api")

    def need(var: str, what: str) -> str:
        value = env.get(var, "").strip()
        if not value:
            raise InputError(
                f"{what} is not set: export {var}=…",
                where=where,
                hint=f"the {spec.provider} provider reads it from the environment; keys never go in skillopt.yml",
            )
        return value

    if spec.provider == "openai":
        key = need(spec.api_key_env or "OPENAI_API_KEY", "the OpenAI API key")
        return Endpoint("openai", spec.model, key, spec.base_url or env.get("OPENAI_BASE_URL") or None, api=spec.api)
    if spec.provider == "anthropic":
        key = need(spec.api_key_env or "ANTHROPIC_API_KEY", "the Anthropic API key")
        return Endpoint("anthropic", spec.model, key, spec.base_url or env.get("ANTHROPIC_BASE_URL") or None)
    if spec.provider == "azure-openai":
        key = need(spec.api_key_env or "AZURE_OPENAI_API_KEY", "the Azure OpenAI API key")
        endpoint = spec.base_url or need("AZURE_OPENAI_ENDPOINT", "the Azure OpenAI endpoint")
        default = DEFAULT_AZURE_RESPONSES_API_VERSION if spec.api == "responses" else DEFAULT_AZURE_API_VERSION
        version = spec.api_version or env.get("OPENAI_API_VERSION") or default
        return Endpoint("azure-openai", spec.model, key, endpoint, version, api=spec.api)
    if spec.provider == "openai-compatible":
        base_url = spec.base_url or need("OPENAI_BASE_URL", "the server URL (base_url in skillopt.yml or OPENAI_BASE_URL)")
        if spec.api_key_env:
            key = need(spec.api_key_env, "the API key")
        else:
            key = env.get("OPENAI_API_KEY", "").strip() or KEYLESS
        return Endpoint("openai-compatible", spec.model, key, base_url, api=spec.api)
    raise InputError(
        f"unknown provider {spec.provider!r}",
        where=f"{where}.provider",
        hint="use openai, azure-openai, anthropic or openai-compatible",
    )


def base_url_of(spec: ModelSpec, env: Mapping[str, str] | None = None) -> str | None:
    """The URL ``spec`` would call (configured, else the provider's environment variable), without
    needing its key; ``None`` means the provider's public endpoint."""
    env = os.environ if env is None else env
    variable = {"openai": "OPENAI_BASE_URL", "openai-compatible": "OPENAI_BASE_URL",
                "anthropic": "ANTHROPIC_BASE_URL", "azure-openai": "AZURE_OPENAI_ENDPOINT"}.get(spec.provider)
    return spec.base_url or (env.get(variable, "").strip() if variable else "") or None


def create_backend(spec: ModelSpec, env: Mapping[str, str] | None = None) -> Backend:
    """Build the backend for ``spec``; imports the provider SDK only now."""
    endpoint = resolve_endpoint(spec, env)
    if endpoint.provider == "anthropic":
        from skillopt_ci.models.anthropic_backend import AnthropicBackend

        return AnthropicBackend(endpoint, timeout=spec.timeout)
    if endpoint.api == "responses":
        from skillopt_ci.models.responses_backend import ResponsesBackend

        return ResponsesBackend(endpoint, timeout=spec.timeout)
    from skillopt_ci.models.openai_backend import OpenAIBackend

    return OpenAIBackend(endpoint, timeout=spec.timeout)
