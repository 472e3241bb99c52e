"""The response cache and request bodies across the tools change: plain calls keep their bytes and
their keys (an old cache file still answers), tool calls and images enter the key, and a reply
that only calls tools replays from the cache without a server call."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from helpers.paths import DATA
from helpers.wire import make_pool, protocol_setup, run_calls, tiny_png
from skillopt_ci.models.base import ImagePart, Message, ToolCall, ToolSpec, Usage
from skillopt_ci.models.cache import cache_key
from skillopt_ci.sim import ScriptedModelServer, ScriptedReply, ScriptedToolCall

OLD_CACHE = DATA / "cache_v1.sqlite"  # written by the release before tools
PLAIN = [Message("system", "Be brief."), Message("user", "Say hi — ünïcode")]
PARAMS = {"temperature": 0.2, "seed": 7}
# The key the release before tools computed for cache_key("openai", "gpt-4o-mini", PARAMS, PLAIN, 3).
PLAIN_KEY = "32324e8fde4bfdd671916aae22ce6af610208e59537b796ee5bbbcd402b8e176"
LOOKUP = ToolSpec("lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}})


def test_a_plain_call_keeps_the_key_it_always_had():
    assert cache_key("openai", "gpt-4o-mini", PARAMS, PLAIN, 3) == PLAIN_KEY
    assert cache_key("openai", "gpt-4o-mini", PARAMS, PLAIN, 3, tools=(), context={}, api="chat") == PLAIN_KEY


def test_tools_context_api_and_images_each_change_the_key():
    keys = {
        cache_key("openai", "gpt-4o-mini", PARAMS, PLAIN, 3),
        cache_key("openai", "gpt-4o-mini", PARAMS, PLAIN, 3, tools=[LOOKUP]),
        cache_key("openai", "gpt-4o-mini", PARAMS, PLAIN, 3, context={"environment": "tools", "max_turns": 5}),
        cache_key("openai", "gpt-4o-mini", PARAMS, PLAIN, 3, api="responses"),
    }
    for rgb in ((0, 0, 0), (0, 0, 1)):
        with_image = [PLAIN[0], Message("user", ("Say hi — ünïcode", ImagePart("image/png", tiny_png(rgb))))]
        keys.add(cache_key("openai", "gpt-4o-mini", PARAMS, with_image, 3))
    call = ToolCall("c1", "lookup", '{"word": "hi"}')
    for arguments in ('{"word": "hi"}', '{"word": "ho"}'):
        history = [*PLAIN, Message("assistant", "", tool_calls=(ToolCall("c1", "lookup", arguments),)),
                   Message("tool", "a greeting", tool_call_id=call.id, name=call.name)]
        keys.add(cache_key("openai", "gpt-4o-mini", PARAMS, history, 3, tools=[LOOKUP]))
    assert len(keys) == 8


def test_an_old_cache_file_still_answers_after_the_migration(tmp_path):
    path = tmp_path / "cache.sqlite"
    shutil.copy(OLD_CACHE, path)
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing listens there
    pool = make_pool(tmp_path, {"provider": "openai", "model": "gpt-4o-mini", "params": PARAMS}, env, mode="read-write")
    (done,) = run_calls(pool, {"messages": PLAIN, "sample_index": 3})
    assert (done.text, done.usage, done.cached, done.tool_calls) == ("cached answer", Usage(5, 2), True, ())
    # migrated to the newest schema (2: tool calls, 3: whole rollouts)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 3


# The bodies the release before tools sent for PLAIN (recorded by the scripted server).
PLAIN_BODIES = {
    "openai": '{"temperature": 0.2, "seed": 7, "model": "gpt-4o-mini", "messages": [{"role": "system", "content": '
              '"Be brief."}, {"role": "user", "content": "Say hi — ünïcode"}]}',
    "azure": '{"model": "dep", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", '
             '"content": "Say hi — ünïcode"}]}',
    "anthropic": '{"max_tokens": 1024, "temperature": 0.5, "model": "claude-haiku-4-5", "system": "Be brief.", '
                 '"messages": [{"role": "user", "content": "Say hi — ünïcode"}]}',
}


@pytest.mark.parametrize("protocol", sorted(PLAIN_BODIES))
def test_a_plain_request_body_is_unchanged(tmp_path, protocol):
    with ScriptedModelServer(lambda r: "hello") as server:
        spec, env = protocol_setup(protocol, server)
        spec.update({"openai": {"params": PARAMS}, "azure": {"model": "dep"},
                     "anthropic": {"params": {"temperature": 0.5}}}[protocol])
        run_calls(make_pool(tmp_path, spec, env), {"messages": PLAIN})
        assert json.dumps(server.calls[0].request.body, ensure_ascii=False) == PLAIN_BODIES[protocol]


def only_calls(request):
    return ScriptedReply(tool_calls=[ScriptedToolCall("lookup", {"word": "hi"})], input_tokens=9, output_tokens=3)


@pytest.mark.parametrize("protocol", ["openai", "responses", "anthropic"])
def test_tool_calls_replay_from_the_cache_without_a_server_call(tmp_path, protocol):
    with ScriptedModelServer(only_calls) as server:
        spec, env = protocol_setup(protocol, server)
        request = {"messages": PLAIN, "tools": [LOOKUP], "context": {"environment": "tools"}}
        (live,) = run_calls(make_pool(tmp_path, spec, env, mode="read-write"), request)
        assert server.call_count == 1 and live.tool_calls and not live.cached
        replay_pool = make_pool(tmp_path, spec, env, mode="read-write")
        (replayed,) = run_calls(replay_pool, request)
        assert server.call_count == 1
    assert replayed.cached and replay_pool.cache.hits == 1
    assert (replayed.text, replayed.tool_calls, replayed.finish_reason, replayed.usage) == (
        "", live.tool_calls, live.finish_reason, Usage(9, 3))


def test_tools_and_context_are_part_of_the_pool_key(tmp_path):
    with ScriptedModelServer(lambda r: "ok") as server:
        spec, env = protocol_setup("openai", server)
        pool = make_pool(tmp_path, spec, env, mode="read-write")
        run_calls(pool,
                  {"messages": PLAIN},
                  {"messages": PLAIN, "tools": [LOOKUP]},
                  {"messages": PLAIN, "tools": [LOOKUP], "context": {"environment": "tools"}},
                  {"messages": PLAIN, "tools": [LOOKUP], "context": {"environment": "tools"}},
                  {"messages": PLAIN, "context": {}})
        assert server.call_count == 3 and pool.cache.hits == 2
        assert "tools" not in server.calls[0].request.body
        assert server.calls[1].request.tools == [LOOKUP.to_dict()]


def test_a_full_disk_under_the_cache_is_a_runtime_failure_naming_it(tmp_path):
    """SQLite's "database or disk is full" (here: the page limit reached, as a full disk does)."""
    from skillopt_ci.core.errors import RuntimeFailure
    from skillopt_ci.models.base import Completion
    from skillopt_ci.models.cache import ResponseCache

    cache = ResponseCache(tmp_path / "cache.sqlite", "read-write")
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(RuntimeFailure, match=r"no space left on device: .*cache\.sqlite") as caught:
        cache.put("k", "openai", "m", Completion(text="x" * 200_000, usage=Usage(1, 1)))
    assert caught.value.exit_code == 3 and "run the same command again" in (caught.value.hint or "")
