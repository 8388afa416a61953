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
(pkg/scheduler/apis/config/v1/default_plugins.go), as kube-scheduler 1.36 scores
it: by how much the pod improves the node's balance, 50 + (50 + after - before) / 2,
where before and after (the pod placed) are 100 x (1 - |cpu share - memory share|
/ 2), each share capped at 1 (balancedResourceScorer in
pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go, v1.36.3). A
scenario turns it off with `"scheduler": {"balancedAllocation": false}`.

NodeAffinity scores a pod's preferred node affinity (weight 2; `node_affinity_scores`): GKE's
Spot guidance prefers `cloud.google.com/gke-spot` so, and a pod that prefers Spot lands on a Spot
node when one fits.

PodTopologySpread scores too (weight 2), with the system default constraints for pods that set
none (`_DefaultSpread`): a ReplicaSet's pods lean away from the nodes and zones that already hold
many of them. `"scheduler": {"topologySpread": false}` turns it off.

On 100 nodes or more, a pod's filters stop once enough feasible nodes are found, as kube-scheduler's do
(`percentageOfNodesToScore` at its default: 50% less one point per 125 nodes, at least 5% and at least
100 nodes; `numFeasibleNodesToFind` and `findNodesThatPassFilters` in pkg/scheduler/schedule_one.go,
kubernetes v1.36.3), the search starting where the last pod's left off. Below 100 nodes every node is
filtered, in name order.

