"""The HTML report and the live viewer in a real browser (Debian's Chromium, headless, driven by
Playwright), over real runs made by the CLI against the scripted models.

What a user sees: the numbers of summary.json, a chart with one point per step, a step's diff,
filters that count right, whole trajectories, base vs head side by side, a live run that advances
by itself — and nothing else: no request but the page's own, no console error, no model output
ever run as markup. Screenshots of the main views land in each test's ``tmp_path`` (the README's
picture is made by ``python docs/screenshot.py``).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from helpers.cli import run_cli
from helpers.project import write_project
from helpers.repo import (
    ACCOUNT_RULE,
    BILLING_RULE,
    BUG_RULE,
    SKILL,
    commit_on_branch,
    make_repo,
    skill_text,
)
from helpers.training import train_project
from helpers.viewer_run import (
    BAD_ARGS,
    LONG_OUTPUT,
    MARKUP_RESULT,
    SCRIPT_RESULT,
    TOOL_ARGS,
    write_tools_run,
)
from skillopt_ci.core.records import EvalSummary
from skillopt_ci.render.eval_report import summary_row
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.sim.triage import TriagePolicy
from skillopt_ci.viewer import html as viewer_html
from skillopt_ci.viewer.bundle import TEXT_CHARS
from skillopt_ci.viewer.server import ViewerServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION")
SCRIPT_PAYLOAD = "<script>window.__pwned=1</script>"
IMG_PAYLOAD = '<img src=x onerror="window.__pwned=2">'
XSS_TASK_ID = 'xss-<img src=x onerror="window.__pwned=3">'
LONG_ANSWER = "account/P3 " + "because " * 700
XSS_TICKET = "</script><script>window.__pwned=4</script> my <b>invoice</b> is wrong"


# ---- fixtures: a browser, and real runs ----------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium not found (looked for `chromium` on PATH and {CHROMIUM}): install Debian's "
                    "chromium package; these tests drive it with Playwright's executable_path", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def cli(*args: str, cwd: Path | None = None):
    """``run_cli`` in a thread of its own: Playwright's sync API keeps an asyncio loop running in
    this one, and the engine runs its own loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run_cli, *args, cwd=cwd).result()


@contextmanager
def no_keys():
    with pytest.MonkeyPatch.context() as mp:
        for var in KEYS:
            mp.delenv(var, raising=False)
        yield


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    with no_keys(), ScriptedModelServer(SimulatedModels()) as server:
        project = train_project(root / "p", server.openai_base_url)
        res = cli("train", "--skill", "ticket-triage", "--out", str(root / "run"), "--quiet", cwd=project)
    assert res.code == 0, res.err
    return root / "run"


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    with no_keys(), ScriptedModelServer(TriagePolicy()) as server:
        repo = make_repo(root, server.openai_base_url)
        commit_on_branch(repo, "worse", {SKILL: skill_text(repo).replace(BUG_RULE, "").replace(ACCOUNT_RULE, "").replace(BILLING_RULE, "")})
        res = cli("gate", "--base", "main", "--head", "worse", "--out", str(root / "gate"), "--quiet", cwd=repo)
    assert res.code == 1, res.err  # a regression: the check fails
    return root / "gate"


class HostilePolicy:
    """The triage target, except that a third of its answers are a <script> and a third an <img onerror>."""

    def __init__(self):
        self.target = TriagePolicy()

    def __call__(self, request):
        if "log in since yesterday" in request.last_user and request.call_index % 3 == 2:
            return LONG_ANSWER  # longer than a report keeps
        return [SCRIPT_PAYLOAD, IMG_PAYLOAD, None][request.call_index % 3] or self.target(request)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """An eval whose model answers markup, whose task file has markup in an id and a ticket, and
    whose skill has markup in it; 20 repeats, so the answers of a task disagree (flaky) and there
    are more results than one page of the table."""
    root = tmp_path_factory.mktemp("xss")
    with no_keys(), ScriptedModelServer(HostilePolicy()) as server:
        project = write_project(root / "p", server.openai_base_url)
        val = project / "eval_suites/ticket-triage/val.jsonl"
        task = {"id": XSS_TASK_ID, "input": XSS_TICKET, "expected": "billing<img src=x onerror=alert(1)>/P3",
                "metadata": {"plan": "Pro"}}
        val.write_text(val.read_text() + json.dumps(task) + "\n")
        skill = project / SKILL
        skill.write_text(skill.read_text() + "\n</script><img src=x onerror=\"window.__pwned=5\">\n")
        res = cli("eval", "ticket-triage", "--split", "val", "--repeats", "20", "--out", str(root / "runs" / "xss"),
                  "--quiet", cwd=project)
    assert res.code == 0, res.err
    return root / "runs" / "xss"


