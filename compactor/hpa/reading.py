"""Turns Kubernetes JSON (HorizontalPodAutoscaler, ReplicaSet) into the HPA floor's records.

Serves the live reader (pages of a list) and `hpa --snapshot FILE` (what
`kubectl get hpa,replicasets -A -o json` prints; other kinds are ignored).
A malformed object raises `SnapshotError` naming the object and the field.
autoscaling/v1 HPAs read the same: the fields used here are in both versions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from compactor.errors import SnapshotError
from compactor.hpa.model import Cluster, Hpa
from compactor.settings import jsonfiles

HPA_KIND = "HorizontalPodAutoscaler"
REPLICA_SET_KIND = "ReplicaSet"
# HPAs and ReplicaSets of a large cluster (tens of thousands of objects at a few KiB) fit well below this.
MAX_SNAPSHOT_BYTES = 512 << 20


def hpa_from(obj: Mapping[str, Any]) -> Hpa:
    meta = obj.get("metadata") or {}
    where = f"HorizontalPodAutoscaler {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SnapshotError("a HorizontalPodAutoscaler has no metadata.name")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        raise SnapshotError(f"{where}: metadata.annotations must map strings to strings")
    target = spec.get("scaleTargetRef") or {}
    return Hpa(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        min_replicas=_whole(spec.get("minReplicas", 1), where, "spec.minReplicas"),
        max_replicas=_whole(spec.get("maxReplicas"), where, "spec.maxReplicas"),
        current_replicas=None
        if status.get("currentReplicas") is None
        else _whole(status["currentReplicas"], where, "status.currentReplicas"),
        target_kind=str(target.get("kind") or ""),
        target_name=str(target.get("name") or ""),
        annotations=dict(annotations),
    )


def _whole(value: Any, where: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SnapshotError(f"{where}: {path}: {value!r} is not a whole number")
    return value


def deployment_of(replica_set: Mapping[str, Any]) -> str | None:
    for owner in (replica_set.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller") and owner.get("kind") == "Deployment":
            name = owner.get("name")
            return name if isinstance(name, str) else None
    return None


def active_replica_sets(replica_sets: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """Per (namespace, Deployment): how many ReplicaSets it controls have status.replicas > 0 (estafette's test)."""
    counts: dict[tuple[str, str], int] = {}
    for replica_set in replica_sets:
        deployment = deployment_of(replica_set)
        replicas = (replica_set.get("status") or {}).get("replicas") or 0
        if deployment is None or not isinstance(replicas, int) or replicas <= 0:
            continue
        key = (str((replica_set.get("metadata") or {}).get("namespace") or "default"), deployment)
        counts[key] = counts.get(key, 0) + 1
    return counts


def cluster_from(hpas: Iterable[Mapping[str, Any]], replica_sets: Iterable[Mapping[str, Any]] | None = None) -> Cluster:
    records = tuple(sorted((hpa_from(obj) for obj in hpas), key=lambda hpa: (hpa.namespace, hpa.name)))
    return Cluster(records, active_replica_sets(replica_sets or ()))


def read_file(path: str) -> Cluster:
    """`kubectl get hpa,replicasets -A -o json` output (a List), or a single HPA object."""
    document = jsonfiles.read_object(
        path,
        what="snapshot",
        limit=MAX_SNAPSHOT_BYTES,
        error=SnapshotError,
        hint=": it is not a Kubernetes List object",
    )
    items = document.get("items") if "items" in document else [document]
    if not isinstance(items, list):
        raise SnapshotError(f"snapshot {path}: items is not a list")
    objects = [item for item in items if isinstance(item, dict)]
    return cluster_from(
        (obj for obj in objects if obj.get("kind") == HPA_KIND),
        (obj for obj in objects if obj.get("kind") == REPLICA_SET_KIND),
    )
