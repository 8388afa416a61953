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

_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def to_core(event: JsonObject) -> JsonObject:
    core: JsonObject = {key: event[key] for key in _SAME if key in event}
    for new, old in _RENAMED.items():
        if new in event:
            core[old] = event[new]
    core.setdefault("involvedObject", {})
    return core


def to_events_v1(core: JsonObject) -> JsonObject:
    event: JsonObject = {key: core[key] for key in _SAME if key in core}
    for new, old in _RENAMED.items():
        if old in core:
            event[new] = core[old]
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
        controller = core.get("reportingComponent") or ""
        if not controller:
            required("reportingController")
        elif not _QUALIFIED_NAME.match(controller):
            errors.append(
                ("reportingController", "FieldValueInvalid", f'Invalid value: "{controller}": must be a qualified name')
            )
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
