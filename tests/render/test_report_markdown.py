"""Untrusted text in report markdown renders as exactly that text, and the raw file is not
littered with backslashes (a GFM-style renderer checks both)."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.core.records import EvalSummary, TaskResult, summarize
from skillopt_ci.core.trajectory import Step
from skillopt_ci.render.eval_report import eval_report
from skillopt_ci.render.markdown import ZWSP, code_span, escape_inline
from skillopt_ci.sim import ScriptedModelServer

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


def tools_results() -> tuple[EvalSummary, list[TaskResult]]:
    steps = [Step("tool_call", name="python", arguments='{"code": "print(1)"}', call_id="c1").to_dict(),
             Step("tool_result", "<script>alert(1)</script> [x](http://e.com) **b** | @octocat",
                  name="python", call_id="c1", is_error=True).to_dict(),
             Step("error", "max turns (10) reached").to_dict()]
    results = [
        TaskResult("t-tools", 0, "p", "4.5 <b>", 0.0, False, feedback="wrong", trajectory=steps, reward=0.25),
        TaskResult("t-chat", 0, "p", "no", 0.0, False, feedback="wrong"),
        TaskResult("t-err", 0, "p", None, None, None, error={"kind": "environment", "message": "max turns"},
                   trajectory=steps[:2]),
    ]
    summary = summarize(results, ["t-tools", "t-chat", "t-err"], skill={"name": "s", "hash": "0" * 64, "tokens": 1},
                        suite={"name": "x", "hash": "1" * 64}, split="val",
                        model={"provider": "openai", "model": "m"}, repeats=1, wall_time_s=1.0)
    return summary, results


def table_cells(report: str, title: str) -> list[list[str]]:
    """The rendered cells (as text) of the table under the ``<summary>`` titled ``title``."""
    block = report.split(f"<summary>{title}")[1].split("</details>")[0]
    table = "\n".join(line for line in block.splitlines() if line.startswith("|"))
    rendered = MD.render(table)
    assert "<script" not in rendered and "<a " not in rendered and "<strong>" not in rendered
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", rendered, re.S)]


def test_failing_results_with_a_trajectory_show_steps_reward_and_last_error_bounded():
    summary, results = tools_results()
    report = eval_report(summary, results)
    failed = table_cells(report, "Failed tasks")
    assert failed[0] == ["task", "repeat", "output", "feedback", "steps"]
    assert failed[1] == ["t-tools", "0", "4.5 <b>", "wrong", "3 steps · reward 0.250 · last error: max turns (10) reached"]
    assert failed[2] == ["t-chat", "0", "no", "wrong", "—"]  # a chat result beside it: no trajectory
    errored = table_cells(report, "Errored rollouts")
    tool_error = "python: <script>alert(1)</script> [x](http://e.com) **b** | @" + ZWSP + "octocat"
    assert errored[1] == ["t-err", "0", "", "environment: max turns", f"2 steps · last error: {tool_error}"]
    assert "print(1)" not in report  # the steps themselves stay in results.jsonl


def test_a_report_without_trajectories_has_no_steps_column():
    summary, results = tools_results()
    chat = [r for r in results if r.trajectory is None]
    report = eval_report(summary, chat)
    assert "| task | repeat | output | feedback |\n| --- | --- | --- | --- |\n| t-chat | 0 | no | wrong |" in report
