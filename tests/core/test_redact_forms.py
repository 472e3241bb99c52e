"""A key in any spelling text gives it on the way out is masked, and masked before it is escaped
or cut.

A model, a provider or a tool can echo a key base64-encoded, percent-encoded, JSON- or
HTML-escaped, or wrapped over lines; a renderer escapes it (``\\_``, ``&amp;``) or cuts it. Each
test asserts what a reader of the output could do: no decoder of those forms gets the key (or a
dozen characters of it) back from what was written.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import json
import re
import sqlite3
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import pytest

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.repo import SKILL, make_repo
from skillopt_ci.core.redact import SECRETS, SafeStream, defuse_commands, redact
from skillopt_ci.core.text import clip
from skillopt_ci.models.batch import BatchJournal
from skillopt_ci.render.markdown import code_block, code_span, escape_inline, truncate
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.server import Fault
from skillopt_ci.sim.triage import TriagePolicy

# Characters every encoder treats differently: & (HTML), _ and - (markdown), / + = (base64, URLs).
KEY = "acme-Tq7&Zp_-Lm9/Xw+Rb=Kd3Vn8Hs2Qy5"


def forms(key: str) -> dict[str, str]:
    """``key`` as text on its way out spells it, each inside some surrounding text."""
    raw = key.encode()
    found = {"plain": f"the key is {key}."}
    for before in (b"", b"x", b"xy"):  # the three alignments inside a longer base64 stream
        for name, encode in (("base64", base64.b64encode), ("base64url", base64.urlsafe_b64encode)):
            found[f"{name}-{len(before)}"] = "blob " + encode(before + raw + b" and more").decode() + " end"
    found["base64-wrapped"] = "-----\n" + base64.encodebytes(b"lead " * 11 + raw + b" trail" * 9).decode()
    found["url"] = "https://example.test/cb?k=" + quote(key, safe="") + "&next=1"
    found["url-plus"] = "form k=" + quote_plus(key + " x") + "&y=2"
    found["url-lowercase"] = "k=" + "".join(f"%{b:02x}" for b in raw)
    found["json"] = json.dumps({"k": key}).replace("/", "\\/")
    found["json-unicode"] = '{"k": "' + "".join(f"\\u{ord(c):04x}" for c in key) + '"}'
    found["html"] = "<p>" + html.escape(key) + "</p>"
    found["html-numeric"] = "".join(f"&#{ord(c)};" for c in key)
    found["lines"] = f"log: {key[:7]}\n    {key[7:15]}\r\n  {key[15:]} done"
    found["lines-in-json"] = json.dumps({"log": f"{key[:10]}\n\t{key[10:]}"})
    return found


def _decodings(text: str) -> list[str]:
    unescaped = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    unescaped = re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r", "t": "\t"}.get(m[1], m[1]), unescaped)
    views = [text, unquote(text), unquote_plus(text), html.unescape(text), unescaped, html.unescape(unescaped)]
    return views + [re.sub(r"\s+", "", v) for v in views]


def _base64_decodings(text: str) -> list[bytes]:
    found = []
    for run in re.findall(r"[A-Za-z0-9+/=_\-\s]{16,}", text):
        stream = re.sub(r"\s+", "", run)
        for alphabet in (stream, stream.replace("-", "+").replace("_", "/")):
            for shift in range(4):
                chunk = alphabet[shift:].rstrip("=")
                chunk = chunk[: len(chunk) // 4 * 4]
                with contextlib.suppress(ValueError):
                    found.append(base64.b64decode(chunk))
    return found


def recovered(key: str, text: str, *, fragment: int | None = None) -> bool:
    """Whether a reader gets ``key`` (or, with ``fragment``, that many characters of it in a row)
    back from ``text`` by undoing one of the encodings above."""
    pieces = [key] if fragment is None else [key[i:i + fragment] for i in range(len(key) - fragment + 1)]
    if any(p in view for view in _decodings(text) for p in pieces):
        return True
    return any(p.encode() in data for data in _base64_decodings(text) for p in pieces)


@pytest.fixture(autouse=True)
def _registered():
    SECRETS.add(KEY)


# --- the forms ------------------------------------------------------------------------------


@pytest.mark.parametrize("form", sorted(forms(KEY)))
def test_no_form_of_a_registered_key_survives_redaction(form):
    text = forms(KEY)[form]
    assert recovered(KEY, text)  # the premise: a reader can decode it
    masked = redact(text)
    assert not recovered(KEY, masked), masked
    assert "***" in masked


def test_the_text_around_a_masked_form_is_kept():
    masked = redact(forms(KEY)["base64-1"] + " | " + forms(KEY)["url"] + " | " + forms(KEY)["lines"])
    assert masked.startswith("blob ") and "example.test/cb?k=***" in masked and "&next=1" in masked
    assert masked.startswith("blob ") and masked.endswith(" done") and masked.count("***") == 3


def test_a_key_inside_a_json_line_is_masked_without_breaking_the_line():
    line = json.dumps({"output": forms(KEY)["lines"], "steps": [{"text": forms(KEY)["json-unicode"]}]})
    masked = redact(line)
    assert not recovered(KEY, masked)
    assert json.loads(masked)["output"].startswith("log: ***")


def test_a_long_text_is_searched_whole_even_where_a_form_straddles_two_windows():
    from skillopt_ci.core.secret_forms import WINDOW

    for at in (WINDOW - 20, 2 * WINDOW - 3):
        text = "y" * at + forms(KEY)["base64-1"] + " " + forms(KEY)["json-unicode"] + "z" * WINDOW
        assert not recovered(KEY, redact(text))


# --- redaction comes before escaping and cutting --------------------------------------------


@pytest.mark.parametrize("helper", [escape_inline, code_span, code_block, lambda t: truncate(t, 500)])
def test_markdown_helpers_redact_before_they_escape(helper):
    """What a comment body gets: the helper's output, redacted once more when it is sent."""
    sent = redact(helper(f"the provider said: key {KEY} is invalid"))
    assert not recovered(KEY, sent, fragment=8), sent
    assert "the provider said" in sent


