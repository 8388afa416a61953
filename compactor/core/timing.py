"""Reading RFC 3339 times and saying durations the way people read them.

Every time node-compactor reads (annotations, `--now`, snapshot fields,
Lease times) goes through `parse_rfc3339`, so an unreadable or out-of-range
value is one kind of failure, `ValueError`, decided here and nowhere else.
Must never raise anything but ValueError for text it is given.
"""

from __future__ import annotations

from datetime import UTC, datetime


class NoTimeZoneError(ValueError):
    """A time without a zone: it could mean anything."""


class OutOfRangeError(ValueError):
    """A well-formed time that Python's datetime cannot hold once moved to UTC (before year 1, after 9999)."""


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 time as aware UTC.

    ValueError when unreadable, NoTimeZoneError when it has no zone,
    OutOfRangeError when it leaves the years 1-9999 in UTC (say
    `9999-12-31T23:59:59-23:59`), which would otherwise surface later as an
    OverflowError in whatever arithmetic first touched it.
    """
    parsed = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if parsed.tzinfo is None:
        raise NoTimeZoneError(f"{text!r} has no time zone")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise OutOfRangeError(f"{text!r} is outside the years 1 to 9999 once moved to UTC") from None


def parse_stamp(text: str | None) -> datetime | None:
    """An RFC 3339 annotation value as aware UTC, or None when absent or unreadable."""
    if not text:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:
        return None


def format_stamp(moment: datetime) -> str:
    """The form written to annotations: second precision, UTC, `Z`."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def seconds_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds()


def human(seconds: float) -> str:
    """90 -> "1m30s", 7200 -> "2h0m", -5 -> "0s"."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
