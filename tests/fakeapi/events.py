"""Events in their two API shapes, and the validation kube-apiserver runs when one is created.

kube-apiserver stores core/v1 and events.k8s.io/v1 Events in one place; the
fake stores the core/v1 shape and converts at the edge, with the field mapping
of `k8s.io/kubernetes/pkg/apis/events/v1` conversion. Validation follows
`ValidateEventCreate`: the lenient legacy rules for core/v1, the strict ones for
events.k8s.io/v1, so an event node-compactor could not create on a real cluster
is refused here too. Pure functions.
"""

from __future__ import annotations

import re

from tests.fakeapi.resources import JsonObject

# events.k8s.io/v1 field -> core/v1 field, for fields that only changed name.
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SAME = ("metadata", "eventTime", "series", "related", "action", "reason", "type", "reportingInstance")

# k8s.io/apimachinery/pkg/api/validate/content: IsQualifiedName (= IsLabelKey) and IsDNS1123Subdomain.
_NAME_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME = re.compile(f"^{_NAME_FORMAT}$")
_NAME_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    f"character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{_NAME_FORMAT}')"
)
_SUBDOMAIN_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN = re.compile("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    f"start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_SUBDOMAIN_FORMAT}')"
)


def qualified_name_problems(value: str) -> list[str]:
    """Go's `content.IsQualifiedName`: each problem with `value` as a qualified name, in its words."""
    parts = value.split("/")
    problems: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 characters")
            if not _SUBDOMAIN.match(prefix):
                problems.append(f"prefix part {_SUBDOMAIN_MESSAGE}")
    else:
        return [
            f"a valid label key {_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _NAME.match(name):
        problems.append(f"name part {_NAME_MESSAGE}")
    return problems


# Fields kube-apiserver always writes out for a stored Event, at their zero values when unset (Go structs
# and times are never left out; these strings have no omitempty in core/v1). Checked against 1.36.
_CORE_ZERO_VALUES: JsonObject = {
    "source": {},
    "firstTimestamp": None,
    "lastTimestamp": None,
    "eventTime": None,
    "reportingComponent": "",
    "reportingInstance": "",
}
_V1_OMITTED_WHEN_EMPTY = ("reportingController", "reportingInstance")


def with_zero_values(core: JsonObject) -> JsonObject:
    """A core/v1 Event as kube-apiserver stores and shows it: unset fields at their zero values."""
    for key, zero in _CORE_ZERO_VALUES.items():
        if key not in core:
            core[key] = {} if isinstance(zero, dict) else zero
    return core


def to_core(event: JsonObject) -> JsonObject:
    core: JsonObject = {key: event[key] for key in _SAME if key in event}
    for new, old in _RENAMED.items():
        if new in event:
            core[old] = event[new]
    core.setdefault("involvedObject", {})
    return with_zero_values(core)


def to_events_v1(core: JsonObject) -> JsonObject:
    event: JsonObject = {key: core[key] for key in _SAME if key in core}
    for new, old in _RENAMED.items():
        if old in core:
            event[new] = core[old]
    for key in _V1_OMITTED_WHEN_EMPTY:
        if event.get(key) == "":
            del event[key]
    return event


def validation_errors(core: JsonObject, *, strict: bool) -> list[tuple[str, str, str]]:
    """(field, cause reason, message) for each rule `ValidateEventCreate` would break."""
    errors: list[tuple[str, str, str]] = []
    namespace = core.get("metadata", {}).get("namespace", "")
    involved_namespace = (core.get("involvedObject") or {}).get("namespace", "")
    mismatch = (
        "involvedObject.namespace",
        "FieldValueInvalid",
        f'Invalid value: "{involved_namespace}": does not match event.namespace',
    )

    def required(field: str) -> None:
        errors.append((field, "FieldValueRequired", "Required value"))

    if not core.get("eventTime"):
        if involved_namespace and namespace != involved_namespace:
            errors.append(mismatch)
        if not involved_namespace and namespace not in ("", "default"):
            errors.append(mismatch)
    else:
        if not involved_namespace and namespace not in ("default", "kube-system"):
            errors.append(mismatch)
        # legacyValidateEvent names the field as the API the event came through spells it.
        controller_field = "reportingController" if strict else "reportingComponent"
        controller = core.get("reportingComponent") or ""
        if not controller:
            required(controller_field)
        for problem in qualified_name_problems(controller):
            errors.append((controller_field, "FieldValueInvalid", f'Invalid value: "{controller}": {problem}'))
        if not core.get("reportingInstance"):
            required("reportingInstance")
        if not core.get("action"):
            required("action")
        if not core.get("reason"):
            required("reason")
        if len(core.get("message") or "") > 1024:
            errors.append(("message", "FieldValueInvalid", 'Invalid value: "": can have at most 1024 characters'))
    if not strict:
        return errors
    if not core.get("eventTime"):
        required("eventTime")
    if core.get("type") not in ("Normal", "Warning"):
        errors.append(("type", "FieldValueInvalid", f'Invalid value: "": has invalid value: {core.get("type") or ""}'))
    for field in ("firstTimestamp", "lastTimestamp"):
        if core.get(field):
            errors.append((field, "FieldValueInvalid", 'Invalid value: "": needs to be unset'))
    if core.get("count"):
        errors.append(("count", "FieldValueInvalid", 'Invalid value: "": needs to be unset'))
    source = core.get("source") or {}
    if source.get("component") or source.get("host"):
        errors.append(("source", "FieldValueInvalid", 'Invalid value: "": needs to be unset'))
    return errors