A pod that fits no node as it is may preempt pods of lower priority on one node when its own
preemptionPolicy allows it (`Scheduler._preempt`, DefaultPreemption as far as node replacement needs
it: the placeholder, at -10, gives way to any pod and, with `Never`, never takes another's place).
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime

from msgspec import structs

from compactor.core import fit
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import PREFER_NO_SCHEDULE, ZERO, Node, Pod, Snapshot
from compactor.core.selectors import node_affinity_matches
from compactor.settings.config import Config
from compactor.simulation.draws import Draws
from compactor.simulation.world import OwnerKey, World

_NO_POOLS = Config.model_validate({})
KUBE_SCHEDULER = "kube-scheduler"  # the actor of a preemption
# Owners whose pods share one spec, name aside (a round's pass-over of an owner's pods that cannot fit).
SAME_SPEC_OWNERS = frozenset({"ReplicaSet", "Job"})
# TaintToleration's, NodeAffinity's and PodTopologySpread's weights in the default scheduler profile.
TAINT_TOLERATION_WEIGHT = 3
NODE_AFFINITY_WEIGHT = fit.NODE_AFFINITY_WEIGHT
TOPOLOGY_SPREAD_WEIGHT = 2
# kube-scheduler's search for feasible nodes (pkg/scheduler/schedule_one.go, v1.36.3): every node below 100; else
# 50% less one point per 125 nodes, at least 5%, at least 100 nodes.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50


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
        topology_spread: bool = True,
    ) -> None:
        self.world = world
        self.topology_spread = topology_spread
        self.config = config
        self.most_allocated = most_allocated
        self.balanced_allocation = balanced_allocation
        self._ties = Draws(f"{seed}:scheduler")
        # Where the next pod's search for feasible nodes starts (`nextStartNodeIndex`), on 100 nodes or more.
        self._next_start = 0
        # Per node, its pods tuple and the lowest priority among them preemption may remove (`_lowest`).
        self._lowest_on: dict[str, tuple[tuple[Pod, ...], int | None]] = {}

    def state(self) -> tuple[object, ...]:
        """What a round may change besides the world: its draws among tied nodes."""
        return self._ties.draws, self._next_start

    def schedule(self, at: datetime) -> int:
        """Place what can be placed; returns how many pods were bound. A preemption ends a round (its
        victims are gone, the view changed) and the next round reads the cluster again."""
        bound = 0
        while True:
            placed, preempted = self._round(at)
            bound += placed
            if not preempted:
                return bound

    def _round(self, at: datetime) -> tuple[int, bool]:
        pending = self.world.pending()
        if not pending:
            return 0, False
        view = self.world.view(at, self.config)
        targets = sorted((state for state in view.nodes.values() if state.schedulable), key=lambda s: s.name)
        simulation = fit.Simulation(view, NOWHERE, targets)
        used = {t.name: [t.requested.cpu_millis, t.requested.memory_bytes] for t in targets}
        spread = _DefaultSpread(self.world, view) if self.topology_spread else None
        # The lowest priority of a pod preemption may remove, per node: a pod of no higher priority than
        # that of every node's pods need not look for victims.
        lowest = {target.name: self._lowest(target) for target in targets}
        lowest_anywhere = min((value for value in lowest.values() if value is not None), default=None)
        bound = 0
        # The owners of pods found to fit nowhere in this round, preemption included: a later pod of the same
        # ReplicaSet or Job (the same spec; a DaemonSet's pods differ by node, a StatefulSet's by name) fits
        # nowhere either, as placing pods only fills nodes, unless what it asks for can get easier as pods land
        # (pod affinity, topology spread) or its volumes pin it (`prepared`).
        hopeless: set[OwnerKey] = set()
        for key in pending:
            owner = self.world.pod_owner(key)
            if owner is not None and owner in hopeless:
                self._unplaced(key)
                continue
            pod = prepared(self.world, key, simulation)
            feasible = self._feasible(pod, simulation, used)
            if not feasible:
                if lowest_anywhere is not None and lowest_anywhere < pod.priority:
                    chosen = self._preempt(key, pod, view, simulation, lowest, at)
                    if chosen is not None:
                        self.world.bind(key, chosen, at)
                        return bound + 1, True
                if (
                    owner is not None
                    and owner[1] in SAME_SPEC_OWNERS
                    and not (pod.pod_affinity or pod.spread_constraints or pod.pvc_names)
                ):
                    hopeless.add(owner)
                self._unplaced(key)
                continue
            spreading = spread.scores(key, pod, feasible) if spread is not None else None
            preferring = node_affinity_scores(pod, feasible)
            best: NodeState | None = None
            best_score = -1
            ties = 0
            for index, target in enumerate(feasible):
                fitness = (_most_allocated if self.most_allocated else _least_allocated)(target, used[target.name], pod)
                if self.balanced_allocation:
                    fitness += _balanced_allocation(target, used[target.name], pod)
                score = fitness + _taint_toleration(pod, target)
                if spreading is not None:
                    score += TOPOLOGY_SPREAD_WEIGHT * spreading[index]
                if preferring is not None:
                    score += NODE_AFFINITY_WEIGHT * preferring[index]
                if score > best_score:
                    best, best_score, ties = target, score, 1
                elif score == best_score:
                    ties += 1
                    if self._ties.randrange(ties) == 0:
                        best = target
            assert best is not None
            simulation.place(pod, best)
            used[best.name][0] += pod.requests.cpu_millis
            used[best.name][1] += pod.requests.memory_bytes
            self.world.bind(key, best.name, at)
            if spread is not None:
                spread.bound(key, best.name)
            bound += 1
        return bound, False

    def _unplaced(self, key: str) -> None:
        """Pod `key` fits nowhere in this round: marked Unschedulable, and at its first attempt counted as a
        displaced pod that found no place (by the actor that displaced it)."""
        if self.world.mark_unschedulable(key):
            actor = self.world.displaced_by.get(key)
            if actor is not None:
                self.world.recorder.no_place[actor] += 1

    def _lowest(self, target: NodeState) -> int | None:
        """The lowest priority of a pod preemption may remove from `target`, kept while its pods are the same."""
        known = self._lowest_on.get(target.name)
        if known is None or known[0] is not target.pods:
            lowest = min((pod.priority for pod in target.pods if not pod.stays_on_node), default=None)
            known = self._lowest_on[target.name] = (target.pods, lowest)
        return known[1]

    def _feasible(self, pod: Pod, simulation: fit.Simulation, used: dict[str, list[int]]) -> list[NodeState]:
        """The nodes that pass the pod's filters: all of them below `MIN_FEASIBLE_NODES_TO_FIND` nodes; else the
        first `feasible_nodes_to_find` from where the last search stopped, which moves past the nodes it
        filtered (a search that finds too few filters every node). `used`: each target's cpu and memory
        requested in this round: a node whose room is short of the pod's requests even so is passed over without
        asking the full filter, which would refuse it too."""
        targets = simulation.targets
        count = len(targets)
        if count < MIN_FEASIBLE_NODES_TO_FIND:
            return [target for target in targets if simulation.why_not(pod, target) is None]
        wanted = feasible_nodes_to_find(count)
        start = self._next_start % count
        feasible: list[NodeState] = []
        processed = count
        cpu, memory = pod.requests.cpu_millis, pod.requests.memory_bytes
        for offset in range(count):
            target = targets[(start + offset) % count]
            room = target.node.allocatable
            taken = used[target.name]
            if taken[0] + cpu > room.cpu_millis or taken[1] + memory > room.memory_bytes:
                continue
            if simulation.why_not(pod, target) is None:
                feasible.append(target)
                if len(feasible) == wanted:
                    processed = offset + 1
                    break
        self._next_start = (start + processed) % count
        return feasible

    # -- preemption ---------------------------------------------------------------------------------

    def _preempt(
        self,
        key: str,
        pod: Pod,
        view: ClusterView,
        simulation: fit.Simulation,
        lowest: dict[str, int | None],
        at: datetime,
    ) -> str | None:
        """DefaultPreemption (pkg/scheduler/framework/plugins/defaultpreemption, and framework/preemption),
        as far as the model needs it: a pod whose preemptionPolicy allows it (the preemptor's policy
        decides: PreemptLowerPriority by default; a placeholder's Never keeps it from preempting) and that
        fits no node may remove pods of lower priority from one node. On each node that passes the
        pod's static predicates (taints, nodeSelector, node affinity) every lower-priority pod is taken
        off; if the pod then fits, victims are reprieved one by one, the most important first (higher
        priority, then earlier start), those whose PodDisruptionBudget would be violated before the
        others (SelectVictimsOnNode), and what cannot be reprieved is a victim. The node is chosen as
        pickOneNodeForPreemption does: fewest PDB violations, then the lowest highest-victim priority,
        the smallest sum of (priority + 2^31) over the victims, the fewest victims, the latest earliest
        start of the highest-priority victims, then the first by name. The victims are deleted at once
        (graceful termination is instant in the model; a placeholder's is 0) and the pod is bound there in
        the same step (its nominatedNodeName). DaemonSet and static pods are never victims; cross-node
        constraints (spread, pod affinity by zone) are checked against the cluster with the victims still
        on it. Returns the node, or None when preemption does not help."""
        if self.world.preemption_policy(key) == "Never":
            return None
        best: tuple[tuple[int, int, int, int, float, str], str, list[Pod]] | None = None
        for target in simulation.targets:
            floor = lowest.get(target.name)
            if floor is None or floor >= pod.priority or fit.static_refusal(pod, target.node) is not None:
                continue
            found = self._victims(pod, target, view, simulation, at)
            if found is None:
                continue
            victims, violations = found
            top = max(victim.priority for victim in victims)
            earliest = min(
                self.world.bound_at.get(victim.key, at).timestamp() for victim in victims if victim.priority == top
            )
            rank = (
                violations,
                top,
                sum(victim.priority + 2**31 for victim in victims),
                len(victims),
                -earliest,
                target.name,
            )
            if best is None or rank < best[0]:
                best = (rank, target.name, victims)
        if best is None:
            return None
        _, node, victims = best
        for victim in victims:
            self.world.preempt(victim.key, actor=KUBE_SCHEDULER, at=at)
        return node

    def _victims(
        self, pod: Pod, target: NodeState, view: ClusterView, simulation: fit.Simulation, at: datetime
    ) -> tuple[list[Pod], int] | None:
        """The pods `pod` must remove from `target` to fit, and how many of them a budget does not allow to
        go; None when it does not fit even with every lower-priority pod gone."""
        removable = [other for other in target.pods if other.priority < pod.priority and not other.stays_on_node]
        if not removable:
            return None
        gone = {other.key for other in removable}
        kept = [other for other in target.pods if other.key not in gone]
        if not self._fits_with(pod, target, kept, view, simulation):
            return None
        allowed = {budget: self.world.disruptions_allowed(budget, at) for budget in self.world.pdbs}
        violating: list[Pod] = []
        harmless: list[Pod] = []
        for other in sorted(removable, key=lambda p: (-p.priority, self.world.bound_at.get(p.key, at))):
            breaks = False
            for budget in self.world.covering_pdbs(other.key):
                allowed[budget] -= 1
                breaks = breaks or allowed[budget] < 0
            (violating if breaks else harmless).append(other)
        victims: list[Pod] = []
        violations = 0
        for group, count in ((violating, True), (harmless, False)):
            for other in group:
                if self._fits_with(pod, target, [*kept, other], view, simulation):
                    kept.append(other)
                else:
                    victims.append(other)
                    violations += 1 if count else 0
        return victims, violations

    def _fits_with(
        self, pod: Pod, target: NodeState, kept: list[Pod], view: ClusterView, simulation: fit.Simulation
    ) -> bool:
        """Whether `pod` fits `target` were only `kept` on it, with the pods placed there in this round."""
        trial = node_state(target.node, tuple(kept), self.config)
        probe = fit.Simulation(view, NOWHERE, [trial])
        probe.source_zone = simulation.source_zone
        usage = simulation.usage.get(target.name)
        for placed in usage.placed if usage is not None else ():
            probe.place(placed, trial)
        return probe.why_not(pod, trial) is None


