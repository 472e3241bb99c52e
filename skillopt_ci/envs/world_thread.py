"""A world's calls on a thread of its own, each with a wall-clock limit, abandoned when it passes it.

Contract: :class:`WorldThread` runs the calls of one world, one at a time and in order, on one
daemon thread (a world built on one thread is only ever called from it). ``call(limit, fn, ...)``
returns ``fn``'s result or raises what it raised; a call still running after ``limit`` seconds
raises :class:`WorldHung` and the thread is *abandoned*: the call is left to finish or hang on a
daemon thread, which keeps no slot of a shared pool and does not hold up the interpreter's exit,
and every later call on it raises :class:`WorldHung` at once. A cancelled call abandons it too.
Python cannot stop a thread; a world whose step must be killed belongs in a process of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any


class WorldHung(Exception):
    """A world's call passed its time limit (or an earlier one did): the world is abandoned."""


class WorldThread:
    def __init__(self, name: str = "world"):
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self.hung: str | None = None  # what passed its limit, once abandoned

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, kwargs, loop, future = job
            try:
                outcome: tuple[bool, Any] = (True, fn(*args, **kwargs))
            except BaseException as exc:  # delivered to the awaiting coroutine, whatever it is
                outcome = (False, exc)
            if loop is None:  # posted: nobody waits for it
                continue
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this answer any more
                loop.call_soon_threadsafe(_settle, future, outcome)

    async def call(self, limit: float, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on the world's thread, within ``limit`` seconds (see the module doc)."""
        if self.hung is not None:
            raise WorldHung(f"the world is abandoned: its {self.hung} did not return")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((fn, args, kwargs, loop, future))
        try:
            return await asyncio.wait_for(future, max(limit, 0.0))
        except asyncio.TimeoutError:
            self._abandon(what)
            raise WorldHung(f"the world's {what} did not return within {limit:g} s") from None
        except asyncio.CancelledError:
            if not future.done() or future.cancelled():
                self._abandon(what)
            raise

    def _abandon(self, what: str) -> None:
        self.hung = what
        self._jobs.put(None)  # the thread ends after the call it is in, if that ever returns

    def finish(self, fn: Callable[[], Any], limit: float) -> None:
        """Run ``fn`` on the world's thread after the queued calls and stop the thread, blocking
        (no event loop needed: a cancelled rollout cleans up synchronously) at most ``limit``
        seconds; errors are dropped. Nothing runs on an abandoned world."""
        if self.hung is not None:
            return
        finished = threading.Event()

        def last() -> None:
            try:
                fn()
            finally:
                finished.set()

        self._jobs.put((last, (), {}, None, None))
        self.stop()
        finished.wait(limit)

    def stop(self) -> None:
        """End the thread once its queued calls are done (no effect once abandoned)."""
        if self.hung is None:
            self._jobs.put(None)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
