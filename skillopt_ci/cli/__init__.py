"""The ``skillopt-ci`` command: parse, call the engine, print, pick the exit code.

Engine modules are imported inside the commands so that ``skillopt-ci --help`` stays fast.
"""

from __future__ import annotations

import json
import sys
import traceback
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import click

from skillopt_ci import __version__
from skillopt_ci.core.errors import EXIT_INPUT, EXIT_OK, EXIT_RUNTIME, InputError, SkilloptError
from skillopt_ci.core.paths import display_path


class State:
    def __init__(self, config_path: Path | None):
        self.config_path = config_path


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Path to skillopt.yml (default: found in . or above).")
@click.version_option(__version__, prog_name="skillopt-ci")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """Evaluate, gate and train LLM agent skill documents.

    Exit codes: 0 ok, 1 a gate or threshold failed, 2 bad usage or input, 3 runtime failure.
    """
    ctx.obj = State(config_path)


def config_path(state: State) -> Path | None:
    """--config, else the nearest skillopt.yml in . or above; None when there is none. A
    skillopt.yml that is not a file (a directory) is an error, not "no skillopt.yml"."""
    from skillopt_ci.inputs.config import CONFIG_NAME

    if state.config_path is not None:
        if state.config_path.is_dir():
            raise InputError("--config is a directory; it must name a YAML file", where=str(state.config_path))
        if not state.config_path.is_file():
            raise InputError("config file not found", where=str(state.config_path))
        return state.config_path
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
        if candidate.exists():
            raise InputError("is a directory, not a config file", where=display_path(candidate),
                             hint="the config must be a YAML file: move that directory away, or pass --config FILE")
    return None


def load_project_config(state: State, model: str | None = None, base_url: str | None = None) -> Any:
    """The config from --config or skillopt.yml, with --model/--base-url overriding the target."""
    from skillopt_ci.inputs.config import ModelSpec, default_config, load_config

    path = config_path(state)
    override = None
    if model:
        provider, sep, name = model.partition(":")
        if not sep or not name:
            raise InputError(f"--model {model!r} must look like provider:model, e.g. openai:gpt-4o-mini")
        override = ModelSpec.from_dict("target", {"provider": provider, "model": name, "base_url": base_url})
    elif base_url:
        raise InputError("--base-url needs --model provider:model")
    if path is None:
        if override is None:
            raise InputError("no skillopt.yml in this directory or above",
                             hint="run skillopt-ci init, or pass --config, or --model provider:model")
        return default_config(Path.cwd(), override)
    config = load_config(path, display=display_path(path))
    if override is not None:
        config = replace(config, models=MappingProxyType({**config.models, "target": override}))
    return config


@cli.command()
@click.argument("directory", type=click.Path(path_type=Path), default=".")
def init(directory: Path) -> None:
    """Scaffold skillopt.yml, an example skill and suite, and a workflow in DIRECTORY."""
    from skillopt_ci.inputs.scaffold import init_project
    from skillopt_ci.inputs.writable import check_dir

    check_dir(directory, "DIRECTORY")
    had_gitignore = (directory / ".gitignore").is_file()
    written = init_project(directory)
    for rel in written:
        updated = rel == ".gitignore" and had_gitignore
        click.echo(f"{'added .skillopt/ to' if updated else 'created'} {directory / rel}")
    click.echo("next: skillopt-ci validate, then skillopt-ci eval ticket-triage (needs OPENAI_API_KEY), or skillopt-ci demo")


@cli.command()
@click.option("--strict", is_flag=True, help="Treat warnings (soft Agent Skills deviations, oversized inputs) as errors.")
@click.pass_obj
def validate(state: State, strict: bool) -> None:
    """Check the config, every suite and every skill; list all problems (and warnings) at once."""
    from skillopt_ci.engine.validate import validate_project

    path = config_path(state)
    if path is None:
        raise InputError("no skillopt.yml in this directory or above", hint="run skillopt-ci init or pass --config")
    config, problems = validate_project(path, display=display_path(path))
    for problem in problems:
        click.echo(f"{'warning' if problem.is_warning else 'error'}: {problem}", err=True)
    errors = [p for p in problems if strict or not p.is_warning]
    if errors:
        click.echo(f"{len(errors)} problem(s) found" + (" (--strict: warnings count)" if strict else ""), err=True)
        sys.exit(EXIT_INPUT)
    n = len(config.skills) if config else 0
    warned = f", with {len(problems)} warning(s)" if problems else ""
    click.echo(f"ok: {path} with {n} skill(s) and their suites are valid{warned}")


