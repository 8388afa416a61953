"""Disruption cost (DESIGN rule 8), cheapest first, as Karpenter orders consolidation candidates."""

from __future__ import annotations

from compactor.core.cluster import NodeState


def disruption_cost(state: NodeState) -> tuple[int, int, int, float, float, str]:
    """Fewer evicted pods, lower summed pod-deletion-cost, lower priorities, lower utilization, name."""
    movable = state.movable_pods
    return (
        len(movable),
        sum(pod.deletion_cost for pod in movable),
        sum(pod.priority for pod in movable),
        state.cpu_ratio if state.cpu_ratio is not None else 1.0,
        state.memory_ratio if state.memory_ratio is not None else 1.0,
        state.name,
    )