# ---- helpers -------------------------------------------------------------------------------------


class Watched:
    """A page whose requests and console messages are all recorded."""

    def __init__(self, page: Page):
        self.page = page
        self.requests: list[str] = []
        self.console: list[tuple[str, str]] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("console", lambda m: self.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))

    def assert_clean(self, allowed) -> None:
        """No console error or warning, nothing shown in #error, and no request but ``allowed(url)``."""
        problems = [m for m in self.console if m[0] in ("error", "warning", "pageerror")]
        assert not problems, problems
        assert self.page.locator("#error").is_hidden(), self.page.inner_text("#error")
        strangers = [url for url in self.requests if not allowed(url)]
        assert not strangers, strangers


@contextmanager
def open_page(browser, url: str | None = None):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    watched = Watched(page)
    try:
        if url:
            page.goto(url)
            page.wait_for_selector('#summary[data-ready="1"]')
        yield watched
    finally:
        page.close()


def write_report(run: Path, out: Path) -> Path:
    html = out / "report.html"
    res = cli("report", str(run), "--html", str(html))
    assert res.code == 0, res.err
    assert "wrote" in res.out
    return html


def results_by_dir(run: Path) -> dict[Path, list[dict]]:
    """Every results.jsonl under ``run``, the last line per task and repeat (as a resumed run keeps)."""
    out = {}
    for path in sorted(run.rglob("results.jsonl")):
        latest = {}
        for line in path.read_text().splitlines():
            r = json.loads(line)
            latest[(r["task_id"], r["repeat"])] = r
        out[path.parent] = list(latest.values())
    return out


def regressed_rows(results: dict[Path, list[dict]], pairs: list[tuple[Path, Path]]) -> int:
    """Rows of either side of a pair whose task and repeat scored lower after than before."""
    marked = set()
    for before, after in pairs:
        old = {(r["task_id"], r["repeat"]): r for r in results.get(before, [])}
        for r in results.get(after, []):
            o = old.get((r["task_id"], r["repeat"]))
            if o and o["score"] is not None and r["score"] is not None and r["score"] < o["score"]:
                marked |= {(before, r["task_id"], r["repeat"]), (after, r["task_id"], r["repeat"])}
    return len(marked)


def flaky_rows(results: dict[Path, list[dict]]) -> int:
    n = 0
    for rows in results.values():
        for task in {r["task_id"] for r in rows}:
            repeats = [r for r in rows if r["task_id"] == task]
            if len({r["passed"] for r in repeats if r["passed"] is not None}) > 1:
                n += len(repeats)
    return n


def count_shown(page: Page) -> int:
    return int(page.get_attribute("#result-count", "data-count"))


def only_file(html: Path):
    return lambda url: url == html.as_uri()


# ---- the training report -------------------------------------------------------------------------


