"""Loading the world class an ``interactive`` suite names.

``"module:Class"`` is looked up first as a file of the suite directory (``module.py``, dots as
folders), imported by path under a module name unique to that file so two suites may each have
a ``world.py``; ``sys.path`` is not touched. The path stays inside the suite folder (no ``..``,
no absolute path, no symlink out: an ``InputError``) and the file is loaded from its source.
When no such file exists, ``module`` is imported as an installed module (``my_pkg.worlds:MazeWorld``, ``alfworld_adapter:World``).
Every failure is an ``InputError`` naming ``where`` (the suite file) and the option.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.text import clip
from skillopt_ci.inputs.usercode import import_file, module_path

REQUIRED_METHODS = ("reset", "step")


def load_world_class(spec: str, suite_dir: Path, where: str, option: str = "world") -> type:
    """The class ``spec`` names, checked to have ``reset`` and ``step``."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InputError(f'option "{option}" must be "module:Class", got {spec!r}', where=where)
    path = module_path(suite_dir, module_name, where=where, key=f"environment.{option}")
    module = _import_file(path, where, option) if path.is_file() else _import_module(module_name, where, option)
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        found = sorted(k for k, v in vars(module).items() if isinstance(v, type) and not k.startswith("_"))
        raise InputError(f'option "{option}": {module_name} has no class {attr!r} '
                         f"(classes found: {', '.join(found) or 'none'})", where=where)
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise InputError(f'option "{option}": class {spec} has no {" or ".join(missing)} method '
                         "(a world needs reset(task) -> observation and step(action) -> "
                         "(observation, reward, done))", where=where)
    return cls


def _import_file(path: Path, where: str, option: str) -> Any:
    """The suite's own file, imported like every piece of suite code (:mod:`inputs.usercode`);
    its error names the file and line, and the option it came from."""
    try:
        return import_file(path, path.name)
    except InputError as exc:
        raise InputError(f'option "{option}": {exc.message}', where=exc.where or where) from None


def _import_module(name: str, where: str, option: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        raise InputError(f'option "{option}": no module {missing!r} (neither {name.replace(".", "/")}.py '
                         "in the suite directory nor an installed module)", where=where,
                         hint="put the file next to suite.yaml or install the package") from None
    except Exception as exc:
        raise InputError(f'option "{option}": importing {name} raised {type(exc).__name__}: '
                         f"{clip(str(exc), 160)}", where=where) from None
