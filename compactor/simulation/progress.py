"""Progress on stderr while a simulation runs: a bar redrawn in place on a terminal; elsewhere (a log, a CI
job) a plain line at most every `PLAIN_EVERY_SECONDS` with the percent and the simulated time, and a
line when each strategy is done. It writes nothing else and never to stdout, which carries the results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TextIO

WIDTH = 30
PLAIN_EVERY_SECONDS = 5.0
WARM_UP = "warm-up"  # the runner's phase before the measured period; every other phase is a strategy


class Bar:
    def __init__(
        self,
        stream: TextIO,
        *,
        start: datetime | None = None,
        hours: float | None = None,
        warmup_hours: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.start = start
        self.hours = hours
        self.warmup_hours = warmup_hours
        self.clock = clock
        self.phase: str | None = None
        self.shown = -1
        # The first plain line comes after a full interval: a short run writes only its "done" lines.
        self.written_at = clock()

    def update(self, phase: str, fraction: float) -> None:
        if phase != self.phase:
            self._finish_line()
            self.phase = phase
            self.shown = -1
        fraction = max(0.0, min(1.0, fraction))
        percent = int(fraction * 100)
        if percent == self.shown:
            return
        self.shown = percent
        if self.live:
            filled = WIDTH * percent // 100
            self.stream.write(f"\r{phase:<15} [{'#' * filled}{'.' * (WIDTH - filled)}] {percent:3d}%")
            self.stream.flush()
        elif percent == 100:
            self._plain(f"{phase}: done")
        elif self.clock() - self.written_at >= PLAIN_EVERY_SECONDS:
            self._plain(f"{phase}: {percent}%{self._simulated(phase, fraction)}")

    def close(self) -> None:
        self._finish_line()

    def _simulated(self, phase: str, fraction: float) -> str:
        """How far the phase is in simulated time, e.g. ", 6.0 h of 24 h simulated (2026-11-21 18:00 UTC)"."""
        if self.start is None or self.hours is None:
            return ""
        warm_up = phase == WARM_UP
        span = self.warmup_hours if warm_up else self.hours
        begin = self.start - timedelta(hours=self.warmup_hours) if warm_up else self.start
        done = fraction * span
        moment = begin + timedelta(hours=done)
        return f", {done:.1f} h of {span:g} h simulated ({moment:%Y-%m-%d %H:%M} UTC)"

    def _plain(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self.written_at = self.clock()

    def _finish_line(self) -> None:
        if self.live and self.phase is not None:
            self.stream.write("\n")
            self.stream.flush()
            self.phase = None