def test_training_report_shows_the_numbers_the_chart_and_each_steps_diff(browser, training_run, tmp_path):
    html = write_report(training_run, tmp_path)
    text = html.read_text(encoding="utf-8")
    assert html.stat().st_size < 5 * 1024 * 1024
    # One script runs: the app, allowed by its hash; the data is inert JSON.
    script = re.search(r"<script>(.*)</script>", text, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text).group(1)
    assert csp == f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"
    assert re.findall(r"<(script|link|img|iframe|object)\b[^>]*>", text) == ["link", "script", "script"]

    state = json.loads((training_run / "state.json").read_text())
    summary = json.loads((training_run / "summary.json").read_text())
    history = state["history"]
    with open_page(browser, html.as_uri()) as w:
        page = w.page
        val_row = page.locator("#split-table tbody tr").first.inner_text()
        v = summary["val"]
        for shown in (f"{v['current']:.3f}", f"{v['trained']:.3f}", f"{v['delta']:+.3f}", f"{v['ci'][0]:+.3f}",
                      v["verdict"]):
            assert shown in val_row, (shown, val_row)
        counts = page.inner_text("#step-counts")
        assert f"accepted {summary['steps_accepted']}" in " ".join(counts.split())
        assert f"{summary['input_tokens'] + summary['output_tokens']:,}" in page.inner_text("#spend-table")

        # The chart: one marker per step, in order, with its decision.
        points = page.locator("#val-chart circle.point")
        assert points.count() == 1 + len(history)
        assert [points.nth(i).get_attribute("data-step") for i in range(points.count())] == \
            ["baseline"] + [r["step"] for r in history]
        assert [points.nth(i).get_attribute("data-decision") for i in range(1, points.count())] == \
            [r["decision"] for r in history]
        accepted = next(r for r in history if r["decision"] == "accepted")
        page.locator(f'#val-chart circle.point[data-step="{accepted["step"]}"]').click()
        page.evaluate("window.scrollTo(0, 0)")
        box = page.locator(".chart-box").bounding_box()
        clip = {"x": 0, "y": 0, "width": 1400, "height": box["y"] + box["height"] + 16}
        page.screenshot(path=str(tmp_path / "train-summary-chart.png"), full_page=True, clip=clip)

        # Clicking an accepted step (above) shows its diff, with the edits it applied as added lines.
        detail = page.locator("#step-detail")
        assert accepted["step"] in detail.locator("h3").inner_text() and "accepted" in detail.inner_text()
        added = detail.locator("pre.diff .add").all_inner_texts()
        assert added, "an accepted step adds lines"
        screened_out = {e["edit"]["text"] for e in (accepted.get("screen") or {}).get("edits", []) if not e["kept"]}
        applied = [o["edit"]["text"] for o in accepted["applied"]
                   if o["status"] == "applied" and o["edit"]["text"] and o["edit"]["text"] not in screened_out]
        assert any(applied[0].splitlines()[0] in line for line in added)
        assert accepted["reason"] in detail.inner_text()
        assert detail.locator("table.apply-report tbody tr").count() == len(accepted["applied"])
        assert accepted["selected"][0]["rationale"] in detail.inner_text()
        detail.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "train-step-detail.png"))

        # A row of the steps table selects that step too.
        rejected = next(r for r in history if r["decision"] == "rejected")
        page.locator(f'#steps tr[data-step="{rejected["step"]}"]').click()
        assert rejected["reason"] in detail.inner_text() and "rejected" in detail.locator("h3").inner_text()
        assert page.locator(f'#val-chart circle.point.selected[data-step="{rejected["step"]}"]').count() == 1

        # Versions: any two can be diffed; epochs show the meta skill, marked as not part of the skill.
        assert page.locator("#version-table tbody tr").count() == len(state["versions"])
        best = f"v{state['incumbent']:03d}"
        page.select_option("#diff-from", "v000")
        page.select_option("#diff-to", best)
        assert page.locator("#version-diff pre.diff .add").count() >= 1
        page.select_option("#diff-to", "v000")
        assert "identical" in page.inner_text("#version-diff")
        epochs = page.locator("#epochs")
        assert "not part of the skill" in epochs.inner_text().lower()
        meta = state["epochs"][-1]["meta_skill"]["text"]
        assert meta.splitlines()[0] in epochs.inner_text()
        w.assert_clean(only_file(html))


def test_results_filters_count_right_and_a_trajectory_shows_everything(browser, training_run, tmp_path):
    html = write_report(training_run, tmp_path)
    results = results_by_dir(training_run)
    state = json.loads((training_run / "state.json").read_text())
    best = state["versions"][state["incumbent"]]
    all_rows = [r for rows in results.values() for r in rows]
    with open_page(browser, html.as_uri()) as w:
        page = w.page
        assert count_shown(page) == len(all_rows)
        page.check("#filter-failed")
        assert count_shown(page) == sum(1 for r in all_rows if r["passed"] is False)
        assert page.locator("#results-table tbody tr td.passed").all_inner_texts() == \
            ["✗ fail"] * min(200, count_shown(page))
        page.uncheck("#filter-failed")
        pairs = [(training_run / state["versions"][0]["val_dir"], training_run / best["val_dir"]),
                 (training_run / "versions/v000/test", training_run / f"versions/v{best['number']:03d}/test")]
        page.check("#filter-regressed")
        assert count_shown(page) == regressed_rows(results, pairs)
        page.uncheck("#filter-regressed")
        page.check("#filter-flaky")
        assert count_shown(page) == flaky_rows(results)
        page.uncheck("#filter-flaky")
        for split in ("train", "val", "test"):
            page.select_option("#filter-split", split)
            expected = sum(len(rows) for d, rows in results.items()
                           if json.loads((d / "run.json").read_text()).get("split") == split)
            assert count_shown(page) == expected, split
        page.select_option("#filter-split", "")
        page.select_option("#filter-eval", "versions/v000/val")
        assert count_shown(page) == len(results[training_run / "versions/v000/val"])

        # A failed baseline result: the whole trajectory, the system message being the skill.
        page.check("#filter-failed")
        page.locator("#results-table tbody tr").first.click()
        traj = page.locator("#trajectory")
        task_id = traj.locator("h3").inner_text().split(" · ")[0]
        result = next(r for r in results[training_run / "versions/v000/val"] if r["task_id"] == task_id)
        system = traj.locator(".message.system")
        skill = (training_run / "skills/v000.md").read_text()
        assert not system.locator("pre").is_visible()  # collapsed until asked for
        system.locator("summary").click()
        assert system.locator("pre").inner_text().strip() == skill.strip()
        assert traj.locator(".message.user pre").inner_text() == result["prompt"]
        assert traj.locator(".message.assistant pre").inner_text() == result["output"]
        assert traj.locator("pre.expected").inner_text() == result["expected"]
        assert traj.locator("pre.feedback").inner_text() == result["feedback"]
        facts = traj.locator("table.kv").inner_text()
        assert f"{result['usage']['input_tokens']:,} in" in facts and "finish reason" in facts and "stop" in facts
        page.locator("#results").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "results-trajectory.png"))
        w.assert_clean(only_file(html))