@pytest.mark.parametrize("cut", [lambda t: clip(t, 300), lambda t: truncate(t, 300),
                                 lambda t: escape_inline(t, 300), lambda t: code_block(t, 300)])
def test_a_cut_through_a_key_leaves_no_part_of_it(cut):
    text = "x" * 280 + KEY + " and the rest of a long error"
    assert not recovered(KEY, redact(cut(text)), fragment=8)


# --- at the source: the run's files, the cache, the journal ---------------------------------


class EchoingPolicy(TriagePolicy):
    """Answers the ticket, then echoes the key in every spelling."""

    def __call__(self, request):
        return super().__call__(request) + "\n" + "\n".join(forms(KEY).values())


def _cache_texts(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT text, tool_calls FROM responses").fetchall()
        rows += db.execute("SELECT result, files FROM rollouts").fetchall()
    finally:
        db.close()
    return [str(value) for row in rows for value in row if value is not None]


def test_an_echoed_key_reaches_no_file_of_the_run_nor_the_cache(tmp_path):
    with ScriptedModelServer(EchoingPolicy()) as server:
        # a provider error that quotes the key 288 characters in: an error cut at 300 kept a prefix
        server.fault_plan = lambda r: Fault.status(400, "bad request: " + "x" * 275 + KEY) \
            if r.call_index % 9 == 4 else None
        project = write_project(tmp_path / "p", server.openai_base_url, target={"api_key_env": "SIM_API_KEY"})
        out = project / "run"
        res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project, env={"SIM_API_KEY": KEY})
        html_res = run_cli("report", str(out), "--html", str(out / "report.html"), cwd=project,
                           env={"SIM_API_KEY": KEY})
        assert any(c.status == 400 for c in server.calls)  # the premise: the error was sent
    assert res.code == 0, res.err
    assert html_res.code == 0, html_res.err
    texts = {name: (out / name).read_text(encoding="utf-8")
             for name in ("results.jsonl", "summary.json", "report.md", "report.html")}
    texts["cache.sqlite"] = "\n".join(_cache_texts(project / ".skillopt" / "cache.sqlite"))
    assert "***" in texts["cache.sqlite"] and "bad request: xxx" in texts["results.jsonl"]
    for name, text in {**texts, "stdout": res.out, "stderr": res.err}.items():
        assert not recovered(KEY, text, fragment=12), f"a form of the key is in {name}"


def test_a_replayed_run_sees_the_redacted_text_the_live_run_saw(tmp_path):
    with ScriptedModelServer(EchoingPolicy()) as server:
        project = write_project(tmp_path / "p", server.openai_base_url, target={"api_key_env": "SIM_API_KEY"})
        live = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "live"), "--quiet", cwd=project,
                       env={"SIM_API_KEY": KEY})
    replay = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "replay"), "--quiet", "--cache",
                     "replay-only", cwd=project, env={"SIM_API_KEY": KEY})
    assert live.code == 0 and replay.code == 0, live.err + replay.err

    def outputs(run: str) -> dict:
        lines = [json.loads(x) for x in (tmp_path / run / "results.jsonl").read_text().splitlines()]
        return {(r["task_id"], r["repeat"]): r["output"] for r in lines}

    assert outputs("live") == outputs("replay")


