"""Node replacement's writes (DESIGN "Node replacement"): the placeholder pods and the replaced nodes' annotations.

node-compactor never creates a VM: it asks the Cluster Autoscaler for each new node with a placeholder
pod, as GKE documents for spare capacity. A pod is bare, in `placeholderNamespace`, with the
PriorityClass `node-compactor-placeholder` (value -10, `preemptionPolicy: Never`: the autoscaler
scales up for it, kube-scheduler lets any other pod preempt it, and it never preempts anything), and
requests what the pods the proof put on its node request, capped at the node's allocatable, selecting the
target (a pool, or a machine family and type) and the zone of the first replaced node, tolerating the
target's taints, repelling the other placeholders of its replacement and kept off the nodes that exist.

Order of the writes, so that a run stopped at any point leaves state the next one reads: the placeholders
are created first, one per new node, then the nodes get `replaced-by` naming them all (a placeholder no node
points to is deleted by the next run; a placeholder a node names that is missing before the drain has
disappeared, and gives the replacement up). When it is over, the placeholders are deleted first, then the
annotations change. Must never: delete a pod that is not a
placeholder in `placeholderNamespace`, or write anything in a dry run (the executor does not call it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from compactor.core.model import (
    CREATED_AT,
    HOSTNAME_LABEL,
    PLACEHOLDER_LABEL,
    PLACEHOLDER_PREFIX,
    PLACEHOLDER_PRIORITY_CLASS,
    REPLACED_BY,
    REPLACEMENT_FAILED_AT,
    REPLACEMENT_LABEL,
    REPLACES,
)
from compactor.core.plan import Replacement
from compactor.core.timing import format_stamp
from compactor.kube.answers import ConflictError, NotFoundError

log = logging.getLogger(__name__)

# The container a placeholder runs: the pause image kube-scheduler's own tests and GKE's spare-capacity
# guide use, which does nothing and holds no memory beyond its requests.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


class PlaceholderPort(Protocol):
    """What the writes need of a cluster (`compactor.kube.client.Cluster`)."""

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    def delete_pod(self, namespace: str, name: str) -> None: ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    def node(self, name: str) -> dict[str, Any] | None: ...

    def event(self, node: Any, *, reason: str, message: str, warning: bool, now: datetime) -> None: ...


@dataclass
class Written:
    """What this run wrote for node replacement, for the report's outcome."""

    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    marked_replaced: list[str] = field(default_factory=list)
    marked_failed: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)


