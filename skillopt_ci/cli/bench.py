"""``bench``: the method's six benchmarks (``bench import``; ``bench run`` is in bench_run.py)."""

from __future__ import annotations

from pathlib import Path

import click

from skillopt_ci.cli.bench_run import bench_run


@click.group()
def bench() -> None:
    """Import the method's benchmarks from their upstream data and evaluate skills on them."""


@bench.command("import")
@click.argument("name")
@click.option("--from", "source", required=True, type=click.Path(path_type=Path),
              help="The upstream data as its own download gives it (a file or a folder).")
@click.option("--manifest", "manifest_dir", type=click.Path(path_type=Path),
              help="A split-manifest folder (default: the published manifest shipped with skillopt-ci).")
@click.option("--out", type=click.Path(path_type=Path), help="The suite folder to write (default: eval_suites/NAME).")
@click.option("--force", is_flag=True, help="Replace a non-empty --out folder.")
def import_cmd(name: str, source: Path, manifest_dir: Path | None, out: Path | None, force: bool) -> None:
    """Import benchmark NAME from its upstream data into a suite, split by the manifest.

    NAME: searchqa, docvqa, alfworld, livemathematicianbench, spreadsheetbench or officeqa.
    """
    from skillopt_ci.benchmarks.importer import import_benchmark

    target = out if out is not None else Path("eval_suites") / name
    report = import_benchmark(name, source, target, manifest_dir=manifest_dir, force=force)
    sizes = " / ".join(f"{report.counts.get(s, 0)} {s}" for s in ("train", "val", "test"))
    click.echo(f"imported {report.title} into {target}: {sizes}")
    if report.assets:
        click.echo(f"{report.assets} file(s) referenced where they lie, hashed in {target / 'assets.json'}")
    for note in report.notes:
        click.echo(note)
    click.echo(f"next: add the suite to skillopt.yml, or run skillopt-ci bench run --skill SKILL.md --benchmarks {name}")


bench.add_command(bench_run)
