"""ALFWorld: the importer (the published path manifest over the user's ALFWorld data
folder) and the demo fixture. The world it runs in stays ``skillopt_ci.envs.alfworld``: that
name is written into every imported suite (and so into its run identity)."""

from skillopt_ci.benchmarks.pack import Pack

# no extras: importing reads paths only; running real games needs the alfworld extra
PACK = Pack("alfworld", "ALFWorld", read="skillopt_ci.benchmarks.packs.alfworld.importer:read",
            data_help=("--from the ALFWorld data folder (ALFWORLD_DATA, filled by alfworld-download from the "
                       "alfworld GitHub release; it holds json_2.1.1/)"),
            fixture="skillopt_ci.benchmarks.packs.alfworld.fixture")