def embedded(html: Path) -> dict:
    text = html.read_text(encoding="utf-8")
    return json.loads(re.search(r'<script type="application/json" id="bundle">(.*?)</script>', text, re.S).group(1))


def test_a_big_bundle_is_embedded_gzipped_and_reads_the_same(browser, training_run, tmp_path, monkeypatch):
    plain = embedded(write_report(training_run, tmp_path))
    assert plain["kind"] == "train" and plain["source"] == str(training_run)
    monkeypatch.setattr(viewer_html, "PLAIN_LIMIT", 0)  # as a report of thousands of results is
    html = write_report(training_run, tmp_path / "packed")
    packed = embedded(html)
    assert set(packed) == {"encoding", "data"} and packed["encoding"] == "gzip+base64"
    inflated = json.loads(gzip.decompress(base64.b64decode(packed["data"])))
    assert {**inflated, "generated_at": None} == {**plain, "generated_at": None}
    history = json.loads((training_run / "state.json").read_text())["history"]
    with open_page(browser, html.as_uri()) as w:
        assert w.page.locator("#val-chart circle.point").count() == 1 + len(history)
        assert count_shown(w.page) == sum(len(rows) for rows in results_by_dir(training_run).values())
        w.assert_clean(only_file(html))


# ---- the gate report -----------------------------------------------------------------------------


def test_gate_report_puts_base_and_head_side_by_side(browser, gate_run, tmp_path):
    html = write_report(gate_run, tmp_path)
    gate = json.loads((gate_run / "gate.json").read_text())
    results = results_by_dir(gate_run)
    base = {(r["task_id"], r["repeat"]): r for r in results[gate_run / "ticket-triage/base"]}
    head = {(r["task_id"], r["repeat"]): r for r in results[gate_run / "ticket-triage/head"]}
    with open_page(browser, html.as_uri()) as w:
        page = w.page
        row = page.locator("#gate-table tbody tr").first.inner_text()
        c = gate["skills"][0]["comparison"]
        assert "ticket-triage" in row and "regressed" in row and "fails the check" in row
        assert f"{c['base_mean']:.3f}" in row and f"{c['head_mean']:.3f}" in row and f"{c['delta']:+.3f}" in row
        pane = page.locator('#side-by-side .skill-compare[data-skill="ticket-triage"]')
        rows = pane.locator("table.side-by-side tbody tr")
        assert rows.count() == len(base) == len(head)
        worst = rows.first  # regressions first
        key = (worst.get_attribute("data-task"), 0)
        assert worst.locator("td.base-output").inner_text() == base[key]["output"]
        assert worst.locator("td.head-output").inner_text() == head[key]["output"]
        assert head[key]["score"] < base[key]["score"] and worst.locator("td.delta").inner_text().startswith("-")
        pane.locator("details summary").click()  # the skill diff: the head dropped the bug rule
        removed = pane.locator("pre.diff .del").all_inner_texts()
        assert removed == [f"- {BILLING_RULE.strip()}", f"- {ACCOUNT_RULE.strip()}", f"- {BUG_RULE.strip()}"]
        page.locator("#side-by-side").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "gate-side-by-side.png"))

        page.check("#filter-regressed")
        sides = (gate_run / "ticket-triage/base", gate_run / "ticket-triage/head")
        assert count_shown(page) == regressed_rows(results, [sides]) > 0
        w.assert_clean(only_file(html))