@cli.command(name="eval")
@click.argument("skill")
@click.option("--suite", type=click.Path(path_type=Path), help="Suite directory (default: the skill's suite in skillopt.yml).")
@click.option("--split", default="val", show_default=True, help="Which split to evaluate.")
@click.option("--repeats", type=click.IntRange(1, 100), help="Rollouts per task (default: the suite's).")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: a stable one under runs_dir; re-running resumes).")
@click.option("--fresh", is_flag=True, help="Discard an existing run in the output directory and start over.")
@click.option("--threshold", type=click.FloatRange(0, 1), help="Eval-only check: exit 1 when the score is below it.")
@click.option("--model", help="Target model as provider:model, overriding skillopt.yml.")
@click.option("--base-url", help="Base URL for --model (OpenAI-compatible servers).")
@click.option("--cache", "cache_mode", type=click.Choice(["read-write", "refresh", "off", "replay-only"]), help="Response cache mode.")
@click.option("--concurrency", type=click.IntRange(1, 512), help="Model calls in flight.")
@click.option("--shard", help="Evaluate one stable slice of the tasks, i/n (merge the slices with merge).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json (plus the input warnings) instead of the table.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--strict", is_flag=True, help="Treat warnings (soft Agent Skills deviations, oversized inputs) as errors.")
@click.option("--yes", "assume_yes", is_flag=True, help="Run even when the estimated cost exceeds the budget left.")
@click.option("--wait", is_flag=True, help="If another process is writing to the run directory, wait for it instead of failing.")
@click.pass_obj
def eval_cmd(state: State, skill: str, suite: Path | None, split: str, repeats: int | None, out: Path | None,
             fresh: bool, threshold: float | None, model: str | None, base_url: str | None, cache_mode: str | None,
             concurrency: int | None, shard: str | None, as_json: bool, quiet: bool, strict: bool,
             assume_yes: bool, wait: bool) -> None:
    """Evaluate SKILL (a file, or a skill name from skillopt.yml) on a suite split."""
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.engine.evaluation import EvalRequest, run_eval, threshold_verdict
    from skillopt_ci.render.eval_report import score_table

    config = load_project_config(state, model, base_url)
    if concurrency:
        config = replace(config, concurrency=concurrency)
    skill_path, suite_path = resolve_skill(config, skill, suite)
    check_out(config, out)
    request = EvalRequest(skill=skill_path, suite=suite_path, split=split, repeats=repeats, out=out, fresh=fresh,
                          threshold=threshold, cache_mode=cache_mode, shard=parse_shard(shard), strict=strict,
                          assume_yes=assume_yes, wait=wait)
    outcome = run_eval(config, request, show_progress=not quiet)
    code, verdict = threshold_verdict(outcome.summary, threshold)
    if as_json:
        from skillopt_ci.engine.evaluation import prepare
        from skillopt_ci.inputs.preflight import plan_warnings

        warnings = [str(p) for p in plan_warnings(prepare(request), config.limits)]
        click.echo(json.dumps({**outcome.summary.to_dict(), "warnings": warnings}, indent=2))
    else:
        click.echo(score_table([outcome.summary]))
        click.echo(f"\nrun: {outcome.run_dir}")
    click.echo(("ok: " if code == EXIT_OK else "fail: ") + verdict, err=True)
    sys.exit(code)


def check_out(config: Any, out: Path | None) -> None:
    """Fail before any paid work when the run directory (--out, else runs_dir) cannot be written."""
    from skillopt_ci.inputs.writable import check_dir

    if out is not None:
        check_dir(out, "--out")
    else:
        check_dir(config.runs_dir, "runs_dir (skillopt.yml)")


