"""The excess-nodes view of a pool (DESIGN rule 9): how few nodes could hold what it runs."""

from __future__ import annotations

import math
from collections import Counter

from compactor.core.cluster import NodeState
from compactor.core.model import HOSTNAME_LABEL, Pod
from compactor.core.selectors import selector_matches


def lower_bound_nodes(states: list[NodeState]) -> int:
    """The fewest nodes that could hold the pool's pods: the largest of ceil(total requests / node allocatable)
    for cpu and for memory, ceil(pods to place / pods a node takes) and the largest set of pods that each
    need a node of their own (`repels_itself`).

    Pools can mix machine sizes after a change of machine type; the largest node's allocatable (and pod
    count, less the fewest DaemonSet and mirror pods a node carries) keeps this a true lower bound.
    """
    if not states:
        return 0
    cpu = sum(state.requested.cpu_millis for state in states)
    memory = sum(state.requested.memory_bytes for state in states)
    node_cpu = max(state.node.allocatable.cpu_millis for state in states)
    node_memory = max(state.node.allocatable.memory_bytes for state in states)
    by_cpu = math.ceil(cpu / node_cpu) if node_cpu > 0 else 0
    by_memory = math.ceil(memory / node_memory) if node_memory > 0 else 0
    movable = [pod for state in states for pod in state.movable_pods]
    staying = min(len(state.pods) - len(state.movable_pods) for state in states)
    room = max(state.node.allocatable_pods for state in states) - staying
    by_pods = math.ceil(len(movable) / room) if room > 0 else 0
    return max(by_cpu, by_memory, by_pods, one_per_node(movable))


def one_per_node(pods: list[Pod]) -> int:
    """The largest number of pods of one owner that repel one another on `kubernetes.io/hostname`: k such
    replicas need k nodes."""
    groups: Counter[tuple[str, str | None, str | None]] = Counter()
    repelling: set[tuple[str, str | None, str | None]] = set()
    for pod in pods:
        if pod.controller_name is None:
            continue
        key = (pod.namespace, pod.controller_kind, pod.controller_name)
        groups[key] += 1
        if key not in repelling and repels_itself(pod):
            repelling.add(key)
    return max((groups[key] for key in repelling), default=0)


def repels_itself(pod: Pod) -> bool:
    """The pod's required anti-affinity on `kubernetes.io/hostname` matches its own labels and namespace,
    so no two pods like it share a node."""
    for term in pod.pod_anti_affinity:
        if term.topology_key != HOSTNAME_LABEL or not selector_matches(term.selector, pod.labels):
            continue
        if term.all_namespaces or pod.namespace in term.namespaces or not term.namespaces:
            return True
    return False