# ---- untrusted text ------------------------------------------------------------------------------


def assert_inert(page: Page) -> None:
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert page.evaluate("document.scripts.length") <= 2  # the app and its data, nothing injected


def test_model_output_and_task_files_are_shown_as_text_never_run(browser, hostile_run, tmp_path):
    html = write_report(hostile_run, tmp_path)
    text = html.read_text(encoding="utf-8")
    assert SCRIPT_PAYLOAD not in text and "<img" not in text and text.count("<script") == 2
    results = results_by_dir(hostile_run)[hostile_run]
    summary = EvalSummary.from_dict(json.loads((hostile_run / "summary.json").read_text()))
    with open_page(browser, html.as_uri()) as w:
        page = w.page
        assert_inert(page)
        # The score table says what the terminal table and report.md say.
        cells = page.locator("#score-table tbody td").all_inner_texts()
        assert cells == list(summary_row(summary).values())
        assert page.locator("#filter-regressed").is_disabled()  # an evaluation alone has nothing to regress from
        # Shown literally, in the table and in the trajectory.
        assert count_shown(page) == len(results) > 200
        assert page.locator("#results-table tbody tr").count() == 200
        page.click("#show-more")
        assert page.locator("#results-table tbody tr").count() == len(results)
        assert page.locator("#show-more").count() == 0
        cell = page.locator("#results-table td.output", has_text=SCRIPT_PAYLOAD).first
        assert cell.inner_text() == SCRIPT_PAYLOAD
        assert page.locator("#results-table td.output", has_text=IMG_PAYLOAD).count() > 0
        page.fill("#filter-text", "xss-")
        assert count_shown(page) == 20
        page.locator("#results-table tbody tr", has_text=SCRIPT_PAYLOAD).first.click()
        traj = page.locator("#trajectory")
        assert traj.locator("h3").inner_text().startswith(XSS_TASK_ID)
        assert traj.locator(".message.assistant pre").inner_text() == SCRIPT_PAYLOAD
        assert XSS_TICKET in traj.locator(".message.user pre").inner_text()
        assert "<img src=x onerror=alert(1)>" in traj.locator("pre.expected").inner_text()
        traj.locator(".message.system summary").click()
        assert 'onerror="window.__pwned=5"' in traj.locator(".message.system pre").inner_text()
        # A long answer is cut in the report, and says so.
        page.fill("#filter-text", "val-01")
        page.locator("#results-table tbody tr", has_text="account/P3 because").first.click()
        assistant = traj.locator(".message.assistant pre").inner_text()
        assert assistant.startswith(LONG_ANSWER[:TEXT_CHARS]) and len(assistant) < len(LONG_ANSWER)
        assert "cut to 4000 characters" in traj.inner_text() and "long texts cut" in page.inner_text("#header")
        page.fill("#filter-text", "")
        page.check("#filter-flaky")
        assert count_shown(page) == flaky_rows({hostile_run: results}) > 0
        assert_inert(page)
        w.assert_clean(only_file(html))

    # The live viewer serves the same run: just as inert, with the policy sent as a header.
    with ViewerServer(hostile_run.parent) as viewer, open_page(browser) as w:
        response = w.page.goto(f"{viewer.url}/#run=xss")
        assert response.headers["content-security-policy"].startswith("default-src 'none'; connect-src 'self';")
        w.page.wait_for_selector('#summary[data-ready="1"]')
        w.page.locator("#results-table tbody tr", has_text=IMG_PAYLOAD).first.click()
        assert w.page.locator("#trajectory .message.assistant pre").inner_text() == IMG_PAYLOAD
        assert_inert(w.page)
        w.assert_clean(lambda url: url.startswith(viewer.url + "/"))


# ---- the live viewer -----------------------------------------------------------------------------


