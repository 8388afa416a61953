"""kube-scheduler as GKE runs it by default: the planner's predicates, then resource and taint scoring.

Pending pods are taken in queue order (priority, then age). A node is
feasible when `compactor.core.fit`'s `why_not` finds nothing against it (the
very predicates the planner proves a drain with: resources, pod count,
taints, node selectors and affinity, host ports, pod (anti-)affinity,
topology spread, volume zone). Among feasible nodes the one with the most
free cpu and memory after placement wins (NodeResourcesFit LeastAllocated,
with BalancedAllocation below, integer scores as the scheduler computes
them); ties are broken at random, from the run's seed. A pod that fits nowhere is marked Unschedulable, which
is what the Cluster Autoscaler and the planner read. TaintToleration scoring
comes first: a node with a PreferNoSchedule taint the pod does not tolerate
(node-compactor's soft taint on marked nodes) is taken only when no other fits.

With `most_allocated` (GKE's optimize-utilization profile) the score is
turned around: the feasible node with the least free cpu and memory after
placement wins (NodeResourcesFit MostAllocated).

NodeResourcesBalancedAllocation is scored too, at the same weight as
NodeResourcesFit, as the default profile does
(pkg/scheduler/apis/config/v1/default_plugins.go): 100 x (1 - |cpu share - memory
share| / 2) after placement, each share capped at 1
(pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go). A
scenario turns it off with `"scheduler": {"balancedAllocation": false}`.
"""

from __future__ import annotations

import random
from datetime import datetime

from msgspec import structs

from compactor.config import Config
from compactor.core import fit
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import PREFER_NO_SCHEDULE, ZERO, Node, Pod, Snapshot
from compactor.simulation.world import World

_NO_POOLS = Config.model_validate({})
# TaintToleration's weight in the default scheduler profile.
TAINT_TOLERATION_WEIGHT = 3


def node_state(node: Node, pods: tuple[Pod, ...] = (), config: Config = _NO_POOLS) -> NodeState:
    """A NodeState for a node outside any snapshot, built the way the planner builds its own."""
    return ClusterView(Snapshot(nodes=(node,), pods=pods), config).nodes[node.name]


# The source of a scheduling simulation when pods come from nowhere: a node that does not exist.
NOWHERE = node_state(Node(name="", allocatable=ZERO, allocatable_pods=0))


def prepared(world: World, key: str, simulation: fit.Simulation) -> Pod:
    """The pod as the predicates must see it: bound volumes pin it to their zone, unbound ones do not."""
    pod = world.pod_record(key)
    if not pod.pvc_names:
        return pod
    zone = world.volume_zone(key)
    if zone is None:
        # WaitForFirstConsumer: the claim is bound in whatever zone the pod lands in.
        return structs.replace(pod, pvc_names=())
    simulation.source_zone = zone
    return pod


class Scheduler:
    def __init__(
        self,
        world: World,
        config: Config,
        seed: int,
        *,
        most_allocated: bool = False,
        balanced_allocation: bool = True,
    ) -> None:
        self.world = world
        self.config = config
        self.most_allocated = most_allocated
        self.balanced_allocation = balanced_allocation
        self._ties = random.Random(f"{seed}:scheduler")

    def schedule(self, at: datetime) -> int:
        """Place what can be placed; returns how many pods were bound."""
        pending = self.world.pending()
        if not pending:
            return 0
        view = ClusterView(self.world.snapshot(at), self.config)
        targets = sorted((state for state in view.nodes.values() if state.schedulable), key=lambda s: s.name)
        simulation = fit.Simulation(view, NOWHERE, targets)
        used = {t.name: [t.requested.cpu_millis, t.requested.memory_bytes] for t in targets}
        bound = 0
        recorder = self.world.recorder
        for key in pending:
            pod = prepared(self.world, key, simulation)
            best: NodeState | None = None
            best_score = -1
            ties = 0
            for target in simulation.targets:
                if simulation.why_not(pod, target) is not None:
                    continue
                fitness = (_most_allocated if self.most_allocated else _least_allocated)(target, used[target.name], pod)
                if self.balanced_allocation:
                    fitness += _balanced_allocation(target, used[target.name], pod)
                score = fitness + _taint_toleration(pod, target)
                if score > best_score:
                    best, best_score, ties = target, score, 1
                elif score == best_score:
                    ties += 1
                    if self._ties.randrange(ties) == 0:
                        best = target
            if best is None:
                first_attempt = self.world.mark_unschedulable(key)
                actor = self.world.displaced_by.get(key)
                if first_attempt and actor is not None:
                    recorder.no_place[actor] += 1
                continue
            simulation.place(pod, best)
            used[best.name][0] += pod.requests.cpu_millis
            used[best.name][1] += pod.requests.memory_bytes
            self.world.bind(key, best.name, at)
            bound += 1
        return bound


def _taint_toleration(pod: Pod, target: NodeState) -> int:
    """TaintToleration's score: nodes with no PreferNoSchedule taint the pod does not tolerate first.

    kube-scheduler normalizes it to 0-100 (the node with the most such taints scores 0) and weighs it
    3 in the default profile (pkg/scheduler/apis/config/v1/default_plugins.go), against 1 for
    NodeResourcesFit: a node the pod need not avoid wins whatever its load.
    """
    intolerable = any(
        taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in pod.tolerations)
        for taint in target.node.taints
    )
    return 0 if intolerable else TAINT_TOLERATION_WEIGHT * 100


def _least_allocated(target: NodeState, used: list[int], pod: Pod) -> int:
    allocatable = target.node.allocatable
    cpu = _free_share(allocatable.cpu_millis, used[0] + pod.requests.cpu_millis)
    memory = _free_share(allocatable.memory_bytes, used[1] + pod.requests.memory_bytes)
    return (cpu + memory) // 2


def _most_allocated(target: NodeState, used: list[int], pod: Pod) -> int:
    allocatable = target.node.allocatable
    cpu = _used_share(allocatable.cpu_millis, used[0] + pod.requests.cpu_millis)
    memory = _used_share(allocatable.memory_bytes, used[1] + pod.requests.memory_bytes)
    return (cpu + memory) // 2


def _balanced_allocation(target: NodeState, used: list[int], pod: Pod) -> int:
    """NodeResourcesBalancedAllocation's score for cpu and memory: nodes whose two shares stay close win."""
    allocatable = target.node.allocatable
    if allocatable.cpu_millis <= 0 or allocatable.memory_bytes <= 0:
        return 100  # a resource the node has none of is left out: one share has no spread
    cpu = min(1.0, (used[0] + pod.requests.cpu_millis) / allocatable.cpu_millis)
    memory = min(1.0, (used[1] + pod.requests.memory_bytes) / allocatable.memory_bytes)
    return int((1 - abs(cpu - memory) / 2) * 100)


def _used_share(capacity: int, requested: int) -> int:
    if capacity <= 0 or requested > capacity:
        return 0
    return requested * 100 // capacity


def _free_share(capacity: int, requested: int) -> int:
    if capacity <= 0 or requested > capacity:
        return 0
    return (capacity - requested) * 100 // capacity
