"""What kube-apiserver checks when it decodes a Lease: its times are metav1.MicroTime.

`MicroTime.UnmarshalJSON` (k8s.io/apimachinery/pkg/apis/meta/v1/micro_time.go)
accepts null or a string parsed with Go's `time.Parse(RFC3339Micro, s)`, where
RFC3339Micro is "2006-01-02T15:04:05.000000Z07:00": a fraction of exactly six
digits (Go's `stdFracSecond0` takes as many digits as the layout has zeros),
an upper-case `T`, and `Z` or a `+hh:mm` offset. Anything else fails the
decode, which the API server answers with 400 BadRequest. Pure functions.
"""

from __future__ import annotations

import re
from datetime import datetime

from tests.fakeapi.resources import JsonObject

RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
MICRO_TIME_FIELDS = ("acquireTime", "renewTime")

_MICRO_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{6}(Z|[+-](\d{2}):(\d{2}))$")


def micro_time_problem(value: object) -> str | None:
    """Why `value` is not a MicroTime kube-apiserver would decode, or None when it is one."""
    if value is None:
        return None
    if not isinstance(value, str):
        return f"json: cannot unmarshal {type(value).__name__} into Go value of type string"
    match = _MICRO_TIME.match(value)
    if match is None:
        return f'parsing time "{value}" as "{RFC3339_MICRO}": cannot parse'
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    try:
        # Go accepts year 0; Python's calendar starts at 1, which changes no month length that matters here.
        datetime(max(year, 1), month, day, hour, minute, second)
    except ValueError:
        return f'parsing time "{value}": value out of range'
    if match.group(8) is not None and (int(match.group(8)) > 24 or int(match.group(9)) > 60):
        return f'parsing time "{value}": time zone offset out of range'
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
