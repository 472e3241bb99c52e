"""What SpreadsheetBench costs outside the model: the import, one run of a program, one scoring.

Run: python bench/bench_spreadsheetbench.py [--n 10]

Prints:
- the wall time of writing the fixture for every published id (400 tasks) and of importing it
  with the published manifest (hashing the workbooks, one preview per distinct workbook);
- the median wall time of N runs of a small openpyxl program through the codegen environment's
  sandboxed runner (interpreter start, openpyxl import, load, save) against the same program in
  a bare ``python -c``;
- the median wall time of N scorings of one two-case task (two workbooks opened per case).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from skillopt_ci.benchmarks import spreadsheetbench
from skillopt_ci.benchmarks.manifest import load_manifest
from skillopt_ci.benchmarks.packs.spreadsheetbench import fixture
from skillopt_ci.benchmarks.packs.spreadsheetbench.codegen import (
    Case,
    CodegenEnvironment,
    CodegenOptions,
)
from skillopt_ci.core.task import Task
from skillopt_ci.sandbox import Workspace
from skillopt_ci.scorers import build_scorer


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        manifest = load_manifest("spreadsheetbench")
        source: list[Path] = []
        write = timed(lambda: source.append(fixture.write_fixture(root / "data")))
        drafts = []
        read = timed(lambda: drafts.append(spreadsheetbench.read(source[0], manifest)))
        print(f"fixture of 400 tasks: written in {write:.2f} s, imported (read) in {read:.2f} s")
        books = fixture.workbooks()["sum"]
        suite = root / "suite"
        suite.mkdir()
        for i, (init, golden) in enumerate(books, 1):
            (suite / f"in{i}.xlsx").write_bytes(init)
            (suite / f"g{i}.xlsx").write_bytes(golden)
        workspace = Workspace.create({f"cases/{i}/input.xlsx": suite / f"in{i}.xlsx" for i in (1, 2)})
        env = CodegenEnvironment(CodegenOptions(), suite)
        code = fixture.PROGRAMS["sum"]
        case = Case("cases/1/input.xlsx", "cases/1/output.xlsx")
        runs = [timed(lambda: asyncio.run(env.execute(workspace, code, case))) for _ in range(n)]
        bare_code = f"INPUT_PATH, OUTPUT_PATH = {str(suite / 'in1.xlsx')!r}, {str(root / 'bare.xlsx')!r}\n{code}"
        bare = [timed(lambda: subprocess.run([sys.executable, "-c", bare_code], check=True)) for _ in range(n)]
        print(f"one program run: sandboxed {median(runs) * 1000:.0f} ms, bare python -c {median(bare) * 1000:.0f} ms "
              f"(median of {n})")
        asyncio.run(env.execute(workspace, code, Case("cases/2/input.xlsx", "cases/2/output.xlsx")))
        task = Task("t", "", expected={"answer_position": "B1", "golden": ["g1.xlsx", "g2.xlsx"]},
                    fields={"cases": [{"input": f"cases/{i}/input.xlsx", "output": f"cases/{i}/output.xlsx"}
                                      for i in (1, 2)]})
        scorer = build_scorer({"type": "spreadsheet"}, suite)
        scores = [timed(lambda: scorer.score_workspace(workspace.path, task)) for _ in range(n)]
        assert scorer.score_workspace(workspace.path, task).passed
        print(f"scoring a two-case task: {median(scores) * 1000:.0f} ms (median of {n})")
        workspace.cleanup()


if __name__ == "__main__":
    main()
