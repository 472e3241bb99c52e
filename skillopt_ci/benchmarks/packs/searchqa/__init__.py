"""SearchQA: the importer (parquet or JSON rows, the context cut as the method cuts
it), the ``searchqa`` scorer (SQuAD exact match and token F1) and the demo fixture."""

from skillopt_ci.benchmarks.pack import Pack

# no extras: pyarrow is needed for parquet files only, imported when one is read
PACK = Pack("searchqa", "SearchQA", read="skillopt_ci.benchmarks.packs.searchqa.importer:read",
            data_help=("download the Hugging Face dataset lucadiliello/searchqa (its parquet files, or rows as "
                       "JSON/JSONL) and pass the folder or a file with --from"),
            scorers={"searchqa": "skillopt_ci.benchmarks.packs.searchqa.scorer:SearchQAScorer"},
            fixture="skillopt_ci.benchmarks.packs.searchqa.fixture")
