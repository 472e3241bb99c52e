"""Untrusted text in report markdown renders as exactly that text, and the raw file is not
littered with backslashes (a GFM-style renderer checks both)."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from conftest import run_cli, write_project
from skillopt_ci.render.markdown import ZWSP, code_span, escape_inline
from skillopt_ci.testing import ScriptedModelServer

MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")

SAMPLES = [
    "bug (here the user reports a crash)",
    "see [the log](http://example.com) and ![img](x.png) *now* **bold** _under_ __init__ snake_case",
    "a|b <b>x</b> <script>alert(1)</script> & &amp; @user #12 ~~gone~~ `code`",
    "C:\\path\\ \\* back\\slash at the end\\",
    "- a list?", "1. numbered?", "# heading?", "> quote?", "+ plus", "[unclosed ( and ] then [ok]",
    "{braces} !bang (parens) 100% a+b=c",
]


def cell_text(markdown_text: str) -> tuple[str, str]:
    """The rendered HTML of the first table cell, and its text."""
    rendered = MD.render(markdown_text)
    cell = re.search(r"<td>(.*?)</td>", rendered, re.S).group(1)
    return cell, html.unescape(re.sub(r"<[^>]+>", "", cell))


@pytest.mark.parametrize("text", SAMPLES)
def test_escaped_text_renders_as_itself_in_a_table_cell_and_in_bold(text):
    escaped = escape_inline(text)
    cell, shown = cell_text(f"| a |\n| --- |\n| {escaped} |\n")
    assert shown == text.replace("@", "@" + ZWSP)
    assert "<" not in cell.replace("&lt;", "")  # no element at all: no link, emphasis, code or HTML
    bold = MD.render(f"**{escaped}**").strip()
    assert bold.startswith("<p><strong>") and bold.endswith("</strong></p>")
    assert html.unescape(bold[len("<p><strong>"):-len("</strong></p>")]) == text.replace("@", "@" + ZWSP)


def test_only_what_markdown_needs_is_escaped():
    assert escape_inline("bug (here the user reports a crash)") == "bug (here the user reports a crash)"
    assert escape_inline("snake_case {x} 100% !ok a+b") == "snake_case {x} 100% !ok a+b"
    assert escape_inline("[a] (b)") == "\\[a] (b)"
    assert escape_inline("a [ b") == "a [ b"


@pytest.mark.parametrize("text", ["gpt-4o", "a`b", "`edge`", "x\\y <b> &amp;"])
def test_code_span_shows_text_verbatim(text):
    rendered = MD.render(f"model {code_span(text)}").strip()
    inner = re.search(r"<code>(.*)</code>", rendered).group(1)
    assert html.unescape(inner) == text


def test_eval_report_shows_model_output_as_written(tmp_path):
    answer = "bug (here the user reports [a crash]) *now*"
    with ScriptedModelServer(lambda request: answer) as server:
        project = write_project(tmp_path / "p", server.openai_base_url,
                                target={"model": "sim_triage (v1)"}, pricing={})
        out = tmp_path / "run"
        res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 0, res.err
    report = (out / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| val-01 |"))
    assert row.split(" | ")[2] == "bug (here the user reports \\[a crash]) \\*now\\*"
    assert "\\(" not in report and "\\)" not in report
    table = "\n".join(line for line in report.splitlines() if line.startswith("| task |") or
                      line.startswith("| --- |") or line.startswith("| val-01 |"))
    rendered = MD.render(table)
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", rendered, re.S)]
    assert cells[2] == answer
    model_line = next(line for line in report.splitlines() if line.startswith("Model "))
    assert "`sim_triage (v1)`" in model_line
