"""How fast the chat benchmarks import: rows scanned per second through the parquet reader, and the
time of a whole import (read, write, check) of each fixture that covers its published manifest.

Run: python bench/bench_import_chat.py [--extra-rows 50000]

SearchQA's real training file has about 117,000 rows (~284 MB); the manifest uses 2,000 rows of
the whole dataset. The script writes the fixture's 2,000 rows plus ``--extra-rows`` rows the
manifest does not name (contexts of a few thousand characters, like the real ones) into parquet,
then times the import. DocVQA and LiveMathematicianBench are timed on their fixtures as they are.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from skillopt_ci.benchmarks.importer import import_benchmark
from skillopt_ci.benchmarks.manifest import load_manifest
from skillopt_ci.benchmarks.packs.docvqa import fixture as docvqa
from skillopt_ci.benchmarks.packs.livemathematicianbench import fixture as livemathematicianbench
from skillopt_ci.benchmarks.packs.searchqa import fixture as searchqa


def _searchqa_source(root: Path, extra: int) -> tuple[Path, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = searchqa.write_fixture(root, load_manifest("searchqa"))
    rows = [searchqa.row(f"{n:032x}", n, n % 3) for n in range(extra)]
    path = source / "data" / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return source, sum(p.stat().st_size for p in (source / "data").iterdir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra-rows", type=int, default=50_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source, size = _searchqa_source(root / "sq", args.extra_rows)
        started = time.perf_counter()
        report = import_benchmark("searchqa", source, root / "out-sq")
        took = time.perf_counter() - started
        rows = 2000 + args.extra_rows + 2
        print(f"searchqa: {rows:,} rows, {size / 1e6:.1f} MB parquet -> {sum(report.counts.values()):,} tasks "
              f"in {took:.2f} s ({rows / took:,.0f} rows/s, {size / 1e6 / took:.1f} MB/s)")
        for name, module in (("docvqa", docvqa), ("livemathematicianbench", livemathematicianbench)):
            data = module.write_fixture(root / name, load_manifest(name))
            started = time.perf_counter()
            report = import_benchmark(name, data, root / f"out-{name}")
            print(f"{name}: {sum(report.counts.values()):,} tasks in {time.perf_counter() - started:.2f} s "
                  f"({'; '.join(report.notes)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
