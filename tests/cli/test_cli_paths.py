"""Plain path and setup mistakes give one line naming the path and exit 2, never a traceback;
an aborted run says what failed and keeps what the user is told to read."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from helpers.cli import run_cli
from helpers.project import write_project
from skillopt_ci.httpserve import LoopbackHandler, LoopbackService
from skillopt_ci.sim import Fault

BUG = "a bug in skillopt-ci"


def first_error(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("error:"))


def assert_clean_input_error(res, *phrases: str) -> None:
    assert res.code == 2, res.err
    assert "Traceback" not in res.err and BUG not in res.err
    line = first_error(res.err)
    for phrase in phrases:
        assert phrase in line, line


def set_config(project: Path, **changes) -> None:
    config = yaml.safe_load((project / "skillopt.yml").read_text())
    config.update(changes)
    (project / "skillopt.yml").write_text(yaml.safe_dump(config))


# --- item: --out, --html, cache.path, runs_dir ------------------------------------------------

def test_eval_out_pointing_at_a_file(project, server, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    res = run_cli("eval", "ticket-triage", "--out", str(target), "--quiet", cwd=project)
    assert_clean_input_error(res, str(target), "--out is a file, not a directory")
    assert target.read_text() == "mine" and server.call_count == 0


def test_eval_out_under_a_file(project, server, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    res = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "notes.txt" / "run"), "--quiet", cwd=project)
    assert_clean_input_error(res, "--out cannot be created", "notes.txt is a file")
    assert server.call_count == 0


def test_runs_dir_under_a_file(project, server):
    (project / "blocker").write_text("")
    set_config(project, runs_dir="blocker/runs")
    for args in (("eval", "ticket-triage"), ("train", "--skill", "ticket-triage"),
                 ("compare", "skills/ticket-triage/SKILL.md", "skills/ticket-triage/SKILL.md",
                  "--suite", "eval_suites/ticket-triage")):
        res = run_cli(*args, "--quiet", cwd=project)
        assert_clean_input_error(res, "runs_dir", "blocker is a file")
    assert server.call_count == 0


def test_cache_path_in_an_unusable_place(project, server):
    (project / "blocker").write_text("")
    set_config(project, cache={"mode": "read-write", "path": "blocker/cache.sqlite"})
    res = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert_clean_input_error(res, "blocker/cache.sqlite", "cache.path cannot be created", "--cache off")
    set_config(project, cache={"mode": "read-write", "path": "skills"})
    res = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert_clean_input_error(res, "cache.path is a directory")
    assert server.call_count == 0


def test_cache_path_that_sqlite_cannot_create(project, server, tmp_path):
    # A directory sqlite cannot create a file in, even as root: a name that is too long.
    set_config(project, cache={"mode": "read-write", "path": "x" * 300 + ".sqlite"})
    res = run_cli("eval", "ticket-triage", "--quiet", cwd=project)
    assert res.code == 2 and "Traceback" not in res.err and BUG not in res.err
    assert "cache" in first_error(res.err)


def test_report_html_pointing_at_a_directory_or_under_a_file(project, tmp_path):
    assert run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=project).code == 0
    res = run_cli("report", str(tmp_path / "run"), "--html", str(tmp_path), cwd=project)
    assert_clean_input_error(res, str(tmp_path), "--html is a directory", "report.html")
    (tmp_path / "file").write_text("")
    res = run_cli("report", str(tmp_path / "run"), "--html", str(tmp_path / "file" / "r.html"), cwd=project)
    assert_clean_input_error(res, "--html cannot be created", "file is a file")
    assert not list(tmp_path.glob(".*.tmp"))


def test_merge_out_pointing_at_a_file(project, tmp_path):
    assert run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=project).code == 0
    (tmp_path / "file").write_text("")
    res = run_cli("merge", str(tmp_path / "run"), "--out", str(tmp_path / "file"), cwd=project)
    assert_clean_input_error(res, "--out is a file")


def test_a_file_system_error_the_checks_miss_is_one_line(project, tmp_path):
    """A path that passes the up-front check but fails when written (here under /proc, which the
    check may see as writable when run as root) still ends in one line, never a traceback."""
    assert run_cli("eval", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=project).code == 0
    res = run_cli("report", str(tmp_path / "run"), "--html", "/proc/self/no/such/report.html", cwd=project)
    assert res.code == 2 and "Traceback" not in res.err and BUG not in res.err
    assert "/proc/self/no/such" in first_error(res.err)


# --- item: not a git repository; skillopt.yml a directory -------------------------------------

def test_gate_outside_a_git_repository(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url)
    for args in (("gate", "--quiet"), ("gate", "--base", "HEAD~1", "--quiet")):
        res = run_cli(*args, cwd=project)
        assert_clean_input_error(res, "not a git repository")
        assert "unknown git ref" not in res.err and "no default base branch" not in res.err


def test_skillopt_yml_that_is_a_directory(tmp_path):
    (tmp_path / "skillopt.yml").mkdir()
    for args in (("validate",), ("eval", "x"), ("train", "--skill", "x")):
        res = run_cli(*args, cwd=tmp_path)
        assert_clean_input_error(res, "skillopt.yml", "is a directory")
        assert "no skillopt.yml" not in res.err
    res = run_cli("--config", str(tmp_path / "skillopt.yml"), "validate", cwd=tmp_path)
    assert_clean_input_error(res, "--config is a directory")


# --- item: an abort after errors says what failed and keeps what it points to ------------------

class _HtmlHandler(LoopbackHandler):
    do_POST = do_GET = LoopbackHandler.receive

    def respond(self, method: str, body: bytes, headers: dict[str, str]) -> None:
        page = b"<!doctype html><html><body><h1>Sign in to continue</h1></body></html>"
        self.send_bytes(200, {"Content-Type": "text/html; charset=utf-8"}, page)


class HtmlPortal(LoopbackService):
    """An endpoint that answers every request with a web page (a captive portal, a wrong URL)."""

    handler_class = _HtmlHandler


def test_abort_on_an_html_endpoint_says_what_came_back(tmp_path):
    """Nothing was measured, so no run directory is left behind, and the message itself carries
    the count and the first error instead of pointing at a file that is gone."""
    with HtmlPortal() as portal:
        base_url = portal.url + "/v1"
        project = write_project(tmp_path / "p", base_url, target={"max_retries": 0})
        out = tmp_path / "run"
        res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 3 and "Traceback" not in res.err
    line = first_error(res.err)
    assert "aborted after 10 of 10 rollouts failed (10 malformed)" in line
    assert "first error: malformed:" in line and "Sign in to continue" in line
    assert f"{base_url} did not answer like a model API" in line and "check models.target.base_url" in line
    assert "results.jsonl" not in line and not out.exists()


def test_abort_after_some_results_keeps_the_run_it_points_to(tmp_path, server):
    project = write_project(tmp_path / "p", server.openai_base_url, target={"max_retries": 0}, concurrency=1,
                            cache={"mode": "off"})
    server.fault_plan = lambda request: Fault.malformed() if len(server.calls) >= 4 else None
    out = tmp_path / "run"
    res = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert res.code == 3 and "Traceback" not in res.err
    line = first_error(res.err)
    assert "aborted after 6 of 10 rollouts failed (6 malformed); first error: malformed:" in line
    assert str(out / "results.jsonl") in line
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sum(r["error"] is None for r in results) == 4 and sum(r["error"] is not None for r in results) == 6
    server.fault_plan = None
    again = run_cli("eval", "ticket-triage", "--out", str(out), "--quiet", cwd=project)
    assert again.code == 0, again.err  # the same command resumes and retries the errored rollouts


def test_git_is_a_real_repository_check(tmp_path):
    """The gate's check is git's own: a directory inside a repository is fine."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "sub").mkdir()
    from skillopt_ci.gate.git import Git

    assert Git(tmp_path / "sub").top_level().resolve() == tmp_path.resolve()


def test_init_into_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    for target in (tmp_path / "file", tmp_path / "file" / "sub"):
        res = run_cli("init", str(target), cwd=tmp_path)
        assert_clean_input_error(res, "DIRECTORY", "file")