def resolve_skill(config: Any, skill: str, suite: Path | None) -> tuple[Path, Path]:
    """SKILL is a path, or the name of a configured skill; --suite defaults to its suite."""
    entry = config.skill(skill)
    path = Path(skill)
    if entry is None:
        resolved = (path / "SKILL.md" if path.is_dir() else path).resolve()
        entry = next((e for e in config.skills if e.path.resolve() == resolved), None)
    if entry is not None and not path.exists():
        path = entry.path
    if not path.exists():
        known = ", ".join(e.name for e in config.skills) or "none configured"
        raise InputError(f"no skill file or configured skill named {skill!r}", hint=f"configured skills: {known}")
    if suite is None:
        if entry is None:
            raise InputError(f"{skill} is not in skillopt.yml, so --suite is needed")
        suite = entry.suite
    return path, suite


def _session(config: Any, cache_mode: str | None, quiet: bool, strict: bool = False, assume_yes: bool = False,
             wait: bool = False) -> Any:
    """The session of a gate or compare: base and head are evaluated, so the estimate counts two."""
    from skillopt_ci.engine.evaluation import EvalSession

    return EvalSession(config, cache_mode=cache_mode, show_progress=not quiet, strict=strict, assume_yes=assume_yes,
                       estimate_runs=2, wait=wait)


def _finish_gate(report: Any, out: Path, as_json: bool, as_markdown: bool = False) -> None:
    """Write report.md, print the table (or gate.json, or the markdown) and exit with the gate's code."""
    from skillopt_ci.engine.rundir import write_atomic
    from skillopt_ci.gate.report import render_gate, terminal_table

    markdown = render_gate(report, limit=1_000_000)
    write_atomic(out / "report.md", markdown)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    elif as_markdown:
        click.echo(markdown)
    else:
        click.echo(terminal_table(report))
        click.echo(f"\nreport: {display_path(out / 'report.md')}")
    code = 1 if report.failed and not report.overridden else 0
    reasons = [f"{s.change.name}: {s.reason}" for s in report.skills if s.failed or s.verdict == "inconclusive"]
    click.echo(f"{report.verdict}" + (": " + "; ".join(reasons) if reasons else ""), err=True)
    sys.exit(code)


@cli.command()
@click.argument("base_skill", type=click.Path(path_type=Path))
@click.argument("head_skill", type=click.Path(path_type=Path))
@click.option("--suite", type=click.Path(path_type=Path), required=True, help="Suite directory.")
@click.option("--split", help="Split (default: gate.split, val).")
@click.option("--repeats", type=click.IntRange(1, 100), help="Rollouts per task and side.")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: under runs_dir, named by the "
              "content of both skills and the suite; re-running resumes).")
@click.option("--fresh", is_flag=True, help="Discard an existing run in the output directory and start over.")
@click.option("--shard", help="Compare on one stable slice of the tasks, i/n.")
@click.option("--model", help="Target model as provider:model, overriding skillopt.yml.")
@click.option("--base-url", help="Base URL for --model.")
@click.option("--cache", "cache_mode", type=click.Choice(["read-write", "refresh", "off", "replay-only"]))
@click.option("--json", "as_json", is_flag=True, help="Print gate.json instead of the table.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--strict", is_flag=True, help="Treat warnings (soft Agent Skills deviations, oversized inputs) as errors.")
@click.option("--yes", "assume_yes", is_flag=True, help="Run even when the estimated cost exceeds the budget left.")
@click.option("--wait", is_flag=True, help="If another process is writing to the run directory, wait for it instead of failing.")
@click.pass_obj
def compare(state: State, base_skill: Path, head_skill: Path, suite: Path, split: str | None, repeats: int | None,
            out: Path | None, fresh: bool, shard: str | None, model: str | None, base_url: str | None,
            cache_mode: str | None, as_json: bool, quiet: bool, strict: bool, assume_yes: bool,
            wait: bool) -> None:
    """Paired comparison of two skill files on the same tasks; exit 1 when the head regresses."""
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.engine.runlock import RunLock
    from skillopt_ci.gate.run import run_compare
    from skillopt_ci.gate.run_names import compare_run_dir

    config = _with_gate(load_project_config(state, model, base_url), split, repeats)
    shard_spec = parse_shard(shard)
    check_out(config, out)
    out = out or compare_run_dir(config, base_skill, head_skill, suite, shard_spec)
    with RunLock(out, wait=wait), _session(config, cache_mode, quiet, strict, assume_yes, wait) as session:
        report = run_compare(config, session, base_skill, head_skill, suite, out, shard=shard_spec, fresh=fresh)
        _finish_gate(report, out, as_json)


