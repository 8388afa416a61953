"""Kubernetes JSON for the objects the simulation creates: nodes, pods, PodDisruptionBudgets.

Shaped like what the API server returns on GKE, so `compactor.kube.snapshot`
parses them exactly as it parses a live cluster.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from compactor.core.model import HOSTNAME_LABEL, ZONE_LABELS, Node
from compactor.core.prices import pricing
from compactor.core.timing import format_stamp
from compactor.kube import snapshot as parsing
from compactor.simulation.model import PoolSpec

JsonObject = dict[str, Any]

ZONE_LABEL = ZONE_LABELS[0]
INSTANCE_TYPE_LABEL = pricing.INSTANCE_TYPE_LABEL
# GKE labels every node with its machine family (e2, n2, ...): what a ComputeClass rule or a nodeSelector matches.
MACHINE_FAMILY_LABEL = pricing.MACHINE_FAMILY_LABEL


def uid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def short_hash(*parts: str, length: int = 9) -> str:
    """A stable, name-safe hash, like a ReplicaSet's pod-template-hash."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = int(hashlib.sha256("/".join(parts).encode()).hexdigest(), 16)
    chars = []
    for _ in range(length):
        number, index = divmod(number, len(alphabet))
        chars.append(alphabet[index])
    return "".join(chars)


def node_object(
    name: str,
    *,
    pool: str,
    pool_label: str,
    zone: str,
    machine_type: str,
    allocatable: Mapping[str, str],
    labels: Mapping[str, str],
    taints: list[JsonObject],
    created: datetime,
) -> JsonObject:
    all_labels = {
        **labels,
        pool_label: pool,
        ZONE_LABEL: zone,
        "topology.kubernetes.io/region": zone.rsplit("-", 1)[0],
        HOSTNAME_LABEL: name,
        INSTANCE_TYPE_LABEL: machine_type,
        MACHINE_FAMILY_LABEL: pricing.machine_family(machine_type),
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    spec: JsonObject = {"providerID": f"gce://simulated/{zone}/{name}"}
    if taints:
        spec["taints"] = copy.deepcopy(taints)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("node", name),
            "creationTimestamp": format_stamp(created),
            "labels": all_labels,
            "annotations": {},
        },
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def pod_template(
    *,
    namespace: str,
    labels: Mapping[str, str],
    requests: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    priority: int = 0,
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[JsonObject] | None = None,
    affinity: JsonObject | None = None,
    volumes: list[JsonObject] | None = None,
    spread: list[JsonObject] | None = None,
) -> JsonObject:
    """A pod without name, owner or node: what a controller stamps its pods from."""
    container: JsonObject = {
        "name": labels.get("app", "app"),
        "image": f"europe-docker.pkg.dev/simulated/apps/{labels.get('app', 'app')}:1.0",
        "resources": {"requests": dict(requests), "limits": {"memory": requests.get("memory", "0")}},
    }
    spec: JsonObject = {
        "containers": [container],
        "priority": priority,
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
            *(tolerations or []),
        ],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    if volumes:
        spec["volumes"] = volumes
    if spread:
        spec["topologySpreadConstraints"] = spread
    metadata: JsonObject = {"namespace": namespace, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


def json_copy(obj: JsonObject) -> JsonObject:
    """A deep copy of a Kubernetes object, which is JSON (a scenario's, a snapshot's, or made from them): a round
    trip through orjson, seven times faster than copy.deepcopy (a Deployment's template: 2.3 against 16.9 us)."""
    copied: JsonObject = orjson.loads(orjson.dumps(obj))
    return copied


def stamp_pod(
    template: Mapping[str, Any],
    *,
    name: str,
    owner_kind: str | None,
    owner_name: str | None,
    created: datetime,
    node_name: str | None = None,
    extra_labels: Mapping[str, str] | None = None,
) -> JsonObject:
    """A pod from a template: named, owned, and (for DaemonSet and static pods) bound to its node."""
    pod = json_copy(dict(template))
    metadata = pod.setdefault("metadata", {})
    namespace = metadata.get("namespace", "default")
    for key in ("resourceVersion", "deletionTimestamp", "generateName"):
        metadata.pop(key, None)
    metadata["name"] = name
    metadata["uid"] = uid("pod", namespace, name, format_stamp(created))
    metadata["creationTimestamp"] = format_stamp(created)
    if extra_labels:
        metadata["labels"] = {**(metadata.get("labels") or {}), **extra_labels}
    if owner_kind is not None and owner_name is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1" if owner_kind == "Job" else "apps/v1",
                "kind": owner_kind,
                "name": owner_name,
                "uid": uid("owner", namespace, owner_kind, owner_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    else:
        metadata.pop("ownerReferences", None)
    spec = pod.setdefault("spec", {})
    spec.pop("nodeName", None)
    if node_name is not None:
        spec["nodeName"] = node_name
        pod["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    else:
        pod["status"] = {"phase": "Pending"}
    return pod


def pdb_object(
    namespace: str,
    name: str,
    match_labels: Mapping[str, str],
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> JsonObject:
    spec: JsonObject = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": uid("pdb", namespace, name)},
        "spec": spec,
    }


# A node pool's template node: its age means nothing (prices, and a replacement into a pool with no node).
TEMPLATE_CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def template_node(pool: PoolSpec, pool_label: str) -> Node:
    """An empty node of the pool in its first zone, labelled and tainted as the autoscaler makes them."""
    return parsing.parse_node(
        node_object(
            f"template-{pool.name}",
            pool=pool.name,
            pool_label=pool_label,
            zone=pool.zones[0],
            machine_type=pool.machine_type,
            allocatable=pool.allocatable,
            labels=pool.labels,
            taints=list(pool.taints),
            created=TEMPLATE_CREATED,
        )
    )
