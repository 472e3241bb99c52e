"""Code from the suite directory: ``module:function`` names a function in a ``.py`` file there
(a python scorer, a function tool of the ``tools`` environment).

The file is imported by path under a unique module name, so two suites may each have a
``scorer.py``; ``sys.path`` is not touched, so the file cannot import its neighbours (it may
import installed packages). A file that is missing, does not import, or lacks the function is an
:class:`~skillopt_ci.core.errors.InputError` naming the file (and the line, when the import
raised there).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.text import clip


def module_path(suite_dir: Path, module: str) -> Path:
    """The file ``module`` names: ``pkg.mod`` → ``pkg/mod.py``; ``tools.py`` as it is."""
    relative = module if module.endswith(".py") else module.replace(".", "/") + ".py"
    return suite_dir / relative


def load_function(
    path: Path,
    name: str,
    *,
    what: str = "python scorer",
    accepts: Sequence[str] | None = ("output", "task"),
) -> Callable[..., Any]:
    """Import ``path`` under a unique module name and return its callable ``name``.

    ``what`` names the kind of code in messages; ``accepts`` are positional arguments the
    function must accept (``None``: no check)."""
    if not path.is_file():
        raise InputError(f"{what} file not found", where=str(path))
    module = import_file(path, what)
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(
            k for k, v in vars(module).items() if inspect.isfunction(v) and not k.startswith("_")
        )
        raise InputError(
            f'{what} has no function "{name}" (functions found: {", ".join(found) or "none"})',
            where=str(path),
        )
    if accepts is not None:
        try:
            inspect.signature(fn).bind(*accepts)
        except TypeError:
            raise InputError(
                f'{what} function "{name}" must accept ({", ".join(accepts)})', where=str(path)
            ) from None
        except ValueError:  # no signature available (some builtins): find out at call time
            pass
    return fn


def import_file(path: Path, what: str) -> Any:
    """Import the file ``path`` as a module of its own; ``InputError`` naming the file and line."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"skillopt_user_{digest}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot import {what} file", where=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise InputError(f"syntax error in {what}: {exc.msg}", where=f"{path}:{exc.lineno}") from exc
    except Exception as exc:
        sys.modules.pop(module_name, None)
        line = line_in(exc, path)
        where = f"{path}:{line}" if line else str(path)
        raise InputError(
            f"importing {what} raised {type(exc).__name__}: {clip(str(exc), 160)}", where=where
        ) from exc
    return module


def line_in(exc: BaseException, path: Path) -> int | None:
    """The line of the innermost traceback frame that lies in ``path``."""
    target = path.resolve()
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == target:
            line = frame.lineno
    return line
