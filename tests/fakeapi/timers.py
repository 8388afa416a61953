"""One background thread that runs the fake cluster's delayed work (pod termination,
controller recreation) in due order, and lets tests wait until none is left.

Callbacks run while holding the lock they were given, the same lock the request
handlers hold, so a callback sees and leaves the store consistent.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

logger = logging.getLogger(__name__)


class Timers:
    def __init__(self, lock: AbstractContextManager[Any]) -> None:
        self._lock = lock
        self._condition = threading.Condition()
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._running = 0
        self._errors: list[BaseException] = []
        self._stopping = False
        self._thread: threading.Thread | None = None

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        with self._condition:
            if self._stopping:
                return
            heapq.heappush(self._due, (time.monotonic() + max(delay, 0.0), next(self._order), callback))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fakeapi-controllers", daemon=True)
                self._thread.start()
            self._condition.notify_all()

    def pending(self) -> int:
        with self._condition:
            return len(self._due) + self._running

    def wait_idle(self, timeout: float) -> None:
        """Block until no delayed work is left; re-raise the first error a callback hit."""
        with self._condition:
            idle = self._condition.wait_for(lambda: not self._due and not self._running, timeout)
            errors, self._errors = self._errors, []
        if errors:
            raise RuntimeError("a fake API server controller failed") from errors[0]
        if not idle:
            raise TimeoutError(f"the fake API server still had delayed work after {timeout} s")

    def stop(self) -> None:
        with self._condition:
            self._stopping = True
            self._due.clear()
            self._condition.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._stopping:
                    if self._due:
                        wait = self._due[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self._condition.wait(wait)
                    else:
                        self._condition.wait()
                if self._stopping:
                    return
                _, _, callback = heapq.heappop(self._due)
                self._running += 1
            try:
                with self._lock:
                    callback()
            except Exception as error:  # a broken callback must not stop the others; wait_idle reports it
                logger.exception("fake API server controller failed")
                with self._condition:
                    self._errors.append(error)
            finally:
                with self._condition:
                    self._running -= 1
                    self._condition.notify_all()
