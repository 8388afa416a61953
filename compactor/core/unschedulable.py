"""Pods the scheduler found no node for, by the pools that could hold them (DESIGN rule 7's scope).

Read by the pool gates (no new drain in a pool such pods could use) and by a drain under way (no
further batch of evictions while they wait: `inflight`).
"""

from __future__ import annotations

from collections import defaultdict

from compactor.core import fit
from compactor.core.cluster import ClusterView
from compactor.core.model import HOSTNAME_LABEL, Node, Pod


def by_pool(view: ClusterView) -> dict[str | None, list[Pod]]:
    """Unschedulable pods per pool whose nodes they could run on; the others cannot be helped by that pool.

    A pod waits for a pool only when it passes a node's taints, nodeSelector and node affinity and its
    requests fit an empty node of that shape: the pools the Cluster Autoscaler could grow for it.
    Pods and nodes are grouped by what those predicates read, so a thousand replicas of one
    Deployment against a thousand alike nodes cost one check.
    """
    pending = view.unschedulable_pods
    if not pending:
        return {}
    representatives: dict[str | None, list[Node]] = defaultdict(list)
    seen: set[tuple[object, ...]] = set()
    for name, members in view.nodes_by_pool.items():
        for member in members:
            node = member.node
            labels = tuple(sorted((k, v) for k, v in node.labels.items() if k != HOSTNAME_LABEL))
            shape = (name, labels, node.taints, node.allocatable)
            if shape not in seen:
                seen.add(shape)
                representatives[name].append(node)
    answers: dict[tuple[object, ...], list[str | None]] = {}
    by_pool: dict[str | None, list[Pod]] = defaultdict(list)
    for pod in pending:
        key = (pod.tolerations, pod.node_selector, pod.node_affinity, pod.requests)
        usable = answers.get(key)
        if usable is None:
            # Node affinity may name one node (matchFields metadata.name): then every node is checked.
            pinned = pod.node_affinity is not None
            usable = [
                name
                for name, nodes in representatives.items()
                if any(
                    fit.could_use(pod, node)
                    for node in ([m.node for m in view.nodes_by_pool[name]] if pinned else nodes)
                )
            ]
            answers[key] = usable
        for name in usable:
            by_pool[name].append(pod)
    return by_pool
