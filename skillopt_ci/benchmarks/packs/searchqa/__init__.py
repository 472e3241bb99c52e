"""SearchQA: the importer (parquet or JSON rows, the context cut as the method cuts
it), the ``searchqa`` scorer (SQuAD exact match and token F1) and the demo fixture."""

from __future__ import annotations

from skillopt_ci.benchmarks.pack import Pack

NAME = "searchqa"
TITLE = "SearchQA"
EXTRAS: tuple[str, ...] = ()  # pyarrow only for parquet files, imported when one is read
DATA_HELP = ("download the Hugging Face dataset lucadiliello/searchqa (its parquet files, or rows as "
             "JSON/JSONL) and pass the folder or a file with --from")

PACK = Pack(NAME, TITLE, DATA_HELP, "skillopt_ci.benchmarks.packs.searchqa.importer:read", EXTRAS,
            scorers={"searchqa": "skillopt_ci.benchmarks.packs.searchqa.scorer:SearchQAScorer"},
            fixture="skillopt_ci.benchmarks.packs.searchqa.fixture")
