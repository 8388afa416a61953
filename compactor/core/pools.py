"""The excess-nodes view of a pool (DESIGN rule 9): how few nodes could hold what it runs."""

from __future__ import annotations

import math

from compactor.core.cluster import NodeState
from compactor.core.model import HOSTNAME_LABEL, Pod
from compactor.core.selectors import selector_matches


def lower_bound_nodes(states: list[NodeState]) -> int:
    """ceil(total requests / node allocatable), the larger of cpu and memory (DESIGN rule 9: what the report's
    `lowerBoundNodes` and `excessNodesThreshold` mean).

    Pools can mix machine sizes after a change of machine type; the largest
    node's allocatable keeps this a true lower bound. The simulator's `lower-bound` entry also counts
    pods per node and replicas that repel one another (`repels_itself`); a live pool's bound keeps to
    the rule, so a configuration's excess-node threshold means what it always has.
    """
    if not states:
        return 0
    cpu = sum(state.requested.cpu_millis for state in states)
    memory = sum(state.requested.memory_bytes for state in states)
    node_cpu = max(state.node.allocatable.cpu_millis for state in states)
    node_memory = max(state.node.allocatable.memory_bytes for state in states)
    by_cpu = math.ceil(cpu / node_cpu) if node_cpu > 0 else 0
    by_memory = math.ceil(memory / node_memory) if node_memory > 0 else 0
    return max(by_cpu, by_memory)


def repels_itself(pod: Pod) -> bool:
    """The pod's required anti-affinity on `kubernetes.io/hostname` matches its own labels and namespace,
    so no two pods like it share a node."""
    for term in pod.pod_anti_affinity:
        if term.topology_key != HOSTNAME_LABEL or not selector_matches(term.selector, pod.labels):
            continue
        if term.all_namespaces or pod.namespace in term.namespaces or not term.namespaces:
            return True
    return False