class _DefaultSpread:
    """PodTopologySpread's score under the system default constraints, for one scheduling round.

    kube-scheduler's default profile scores PodTopologySpread at weight 2
    (pkg/scheduler/apis/config/v1/default_plugins.go). A pod that sets no topologySpreadConstraints
    gets the system defaults: `kubernetes.io/hostname` with maxSkew 3 and `topology.kubernetes.io/zone`
    with maxSkew 5, both ScheduleAnyway, over the pods of its owner (podtopologyspread/plugin.go,
    the selector of the Services, ReplicaSets and StatefulSets selecting the pod). scoring.go: per
    feasible node, sum over the constraints of count x log(domains + 2) + (maxSkew - 1), where
    count is the owner's pods on the node (hostname) or in its zone over the nodes matching the pod's
    node selector, cordoned ones too; rounded; then normalized to 100 x (max + min - score) / max
    (100 everywhere when max is 0). A pod with constraints of its own is scored by their ScheduleAnyway
    ones, which the model does not read: such pods get no spread score here. Job pods have no
    default selector (no Service selects them in the model) and get none either.
    """

    DEFAULT_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
    HOSTNAME_MAX_SKEW = 3
    ZONE_MAX_SKEW = 5

    def __init__(self, world: World, view: ClusterView) -> None:
        self.world = world
        self.view = view
        self._counts: dict[tuple[str, str, str], Counter[str]] = {}

    def _owner_counts(self, owner: tuple[str, str, str]) -> Counter[str]:
        counts = self._counts.get(owner)
        if counts is None:
            counts = Counter()
            for key in self.world.owned(owner):
                node = self.world.pod_record(key).node_name
                if node is not None:
                    counts[node] += 1
            self._counts[owner] = counts
        return counts

    def bound(self, key: str, node: str) -> None:
        owner = self.world.pod_owner(key)
        if owner is not None and owner in self._counts:
            self._counts[owner][node] += 1

    def scores(self, key: str, pod: Pod, feasible: list[NodeState]) -> list[int] | None:
        """The normalized score (0-100) of each feasible node, in order; None when the pod gets none."""
        owner = self.world.pod_owner(key)
        if owner is None or owner[1] not in self.DEFAULT_OWNERS:
            return None
        if self.world.pods[key]["spec"].get("topologySpreadConstraints"):
            return None
        counts = self._owner_counts(owner)
        zones: Counter[str] = Counter()
        target_zones = [target.node.zone for target in feasible]  # a property: read once per node
        feasible_zones = {zone for zone in target_zones if zone is not None}
        for name, count in counts.items():
            state = self.view.nodes.get(name)
            if state is None:
                continue
            zone = state.node.zone
            if zone not in feasible_zones or not _selects(pod, state.node):
                continue
            zones[zone] += count
        host_weight = math.log(len(feasible) + 2)
        zone_weight = math.log(len(feasible_zones) + 2)
        raw = []
        for target, zone in zip(feasible, target_zones, strict=True):
            score = counts[target.name] * host_weight + (self.HOSTNAME_MAX_SKEW - 1)
            if zone is not None:
                score += zones[zone] * zone_weight + (self.ZONE_MAX_SKEW - 1)
            raw.append(round(score))
        highest, lowest = max(raw), min(raw)
        if highest == 0:
            return [100] * len(raw)
        return [100 * (highest + lowest - score) // highest for score in raw]


def feasible_nodes_to_find(count: int) -> int:
    """How many feasible nodes kube-scheduler looks for among `count` (`numFeasibleNodesToFind`, with
    percentageOfNodesToScore at its default of 0: adaptive)."""
    if count < MIN_FEASIBLE_NODES_TO_FIND:
        return count
    percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE, BASE_PERCENTAGE_OF_NODES_TO_SCORE - count // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, count * percentage // 100)


def _selects(pod: Pod, node: Node) -> bool:
    """Whether the node matches the pod's nodeSelector and required node affinity: nodeAffinityPolicy
    Honor, the default, counts only such nodes as the pod's spread domains."""
    if any(node.labels.get(label) != value for label, value in pod.node_selector):
        return False
    return node_affinity_matches(pod.node_affinity, node.name, node.labels)


def node_affinity_scores(pod: Pod, feasible: list[NodeState]) -> list[int] | None:
    """NodeAffinity's normalized score (0-100) of each feasible node, in order (`fit.node_affinity_scores`: the
    matched weights of the pod's preferred terms, normalized by the highest, kubernetes v1.36.3; at weight 2 in
    the default profile, so one matched term against none is worth 200, as much as the resource scores can
    differ); None for a pod without preferred node affinity (the plugin skips it: no node gains)."""
    if not pod.preferred_node_affinity:
        return None
    return fit.node_affinity_scores(pod, feasible)


def _taint_toleration(pod: Pod, target: NodeState) -> int:
    """TaintToleration's score: nodes with no PreferNoSchedule taint the pod does not tolerate first.

    kube-scheduler normalizes it to 0-100 (the node with the most such taints scores 0) and weighs it
    3 in the default profile (pkg/scheduler/apis/config/v1/default_plugins.go), against 1 for
    NodeResourcesFit: a node the pod need not avoid wins whatever its load.
    """
    taints = target.node.taints
    intolerable = bool(taints) and any(
        taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in pod.tolerations) for taint in taints
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
    """NodeResourcesBalancedAllocation's score for cpu and memory: nodes whose balance the pod improves win.

    kube-scheduler 1.36 (balancedResourceScorer, noderesources/balanced_allocation.go) scores the change
    the pod makes, 50 + (50 + after - before) / 2 in integers, not the balance after placement alone:
    a node already uneven that the pod leaves as uneven scores about 75, like an even one it keeps
    even. The e2e calibration (tests/simulation/calibrate_consolidation.py) found the difference: a
    drained pod went to a busier node than the older formula sent it to.
    """
    allocatable = target.node.allocatable
    if allocatable.cpu_millis <= 0 or allocatable.memory_bytes <= 0:
        return 100  # a resource the node has none of is left out: one share has no spread
    cpu, memory = allocatable.cpu_millis, allocatable.memory_bytes
    before = fit.balanced_resource_score(cpu, memory, used[0], used[1])
    after = fit.balanced_resource_score(
        cpu, memory, used[0] + pod.requests.cpu_millis, used[1] + pod.requests.memory_bytes
    )
    return 50 + (50 + after - before) // 2  # never negative: after and before are both within 50..100


def _used_share(capacity: int, requested: int) -> int:
    if capacity <= 0 or requested > capacity:
        return 0
    return requested * 100 // capacity


def _free_share(capacity: int, requested: int) -> int:
    if capacity <= 0 or requested > capacity:
        return 0
    return (capacity - requested) * 100 // capacity
