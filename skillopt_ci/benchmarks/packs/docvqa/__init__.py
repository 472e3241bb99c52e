"""DocVQA: the importer (parquet or CSV rows with their page images), the ``docvqa``
scorer (ANLS) and the demo fixture."""

from skillopt_ci.benchmarks.pack import Pack

# no extras: pyarrow is needed for the parquet files only, imported when one is read
PACK = Pack("docvqa", "DocVQA", read="skillopt_ci.benchmarks.packs.docvqa.importer:read",
            data_help=("download the Hugging Face dataset lmms-lab/DocVQA (config DocVQA: the validation parquet files) "
                       "and pass its folder with --from, or a folder of per-split CSVs with their page images"),
            scorers={"docvqa": "skillopt_ci.benchmarks.packs.docvqa.scorer:DocVQAScorer"},
            fixture="skillopt_ci.benchmarks.packs.docvqa.fixture")
