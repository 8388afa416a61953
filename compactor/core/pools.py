"""The excess-nodes view of a pool (DESIGN rule 9): how few nodes could hold what it runs."""

from __future__ import annotations

import math

from compactor.core.cluster import NodeState


def lower_bound_nodes(states: list[NodeState]) -> int:
    """ceil(total requests / node allocatable), the larger of cpu and memory.

    Pools can mix machine sizes after a change of machine type; the largest
    node's allocatable keeps this a true lower bound.
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