def _with_gate(config: Any, split: str | None, repeats: int | None) -> Any:
    changes = {k: v for k, v in (("split", split), ("repeats", repeats)) if v is not None}
    return replace(config, gate=replace(config.gate, **changes)) if changes else config


@cli.command()
@click.option("--base", "base_ref", help="Base ref (default: origin/HEAD, origin/main or main).")
@click.option("--head", "head_ref", help="Head ref (default: the working tree, uncommitted edits included).")
@click.option("--skill", "skills", multiple=True, help="Only these configured skills (repeatable).")
@click.option("--split", help="Split (default: gate.split, val).")
@click.option("--repeats", type=click.IntRange(1, 100), help="Rollouts per task and side.")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: under runs_dir, named by the "
              "commits or working-tree content compared; re-running resumes).")
@click.option("--fresh", is_flag=True, help="Discard an existing run in the output directory and start over.")
@click.option("--shard", help="Evaluate one stable slice of the tasks, i/n (merge the slices with merge).")
@click.option("--cache", "cache_mode", type=click.Choice(["read-write", "refresh", "off", "replay-only"]))
@click.option("--json", "as_json", is_flag=True, help="Print gate.json instead of the table.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print report.md (e.g. >> $GITHUB_STEP_SUMMARY).")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--strict", is_flag=True, help="Treat warnings (soft Agent Skills deviations, oversized inputs) as errors.")
@click.option("--yes", "assume_yes", is_flag=True, help="Run even when the estimated cost exceeds the budget left.")
@click.option("--wait", is_flag=True, help="If another process is writing to the run directory, wait for it instead of failing.")
@click.pass_obj
def gate(state: State, base_ref: str | None, head_ref: str | None, skills: tuple[str, ...], split: str | None,
         repeats: int | None, out: Path | None, fresh: bool, shard: str | None, cache_mode: str | None,
         as_json: bool, as_markdown: bool, quiet: bool, strict: bool, assume_yes: bool,
         wait: bool) -> None:
    """Evaluate base and head of every changed skill on held-out tasks; exit 1 on a regression."""
    from skillopt_ci.core.shard import parse_shard
    from skillopt_ci.engine.runlock import RunLock
    from skillopt_ci.gate.git import Git
    from skillopt_ci.gate.run import default_base_ref, run_gate
    from skillopt_ci.gate.run_names import gate_run_dir

    config = _with_gate(load_project_config(state), split, repeats)
    git = Git(config.root)
    git.top_level()  # outside a repository, say so before any ref is looked up
    base_ref = base_ref or default_base_ref(git)
    shard_spec = parse_shard(shard)
    check_out(config, out)
    out = out or gate_run_dir(config, git, base_ref, head_ref, shard_spec, skills)
    with RunLock(out, wait=wait), _session(config, cache_mode, quiet, strict, assume_yes, wait) as session:
        report = run_gate(config, git, session, out, base_ref=base_ref, head_ref=head_ref, shard=shard_spec,
                          only=skills, fresh=fresh)
        _finish_gate(report, out, as_json, as_markdown)


@cli.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Where to write the merged run.")
@click.option("--json", "as_json", is_flag=True, help="Print the merged summary or gate.json.")
def merge(dirs: tuple[Path, ...], out: Path, as_json: bool) -> None:
    """Join the run directories of --shard jobs into the report a single run would give."""
    from skillopt_ci.engine.merge import kind_of, merge_eval_runs
    from skillopt_ci.engine.rundir import write_atomic
    from skillopt_ci.engine.runlock import RunLock
    from skillopt_ci.gate.merge import merge_gate_runs
    from skillopt_ci.inputs.writable import check_dir
    from skillopt_ci.render.eval_report import eval_report, score_table

    check_dir(out, "--out")
    kinds = {kind_of(d) for d in dirs}
    if len(kinds) > 1:
        raise InputError("cannot merge eval runs with gate runs", hint="pass the shard directories of one job")
    with RunLock(out):
        if kinds == {"gate"}:
            _finish_gate(merge_gate_runs(list(dirs), out), out, as_json)
        summary, results = merge_eval_runs(list(dirs), out)
        write_atomic(out / "report.md", eval_report(summary, results))
    click.echo(json.dumps(summary.to_dict(), indent=2) if as_json else score_table([summary]))
    if not summary.complete:
        # A partial merge must not pass for the whole split.
        advice = "merge every shard's directory" if summary.missing_tasks else "resume that shard, then merge again"
        click.echo(f"incomplete: {summary.stopped}; {advice}", err=True)
        sys.exit(EXIT_RUNTIME)


