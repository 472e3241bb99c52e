"""The local forwarding endpoint: the real ``openai`` and ``anthropic`` SDKs hold only a
per-rollout credential, the scripted server sees the real key in the provider's header shape,
streams come through as they arrive, and a missing, unknown or revoked credential is a 401 that
never reaches the provider. Also the relay a network-less sandbox reaches it through."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anthropic
import openai
import pytest

from skillopt_ci.models import forward_relay
from skillopt_ci.models.forward_usage import UsageMeter
from skillopt_ci.models.forwarder import Forwarder
from skillopt_ci.sim import ScriptedModelServer, ScriptedReply

KEY = "sk-real-provider-key-0123456789abcdef"


@pytest.fixture()
def server():
    with ScriptedModelServer(lambda r: ScriptedReply(f"hello {r.last_user}", input_tokens=11, output_tokens=7)) as srv:
        yield srv


@pytest.fixture()
def forwarder():
    with Forwarder(unix_socket=True) as fwd:
        yield fwd


def test_openai_chat_through_the_forwarder_carries_the_real_key_and_counts_usage(server, forwarder):
    grant = forwarder.issue("openai", KEY, server.openai_base_url)
    assert KEY not in grant.base_url and server.url not in grant.base_url
    client = openai.OpenAI(api_key=grant.credential, base_url=grant.base_url, max_retries=0)
    reply = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "there"}])
    assert reply.choices[0].message.content == "hello there"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (11, 7)
    seen = server.calls[0].request.headers
    assert seen["authorization"] == f"Bearer {KEY}"
    assert grant.credential not in json.dumps(seen)
    assert (grant.calls, grant.errors, grant.usage.input_tokens, grant.usage.output_tokens) == (1, 0, 11, 7)


def test_responses_stream_arrives_event_by_event_and_its_usage_is_counted(server, forwarder):
    grant = forwarder.issue("openai", KEY, server.openai_base_url)
    client = openai.OpenAI(api_key=grant.credential, base_url=grant.base_url, max_retries=0)
    kinds = []
    with client.responses.stream(model="gpt-test", input="world") as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_response()
    assert final.output_text == "hello world"
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert (grant.calls, grant.usage.input_tokens, grant.usage.output_tokens) == (1, 11, 7)


def test_the_stream_is_not_buffered_whole(server, forwarder):
    """The first event reaches the client while the server still holds the rest back."""
    release = threading.Event()
    server.policy = lambda r: ScriptedReply("slow answer", input_tokens=3, output_tokens=2)
    grant = forwarder.issue("anthropic", KEY, server.anthropic_base_url)
    original = server.handler_class._send_stream

    def held(handler, response):
        frames = list(response.frames or ())
        handler.send_response(response.status)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for frame in frames[:1]:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        handler.wfile.flush()
        release.wait(30)
        for frame in frames[1:]:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        handler.wfile.write(b"0\r\n\r\n")

    server.handler_class._send_stream = held
    try:
        client = anthropic.Anthropic(api_key=grant.credential, base_url=grant.base_url, max_retries=0)
        with client.messages.stream(model="claude-test", max_tokens=50,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:
            first = next(iter(stream))
            assert first.type == "message_start"  # arrived although the server has not sent the rest
            release.set()
            text = stream.get_final_text()
    finally:
        release.set()
        server.handler_class._send_stream = original
    assert text == "slow answer"
    assert server.calls[0].request.headers["x-api-key"] == KEY
    assert (grant.usage.input_tokens, grant.usage.output_tokens) == (3, 2)


def test_anthropic_messages_plain_and_streamed(server, forwarder):
    grant = forwarder.issue("anthropic", KEY, server.anthropic_base_url)
    client = anthropic.Anthropic(api_key=grant.credential, base_url=grant.base_url, max_retries=0)
    plain = client.messages.create(model="claude-test", max_tokens=50, messages=[{"role": "user", "content": "a"}])
    assert plain.content[0].text == "hello a"
    with client.messages.stream(model="claude-test", max_tokens=50,
                                messages=[{"role": "user", "content": "b"}]) as stream:
        assert stream.get_final_text() == "hello b"
    for call in server.calls:
        assert call.request.headers["x-api-key"] == KEY and "authorization" not in call.request.headers
    assert (grant.calls, grant.usage.input_tokens, grant.usage.output_tokens) == (2, 22, 14)


def test_azure_gets_api_key_and_keeps_its_api_version(server, forwarder):
    grant = forwarder.issue("azure-openai", KEY, server.azure_endpoint)
    client = openai.AzureOpenAI(api_key=grant.credential, azure_endpoint=grant.base_url,
                                api_version="2024-10-21", max_retries=0)
    reply = client.chat.completions.create(model="dep-1", messages=[{"role": "user", "content": "z"}])
    assert reply.choices[0].message.content == "hello z"
    headers = server.calls[0].request.headers
    assert headers["api-key"] == KEY and grant.credential not in json.dumps(headers)
    assert server.calls[0].request.model == "dep-1"  # the deployment route and its api-version arrived


@pytest.mark.parametrize("header", ["authorization", "x-api-key", "api-key", None])
def test_no_unknown_or_revoked_credential_is_a_401_that_never_reaches_the_provider(server, forwarder, header):
    grant = forwarder.issue("openai", KEY, server.openai_base_url)
    ok = post(forwarder.url, "/v1/chat/completions", {"authorization": f"Bearer {grant.credential}"})
    assert ok[0] == 200 and server.call_count == 1
    forwarder.revoke(grant)
    for value in ([grant.credential, "skillopt-rollout-guessed", KEY] if header else [None]):
        headers = {} if header is None else {header: f"Bearer {value}" if header == "authorization" else value}
        status, body = post(forwarder.url, "/v1/chat/completions", headers)
        assert status == 401, body
        assert "revoked" in body and KEY not in body
    assert server.call_count == 1  # nothing after the revocation reached the provider


def test_the_anthropic_sdk_with_a_revoked_credential_gets_an_authentication_error(server, forwarder):
    grant = forwarder.issue("anthropic", KEY, server.anthropic_base_url)
    forwarder.revoke(grant)
    client = anthropic.Anthropic(api_key=grant.credential, base_url=grant.base_url, max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        client.messages.create(model="claude-test", max_tokens=5, messages=[{"role": "user", "content": "a"}])
    assert server.call_count == 0


def test_a_path_outside_the_grants_base_is_refused(server, forwarder):
    grant = forwarder.issue("openai", KEY, server.openai_base_url)
    status, _ = post(forwarder.url, "/v2/chat/completions", {"authorization": f"Bearer {grant.credential}"})
    assert status == 404 and server.call_count == 0


def test_stop_revokes_every_grant_and_an_unreachable_upstream_is_a_502(server):
    fwd = Forwarder().start()
    grant = fwd.issue("openai", KEY, "http://127.0.0.1:9/v1")
    status, body = post(fwd.url, "/v1/chat/completions", {"authorization": f"Bearer {grant.credential}"})
    assert status == 502 and KEY not in body
    assert (grant.calls, grant.errors) == (1, 1)
    fwd.stop()
    assert grant.revoked and fwd.lookup(grant.credential) is None


def test_calls_past_the_grants_cap_are_refused_with_a_rate_limit_error_the_sdks_report(server, forwarder):
    grant = forwarder.issue("openai", KEY, server.openai_base_url, max_calls=2)
    client = openai.OpenAI(api_key=grant.credential, base_url=grant.base_url, max_retries=0)
    for text in ("one", "two"):
        assert client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}]) is not None
    with pytest.raises(openai.RateLimitError, match="has made its 2 model calls"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "three"}])
    assert server.call_count == 2 and (grant.calls, grant.refused) == (2, 1)
    capped = forwarder.issue("anthropic", KEY, server.anthropic_base_url, max_calls=0)
    claude = anthropic.Anthropic(api_key=capped.credential, base_url=capped.base_url, max_retries=0)
    with pytest.raises(anthropic.RateLimitError, match="has made its 0 model calls"):
        claude.messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "a"}])
    assert server.call_count == 2 and capped.refused == 1


def test_the_cap_holds_for_concurrent_calls(server, forwarder):
    grant = forwarder.issue("openai", KEY, server.openai_base_url, max_calls=3)
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(
        post(forwarder.url, "/v1/chat/completions", {"authorization": f"Bearer {grant.credential}"})[0]))
        for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] * 3 + [429] * 5
    assert server.call_count == 3 and (grant.calls, grant.refused) == (3, 5)


def test_the_unix_socket_serves_the_same_grants(server, forwarder):
    grant = forwarder.issue("openai", KEY, server.openai_base_url)
    status, body = post_unix(forwarder.socket_path, "/v1/chat/completions", {"authorization": f"Bearer {grant.credential}"})
    assert status == 200 and "hello" in body
    assert oct(forwarder.socket_path.parent.stat().st_mode & 0o777) == "0o711"  # no listing
    assert forwarder.relay_path.read_text() == Path(forward_relay.__file__).read_text()


def test_usage_meter_reads_the_three_shapes_and_ignores_noise():
    sse = UsageMeter("text/event-stream")
    for piece in (b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":5,',
                  b'"cache_read_input_tokens":2,"output_tokens":1}}}\n\ndata: not json "usage"\n',
                  b'data: {"type":"message_delta","usage":{"output_tokens":9}}\n\n'):
        sse.feed(piece)
    assert sse.finish() == (7, 9)
    chat = UsageMeter("application/json")
    chat.feed(b'{"usage": {"prompt_tokens": 4, "completion_tokens": 3}}')
    assert chat.finish() == (4, 3)
    assert UsageMeter("application/json").finish() == (None, None)


# -- the relay: a sandbox without network reaches the forwarder's Unix socket ------------------

def test_the_relay_carries_a_clients_tcp_to_the_unix_socket_and_ends_with_the_command(server, forwarder, tmp_path):
    grant = forwarder.issue("openai", KEY, server.openai_base_url)
    port = free_port()
    script = (
        "import json, os, urllib.request\n"
        f"req = urllib.request.Request('http://127.0.0.1:{port}/v1/chat/completions', method='POST',\n"
        "    data=json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'relay'}]}).encode(),\n"
        "    headers={'authorization': 'Bearer ' + os.environ['CRED'], 'content-type': 'application/json'})\n"
        "print(json.load(urllib.request.urlopen(req))['choices'][0]['message']['content'])\n"
    )
    done = subprocess.run(
        [sys.executable, forward_relay.__file__, str(forwarder.socket_path), str(port), "--", sys.executable, "-c", script],
        capture_output=True, text=True, timeout=60, env={"CRED": grant.credential, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello relay"
    assert grant.calls == 1
    assert relay_gone(port)  # it ended with its command: nothing listens on the port any more


def test_the_relay_passes_on_the_commands_exit_code(forwarder):
    done = subprocess.run([sys.executable, forward_relay.__file__, str(forwarder.socket_path), str(free_port()), "--",
                           sys.executable, "-c", "raise SystemExit(7)"], capture_output=True, timeout=60)
    assert done.returncode == 7


def test_in_a_network_namespace_only_the_relay_reaches_the_forwarder(server, forwarder):
    """Under bubblewrap's ``--unshare-net`` the host's 127.0.0.1 (the forwarder's TCP port) is out
    of reach; the relay, started inside in front of the command, carries it to the Unix socket."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or subprocess.run([bwrap, "--dev-bind", "/", "/", "--unshare-net", "--", "true"],
                                       capture_output=True).returncode != 0:
        pytest.skip("bubblewrap cannot make a network namespace here")
    grant = forwarder.issue("openai", KEY, server.openai_base_url)
    script = (
        "import json, os, sys, urllib.request\n"
        "def ask(base):\n"
        "    req = urllib.request.Request(base + '/chat/completions', method='POST',\n"
        "        data=json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'ns'}]}).encode(),\n"
        "        headers={'authorization': 'Bearer ' + os.environ['CRED'], 'content-type': 'application/json'})\n"
        "    return json.load(urllib.request.urlopen(req, timeout=20))['choices'][0]['message']['content']\n"
        "try:\n"
        "    ask(os.environ['HOST_URL'])\n"
        "    print('host reachable')\n"
        "except OSError as exc:\n"
        "    print('host unreachable')\n"
        "print(ask(os.environ['RELAY_URL']))\n"
    )
    relay_url = grant.path_for("http://127.0.0.1:47110")
    done = subprocess.run(
        [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "--",
         sys.executable, str(forwarder.relay_path), str(forwarder.socket_path), "47110", "--",
         sys.executable, "-c", script],
        capture_output=True, text=True, timeout=60,
        env={"CRED": grant.credential, "HOST_URL": grant.base_url, "RELAY_URL": relay_url, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["host unreachable", "hello ns"]
    assert grant.calls == 1 and server.calls[0].request.headers["authorization"] == f"Bearer {KEY}"


# -- helpers -----------------------------------------------------------------------------------

def post(origin: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
    host, port = origin.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    return _exchange(connection, path, headers)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path):
        super().__init__("localhost", timeout=30)
        self._path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def post_unix(path: Path, url: str, headers: dict[str, str]) -> tuple[int, str]:
    return _exchange(_UnixConnection(path), url, headers)


def _exchange(connection: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> tuple[int, str]:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    try:
        connection.request("POST", path, body=body, headers={"content-type": "application/json", **headers})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def relay_gone(port: int) -> bool:
    """Whether the port stops accepting within a few seconds (the relay exits as its command does,
    which the kernel delivers asynchronously)."""
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except OSError:
            return True
        time.sleep(0.05)
    return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
