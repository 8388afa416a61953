"""Cron schedules as the configuration writes them: five fields or one of Karpenter's macros, in a time zone.

Both the configuration (which checks a schedule when it loads) and the
planner's disruption windows (which evaluate one) read schedules here, so the
settings never depend on the planner. Pure: parsing only, no clock.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

# The macros Karpenter's budgets accept (robfig/cron's descriptors), as five fields.
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def expression(schedule: str) -> str:
    text = schedule.strip()
    return MACROS.get(text.lower(), text)


def schedule_problem(schedule: str) -> str | None:
    """Why a schedule is not a cron expression we can read, or None."""
    try:
        CronSim(expression(schedule), datetime(2000, 1, 1))
    except CronSimError as error:
        return f"schedule {schedule!r} is not a cron expression: {error}"
    return None


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f"{name!r} is not an IANA time zone name (e.g. Europe/Amsterdam)") from error