@cli.command()
@click.option("--skill", "skill", required=True, help="The configured skill to train.")
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: under runs_dir; re-running resumes).")
@click.option("--fresh", is_flag=True, help="Discard an existing run in the output directory and start over.")
@click.option("--epochs", type=click.IntRange(1, 100), help="Passes over the train split (default: train.epochs).")
@click.option("--batch-size", type=click.IntRange(1, 10_000), help="Train tasks per step (default: train.batch_size).")
@click.option("--budget-tokens", type=click.IntRange(0), help="Stop after this many tokens (all models).")
@click.option("--budget-dollars", type=click.FloatRange(0), help="Stop after this many dollars.")
@click.option("--budget-seconds", type=click.FloatRange(0), help="Stop after this much wall time.")
@click.option("--cache", "cache_mode", type=click.Choice(["read-write", "refresh", "off", "replay-only"]))
@click.option("--json", "as_json", is_flag=True, help="Print summary.json.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--strict", is_flag=True, help="Treat warnings (soft Agent Skills deviations, oversized inputs) as errors.")
@click.option("--yes", "assume_yes", is_flag=True, help="Run even when the estimated cost exceeds the budget left.")
@click.option("--wait", is_flag=True, help="If another process is writing to the run directory, wait for it instead of failing.")
@click.pass_obj
def train(state: State, skill: str, out: Path | None, fresh: bool, epochs: int | None, batch_size: int | None,
          budget_tokens: int | None, budget_dollars: float | None, budget_seconds: float | None,
          cache_mode: str | None, as_json: bool, quiet: bool, strict: bool, assume_yes: bool,
          wait: bool) -> None:
    """Train a skill: rollout, reflect, edit, keep only what beats it on validation."""
    from skillopt_ci.train.entry import TrainRequest, run_training
    from skillopt_ci.train.report import summary_table

    config = load_project_config(state)
    check_out(config, out)
    request = TrainRequest(skill=skill, out=out, fresh=fresh, epochs=epochs, batch_size=batch_size,
                           max_tokens=budget_tokens, max_dollars=budget_dollars, max_wall_seconds=budget_seconds,
                           cache_mode=cache_mode, wait=wait)
    outcome = run_training(config, request, log=(lambda line: None) if quiet else (lambda line: click.echo(line, err=True)),
                           session_options={"show_progress": False, "strict": strict, "assume_yes": assume_yes})
    if as_json:
        from skillopt_ci.core.skill import load_skill
        from skillopt_ci.inputs.preflight import skill_warnings

        shown = display_path(outcome.entry.path)
        warnings = [str(p) for p in skill_warnings(load_skill(outcome.entry.path, display=shown), shown, config.limits)]
        click.echo(json.dumps({**outcome.summary.to_dict(), "warnings": warnings}, indent=2))
    else:
        click.echo(summary_table(outcome.summary))
        click.echo(f"\nbest skill: {display_path(outcome.run_dir / 'best_skill.md')}")
    s = outcome.summary
    if not s.complete:
        click.echo(f"stopped: {s.stopped}; re-run the same command to resume", err=True)
    else:
        click.echo("improved" if s.improved else "no improvement", err=True)
    sys.exit(EXIT_OK)


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--html", "html_file", type=click.Path(path_type=Path), required=True,
              help="Where to write the self-contained HTML report.")
def report(run_dir: Path, html_file: Path) -> None:
    """Write one self-contained HTML report (no network requests) for an eval, gate or training run."""
    from skillopt_ci.inputs.writable import check_file
    from skillopt_ci.viewer.report import write_html_report

    check_file(html_file, "--html")
    size = write_html_report(run_dir, html_file)
    click.echo(f"wrote {display_path(html_file)} ({size / 1024:.0f} KiB)")