def test_an_agent_runs_score_table_shows_how_often_the_skill_was_used_as_the_terminal_does(browser, hostile_run,
                                                                                          tmp_path):
    run = tmp_path / "agent-run"
    shutil.copytree(hostile_run, run)
    data = json.loads((run / "summary.json").read_text())
    data["consulted"] = {"consulted": 5, "rollouts": 6, "references": 1, "scripts": 0}
    (run / "summary.json").write_text(json.dumps(data))
    summary = EvalSummary.from_dict(data)
    html = write_report(run, tmp_path)
    with open_page(browser, html.as_uri()) as w:
        headers = w.page.locator("#score-table thead th").all_inner_texts()
        cells = w.page.locator("#score-table tbody td").all_inner_texts()
    terminal = summary_row(summary, consulted=True)
    assert headers == list(terminal) and cells == list(terminal.values())
    assert dict(zip(headers, cells, strict=True))["skill used"] == "5/6 (83%)"


def test_a_gate_of_agent_suites_shows_how_often_each_side_used_the_skill(browser, gate_run, tmp_path):
    run = tmp_path / "agent-gate"
    shutil.copytree(gate_run, run)
    data = json.loads((run / "gate.json").read_text())
    skill = data["skills"][0]
    skill["base"]["consulted"] = {"consulted": 6, "rollouts": 6, "references": 0, "scripts": 0}
    skill["head"]["consulted"] = {"consulted": 2, "rollouts": 6, "references": 0, "scripts": 0}
    skill["base"]["trigger"] = {"tp": 18, "fp": 1, "tn": 19, "fn": 2}
    skill["head"]["trigger"] = {"tp": 11, "fp": 1, "tn": 19, "fn": 9}
    (run / "gate.json").write_text(json.dumps(data))
    html = write_report(run, tmp_path)
    with open_page(browser, html.as_uri()) as w:
        lines = w.page.locator("#gate-triggering li").all_inner_texts()
    name = skill["name"]
    assert lines == [f"{name} skill used: base 6/6 (100%) → head 2/6 (33%)",
                     f"{name} triggering: recall 18/20 (90%) → 11/20 (55%); precision 18/19 (95%) → 11/12 (92%)"]


def test_a_run_stopped_by_its_budget_is_shown_stopped_not_in_progress(browser, tmp_path):
    with no_keys(), ScriptedModelServer(SimulatedModels()) as server:
        project = train_project(tmp_path / "p", server.openai_base_url)
        res = cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "runs" / "short"), "--quiet",
                  "--budget-tokens", "6000", cwd=project)
    assert res.code == 0, res.err
    assert json.loads((tmp_path / "runs/short/state.json").read_text())["stopped"].startswith("token budget")
    with ViewerServer(tmp_path / "runs") as viewer, open_page(browser) as w:
        w.page.goto(f"{viewer.url}/#run=short")
        expect(w.page.locator("#live-status")).to_have_text("stopped")
        assert "token budget reached" in w.page.inner_text("#live")
        assert "Stopped early" in w.page.inner_text("#summary")
        expect(w.page.locator("a.run-link")).to_have_count(1)
        assert "in progress" not in w.page.inner_text("#run-list")
        w.page.wait_for_timeout(2500)  # no polling for a run that is over
        assert sum(1 for url in w.requests if "/api/run?" in url) == 1
        w.assert_clean(lambda url: url.startswith(viewer.url + "/"))


def test_a_run_planned_within_its_target_calls_shows_the_best_so_far_curve(browser, tmp_path):
    with no_keys(), ScriptedModelServer(SimulatedModels()) as server:
        project = train_project(tmp_path / "p", server.openai_base_url, budgets={"max_target_calls": 150})
        res = cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=project)
    assert res.code == 0, res.err
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["stopped"].startswith("target-call budget") and summary["complete"]
    curve = summary["best_so_far"]
    html = write_report(tmp_path / "run", tmp_path)
    with open_page(browser, html.as_uri()) as w:
        page = w.page
        heading = page.locator("#summary h3", has_text="Best so far")
        assert heading.inner_text() == "Best so far by target calls (of 150)"
        rows = page.locator("#best-so-far tbody tr")
        # the baseline, each change of the best skill, the last step: the calls each one cost, in order
        changes = [p for i, p in enumerate(curve) if i in (0, len(curve) - 1) or p["version"] != curve[i - 1]["version"]]
        assert rows.count() == len(changes)
        for i, p in enumerate(changes):
            cells = rows.nth(i).locator("td").all_inner_texts()
            assert cells == [p["step"], f"{p['calls']:,}", f"v{p['version']:03d}", f"{p['val']:.3f}"], cells
        assert summary["stopped"] in page.inner_text("#planned-stop")
        assert "Stopped early:" not in page.inner_text("#summary")  # finished, not waiting for a resume
        page.screenshot(path=str(tmp_path / "train-best-so-far.png"), full_page=True)
        w.assert_clean(only_file(html))
    # A run without its summary (one in progress) gets the same curve from its state, baseline calls included.
    (tmp_path / "run/summary.json").unlink()
    html = write_report(tmp_path / "run", tmp_path / "live")
    with open_page(browser, html.as_uri()) as w:
        rows = w.page.locator("#best-so-far tbody tr")
        assert [rows.nth(i).locator("td").all_inner_texts()[:3] for i in range(rows.count())] == \
               [[p["step"], f"{p['calls']:,}", f"v{p['version']:03d}"] for p in changes]
        assert curve[0]["calls"] > 0
        w.assert_clean(only_file(html))


