"""LiveMathematicianBench: the importer (the monthly JSON files, the options
shuffled per item), the ``livemath`` scorer and the demo fixture."""

from __future__ import annotations

from skillopt_ci.benchmarks.pack import Pack

NAME = "livemathematicianbench"
TITLE = "LiveMathematicianBench"
EXTRAS: tuple[str, ...] = ()
DATA_HELP = ("download the monthly qa_YYYYMM_final.json files of LiveMathematicianBench (the Hugging Face "
             "dataset or the project's GitHub data/ folder) and pass their folder with --from")

PACK = Pack(NAME, TITLE, DATA_HELP, "skillopt_ci.benchmarks.packs.livemathematicianbench.importer:read", EXTRAS,
            scorers={"livemath": "skillopt_ci.benchmarks.packs.livemathematicianbench.scorer:LiveMathScorer"},
            fixture="skillopt_ci.benchmarks.packs.livemathematicianbench.fixture")
