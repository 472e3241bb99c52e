"""A scripted model server: real HTTP on 127.0.0.1 speaking OpenAI (Chat Completions and the
Responses API), Azure OpenAI and Anthropic, with tool calls and images.

A request that forces a tool or asks for a JSON response format gets the reply a constrained
decoder would give (:mod:`constrained`). Tests point the real ``openai`` and ``anthropic`` SDKs (and the Codex and Claude Code CLIs) at
it; a Python policy decides each reply. ``stream: true`` on the Responses API and Anthropic
Messages is answered with Server-Sent Events (:mod:`wire_stream`), chunked; Chat Completions
refuses it. Faults (rate limits, server errors, slow or malformed answers, dropped connections)
can be injected per request. The batch APIs (OpenAI files and batches, Azure's too, Anthropic Message
Batches) answer each line through the same policy and faults (:mod:`wire_batch`; ``server.batches``
holds their state and ``server.batches.delay`` how long a batch takes). Run it in its own process with
``python -m skillopt_ci.sim.server --port 0 --latency 0.1 --policy module:function``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from skillopt_ci.httpserve import LoopbackHandler, LoopbackService
from skillopt_ci.sim.constrained import constrain
from skillopt_ci.sim.protocols import (
    Fault,
    RequestError,
    ScriptedReply,
    ScriptedRequest,
    ScriptedToolCall,
    WireResponse,
    error_response,
    fault_response,
    format_reply,
    guess_protocol,
    json_response,
    parse_request,
    route,
    stream_response,
)
from skillopt_ci.sim.ratelimit import RateLimit
from skillopt_ci.sim.wire_batch import BatchStore

__all__ = ["Fault", "RecordedCall", "ScriptedModelServer", "ScriptedReply", "ScriptedRequest", "ScriptedToolCall"]

Policy = Callable[[ScriptedRequest], "str | ScriptedReply"]
FaultPlan = Callable[[ScriptedRequest], "Fault | None"]


def echo(request: ScriptedRequest) -> str:
    """The default policy: answer with the text of the last user message."""
    return request.last_user


@dataclass(frozen=True)
class RecordedCall:
    """One model call the server answered. ``status`` is 0 when the connection was dropped
    (200 for a streaming request, whose stream starts and is then cut);
    ``error`` names the exception when the policy or fault plan raised."""

    request: ScriptedRequest
    status: int
    fault: str | None
    reply_text: str | None
    error: str | None = None


class _Handler(LoopbackHandler):
    server_version = "ScriptedModelServer/1.0"
    do_GET = do_POST = LoopbackHandler.receive

    def respond(self, method: str, raw: bytes, headers: dict[str, str]) -> None:
        batched = cast("ScriptedModelServer", self.server.service).batches.respond(method, self.path, raw, headers)
        if batched is not None:
            self._send(batched)
            return
        url = urlsplit(self.path)
        target = route(url.path) if method == "POST" else None
        if target is None:
            protocol = guess_protocol(url.path, headers)
            response = error_response(protocol, 404, f"Invalid URL ({method} {url.path})")
        elif url.path.startswith("/openai/") and "api-version" not in parse_qs(url.query):
            response = error_response(target[0], 400, "Missing required query parameter: api-version")
        else:
            owner = cast("ScriptedModelServer", self.server.service)
            response = owner._answer(target[0], raw, headers, target[1])
        self._send(response)

    def _send(self, response: WireResponse) -> None:
        if response.delay > 0 and self.server.stopping.wait(response.delay):
            response = WireResponse(0, None, {})
        if response.body is None:
            self.close_connection = True
            return
        if response.frames is not None:
            self._send_stream(response)
            return
        headers = {"Content-Type": "application/json", **response.headers}
        self.send_bytes(response.status, headers, response.body)

    def _send_stream(self, response: WireResponse) -> None:
        """Server-Sent Events as HTTP/1.1 chunks, one per event; ``cut`` stops after that many
        frames and closes the connection without the final chunk."""
        frames = response.frames or ()
        try:
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for frame in frames[: response.cut] if response.cut else frames:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            if response.cut:
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True


class ScriptedModelServer(LoopbackService):
    """An HTTP model server on ``host:port`` (an ephemeral port by default) driven by ``policy``.

    ``policy(request) -> str | ScriptedReply`` is called concurrently from handler threads and
    must be thread-safe; ``None`` echoes the last user message. ``latency`` (seconds) delays every
    successful reply. ``rate_limit`` (:class:`~skillopt_ci.sim.ratelimit.RateLimit`) answers
    429 beyond a requests/tokens-per-minute budget and sends the rate-limit headers.
    ``policy``, ``latency`` and ``fault_plan`` may be reassigned at any time.
    Requests to unknown routes and invalid bodies are answered (404/400) but neither recorded
    nor given a ``call_index``, nor do they consume faults. On :meth:`stop`, replies still
    waiting out a delay are abandoned without an answer.
    """

    handler_class = _Handler

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.policy: Policy = policy or echo
        self.latency = latency
        self.rate_limit = rate_limit
        self.fault_plan: FaultPlan | None = None
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._calls: list[RecordedCall] = []
        self._next_index = 0
        self.batches = BatchStore(self._answer, lambda: self.url)
        super().__init__(host=host, port=port)

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Without ``/v1``: the Anthropic SDK appends it."""
        return self.url

    @property
    def azure_endpoint(self) -> str:
        return self.url

    def inject(self, *faults: Fault) -> None:
        """Queue faults; each following model call consumes one, in arrival order."""
        for fault in faults:
            if not isinstance(fault, Fault):
                raise TypeError(f"inject() takes Fault objects, not {type(fault).__name__}")
        with self._lock:
            self._faults.extend(faults)

    @property
    def calls(self) -> list[RecordedCall]:
        """A copy of the recorded calls, in the order they were answered."""
        with self._lock:
            return list(self._calls)

    @property
    def call_count(self) -> int:
        with self._lock:
            return len(self._calls)

    def reset(self) -> None:
        """Forget recorded calls and queued faults, and restart ``call_index`` at 0."""
        with self._lock:
            self._calls.clear()
            self._faults.clear()
            self._next_index = 0

    def _answer(
        self, protocol: str, raw: bytes, headers: dict[str, str], deployment: str | None
    ) -> WireResponse:
        """Decide the response to one request on a known route."""
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return error_response(
                protocol, 400, f"We could not parse the JSON body of your request: {exc}"
            )
        try:
            parsed = parse_request(protocol, body, headers, deployment)
        except RequestError as exc:
            return error_response(protocol, exc.status, exc.message)
        with self._lock:
            request = replace(parsed, call_index=self._next_index)
            self._next_index += 1
            fault = self._faults.popleft() if self._faults else None
            plan = self.fault_plan
        culprit = "fault_plan"
        try:
            if fault is None and plan is not None:
                fault = plan(request)
            if fault is not None and fault.kind == "drop" and request.params.get("stream"):
                response = _dropped_stream(request)
                self._record(RecordedCall(request, 200, fault.kind, None))
                return response
            if fault is not None and fault.kind != "slow":
                response = fault_response(protocol, fault)
                self._record(RecordedCall(request, response.status, fault.kind, None))
                return response
            limit_headers: dict[str, str] = {}
            if self.rate_limit is not None:
                cost = request.prompt_tokens + int(request.params.get("max_tokens") or 16)
                allowed, limit_headers = self.rate_limit.take(cost)
                if not allowed:
                    response = error_response(protocol, 429, "Rate limit reached for requests", limit_headers)
                    self._record(RecordedCall(request, 429, "rate_limit", None))
                    return response
            culprit = "policy"
            reply = constrain(request.params, _as_reply(self.policy(request)))
        except Exception as exc:
            message = f"ScriptedModelServer {culprit} raised {type(exc).__name__}: {exc}"
            self._record(RecordedCall(request, 500, None, None, message))
            return error_response(protocol, 500, message)
        delay = fault.delay if fault else (self.latency if reply.latency is None else reply.latency)
        self._record(RecordedCall(request, 200, fault.kind if fault else None, reply.text))
        if request.params.get("stream"):
            return stream_response(protocol, format_reply(request, reply), delay)
        return json_response(protocol, 200, format_reply(request, reply), delay, limit_headers)

    def _record(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)


def _dropped_stream(request: ScriptedRequest) -> WireResponse:
    """A stream that starts (status 200, the first event) and then loses its connection."""
    return stream_response(request.protocol, format_reply(request, ScriptedReply("")), cut=1)


def _as_reply(value: object) -> ScriptedReply:
    if isinstance(value, ScriptedReply):
        return value
    if isinstance(value, str):
        return ScriptedReply(value)
    raise TypeError(f"policy returned {type(value).__name__}; expected str or ScriptedReply")


def _load_policy(spec: str) -> Policy:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"--policy must look like module:function, got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"--policy {spec!r} cannot be loaded: {exc}") from exc
    if not callable(target):
        raise SystemExit(f"--policy {spec!r} is not callable")
    return target


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT; print ``READY <url>`` once listening. Returns 0."""
    parser = argparse.ArgumentParser(prog="python -m skillopt_ci.sim.server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--policy", help="module:function (default: echo the last user message)")
    args = parser.parse_args(argv)
    policy = _load_policy(args.policy) if args.policy else None
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    server = ScriptedModelServer(policy, latency=args.latency, host=args.host, port=args.port)
    with server:
        print(f"READY {server.url}", flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
