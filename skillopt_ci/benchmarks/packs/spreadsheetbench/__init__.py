"""SpreadsheetBench: the importer (the tarball or its folder), the ``codegen``
environment (Python run on the workbook, repaired from the error), the ``spreadsheet`` scorer
(cell by cell, :mod:`.compare`) and the demo fixture."""

from skillopt_ci.benchmarks.pack import Pack

PACK = Pack("spreadsheetbench", "SpreadsheetBench", read="skillopt_ci.benchmarks.packs.spreadsheetbench.importer:read",
            data_help=("--from the folder holding dataset.json and spreadsheet/ (spreadsheetbench_verified_400.tar.gz "
                       "from huggingface.co/datasets/KAKA22/SpreadsheetBench, extracted), or the .tar.gz itself"),
            extras=("openpyxl",),
            scorers={"spreadsheet": "skillopt_ci.benchmarks.packs.spreadsheetbench.scorer:SpreadsheetScorer"},
            environments={"codegen": "skillopt_ci.benchmarks.packs.spreadsheetbench.codegen:CodegenEnvironment"},
            fixture="skillopt_ci.benchmarks.packs.spreadsheetbench.fixture")
