"""The API resources the fake API server serves, and how their URLs and names are spelled.

Only data lives here; nothing in this module touches stored objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """One REST resource: `kind` is what it holds, `plural` what the URL says."""

    kind: str
    plural: str
    group: str
    version: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return self.version if not self.group else f"{self.group}/{self.version}"

    @property
    def qualified(self) -> str:
        """The resource as kube-apiserver names it in error messages (`leases.coordination.k8s.io`)."""
        return self.plural if not self.group else f"{self.plural}.{self.group}"

    @property
    def qualified_kind(self) -> str:
        """The kind as kube-apiserver names it in `Invalid` messages (`Event.events.k8s.io`)."""
        return self.kind if not self.group else f"{self.kind}.{self.group}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def type_meta(self) -> bytes:
        """`"kind":...,"apiVersion":...,` ready to splice in front of a stored object's other fields."""
        return f'"kind":"{self.kind}","apiVersion":"{self.api_version}",'.encode()


NODES = Resource("Node", "nodes", "", "v1", namespaced=False)
PODS = Resource("Pod", "pods", "", "v1", namespaced=True)
CORE_EVENTS = Resource("Event", "events", "", "v1", namespaced=True)
EVENTS = Resource("Event", "events", "events.k8s.io", "v1", namespaced=True)
PDBS = Resource("PodDisruptionBudget", "poddisruptionbudgets", "policy", "v1", namespaced=True)
LEASES = Resource("Lease", "leases", "coordination.k8s.io", "v1", namespaced=True)
HPAS = Resource("HorizontalPodAutoscaler", "horizontalpodautoscalers", "autoscaling", "v2", namespaced=True)
REPLICASETS = Resource("ReplicaSet", "replicasets", "apps", "v1", namespaced=True)
DEPLOYMENTS = Resource("Deployment", "deployments", "apps", "v1", namespaced=True)
PVCS = Resource("PersistentVolumeClaim", "persistentvolumeclaims", "", "v1", namespaced=True)
# GKE's ComputeClass, a custom resource (its CRD is GKE's): served unless a test removes it
# (`FakeApiServer.remove_compute_class_crd`), as on a cluster that is not GKE or older than 1.30.3-gke.1451000.
COMPUTE_CLASSES = Resource("ComputeClass", "computeclasses", "cloud.google.com", "v1", namespaced=False)

# Core/v1 and events.k8s.io/v1 Events share one storage in kube-apiserver; core/v1 is the stored form.
BY_KIND: dict[str, Resource] = {
    "Node": NODES,
    "Pod": PODS,
    "PodDisruptionBudget": PDBS,
    "Lease": LEASES,
    "Event": CORE_EVENTS,
    "HorizontalPodAutoscaler": HPAS,
    "ReplicaSet": REPLICASETS,
    "Deployment": DEPLOYMENTS,
    "PersistentVolumeClaim": PVCS,
    "ComputeClass": COMPUTE_CLASSES,
}

BY_URL: dict[tuple[str, str, str], Resource] = {
    (r.group, r.version, r.plural): r
    for r in (NODES, PODS, CORE_EVENTS, EVENTS, PDBS, LEASES, HPAS, REPLICASETS, DEPLOYMENTS, PVCS, COMPUTE_CLASSES)
}

# Kinds whose `status` is a subresource: writes to the main resource keep the stored status.
KINDS_WITH_STATUS_SUBRESOURCE = frozenset(
    {
        "Node",
        "Pod",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "ReplicaSet",
        "Deployment",
        "PersistentVolumeClaim",
    }
)

# Kinds kube-apiserver updates without a resourceVersion (`AllowUnconditionalUpdate`).
KINDS_ALLOWING_UNCONDITIONAL_UPDATE = frozenset(
    {
        "Node",
        "Pod",
        "PodDisruptionBudget",
        "Event",
        "HorizontalPodAutoscaler",
        "ReplicaSet",
        "Deployment",
        "PersistentVolumeClaim",
    }
)

# Kinds kube-apiserver creates on a PUT to a missing name (`AllowCreateOnUpdate`).
KINDS_CREATED_ON_UPDATE = frozenset({"Lease", "Event"})


def resource_for_kind(kind: str) -> Resource:
    try:
        return BY_KIND[kind]
    except KeyError:
        known = ", ".join(sorted(BY_KIND))
        raise ValueError(f"the fake API server does not store {kind!r}; it stores {known}") from None


def resource_for_object(obj: JsonObject) -> Resource:
    kind = obj.get("kind")
    if not isinstance(kind, str):
        raise ValueError("the object has no kind")
    if kind == "Event" and obj.get("apiVersion") == EVENTS.api_version:
        return EVENTS
    return resource_for_kind(kind)
