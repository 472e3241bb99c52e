"""LiveMathematicianBench: the importer (the monthly JSON files, the options
shuffled per item), the ``livemath`` scorer and the demo fixture."""

from skillopt_ci.benchmarks.pack import Pack

PACK = Pack("livemathematicianbench", "LiveMathematicianBench", read="skillopt_ci.benchmarks.packs.livemathematicianbench.importer:read",
            data_help=("download the monthly qa_YYYYMM_final.json files of LiveMathematicianBench (the Hugging Face "
                       "dataset or the project's GitHub data/ folder) and pass their folder with --from"),
            scorers={"livemath": "skillopt_ci.benchmarks.packs.livemathematicianbench.scorer:LiveMathScorer"},
            fixture="skillopt_ci.benchmarks.packs.livemathematicianbench.fixture")
