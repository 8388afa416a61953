"""The Deployment controller's rolling update, as far as a restart (`kubectl rollout restart`) needs it.

A write that changes a Deployment's spec bumps its `metadata.generation`
(kube-apiserver's rule for objects with a status subresource). A Deployment
whose pod template no ReplicaSet of its own carries gets a new ReplicaSet, and
the rollout then moves one step every `Cluster.rollout_step` seconds, as the
controller's `rolloutRolling` does: start a new pod while the pods number
less than replicas + maxSurge, and remove an old pod (a deletion, not an
eviction) only while the available pods stay at least replicas -
maxUnavailable. maxSurge rounds up and maxUnavailable down; both 0 make
maxUnavailable 1 (`ResolveFenceposts`). `Recreate` removes every old pod
first. The status the controller writes follows each step (observedGeneration,
replicas, updatedReplicas, readyReplicas, availableReplicas), and the new
pods are placed by the fake's scheduler, so a cordoned node gets none.

Simpler than the real controller: one step at a time for the whole rollout,
no minReadySeconds or progress deadline, no revision history cleanup.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from tests.fakeapi import scheduling
from tests.fakeapi.store import object_key

if TYPE_CHECKING:
    from tests.fakeapi.cluster import Cluster

JsonObject = dict[str, Any]
TEMPLATE_HASH = "pod-template-hash"


def admit(deployment: JsonObject, existing: JsonObject | None) -> None:
    """metadata.generation counts the spec's changes; the controller's status stays as it was."""
    metadata = deployment.setdefault("metadata", {})
    generation = int((existing or {}).get("metadata", {}).get("generation", metadata.get("generation", 1)))
    if existing is not None and deployment.get("spec") != existing.get("spec"):
        generation += 1
    metadata["generation"] = generation


def template_hash(template: JsonObject) -> str:
    """A stable name suffix for a pod template (the real controller hashes it with FNV)."""
    without = _without_hash(template)
    return hashlib.sha256(orjson.dumps(without, option=orjson.OPT_SORT_KEYS)).hexdigest()[:10]


def reconcile_all(cluster: Cluster) -> None:
    """One rollout step for every Deployment that is not rolled out; the next step is scheduled if needed."""
    more = False
    for key in list(cluster.store.keys_in_namespace("Deployment", None)):
        more = _step(cluster, key) or more
    if more:
        cluster.timers.call_later(cluster.rollout_step, lambda: reconcile_all(cluster))


def _step(cluster: Cluster, key: str) -> bool:
    store = cluster.store
    deployment = store.copy("Deployment", key)
    metadata = deployment["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    spec = deployment.get("spec") or {}
    template = spec.get("template") or {}
    desired = int(spec.get("replicas", 1))
    sets = [
        (set_key, replica_set)
        for set_key, replica_set in store.items("ReplicaSet")
        if replica_set["metadata"].get("namespace") == namespace and _owner(replica_set) == ("Deployment", name)
    ]
    current = next(
        (
            item
            for item in sets
            if _without_hash(item[1].get("spec", {}).get("template") or {}) == _without_hash(template)
        ),
        None,
    )
    if spec.get("paused"):
        return False
    if current is None:
        current = _new_replica_set(cluster, deployment, template)
    current_key, current_set = current
    pods = _pods_by_set(cluster, namespace)
    new_pods = pods.get(current_set["metadata"]["name"], [])
    old_pods = [
        pod
        for set_key, replica_set in sets
        if set_key != current_key
        for pod in pods.get(replica_set["metadata"]["name"], [])
    ]
    surge, unavailable = _fenceposts(spec.get("strategy") or {}, desired)
    ready = sum(1 for pod in new_pods + old_pods if scheduling.is_ready(pod))
    recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
    if recreate and old_pods:
        for pod in old_pods:
            _remove(cluster, pod)
        old_pods = []
    elif len(new_pods) < desired and (recreate or len(new_pods) + len(old_pods) < desired + surge):
        new_pods.append(_new_pod(cluster, current_set, template))
    elif old_pods and ready - 1 >= desired - unavailable:
        victim = min(old_pods, key=lambda pod: (scheduling.is_ready(pod), pod["metadata"]["name"]))
        _remove(cluster, victim)
        old_pods.remove(victim)
    for set_key, replica_set in [*sets, current] if current not in sets else sets:
        set_name = replica_set["metadata"]["name"]
        count = (
            len(new_pods)
            if set_key == current_key
            else sum(1 for pod in old_pods if _owner(pod) == ("ReplicaSet", set_name))
        )
        fresh = store.copy("ReplicaSet", set_key)
        fresh.setdefault("spec", {})["replicas"] = count
        fresh["status"] = {"replicas": count, "readyReplicas": count, "availableReplicas": count}
        store.put("ReplicaSet", set_key, fresh)
    all_pods = new_pods + old_pods
    ready = sum(1 for pod in all_pods if scheduling.is_ready(pod))
    deployment = store.copy("Deployment", key)
    deployment["status"] = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": len(all_pods),
        "updatedReplicas": len(new_pods),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(0, desired - ready),
    }
    store.put("Deployment", key, deployment)
    return bool(old_pods) or len(new_pods) != desired or ready < desired


def _fenceposts(strategy: JsonObject, desired: int) -> tuple[int, int]:
    rolling = strategy.get("rollingUpdate") or {}
    surge = _scaled(rolling.get("maxSurge", "25%"), desired, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _scaled(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    share = int(value.rstrip("%")) * total / 100
    return math.ceil(share) if round_up else math.floor(share)


def _owner(obj: JsonObject) -> tuple[str, str] | None:
    for reference in obj.get("metadata", {}).get("ownerReferences") or []:
        if reference.get("controller"):
            return reference.get("kind", ""), reference.get("name", "")
    return None


def _without_hash(template: JsonObject) -> JsonObject:
    copy: JsonObject = orjson.loads(orjson.dumps(template))
    labels = (copy.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(TEMPLATE_HASH, None)
    return copy


def _pods_by_set(cluster: Cluster, namespace: str) -> dict[str, list[JsonObject]]:
    found: dict[str, list[JsonObject]] = {}
    for key in cluster.store.keys_in_namespace("Pod", namespace):
        pod = cluster.store.get("Pod", key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            continue
        owner = _owner(pod)
        if owner is not None and owner[0] == "ReplicaSet":
            found.setdefault(owner[1], []).append(pod)
    return found


def _new_replica_set(cluster: Cluster, deployment: JsonObject, template: JsonObject) -> tuple[str, JsonObject]:
    metadata = deployment["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    suffix = template_hash(template)
    set_template = orjson.loads(orjson.dumps(template))
    set_template.setdefault("metadata", {}).setdefault("labels", {})[TEMPLATE_HASH] = suffix
    set_name = f"{name}-{suffix}"
    replica_set: JsonObject = {
        "metadata": {
            "name": set_name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "labels": dict(set_template["metadata"]["labels"]),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "uid": metadata.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "creationTimestamp": metadata.get("creationTimestamp", ""),
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": dict(set_template["metadata"]["labels"])},
            "template": set_template,
        },
        "status": {"replicas": 0},
    }
    key = object_key(namespace, set_name)
    cluster.store.put("ReplicaSet", key, replica_set)
    return key, cluster.store.copy("ReplicaSet", key)


def _new_pod(cluster: Cluster, replica_set: JsonObject, template: JsonObject) -> JsonObject:
    set_metadata = replica_set["metadata"]
    namespace, set_name = set_metadata["namespace"], set_metadata["name"]
    set_template = replica_set.get("spec", {}).get("template") or template
    template_metadata = set_template.get("metadata") or {}
    name = cluster.new_pod_name(namespace, f"{set_name}-")
    metadata: JsonObject = {
        "name": name,
        "generateName": f"{set_name}-",
        "namespace": namespace,
        "uid": str(uuid.uuid4()),
        "labels": dict(template_metadata.get("labels") or {}),
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": set_name,
                "uid": set_metadata.get("uid", ""),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_metadata.get("annotations"):
        metadata["annotations"] = dict(template_metadata["annotations"])
    pod: JsonObject = {
        "metadata": metadata,
        "spec": orjson.loads(orjson.dumps(set_template.get("spec") or {})),
        "status": {},
    }
    return cluster.start_pod(pod)


def _remove(cluster: Cluster, pod: JsonObject) -> None:
    metadata = pod["metadata"]
    cluster.remove_pod_by_controller(object_key(metadata["namespace"], metadata["name"]), metadata.get("uid", ""))
