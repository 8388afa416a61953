"""Field and label selectors as kube-apiserver parses and applies them.

Field selectors accept only the field labels each kind registers in kube-apiserver
(anything else is a 400 worded as kube-apiserver words it); label selectors follow the
set-based grammar of `k8s.io/apimachinery/pkg/labels`. Pure functions over JSON dicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.fakeapi import statuses
from tests.fakeapi.resources import JsonObject

FieldGetter = Callable[[JsonObject], str]


def _path(*keys: str) -> FieldGetter:
    def get(obj: JsonObject) -> str:
        value: Any = obj
        for key in keys:
            if not isinstance(value, dict):
                return ""
            value = value.get(key)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


_METADATA: dict[str, FieldGetter] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}

# The field labels each kind registers (`AddFieldLabelConversionFunc` in kube-apiserver).
FIELD_LABELS: dict[str, dict[str, FieldGetter]] = {
    "Pod": {
        **_METADATA,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.host": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda pod: "true" if pod.get("spec", {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "Node": {
        "metadata.name": _path("metadata", "name"),
        "spec.unschedulable": lambda node: "true" if node.get("spec", {}).get("unschedulable") else "false",
    },
    "Event": {
        **_METADATA,
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "PodDisruptionBudget": dict(_METADATA),
    "Lease": dict(_METADATA),
    "HorizontalPodAutoscaler": dict(_METADATA),
    # The registry's ReplicaSetToSelectableFields offers status.replicas, but apps/v1 registers no
    # field label conversion for it, so kube-apiserver refuses it (checked against 1.36 by tests/e2e).
    "ReplicaSet": dict(_METADATA),
}

# Kinds whose group registers field label conversion functions (core/v1 and events.k8s.io): an unknown
# field is "field label not supported". The others fall back to the default conversion, which words it
# differently (k8s.io/apimachinery/pkg/runtime.DefaultMetaV1FieldSelectorConversion).
LEGACY_FIELD_LABEL_KINDS = frozenset({"Pod", "Node", "Event"})

# events.k8s.io/v1 spells the same stored fields differently; the fake stores core/v1 Events.
EVENTS_V1_FIELD_ALIASES: dict[str, str] = {
    "regarding.kind": "involvedObject.kind",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name",
    "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    "metadata.name": "metadata.name",
    "metadata.namespace": "metadata.namespace",
    "reason": "reason",
    "type": "type",
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str
    getter: FieldGetter

    def matches(self, obj: JsonObject) -> bool:
        return (self.getter(obj) == self.value) == self.equal


def parse_field_selector(text: str, kind: str, *, events_v1: bool = False) -> list[FieldRequirement]:
    """Parse `a=b,c!=d`; a field the kind does not register is a 400 like kube-apiserver's."""
    requirements: list[FieldRequirement] = []
    if not text.strip():
        return requirements
    getters = FIELD_LABELS.get(kind, _METADATA)
    for term in text.split(","):
        term = term.strip()
        if "!=" in term:
            field, value = term.split("!=", 1)
            equal = False
        elif "==" in term:
            field, value = term.split("==", 1)
            equal = True
        elif "=" in term:
            field, value = term.split("=", 1)
            equal = True
        else:
            raise statuses.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field = field.strip()
        stored_field = EVENTS_V1_FIELD_ALIASES.get(field, "") if events_v1 else field
        getter = getters.get(stored_field)
        if getter is None:
            if kind in LEGACY_FIELD_LABEL_KINDS:
                raise statuses.bad_request(f"field label not supported: {field}")
            raise statuses.bad_request(
                f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"'
            )
        requirements.append(FieldRequirement(field, equal, value.strip(), getter))
    return requirements


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if not present or value is None:
            return False
        try:
            number, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return number > bound if self.operator == "gt" else number < bound


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_TERM = re.compile(rf"^(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_NOT_EXISTS_TERM = re.compile(rf"^!\s*(?P<key>{_KEY})$")
_COMPARE_TERM = re.compile(rf"^(?P<key>{_KEY})\s*(?P<op>==|=|!=|>|<)\s*(?P<value>[-A-Za-z0-9_.]*)$")
_EXISTS_TERM = re.compile(rf"^(?P<key>{_KEY})$")


def _split_outside_parentheses(text: str) -> list[str]:
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return terms


def parse_label_selector(text: str) -> list[LabelRequirement]:
    requirements: list[LabelRequirement] = []
    if not text.strip():
        return requirements
    for raw_term in _split_outside_parentheses(text):
        term = raw_term.strip()
        if match := _SET_TERM.match(term):
            values = tuple(v.strip() for v in match["values"].split(",") if v.strip())
            requirements.append(LabelRequirement(match["key"], match["op"], values))
        elif match := _NOT_EXISTS_TERM.match(term):
            requirements.append(LabelRequirement(match["key"], "!", ()))
        elif match := _COMPARE_TERM.match(term):
            operator = {"==": "=", "=": "=", "!=": "!=", ">": "gt", "<": "lt"}[match["op"]]
            requirements.append(LabelRequirement(match["key"], operator, (match["value"],)))
        elif match := _EXISTS_TERM.match(term):
            requirements.append(LabelRequirement(match["key"], "exists", ()))
        else:
            raise statuses.bad_request(f"unable to parse requirement: found '{term}', expected: identifier")
    return requirements


def labels_of(obj: JsonObject) -> Mapping[str, str]:
    labels = obj.get("metadata", {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def label_selector_object_matches(selector: JsonObject | None, labels: Mapping[str, str]) -> bool:
    """A `metav1.LabelSelector`; an empty one matches nothing, as the eviction subresource treats PDBs."""
    if not selector:
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return False
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expression in expressions:
        operator = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(
            expression.get("operator", ""), ""
        )
        if not operator:
            return False
        requirement = LabelRequirement(expression.get("key", ""), operator, tuple(expression.get("values") or ()))
        if not requirement.matches(labels):
            return False
    return True