class Held:
    """A policy that answers only once ``released`` is set: the run waits until the page watches."""

    def __init__(self, inner):
        self.inner = inner
        self.released = threading.Event()

    def __call__(self, request):
        self.released.wait(60)
        return self.inner(request)


def read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)


def viewer_url(lines: queue.Queue, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(line)
        if m := re.search(r"(http://127\.0\.0\.1:\d+)/", line):
            return m.group(1)
    raise AssertionError(f"the viewer printed no URL: {seen}")


def live_count(page: Page) -> int:
    return int(page.inner_text("#live-step").split()[0])


def next_count(page: Page, count: int) -> int:
    """Wait until the page itself shows a step count other than ``count``; return it. (Playwright's
    wait_for_function evaluates a string, which the page's CSP forbids; expect() polls without.)"""
    expect(page.locator("#live-step")).not_to_have_text(re.compile(rf"^{count} "), timeout=30_000)
    return live_count(page)


def test_live_viewer_follows_a_training_run_without_reloading(browser, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    held = Held(SimulatedModels())
    with ScriptedModelServer(held, latency=0.1) as server:
        project = train_project(tmp_path / "p", server.openai_base_url)
        viewer = subprocess.Popen([sys.executable, "-m", "skillopt_ci", "view", str(runs), "--port", "0"],
                                  stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=read_lines, args=(viewer.stderr, lines), daemon=True).start()
        trainer = subprocess.Popen([sys.executable, "-m", "skillopt_ci", "train", "--skill", "ticket-triage",
                                    "--out", str(runs / "train-live"), "--quiet"], cwd=project, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            url = viewer_url(lines)
            with open_page(browser) as w:
                page = w.page
                page.goto(url + "/")
                page.click('a.run-link[data-run="train-live"]', timeout=20_000)
                page.wait_for_selector("#live-step")
                assert page.inner_text("#live-status") == "in progress"
                page.evaluate("window.__sameDocument = true")
                first = live_count(page)
                held.released.set()
                second = next_count(page, first)
                third = next_count(page, second)
                assert third > second > first
                assert page.locator("#val-chart circle.point").count() >= 3  # the chart grew in place
                assert page.locator("#live-decision").inner_text()
                page.screenshot(path=str(tmp_path / "live-in-progress.png"))
                expect(page.locator("#live-status")).to_have_text("done", timeout=60_000)
                assert page.evaluate("window.__sameDocument") is True  # never reloaded
                state = json.loads((runs / "train-live/state.json").read_text())
                steps = sum(1 for r in state["history"] if r["kind"] == "step")
                assert page.inner_text("#live-step") == f"{steps} / {steps} steps"
                assert page.locator("#val-chart circle.point").count() == 1 + len(state["history"])
                assert page.locator("#split-table").count() == 1  # the final summary replaced the progress note
                page.screenshot(path=str(tmp_path / "live-done.png"))
                w.assert_clean(lambda u: u.startswith(url + "/"))
                assert trainer.wait(timeout=60) == 0, trainer.stdout.read()

                # Ctrl-C stops the viewer at once; the page says so instead of failing silently.
                started = time.monotonic()
                viewer.send_signal(signal.SIGINT)
                assert viewer.wait(timeout=10) == 0
                assert time.monotonic() - started < 5
                expect(page.locator("#error")).to_contain_text("Could not load the list of runs", timeout=10_000)
                # Only the browser's own network log: the app throws nothing and logs nothing.
                assert all(kind == "error" and text.startswith("Failed to load resource") for kind, text in w.console)
        finally:
            held.released.set()
            for process in (trainer, viewer):
                if process.poll() is None:
                    process.kill()
                process.wait()


# ---- a rollout's trajectory ----------------------------------------------------------------------


def assert_only_thumbnails(page: Page) -> None:
    """Nothing injected ran, and every image on the page is one of our thumbnails, a PNG data URL."""
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") <= 2
    sources = page.locator("img").evaluate_all("imgs => imgs.map((i) => i.className + ' ' + i.src.slice(0, 22))")
    assert all(s == "thumb data:image/png;base64," for s in sources), sources


def check_trajectory(page: Page, tmp_path: Path, shot: str) -> None:
    """Open the tools result, expand its trajectory and check what a reader sees."""
    page.locator("#results-table tbody tr", has_text="csv-mean").click()
    traj = page.locator("#trajectory")
    steps = traj.locator("details.steps")
    assert "11 steps · 3 tool calls · 1 action · 2 errors · 5 images · 300.00s" in steps.locator("summary").inner_text()
    assert not traj.locator("li.step").first.is_visible()  # collapsed until asked for
    steps.locator("summary").click()
    items = traj.locator("li.step")
    expect(items.first).to_be_visible()
    assert items.count() == 11
    assert traj.locator(".step-n").all_inner_texts() == [str(n) for n in range(1, 12)]
    assert [items.nth(i).get_attribute("data-kind") for i in range(11)][:3] == ["model", "tool_call", "tool_result"]
    call = items.nth(1)
    assert call.locator(".step-name").inner_text() == "python"
    assert call.locator("pre.step-args").inner_text() == json.dumps(TOOL_ARGS, indent=2)
    assert items.nth(2).locator("pre.step-text").inner_text() == SCRIPT_RESULT  # text, not markup
    bad = items.nth(3)
    assert bad.locator("pre.step-args").inner_text() == BAD_ARGS and "not valid JSON" in bad.inner_text()
    assert "failed" in items.nth(4).get_attribute("class") and "error" in items.nth(4).locator(".badge").inner_text()
    assert "failed" in items.nth(10).get_attribute("class")
    assert "time limit" in items.nth(10).inner_text() and "at 300.00s" in items.nth(10).inner_text()
    observation = items.nth(7)
    assert MARKUP_RESULT in observation.inner_text() and "reward 0.500" in observation.inner_text()
    assert observation.locator("a").count() == 0
    # The long tool output shows its start, then all of it on request.
    long = items.nth(6)
    assert long.locator("pre.step-text").inner_text() != LONG_OUTPUT
    long.locator("button.show-all").click()
    assert long.locator("pre.step-text").inner_text() == LONG_OUTPUT
    # The PNG is shown as a thumbnail (decoded: it has its real size); the SVG and the oversized image are not.
    thumb = observation.locator("img.thumb")
    expect(thumb).to_have_count(1)
    assert thumb.evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]") == [True, 40, 30]
    assert thumb.is_visible()
    notes = items.nth(8).locator(".image-note").all_inner_texts()
    assert sum("not a PNG, JPEG, GIF or WebP" in n for n in notes) == 1 and "per image" in notes[1]
    assert "not a PNG, JPEG, GIF or WebP" in observation.locator(".image-note").inner_text()
    thumb.click()
    assert "large" in thumb.get_attribute("class")
    assert traj.locator("ul.files li").all_inner_texts() == ["out.txt (4 bytes)", "big.csv (not kept)",
                                                             "../../../run.json (not kept)"]
    assert traj.locator("ul.files a").count() == 0
    assert "reward" in traj.locator("table.kv").inner_text()
    steps.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / shot))
    # A chat result beside it: no trajectory, as before.
    page.locator("#results-table tbody tr", has_text="chat-task").click()
    assert traj.locator("details.steps").count() == 0 and traj.locator(".message.assistant pre").inner_text() == "hi"


def test_a_tools_trajectory_is_shown_step_by_step_with_its_images(browser, tmp_path):
    run = tmp_path / "runs" / "tools"
    write_tools_run(run)
    html = write_report(run, tmp_path)
    with open_page(browser, html.as_uri()) as w:
        check_trajectory(w.page, tmp_path, "trajectory-report.png")
        assert_only_thumbnails(w.page)
        w.assert_clean(only_file(html))

    with ViewerServer(run.parent) as viewer, open_page(browser) as w:
        w.page.goto(f"{viewer.url}/#run=tools")
        w.page.wait_for_selector('#summary[data-ready="1"]')
        check_trajectory(w.page, tmp_path, "trajectory-live.png")
        assert_only_thumbnails(w.page)
        w.assert_clean(lambda url: url.startswith(viewer.url + "/"))
