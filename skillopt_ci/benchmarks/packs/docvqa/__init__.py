"""DocVQA: the importer (parquet or CSV rows with their page images), the ``docvqa``
scorer (ANLS) and the demo fixture."""

from __future__ import annotations

from skillopt_ci.benchmarks.pack import Pack

NAME = "docvqa"
TITLE = "DocVQA"
EXTRAS: tuple[str, ...] = ()  # pyarrow only for the parquet files, imported when one is read
DATA_HELP = ("download the Hugging Face dataset lmms-lab/DocVQA (config DocVQA: the validation parquet files) "
             "and pass its folder with --from, or a folder of per-split CSVs with their page images")

PACK = Pack(NAME, TITLE, DATA_HELP, "skillopt_ci.benchmarks.packs.docvqa.importer:read", EXTRAS,
            scorers={"docvqa": "skillopt_ci.benchmarks.packs.docvqa.scorer:DocVQAScorer"},
            fixture="skillopt_ci.benchmarks.packs.docvqa.fixture")
