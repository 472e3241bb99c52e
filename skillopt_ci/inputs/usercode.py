"""Code from the suite directory: ``module:function`` names a function in a ``.py`` file there
(a python scorer, a function tool of the ``tools`` environment, an ``interactive`` world).

Contract:
- A module path resolves **inside its suite folder** (:func:`module_path`): no ``..``, no absolute
  path, no empty dotted part (a leading ``.`` would make it absolute), no symlink at any level
  that leads out of the folder. A violation is an :class:`InputError` naming the suite file and
  the key that holds the path.
- A file is loaded **from its source text** (:func:`import_file`): read, ``compile()``d with its
  path as the filename (tracebacks and ``file:line`` errors name it) and executed in a fresh
  module object under a unique name, so two suites may each have a ``scorer.py``. No bytecode
  is read or written: a ``__pycache__`` beside the file is never used. ``sys.path`` is not
  touched, so the file cannot import its neighbours (it may import installed packages).
- User code never ends the run: ``SystemExit`` and a ``KeyboardInterrupt`` it raised itself
  (:func:`user_code`) come out as :class:`UserExit`, an ordinary ``Exception``; a real Ctrl-C
  still interrupts. A file that is missing, does not import, or lacks the function is an
  :class:`InputError` naming the file (and the line, when the import raised there).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import signal
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.text import clip


class UserExit(Exception):
    """User code raised ``SystemExit`` or ``KeyboardInterrupt``; ``original`` is that exception
    (its traceback holds the user's line)."""

    def __init__(self, original: BaseException):
        self.original = original
        super().__init__(describe(original))


def describe(exc: BaseException) -> str:
    """``Type: message`` of what user code raised (the original of a :class:`UserExit`)."""
    exc = exc.original if isinstance(exc, UserExit) else exc
    if isinstance(exc, SystemExit):
        return f"SystemExit (sys.exit({exc.code!r}))"
    return f"{type(exc).__name__}: {clip(str(exc), 160)}"


class _SigintSeen:
    """While user code runs on the main thread, notes whether a real SIGINT arrived, so a
    ``KeyboardInterrupt`` the code raised itself can be told from the user's Ctrl-C."""

    def __init__(self) -> None:
        self.fired = False
        self.previous: Any = None
        self.installed = False
        if threading.current_thread() is not threading.main_thread():
            return  # signals are delivered to the main thread only: any interrupt here is raised
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):
            return  # SIG_IGN or SIG_DFL: no KeyboardInterrupt comes from a real signal
        self.previous = previous
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, self._handler)
            self.installed = True

    def _handler(self, signum: int, frame: Any) -> None:
        self.fired = True
        self.previous(signum, frame)

    def restore(self) -> None:
        if self.installed:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, self.previous)


@contextlib.contextmanager
def user_code() -> Iterator[None]:
    """Run a block of user code: its ``SystemExit`` (and a ``KeyboardInterrupt`` it raised, not
    a real Ctrl-C) is re-raised as :class:`UserExit`."""
    seen = _SigintSeen()
    try:
        yield
    except (SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and seen.fired:
            raise
        raise UserExit(exc).with_traceback(exc.__traceback__) from None
    finally:
        seen.restore()


def module_path(suite_dir: Path, module: str, *, where: str | None = None, key: str = "function") -> Path:
    """The file ``module`` names inside ``suite_dir``: ``pkg.mod`` → ``pkg/mod.py``, ``tools.py``
    and ``sub/tools.py`` as they are. ``InputError`` at ``where`` (the suite file) naming ``key``
    when the path would leave the folder."""
    problem = module_problem(suite_dir, module)
    if problem:
        raise InputError(f"{key}: module {module!r} {problem}", where=where or str(Path(suite_dir) / "suite.yaml"),
                         hint="name a .py file inside the suite folder, e.g. scorer:score or tools/lookup.py:find")
    return Path(suite_dir) / _relative(module)


def _relative(module: str) -> str:
    return module if module.endswith(".py") else module.replace(".", "/") + ".py"


def module_problem(suite_dir: Path, module: str) -> str | None:
    """Why ``module`` does not name a file confined to ``suite_dir``, or ``None``. Pure path
    checks and ``lstat``/``realpath`` of each level; the file need not exist."""
    if not module or module.strip() != module:
        return "is empty or has surrounding spaces"
    if "\\" in module or "\0" in module:
        return "may not contain a backslash or NUL"
    if not module.endswith(".py") and any(not part for part in module.split(".")):
        return "has an empty dotted part (a leading, trailing or doubled dot)"
    relative = PurePosixPath(_relative(module))
    if relative.is_absolute() or module.startswith(("/", "~")):
        return "is an absolute path"
    if any(part in ("..", ".") for part in relative.parts) or str(relative) != _relative(module).rstrip("/"):
        return "may not use '.' or '..' path parts"
    root = Path(suite_dir).resolve()
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink() and not _inside(current.resolve(), root):
            return f"goes through the symlink {part!r}, which leads out of the suite folder"
    if not _inside(current.resolve(), root):
        return "resolves outside the suite folder"
    return None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def defined_inside(fn: Any, suite_dir: Path) -> bool:
    """Whether ``fn`` is a Python function whose code comes from a file inside ``suite_dir``
    (not a builtin, not a function imported from another module)."""
    code = getattr(fn, "__code__", None)
    if not inspect.isfunction(fn) or code is None or not code.co_filename:
        return False
    root = Path(suite_dir).resolve()
    return _inside(Path(code.co_filename).resolve(), root) and Path(code.co_filename).resolve() != root


def load_function(path: Path, name: str, *, what: str = "python scorer") -> Callable[..., Any]:
    """Import ``path`` from source under a unique module name and return its callable ``name``.

    ``what`` names the kind of code in messages."""
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
    return fn


def read_source(path: Path, what: str) -> bytes:
    """The bytes of the ``.py`` file ``path``; ``InputError`` when it is not a readable file."""
    if not path.is_file():
        raise InputError(f"{what} file not found", where=str(path))
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what} file: {exc.strerror or exc}", where=str(path)) from None


def import_file(path: Path, what: str, source: bytes | str | None = None) -> types.ModuleType:
    """Execute the source of ``path`` (or ``source``, its bytes or decoded text already read) as
    a module of its own; ``InputError`` naming the file and line for any failure, ``SystemExit`` included."""
    text = read_source(path, what) if source is None else source
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"skillopt_user_{digest}_{path.stem}"
    try:
        code = compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise InputError(f"syntax error in {what}: {exc.msg}", where=f"{path}:{exc.lineno}") from exc
    except ValueError as exc:  # NUL bytes
        raise InputError(f"cannot compile {what}: {exc}", where=str(path)) from exc
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    try:
        with user_code():
            exec(code, module.__dict__)  # noqa: S102 - the suite's own code, confined and from source
    except Exception as exc:
        sys.modules.pop(module_name, None)
        line = line_in(exc, path)
        where = f"{path}:{line}" if line else str(path)
        raise InputError(f"importing {what} raised {describe(exc)}", where=where) from exc
    return module


def line_in(exc: BaseException, path: Path) -> int | None:
    """The line of the innermost traceback frame that lies in ``path``."""
    target = path.resolve()
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == target:
            line = frame.lineno
    return line