def test_the_batch_journal_holds_no_form_of_a_key(tmp_path):
    journal = BatchJournal(tmp_path / "batches.jsonl")
    journal.append({"event": "submitted", "role": "target", "provider": "openai", "model": "m",
                    "batch_id": "batch_1", "requests": {"r0": "k0"}})
    journal.append({"event": "abandoned", "batch_id": "batch_1",
                    "reason": "404 no batch for key " + forms(KEY)["base64-2"]})
    text = (tmp_path / "batches.jsonl").read_text()
    assert not recovered(KEY, text, fragment=12)
    assert journal.open_batches() == {}  # still a journal that reads back


# --- workflow commands ---------------------------------------------------------------------


def runner_lines(text: str) -> list[str]:
    """Lines as the runner reads them (.NET ReadLine: LF, CR, CRLF), trimmed as it trims."""
    return [line.strip() for line in re.split(r"\r\n|\r|\n", text)]


@pytest.mark.parametrize("text", ["ok\r::error title=x::forged", "ok\r\n\u00a0::warning::forged",
                                  "a\r\r  ::add-mask::x", "\u3000::notice::forged"])
def test_no_line_the_runner_reads_is_a_workflow_command(text):
    assert not any(line.startswith("::") for line in runner_lines(defuse_commands(text)))
    raw = io.StringIO()
    stream = SafeStream(raw)
    for piece in re.split(r"(?<=\r)", text):  # written in pieces, each ending at a CR
        stream.write(piece)
    assert not any(line.startswith("::") for line in runner_lines(raw.getvalue()))


class CarriageReturnPolicy(TriagePolicy):
    """Answers with a CR-separated workflow command, and the key, when the skill carries INJECT."""

    def __call__(self, request):
        if "INJECT" in request.system:
            return f"bug/P2\r::error title=x::forged annotation\rthe key {KEY} is wrong"
        return super().__call__(request)


def test_gate_markdown_has_no_command_after_a_carriage_return_and_no_escaped_key(tmp_path):
    with ScriptedModelServer(CarriageReturnPolicy()) as server:
        root = make_repo(tmp_path, server.openai_base_url)
        (root / SKILL).write_text((root / SKILL).read_text() + "\nINJECT\n")
        res = run_cli("gate", "--base", "main", "--markdown", "--quiet", cwd=root, env={"ACME_API_KEY": KEY})
    assert res.code == 1, res.err
    for line in runner_lines(res.out + res.err):
        assert not line.startswith("::"), line
    assert not recovered(KEY, res.out + res.err, fragment=8)


def test_the_live_viewer_serves_no_form_of_a_key_from_a_run_written_elsewhere(tmp_path):
    """A run directory written by another process (an older version, a copied artifact) may hold
    what this process's redactor would have masked: the viewer masks it on the way out."""
    from helpers.http import raw_get
    from skillopt_ci.viewer.server import ViewerServer

    with ScriptedModelServer(TriagePolicy()) as server:
        project = write_project(tmp_path / "p", server.openai_base_url)
        assert run_cli("eval", "ticket-triage", "--out", str(tmp_path / "runs" / "one"), "--quiet", cwd=project).code == 0
    results = tmp_path / "runs" / "one" / "results.jsonl"
    first = json.loads(results.read_text().splitlines()[0])
    first["output"] = forms(KEY)["base64-2"] + "\n" + forms(KEY)["url"]
    with results.open("a", encoding="utf-8") as fh:  # written as another process would
        fh.write(json.dumps(first) + "\n")
    with ViewerServer(tmp_path / "runs") as viewer:
        host = f"127.0.0.1:{viewer.port}"
        status, listing = raw_get(viewer.port, host)
        assert status == 200
        runs = json.loads(listing)
        run_id = (runs["runs"] if isinstance(runs, dict) else runs)[0]["id"]
        status, body = raw_get(viewer.port, host, f"/api/run?id={quote(run_id)}")
    assert status == 200 and b"ticket" in body
    assert not recovered(KEY, body.decode("utf-8"), fragment=12)


def test_a_cache_written_before_redaction_answers_without_the_key(tmp_path):
    """``actions/cache`` restores a cache file an older version wrote, completions unredacted."""
    from skillopt_ci.models.cache import ResponseCache

    path = tmp_path / "cache.sqlite"
    ResponseCache(path).close()  # the schema
    db = sqlite3.connect(path)
    db.execute("INSERT INTO responses (key, provider, model, text, latency_s, created_at) VALUES (?, ?, ?, ?, ?, ?)",
               ("k1", "openai", "m", "bug/P2 " + forms(KEY)["base64-0"], 0.1, 0.0))
    db.commit()
    db.close()
    cache = ResponseCache(path)
    try:
        answer = cache.get("k1")
    finally:
        cache.close()
    assert answer is not None and answer.text.startswith("bug/P2 blob ")
    assert not recovered(KEY, answer.text, fragment=12)
