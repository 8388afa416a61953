"""What kube-apiserver checks when it decodes a Lease: its times are metav1.MicroTime.

`MicroTime.UnmarshalJSON` (k8s.io/apimachinery/pkg/apis/meta/v1/micro_time.go)
accepts null or a string parsed with Go's `time.Parse(RFC3339Micro, s)`, where
RFC3339Micro is "2006-01-02T15:04:05.000000Z07:00": a fraction of exactly six
digits (Go's `stdFracSecond0` takes as many digits as the layout has zeros),
an upper-case `T`, and `Z` or a `+hh:mm` offset. Anything else fails the
decode, which the API server answers with 400 BadRequest, in Go's words
(`go_parse_problem` follows Go's time.parse for this layout). Pure functions.
"""

from __future__ import annotations

from tests.fakeapi.resources import JsonObject

RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
MICRO_TIME_FIELDS = ("acquireTime", "renewTime")


def micro_time_problem(value: object) -> str | None:
    """Why `value` is not a MicroTime kube-apiserver would decode (Go's error text), or None when it is one."""
    if value is None:
        return None
    if not isinstance(value, str):
        return f"json: cannot unmarshal {type(value).__name__} into Go value of type string"
    return go_parse_problem(value)


def _quote(text: str) -> str:
    """Go's time.quote: double quotes, `"` and `\\` escaped, bytes outside printable ASCII as \\xNN."""
    out = ['"']
    for char in text:
        if char < " " or ord(char) >= 0x80:
            out.extend(f"\\x{byte:02x}" for byte in char.encode())
        else:
            out.append("\\" + char if char in '"\\' else char)
    out.append('"')
    return "".join(out)


def _number(text: str, fixed: bool) -> tuple[int, str] | None:
    """Go's time.getnum: one or two leading digits (two when `fixed`), and what follows."""
    if not text[:1].isdigit() or not text[:1].isascii():
        return None
    if not text[1:2].isdigit() or not text[1:2].isascii():
        return None if fixed else (int(text[0]), text[1:])
    return int(text[:2]), text[2:]


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def go_parse_problem(value: str) -> str | None:
    """Go's `time.Parse(RFC3339Micro, value)` error message, or None when it parses.

    Follows the steps of Go's time.parse for this one layout: each literal is skipped, each
    element read in turn; a failed element is `cannot parse "<rest>" as "<element>"`, a number
    out of range `<what> out of range`, and the day is checked against the month at the end.
    """

    def cannot(rest: str, element: str) -> str:
        return (
            f"parsing time {_quote(value)} as {_quote(RFC3339_MICRO)}: cannot parse {_quote(rest)} as {_quote(element)}"
        )

    def out_of_range(what: str) -> str:
        return f"parsing time {_quote(value)}: {what} out of range"

    rest = value
    year = month = day = 0
    for literal, element in (
        ("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"), ("", ".000000"), ("", "Z07:00"),
    ):  # fmt: skip
        if literal:
            if not rest.startswith(literal):
                return cannot(rest, literal)
            rest = rest[len(literal) :]
        hold = rest
        if element == "2006":
            digits = rest[:4]
            unsigned = digits[1:] if digits[:1] in ("+", "-") else digits  # Go's atoi takes a sign
            if len(digits) < 4 or not (unsigned.isascii() and unsigned.isdigit()):
                return cannot(hold, element)
            year, rest = int(digits), rest[4:]
        elif element in ("01", "02", "15", "04", "05"):
            read = _number(rest, fixed=element != "15")
            if read is None:
                return cannot(hold, element)
            number, rest = read
            if element == "01":
                month = number
                if not 1 <= month <= 12:
                    return out_of_range("month")
            elif element == "02":
                day = number
            elif number >= {"15": 24, "04": 60, "05": 60}[element]:
                return out_of_range({"15": "hour", "04": "minute", "05": "second"}[element])
        elif element == ".000000":
            fraction = rest[1:7]
            if len(rest) < 7 or rest[0] not in ".," or not (fraction.isascii() and fraction.isdigit()):
                return cannot(hold, element)
            rest = rest[7:]
        else:
            if rest.startswith("Z"):
                rest = rest[1:]
                continue
            sign, hours, minutes = rest[:1], rest[1:3], rest[4:6]
            if len(rest) < 6 or rest[3] != ":" or sign not in ("+", "-"):
                return cannot(hold, element)
            hour_read, minute_read = _number(hours, fixed=True), _number(minutes, fixed=True)
            if hour_read is None or minute_read is None:
                return cannot(hold, element)
            if hour_read[0] > 24:
                return out_of_range("time zone offset hour")
            if minute_read[0] > 60:
                return out_of_range("time zone offset minute")
            rest = rest[6:]
    if rest:
        return f"parsing time {_quote(value)}: extra text: {_quote(rest)}"
    if not 1 <= day <= _days_in(month, year):
        return out_of_range("day")
    return None


def decode_problem(lease: JsonObject) -> str | None:
    """The decode error kube-apiserver would answer for this Lease body, or None."""
    spec = lease.get("spec")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        return "json: cannot unmarshal spec into Go struct field Lease.spec of type v1.LeaseSpec"
    for field in MICRO_TIME_FIELDS:
        problem = micro_time_problem(spec.get(field))
        if problem is not None:
            return f'Lease in version "v1" cannot be handled as a Lease: {problem}'
    return None
