"""A key split by the way text leaves the process is still masked: split over two writes to a
console stream, or cut by a message limit before it was redacted.

Each test registers a key that no built-in credential shape (``sk-…``, ``ghp_…``) recognises, so
only the registry's own redaction can mask it, and asserts on what a reader of the output sees."""

from __future__ import annotations

import base64
import io

import pytest
import yaml

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.core.redact import SECRETS, SafeStream, redact, write_command

KEY = "Zq8vN2xLp4Rt7Wm1Ks9Hb3Yc6Fd0Gj5AaQ"


@pytest.fixture(autouse=True)
def _registered():
    SECRETS.add(KEY)


def written(*pieces: str, close: bool = True) -> str:
    raw = io.StringIO()
    stream = SafeStream(raw)
    for piece in pieces:
        stream.write(piece)
        stream.flush()  # click.echo and logging flush after every write: that releases nothing
    if close:
        stream.close()
    return raw.getvalue()


def leaked(text: str, *, run: int = 6) -> bool:
    """Whether ``run`` characters of the key in a row appear in ``text``."""
    return any(KEY[i:i + run] in text for i in range(len(KEY) - run + 1))


@pytest.mark.parametrize("at", [1, 5, 17, len(KEY) - 1])
def test_a_key_split_over_two_writes_is_masked(at):
    out = written(f"the key is {KEY[:at]}", f"{KEY[at:]} and more\n")
    assert out == "the key is *** and more\n"


def test_a_key_wrapped_over_two_written_lines_is_masked():
    pieces = (f"log: {KEY[:12]}\n", f"     {KEY[12:]}\n", "next line\n")
    out = written(*pieces)
    assert not leaked(out) and out == redact("".join(pieces)) and out.endswith("next line\n")


def test_a_base64_key_split_over_writes_is_masked():
    encoded = base64.b64encode(b"header " + KEY.encode() + b" trailer").decode()
    pieces = ("blob ", encoded[:20], encoded[20:33], encoded[33:], " end\n")
    out = written(*pieces)
    assert out == redact("".join(pieces)) and "***" in out  # as if written at once
    assert out.startswith("blob ") and out.endswith(" end\n")


def test_nothing_is_lost_or_held_for_ever():
    """What is held back (the start of a possible key) is written when the stream closes, and
    text that cannot begin a key is written at once."""
    raw = io.StringIO()
    stream = SafeStream(raw)
    stream.write("progress (3/10)\n")  # no key begins with ")": written whatever the registry holds
    assert raw.getvalue() == "progress (3/10)\n"
    stream.write(f"almost {KEY[:9]}")
    assert KEY[:9] not in raw.getvalue()
    stream.close()
    assert raw.getvalue() == f"progress (3/10)\nalmost {KEY[:9]}"  # a prefix alone is no key


def test_our_own_command_comes_after_what_was_written_before_it():
    raw = io.StringIO()
    stream = SafeStream(raw)
    stream.write(f"a partial {KEY[:8]}")
    write_command(stream, "::notice::ours\n")
    assert raw.getvalue().splitlines() == [f"a partial {KEY[:8]}", "::notice::ours"]


def test_a_workflow_command_split_over_writes_is_defused():
    out = written("fine\n", ":", ":error::forged\n", "#", "#[group]x\n")
    assert not any(line.startswith("::") for line in out.splitlines())
    assert "##[" not in out


def test_a_schema_message_quoting_a_key_is_redacted_before_it_is_cut(tmp_path):
    """The message is cut at 200 characters; the key straddles the cut. Cutting first left 13
    characters of it that redaction no longer recognised."""
    root = write_project(tmp_path / "p", "http://127.0.0.1:9/v1")
    suite = root / "eval_suites/ticket-triage/suite.yaml"
    data = yaml.safe_load(suite.read_text())
    data["repeats"] = "x" * 160 + KEY  # a key pasted into the wrong field
    suite.write_text(yaml.safe_dump(data))
    res = run_cli("validate", cwd=root, env={"ACME_API_KEY": KEY})
    assert res.code == 2
    assert "repeats: expected integer, got str 'xxx" in res.out + res.err
    assert not leaked(res.out + res.err)
