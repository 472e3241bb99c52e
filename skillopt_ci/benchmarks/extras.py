"""The optional readers an importer needs (pyarrow, openpyxl, Pillow, pandas, alfworld): imported
only when used, and one clear line naming the extra to install when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from skillopt_ci.core.errors import InputError

EXTRA_OF = {"alfworld": "alfworld", "textworld": "alfworld"}  # everything else: "benchmarks"
PACKAGE_OF = {"PIL": "Pillow", "yaml": "pyyaml"}


def require(module: str, benchmark: str) -> ModuleType:
    """Import ``module`` for ``benchmark``, or raise an :class:`InputError` (exit 2) that says
    which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        extra = EXTRA_OF.get(top, "benchmarks")
        package = PACKAGE_OF.get(top, top)
        raise InputError(f"the {benchmark} benchmark needs {package}, which is not installed",
                         hint=f'pip install "skillopt-ci[{extra}]"') from None
