"""OfficeQA: the importer (the CSV, the bulletins as assets), the ``officeqa`` scorer (the
official rules, :mod:`.rules`, or the reference exact match) and the demo fixture."""

from __future__ import annotations

from skillopt_ci.benchmarks.pack import Pack

NAME = "officeqa"
TITLE = "OfficeQA"
EXTRAS: tuple[str, ...] = ()
DATA_HELP = ("download databricks/officeqa from Hugging Face (gated): officeqa_full.csv and "
             "treasury_bulletins_parsed/transformed/*.txt; --from the download folder (or the CSV; "
             "OFFICEQA_DOCS_DIR may name the corpus folder)")

PACK = Pack(NAME, TITLE, DATA_HELP, "skillopt_ci.benchmarks.packs.officeqa.importer:read", EXTRAS,
            scorers={"officeqa": "skillopt_ci.benchmarks.packs.officeqa.scorer:OfficeQAScorer"},
            fixture="skillopt_ci.benchmarks.packs.officeqa.fixture")
