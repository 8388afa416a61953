"""The order of the moves (DESIGN rule 8): disruption cost, and with prices the saving per disrupted pod first.

Karpenter orders consolidation candidates by disruption cost, and since v1.14 by price over disruption
(`SavingsRatio`, kubernetes-sigs/karpenter pkg/controllers/disruption): a node that costs more per pod it
disrupts is worth moving first. With `ranking: "savings"` (the default) and every node involved priced,
node-compactor orders by saving per hour per disrupted pod, then by disruption cost; where every node costs
the same, that is rule 8's order exactly (fewer pods means a larger saving per pod, and equal counts tie).
"""

from __future__ import annotations

from compactor.core.cluster import NodeState

DisruptionCost = tuple[int, int, int, float, float, str]


def disruption_cost(state: NodeState) -> DisruptionCost:
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


def saving_per_pod(saving_per_hour: float, pods: int) -> float:
    """What a move saves per hour for each pod it disrupts; a move that disrupts none counts as one."""
    return saving_per_hour / max(pods, 1)


def savings_order(state: NodeState, price_per_hour: float) -> tuple[float, DisruptionCost]:
    """A deletion's place in the savings ranking: the largest saving per disrupted pod first (deleting the
    node saves its price), then rule 8's order."""
    return (-saving_per_pod(price_per_hour, len(state.movable_pods)), disruption_cost(state))
