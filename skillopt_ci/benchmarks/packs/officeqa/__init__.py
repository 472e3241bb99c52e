"""OfficeQA: the importer (the CSV, the bulletins as assets), the ``officeqa`` scorer (the
official rules, :mod:`.rules`, or the reference exact match) and the demo fixture."""

from skillopt_ci.benchmarks.pack import Pack

PACK = Pack("officeqa", "OfficeQA", read="skillopt_ci.benchmarks.packs.officeqa.importer:read",
            data_help=("download databricks/officeqa from Hugging Face (gated): officeqa_full.csv and "
                       "treasury_bulletins_parsed/transformed/*.txt; --from the download folder (or the CSV; "
                       "OFFICEQA_DOCS_DIR may name the corpus folder)"),
            scorers={"officeqa": "skillopt_ci.benchmarks.packs.officeqa.scorer:OfficeQAScorer"},
            fixture="skillopt_ci.benchmarks.packs.officeqa.fixture")
