"""Where the default scheduler would bind a pod, for the fake's controller simulation.

Covers the filters that decide whether node-compactor's drains succeed: node
readiness and cordon (as the taints the node lifecycle controller adds),
NoSchedule/NoExecute taints against tolerations, nodeSelector and required node
affinity, and cpu / memory / pod-count fit against allocatable. Among fitting
nodes it picks the least allocated, ties broken by name. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from tests.fakeapi.resources import JsonObject

UNSCHEDULABLE_TAINT: JsonObject = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_READY_TAINT: JsonObject = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def parse_quantity(text: str | int | float) -> Decimal:
    """A Kubernetes resource.Quantity ("250m", "1Gi", "1e3") as an exact Decimal."""
    raw = str(text).strip()
    try:
        for suffix, factor in _BINARY.items():
            if raw.endswith(suffix):
                return Decimal(raw[: -len(suffix)]) * factor
        if raw and raw[-1] in _DECIMAL and not raw[-1].isdigit():
            return Decimal(raw[:-1]) * _DECIMAL[raw[-1]]
        return Decimal(raw)
    except InvalidOperation:
        raise ValueError(f"not a quantity: {text!r}") from None


def millicores(text: str | int | float) -> int:
    return math.ceil(parse_quantity(text) * 1000)


def whole(text: str | int | float) -> int:
    return math.ceil(parse_quantity(text))


@dataclass(frozen=True)
class Requests:
    cpu_millis: int = 0
    memory_bytes: int = 0

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.cpu_millis + other.cpu_millis, self.memory_bytes + other.memory_bytes)

    def max(self, other: Requests) -> Requests:
        return Requests(max(self.cpu_millis, other.cpu_millis), max(self.memory_bytes, other.memory_bytes))


def _container_requests(container: JsonObject) -> Requests:
    requests = (container.get("resources") or {}).get("requests") or {}
    return Requests(
        millicores(requests["cpu"]) if "cpu" in requests else 0,
        whole(requests["memory"]) if "memory" in requests else 0,
    )


def pod_requests(pod: JsonObject) -> Requests:
    """Scheduling semantics: max(app containers + sidecars, largest init step) + overhead."""
    spec = pod.get("spec") or {}
    apps = Requests()
    for container in spec.get("containers") or []:
        apps = apps + _container_requests(container)
    sidecars = Requests()
    init_peak = Requests()
    for container in spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            sidecars = sidecars + requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(requests + sidecars)
    total = (apps + sidecars).max(init_peak)
    overhead = spec.get("overhead") or {}
    return total + Requests(
        millicores(overhead["cpu"]) if "cpu" in overhead else 0,
        whole(overhead["memory"]) if "memory" in overhead else 0,
    )


def is_terminal(pod: JsonObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_ready(obj: JsonObject) -> bool:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def _effective_taints(node: JsonObject) -> list[JsonObject]:
    """The node's taints in the order the scheduler's filters meet them, cordon first."""
    spec = node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    cordoned = bool(spec.get("unschedulable")) or any(t.get("key") == UNSCHEDULABLE_TAINT["key"] for t in taints)
    taints = [t for t in taints if t.get("key") != UNSCHEDULABLE_TAINT["key"]]
    # The node lifecycle controller turns readiness into a taint; the scheduler only sees the taint.
    if not is_ready(node) and all(t.get("key") != NOT_READY_TAINT["key"] for t in taints):
        taints.append(NOT_READY_TAINT)
    return ([UNSCHEDULABLE_TAINT] if cordoned else []) + taints


def _expression_matches(expression: Mapping[str, Any], value: str | None) -> bool:
    operator = expression.get("operator")
    values = expression.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            number, bound = int(value), int(values[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False


def _matches_node_selection(pod: JsonObject, node: JsonObject) -> bool:
    spec = pod.get("spec") or {}
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    for term in terms:
        expressions = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not expressions and not fields:
            continue  # an empty term matches nothing
        if all(_expression_matches(e, labels.get(e.get("key", ""))) for e in expressions) and all(
            _expression_matches(f, metadata.get("name") if f.get("key") == "metadata.name" else None) for f in fields
        ):
            return True
    return False


@dataclass(frozen=True)
class Placement:
    """Where a pod goes: a node name, or None and the scheduler's FailedScheduling message."""

    node: str | None
    message: str


def choose_node(
    pod: JsonObject, nodes: Iterable[JsonObject], pods_by_node: Mapping[str, list[JsonObject]]
) -> Placement:
    wanted = pod_requests(pod)
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    reasons: dict[str, int] = {}
    best: tuple[float, str] | None = None
    node_list = sorted(nodes, key=lambda node: str(node["metadata"]["name"]))
    for node in node_list:
        name = node["metadata"]["name"]
        reason = _rejection(node, pod, wanted, tolerations, pods_by_node.get(name, []))
        if isinstance(reason, str):
            reasons[reason] = reasons.get(reason, 0) + 1
            continue
        candidate = (reason, name)
        if best is None or candidate < best:
            best = candidate
    if best is not None:
        return Placement(best[1], "")
    summary = sorted(f"{count} {reason}" for reason, count in reasons.items())
    detail = ": " + ", ".join(summary) if summary else ""
    return Placement(None, f"0/{len(node_list)} nodes are available{detail}.")


def _rejection(
    node: JsonObject,
    pod: JsonObject,
    wanted: Requests,
    tolerations: list[JsonObject],
    residents: list[JsonObject],
) -> str | float:
    """The scheduler's reason for refusing the node, or the node's allocation score if it fits."""
    for taint in _effective_taints(node):
        if not any(tolerates(t, taint) for t in tolerations):
            if taint.get("key") == UNSCHEDULABLE_TAINT["key"]:
                return "node(s) were unschedulable"
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
    if not _matches_node_selection(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    cpu_total = millicores(allocatable.get("cpu", "0"))
    memory_total = whole(allocatable.get("memory", "0"))
    pods_total = whole(allocatable.get("pods", "0"))
    active = [p for p in residents if not is_terminal(p)]
    used = Requests()
    for resident in active:
        used = used + pod_requests(resident)
    if len(active) + 1 > pods_total:
        return "Too many pods"
    after = used + wanted
    if after.cpu_millis > cpu_total:
        return "Insufficient cpu"
    if after.memory_bytes > memory_total:
        return "Insufficient memory"
    cpu_ratio = after.cpu_millis / cpu_total if cpu_total else 0.0
    memory_ratio = after.memory_bytes / memory_total if memory_total else 0.0
    return max(cpu_ratio, memory_ratio)