@cli.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), required=False)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (keep 127.0.0.1 unless you mean it).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one).")
@click.pass_obj
def view(state: State, directory: Path | None, host: str, port: int) -> None:
    """Browse the runs under DIRECTORY (default: runs_dir of skillopt.yml, else .skillopt/runs) in a browser;
    runs in progress update themselves. Ctrl-C stops."""
    import threading

    from skillopt_ci.inputs.config import load_config
    from skillopt_ci.viewer.server import ViewerServer

    if directory is None:
        path = config_path(state)
        directory = load_config(path).runs_dir if path else Path(".skillopt/runs")
    if not directory.is_dir():
        raise InputError("no such directory", where=str(directory), hint="run an eval, gate or train first, or pass DIRECTORY")
    try:
        server = ViewerServer(directory, host=host, port=port).start()
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}", hint="pass --port 0 for any free port") from None
    click.echo(f"skillopt-ci viewer on {server.url}/ for {display_path(directory)} (Ctrl-C to stop)", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        click.echo("stopping the viewer", err=True)
    finally:
        server.stop()


@cli.command()
def action() -> None:
    """Run as the GitHub Action (reads GITHUB_* and SKILLOPT_* variables; see action.yml)."""
    import os

    from skillopt_ci.github.action import run_action

    sys.exit(run_action(os.environ))


@cli.command()
@click.option("--out", type=click.Path(path_type=Path), help="Where to keep the run directories (default: a temporary directory).")
def demo(out: Path | None) -> None:
    """Offline demo: evaluate the bundled example on a simulated model (no key, no network)."""
    from skillopt_ci.demo import run_demo
    from skillopt_ci.inputs.writable import check_dir

    if out is not None:
        check_dir(out, "--out")
    run_demo(out, echo=click.echo)


def interrupted_message() -> str:
    """What a Ctrl-C kept, from the run directories this process was writing."""
    from skillopt_ci.engine.rundir import count_kept
    from skillopt_ci.engine.runlock import interrupted_runs

    runs = interrupted_runs()
    if not runs:
        return "interrupted: no run directory was written"
    kept = [(run, count_kept(run)) for run in runs]
    where = ", ".join(display_path(run) for run, _ in kept)
    total = sum(n for _, n in kept)
    if total == 0:
        return f"interrupted: no result had finished, nothing was kept ({where})"
    return (f"interrupted: {total} finished result{'s' if total != 1 else ''} kept in {where}; "
            "re-run the same command to resume")


def main(argv: list[str] | None = None) -> None:
    """Entry point: one line for expected errors, a traceback only for bugs. Everything printed
    passes through :class:`~skillopt_ci.core.redact.SafeStream`: no secret, no workflow command."""
    import os

    from skillopt_ci.core.redact import SECRETS, SafeStream
    from skillopt_ci.engine.runlock import set_command

    set_command(["skillopt-ci", *(sys.argv[1:] if argv is None else argv)])
    SECRETS.add_env(os.environ)
    raw_out, raw_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(raw_out), SafeStream(raw_err)
    try:
        _run(argv)
    finally:
        sys.stdout, sys.stderr = raw_out, raw_err


def _run(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="skillopt-ci", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_INPUT)
    except click.Abort as exc:
        # click turns Ctrl-C into Abort; say what the interrupted run kept.
        interrupted = isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)
        click.echo(interrupted_message() if interrupted else "aborted", err=True)
        sys.exit(EXIT_RUNTIME)
    except SkilloptError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo(interrupted_message(), err=True)
        sys.exit(EXIT_RUNTIME)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except OSError as exc:
        from skillopt_ci.inputs.writable import os_error_message

        known = os_error_message(exc)
        if known is None:
            traceback.print_exc()
            click.echo("error: unexpected failure (a bug in skillopt-ci; please report it with the traceback above)",
                       err=True)
            sys.exit(EXIT_RUNTIME)
        click.echo(f"error: {known[0]}", err=True)
        sys.exit(known[1])
    except Exception:
        traceback.print_exc()
        click.echo("error: unexpected failure (a bug in skillopt-ci; please report it with the traceback above)", err=True)
        sys.exit(EXIT_RUNTIME)
    sys.exit(EXIT_OK)
