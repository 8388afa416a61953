"""Progress on stderr while a simulation runs: a line redrawn in place on a terminal; elsewhere (a log, a CI
job) a plain line at most every `PLAIN_EVERY_SECONDS` with the percent, the simulated time and how long is
left, and a line when each strategy is done. It writes nothing else and never to stdout, which carries the
results.

Strategies may run at once (`simulate --jobs`, in worker processes whose progress the runner relays): the
bar keeps each phase's own fraction and start, so each gets its own estimate of the time left (its elapsed
time over its fraction), and with the run's strategies given, the whole run gets one too: the strategies'
mean fraction, at the pace they went so far. Estimates assume the pace holds; they say "about".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
        strategies: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.start = start
        self.hours = hours
        self.warmup_hours = warmup_hours
        self.strategies = tuple(strategies)  # the run's strategies, for the estimate of the whole run
        # The bars line up under the longest name (node-compactor+priorities is 25 characters).
        self.name_width = max([15, *(len(name) for name in self.strategies)])
        self.clock = clock
        self.fractions: dict[str, float] = {}
        self.started: dict[str, float] = {}  # when each phase was first heard of
        self.shown: dict[str, int] = {}  # the percent last shown, by phase
        self.drawn = 0  # the width of the line last drawn in place (live), 0 when none is open
        # The first plain line comes after a full interval: a short run writes only its "done" lines.
        self.written_at = clock()

    def update(self, phase: str, fraction: float) -> None:
        if phase != WARM_UP and self.shown.get(WARM_UP, 100) < 100:
            self.update(WARM_UP, 1.0)  # the runner reports the warm-up up to its last step: a strategy ends it
        now = self.clock()
        self.started.setdefault(phase, now)
        fraction = max(0.0, min(1.0, fraction))
        self.fractions[phase] = fraction
        percent = int(fraction * 100)
        if percent == self.shown.get(phase):
            return
        self.shown[phase] = percent
        if self.live:
            if percent == 100:
                self._draw(
                    f"{phase:<{self.name_width}} [{'#' * WIDTH}] 100%, {duration(now - self.started[phase])}", end="\n"
                )
            self._redraw(now)
        elif percent == 100:
            self._plain(f"{phase}: done")
        elif now - self.written_at >= PLAIN_EVERY_SECONDS:
            where = self._simulated(phase, fraction)
            self._plain(f"{phase}: {percent}%{where}{self._left(phase, now)}{self._all(now)}")

    def close(self) -> None:
        if self.live and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = 0

    def _redraw(self, now: float) -> None:
        """The phases under way on one line: one as a bar, several side by side, then the whole run's estimate."""
        running = [phase for phase, shown in self.shown.items() if shown < 100]
        if not running:
            return
        if len(running) == 1:
            phase = running[0]
            percent = self.shown[phase]
            filled = WIDTH * percent // 100
            bar = f"[{'#' * filled}{'.' * (WIDTH - filled)}]"
            line = f"{phase:<{self.name_width}} {bar} {percent:3d}%{self._left(phase, now)}"
        else:
            line = " | ".join(f"{phase} {self.shown[phase]}%{self._left(phase, now)}" for phase in running)
        self._draw(line + self._all(now))

    def _draw(self, line: str, end: str = "") -> None:
        self.stream.write("\r" + line.ljust(self.drawn) + end)
        self.stream.flush()
        self.drawn = 0 if end else len(line)

    def _left(self, phase: str, now: float) -> str:
        """How long the phase has left at its pace so far, e.g. ", about 3 min 20 s left"."""
        return _estimate(now - self.started[phase], self.fractions[phase])

    def _all(self, now: float) -> str:
        """The whole run's fraction and time left, once a strategy has started: e.g. "; all 7 strategies: 40%,
        about 12 min left"."""
        begun = [self.started[name] for name in self.strategies if name in self.started]
        if not begun:
            return ""
        fraction = sum(self.fractions.get(name, 0.0) for name in self.strategies) / len(self.strategies)
        count = len(self.strategies)
        return f"; all {count} strategies: {int(fraction * 100)}%{_estimate(now - min(begun), fraction)}"

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


def _estimate(elapsed: float, fraction: float) -> str:
    if fraction <= 0.0 or fraction >= 1.0 or elapsed <= 0.0:
        return ""
    left = elapsed * (1 - fraction) / fraction
    if left < 1.0:
        return ", under a second left"
    return f", about {duration(left)} left"


def duration(seconds: float) -> str:
    """A duration for people: "45 s", "3 min 20 s", "1 h 05 min"."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