def manifest(replacement: Replacement, namespace: str, now: datetime, index: int = 0) -> dict[str, Any]:
    """The `index`-th placeholder pod of a replacement at its create step: one per new node, all labelled with
    the replacement's id and repelling one another on kubernetes.io/hostname, so each asks for a node of its own."""
    names = replacement.all_placeholders
    asks = replacement.placeholder_requests
    requests = asks[index] if index < len(asks) else replacement.requests
    resources: dict[str, Any] = {}
    if requests is not None:
        amounts = {"cpu": f"{requests.cpu_millis}m", "memory": str(requests.memory_bytes)}
        resources = {"requests": amounts}
    tolerations = [
        {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
        for taint in replacement.taints
    ]
    labels = {PLACEHOLDER_LABEL: "true", "app.kubernetes.io/managed-by": "node-compactor"}
    affinity: dict[str, Any] = {}
    if replacement.replacement_id:
        labels[REPLACEMENT_LABEL] = replacement.replacement_id
    if replacement.avoid_nodes:
        # Each placeholder asks for a node of its own: not one that exists now, whose free room the proof
        # already counted (a placeholder that landed there would take it twice).
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": list(replacement.avoid_nodes)}
                        ]
                    }
                ]
            }
        }
    if len(names) > 1:
        affinity |= {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {REPLACEMENT_LABEL: replacement.replacement_id}},
                        "topologyKey": HOSTNAME_LABEL,
                    }
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": names[index],
            "namespace": namespace,
            "labels": labels,
            "annotations": {
                REPLACES: ",".join(replacement.nodes),
                CREATED_AT: format_stamp(now),
                # Not read back: what a person looking at the pod wants to know.
                "node-compactor.dev/reason": replacement.reason,
            },
        },
        "spec": {
            "priorityClassName": PLACEHOLDER_PRIORITY_CLASS,
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Always",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "nodeSelector": dict(replacement.node_selector),
            "tolerations": tolerations,
            **({"affinity": affinity} if affinity else {}),
            # Pod Security "restricted", which the namespace enforces: nothing but the pause process, unprivileged.
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65535,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "placeholder",
                    "image": PAUSE_IMAGE,
                    "resources": resources,
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def start(cluster: PlaceholderPort, replacement: Replacement, namespace: str, now: datetime, written: Written) -> None:
    """Create the placeholders, one per new node, then point the replaced nodes at them. A run stopped before the
    pointers leaves placeholders no node points to, which the next run deletes; once a node points at them, a
    placeholder missing before the drain started has disappeared, and the replacement is given up
    (`core.replacement.underway`)."""
    names = replacement.all_placeholders
    for index, placeholder in enumerate(names):
        try:
            cluster.create_pod(namespace, manifest(replacement, namespace, now, index))
        except ConflictError:
            log.info("placeholder %s/%s exists already (a retried create): adopted", namespace, placeholder)
        written.created.append(placeholder)
    for name in replacement.nodes:
        cluster.patch_node(name, {"metadata": {"annotations": {REPLACED_BY: ",".join(names)}}})
        written.marked_replaced.append(name)
    _event(cluster, replacement.nodes[0], "NodeCompactorReplacementStarted", replacement.reason, False, now)


def delete(cluster: PlaceholderPort, namespace: str, names: Iterable[str], written: Written) -> None:
    for name in names:
        if not name.startswith(PLACEHOLDER_PREFIX):
            raise ValueError(f"refusing to delete pod {namespace}/{name}: not a node-compactor placeholder")
        try:
            cluster.delete_pod(namespace, name)
        except NotFoundError:
            log.info("placeholder %s/%s was gone already", namespace, name)
        written.deleted.append(name)


def clear(cluster: PlaceholderPort, nodes: Iterable[str], written: Written) -> None:
    """Remove `replaced-by` from these nodes (a node gone meanwhile needs nothing)."""
    for name in nodes:
        try:
            cluster.patch_node(name, {"metadata": {"annotations": {REPLACED_BY: None}}})
        except NotFoundError:
            continue
        written.cleared.append(name)


def finish(cluster: PlaceholderPort, replacement: Replacement, namespace: str, now: datetime, written: Written) -> None:
    """Delete the placeholders (their work is done, or the replacement is given up); on give-up the nodes not
    drained get `replacement-failed-at` (and are not replaced again for retryBackoffSeconds)."""
    delete(cluster, namespace, replacement.all_placeholders, written)
    failed = set(replacement.failed)
    stamp = format_stamp(now)
    for name in replacement.nodes:
        annotations: dict[str, str | None] = {REPLACED_BY: None}
        if name in failed:
            annotations[REPLACEMENT_FAILED_AT] = stamp
        try:
            cluster.patch_node(name, {"metadata": {"annotations": annotations}})
        except NotFoundError:
            continue
        (written.marked_failed if name in failed else written.cleared).append(name)
    if replacement.step == "give-up" and replacement.nodes:
        _event(cluster, replacement.nodes[0], "NodeCompactorReplacementFailed", replacement.reason, True, now)


def _event(cluster: PlaceholderPort, node_name: str, reason: str, message: str, warning: bool, now: datetime) -> None:
    node = cluster.node(node_name)
    if node is not None:
        cluster.event(node, reason=reason, message=message[:1000], warning=warning, now=now)
