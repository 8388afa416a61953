"""Disruption windows: when a pool may start a drain, as cron schedules with a duration.

Karpenter's disruption budgets (`schedule` + `duration`) are the model: a
window opens each time the schedule fires and stays open for its duration.
Schedules are standard five-field cron (minute hour day-of-month month
day-of-week) or one of the macros Karpenter accepts, read in the
configuration's `timeZone`. Pure: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from cronsim import CronSim

from compactor.settings.cron import expression, zone


class Window(Protocol):
    @property
    def schedule(self) -> str: ...

    @property
    def duration_minutes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class WindowState:
    open: bool
    next_open: datetime | None  # when closed: the next time a window opens (None: never)


def state(windows: Iterable[Window], time_zone: str, now: datetime) -> WindowState:
    """Whether a window is open at `now`, and when the next one opens if none is."""
    local_now = now.astimezone(zone(time_zone)).replace(microsecond=0)
    next_open: datetime | None = None
    for window in windows:
        cron = expression(window.schedule)
        # The latest firing at or before now decides: an earlier one ends no later than it does.
        last = _first(CronSim(cron, local_now + timedelta(seconds=1), reverse=True))
        if last is not None and local_now < last + timedelta(minutes=window.duration_minutes):
            return WindowState(True, None)
        upcoming = _first(CronSim(cron, local_now))
        if upcoming is not None and (next_open is None or upcoming < next_open):
            next_open = upcoming
    return WindowState(False, next_open)


def _first(times: CronSim) -> datetime | None:
    try:
        return next(times)
    except StopIteration:
        return None
