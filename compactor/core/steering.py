"""Scale-down steering: which pods get node-compactor's pod-deletion-cost, and which lose it.

When a Deployment scales in, the ReplicaSet controller deletes the pods with the
lowest `controller.kubernetes.io/pod-deletion-cost` first, before it looks at how
many replicas share a node or how young a pod is (`ActivePodsWithRanks.Less`,
pkg/controller/controller_utils.go; KEP-2255, stable since Kubernetes 1.24).
Left alone, it spreads the removals over the nodes that hold the most replicas,
so every node empties a little and none empties at all. node-compactor gives the
ReplicaSet pods of each enabled pool's least utilized node a cost of -1: the pods
a scale-down removes come from there first, so that node becomes underutilized,
then empty, sooner, and a drain has fewer pods to evict. It does so whether or not
the pool has nodes to spare yet: in a decline, the node to go next is being
emptied before the excess shows. Karpenter steers its consolidation the same way
(its PodDeletionCostManagement feature, karpenter.sh/docs/concepts/pod-deletion-cost).
The node being drained is steered too: a scale-down may take the pods still there.
The price: a scale-down no longer prefers the pods doubled up on a node, so a
Deployment's replicas may end less spread over nodes (the scheduler's topology
spread constraints are not enforced on scale-down either way).

A cost someone else set is never changed: node-compactor writes only pods without
the annotation, records the value it wrote in `STEERED_COST`, and takes back only
a cost that still equals that record. -1 is the least that puts the pods before
the default 0, so pods a person gave a lower cost still go first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from compactor.core import candidates
from compactor.core.blockers import API_ENFORCED, node_pods_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import STEERED_DELETION_COST, Pod

STEER_COST = str(STEERED_DELETION_COST)
# Pod patches a run makes at most (removals first); the rest wait for the next run.
MAX_WRITES_PER_RUN = 300


@dataclass(frozen=True, slots=True)
class Steering:
    nodes: tuple[str, ...]  # the nodes scale-downs are steered to, by name
    add: tuple[str, ...]  # pods ("namespace/name") to give the cost
    remove: tuple[str, ...]  # pods whose cost node-compactor takes back


NONE = Steering((), (), ())


def steer(view: ClusterView, states: Iterable[NodeState], taken: frozenset[str], evicting: str | None) -> Steering:
    """The steered nodes and the pod writes that make their pods, and only theirs, carry the cost.

    `states` are the view's nodes by name, `taken` the nodes drains have started on or this run
    starts one on, `evicting` the one of them whose pods are still being evicted."""
    ordered = list(states)
    steered = set(_chosen(view, ordered, taken)) if view.config.steer_scale_down else set()
    if evicting is not None and view.config.steer_scale_down:
        steered.add(evicting)
    remove: list[str] = []
    add: list[str] = []
    for state in ordered:
        wanted = state.name in steered
        for pod in state.pods:
            if pod.steered and not wanted:
                remove.append(pod.key)
            elif wanted and not pod.steered and _steerable_pod(pod):
                add.append(pod.key)
    remove = remove[:MAX_WRITES_PER_RUN]
    add = add[: MAX_WRITES_PER_RUN - len(remove)]
    return Steering(tuple(sorted(steered)), tuple(add), tuple(remove))


def _chosen(view: ClusterView, states: list[NodeState], taken: frozenset[str]) -> Iterable[str]:
    """Per enabled pool above its minNodes, its least utilized node a drain may take (none in a pool left to
    the Cluster Autoscaler's ComputeClass threshold: its scale-ins are the autoscaler's to use)."""
    by_pool: dict[str | None, list[NodeState]] = {}
    for state in states:
        if state.name not in taken:
            by_pool.setdefault(state.pool, []).append(state)
    for pool, members in by_pool.items():
        settings = view.config.enabled_pool(pool)
        if settings is None or len(members) <= max(1, settings.min_nodes) or view.coexistence.left(pool) is not None:
            continue
        open_nodes = [state for state in members if _steerable_node(state, view)]
        if open_nodes:
            yield min(open_nodes, key=_utilization).name


def _steerable_node(state: NodeState, view: ClusterView) -> bool:
    """Ready, schedulable, not opted out of scale-down, and holding no pod that blocks a drain for good
    (a PodDisruptionBudget at its limit only waits)."""
    node = state.node
    if not node.ready or node.unschedulable or candidates.opt_outs(state):
        return False
    return all(blocker.kind in API_ENFORCED for blocker in node_pods_blockers(state.pods, view.pdbs, view.config))


def _steerable_pod(pod: Pod) -> bool:
    """A running ReplicaSet pod without a pod-deletion-cost of its own: only the ReplicaSet controller
    reads the cost."""
    return (
        pod.controller_kind == "ReplicaSet"
        and not pod.deletion_cost_set
        and not pod.stays_on_node
        and not pod.terminating
    )


def _utilization(state: NodeState) -> tuple[float, str]:
    cpu = state.cpu_ratio if state.cpu_ratio is not None else 1.0
    memory = state.memory_ratio if state.memory_ratio is not None else 1.0
    return max(cpu, memory), state.name
