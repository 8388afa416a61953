"""Scheduling simulation: do a node's pods fit on the rest of the cluster? (DESIGN rule 6)

Places the pods largest first, in the order the executor evicts them, in
the order their replacements reach the scheduler when PodDisruptionBudgets
hold some evictions back (`arrival_order`), and in the order the scheduling
queue hands them out when they wait there together (`queue_order`: higher
priority first), each on the target the default scheduler scores best at
that moment among those passing every predicate, accumulating what the
placements use. The default profile scores NodeResourcesFit (LeastAllocated)
and NodeResourcesBalancedAllocation at weight 1 each, which together come to
200 - 100 x the larger of the node's cpu and memory shares after placement:
a cpu-heavy pod goes where memory is used, not only where most is free.
kube-scheduler 1.36 scores NodeResourcesBalancedAllocation by the change the
pod makes to the node's balance instead, 50 + (50 + after - before) / 2
(kubernetes/kubernetes#135573; 1.35 and earlier score the balance after
placement), so the same pods may land elsewhere: `balance="change"` scores
as 1.36 does, and the fit proof runs both (`proof.prove`).
A pod with preferred node affinity is placed with kube-scheduler's NodeAffinity
score beside those (`node_affinity_scores`, weight 2): one matched term is worth
as much as the resource scores can differ, so a pod preferring Spot takes a Spot
node's room before an emptier node's, and every target is looked at for it.
Among targets scored equally the scheduler picks at random; the proof takes
the one with the most room left, the pick that breaks the largest hole, and
then checks the orders the replacements really arrive in again with ties
going to the fullest target and to seeded random ones (`TieBreak`).
Placing the pods any other way could prove a fit the scheduler then does not
find, when small pods take the room kept for a large one. Targets wait in a
heap keyed by their larger share, which bounds the score a pod can get
there, so a pod looks only at the few targets that could still win.

Predicates: cpu, memory, extended resources and pod count against
allocatable; NoSchedule/NoExecute taints tolerated; nodeSelector and
required node affinity; host ports; required pod affinity and anti-affinity
(both directions); topology spread constraints with DoNotSchedule; and a pod
with a PersistentVolumeClaim stays in its zone.
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from compactor.core import spread
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import (
    HOSTNAME_LABEL,
    PLACEHOLDER_PRIORITY,
    UNSCHEDULABLE_TAINT,
    LabelSelector,
    Node,
    Pdb,
    Pod,
    PodAffinityTerm,
    Resources,
    SpreadConstraint,
)
from compactor.core.selectors import node_affinity_matches, preferred_weight, selector_matches
from compactor.core.wording import mebibytes, refusal, thousandths

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class FitResult:
    fits: bool
    placements: dict[str, str]  # pod key -> target node name
    failure: str | None = None  # why the first pod that did not fit found no node


@dataclass(slots=True)
class _Usage:
    """What one target node carries during a simulation: its own pods plus those placed on it."""

    target: NodeState
    cpu: int
    memory: int
    pods: int
    extended: dict[str, int]
    placed: list[Pod] = field(default_factory=list)

    def copy(self) -> _Usage:
        return _Usage(self.target, self.cpu, self.memory, self.pods, dict(self.extended), list(self.placed))

    def add(self, pod: Pod) -> None:
        """`pod` placed on this node."""
        requests = pod.requests
        self.cpu += requests.cpu_millis
        self.memory += requests.memory_bytes
        self.pods += 1
        for name, amount in requests.extended:
            self.extended[name] = self.extended.get(name, 0) + amount
        self.placed.append(pod)


def _fresh_usage(target: NodeState, held: Resources | None) -> _Usage:
    """What `target` carries before a simulation places anything: its own pods, and a placeholder's room when one
    holds some (`held`)."""
    requested = target.requested
    usage = _Usage(target, requested.cpu_millis, requested.memory_bytes, len(target.pods), dict(requested.extended))
    if held is not None:
        usage.cpu += held.cpu_millis
        usage.memory += held.memory_bytes
        usage.pods += 1
    return usage


class Booked:
    """Pods booked onto nodes across the simulations of one view, which start with them there
    (`Simulation(booked=...)`): the Cluster Autoscaler's pass books the pods of each node it finds removable
    onto the nodes they landed on, for every node it simulates after. Kept once here, each simulation borrowing a
    node's usage until it places something there, instead of each placing every booked pod again: that cost the
    pass the nodes it simulates times the nodes booked onto, the square of the cluster. A simulation reads the
    booking as it is, so it is used only while the booking holds still.

    The booked pods are also filed by namespace, and by the value of each label key a selector has asked for
    (`matching`), so a simulation counting the pods a topology spread constraint selects looks only at the booked
    pods carrying the selector's first label, not at every booked pod (at 5,000 nodes that walk, for each node
    simulated and constraint asked, was a fifth of the autoscaler's pass)."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.usage: dict[str, _Usage] = {}
        # The booked pods by namespace, and by namespace and the value of a label key asked for (filed from the
        # first ask on), each with the usage it was booked into: one of a node unbooked since is passed over.
        self._by_namespace: dict[str, list[tuple[Pod, _Usage]]] = defaultdict(list)
        self._by_label: dict[tuple[str, str, str], list[tuple[Pod, _Usage]]] = {}
        self._label_keys: dict[str, set[str]] = {}

    def book(self, pods: Sequence[Pod], target: NodeState) -> None:
        usage = self.usage.get(target.name)
        if usage is None:
            # As a fresh simulation's `_usage` finds it: no placeholder preempted yet.
            usage = self.usage[target.name] = _fresh_usage(target, self.view.preemptible.get(target.name))
        for pod in pods:
            usage.add(pod)
            self._file(pod, usage)

    def _file(self, pod: Pod, usage: _Usage) -> None:
        entry = (pod, usage)
        self._by_namespace[pod.namespace].append(entry)
        for key in self._label_keys.get(pod.namespace, ()):
            self._file_by_label(entry, key)

    def _file_by_label(self, entry: tuple[Pod, _Usage], key: str) -> None:
        """File a booked pod under its namespace and its value of label `key`, if it has the label."""
        pod = entry[0]
        value = pod.labels.get(key)
        if value is not None:
            self._by_label.setdefault((pod.namespace, key, value), []).append(entry)

    def unbook(self, name: str) -> None:
        """The pods booked onto `name` leave it (the node was found removable: they are booked elsewhere)."""
        self.usage.pop(name, None)

    def matching(self, namespace: str, selector: LabelSelector | None) -> Iterator[tuple[Pod, _Usage]]:
        """The booked pods of `namespace` that `selector` selects (a None selector, none), each with the usage of
        the node it is booked onto: looked for among those carrying the selector's first label."""
        if selector is None:
            return
        if selector.match_labels:
            key, value = selector.match_labels[0]
            keys = self._label_keys.setdefault(namespace, set())
            if key not in keys:
                keys.add(key)
                for entry in self._by_namespace.get(namespace, ()):
                    self._file_by_label(entry, key)
            filed = self._by_label.get((namespace, key, value), ())
        else:
            filed = self._by_namespace.get(namespace, ())
        usage = self.usage
        for pod, booked in filed:
            if usage.get(booked.target.name) is booked and selector_matches(selector, pod.labels):
                yield pod, booked


_Entry = tuple[bool, float, str, int]
# The most a target can score for a pod (`Simulation._score`) when none of it is allocated.
_BEST_POSSIBLE = 200
_NO_NAMES: set[str] = set()
# How a pod's placement picks among targets with the same score: the one with the most room left
# (the proof's first pick), the fullest, or at random as kube-scheduler does (`selectHost`).
TieBreak = Literal["roomiest", "fullest"] | random.Random
# How NodeResourcesBalancedAllocation scores: the balance after placement (kube-scheduler up to
# 1.35), or the change the pod makes to it (1.36 and later; balancedResourceScorer).
Balance = Literal["after", "change"]
# With a tie-break other than the roomiest, a pod's scan looks at most this many targets: the ties
# that matter are among a few nearly full nodes, and thousands of equally roomy ones need not be
# told apart.
MAX_TIE_SCAN = 64


def _rerank(heap: list[_Entry], targets: Sequence[NodeState], rank: Callable[[NodeState], tuple[bool, float]]) -> None:
    """The heap made again after a placeholder was preempted: its node's load changed in place."""
    heap[:] = [(*rank(target), target.name, index) for index, target in enumerate(targets)]
    heapq.heapify(heap)


def largest_first(pods: Iterable[Pod]) -> list[Pod]:
    """DESIGN rule 6's order: largest first (cpu, then memory), ties by name."""
    return sorted(pods, key=lambda p: (-p.requests.cpu_millis, -p.requests.memory_bytes, p.key))


def eviction_order(pods: Iterable[Pod]) -> list[Pod]:
    """The order the executor evicts in: the lower priorities first, and within a priority the
    largest first (cpu, then memory), then pod-deletion-cost and name.

    The replacements reach the scheduler about in this order, and it puts each where it scores best
    as it comes. Large pods first take the holes only they fit in before the small ones, which fit
    nearly anywhere, spread over them: first-fit-decreasing, the order that packs best. Small pods
    first broke those holes, and the proof then found no place for the large pod on nodes where a
    person sees room.
    """
    return sorted(
        pods, key=lambda p: (p.priority, -p.requests.cpu_millis, -p.requests.memory_bytes, p.deletion_cost, p.key)
    )


def arrival_order(evicted: Iterable[Pod], covering: Callable[[Pod], Sequence[Pdb]]) -> list[Pod]:
    """The order the replacements reach the scheduler when the pods are evicted in `evicted`'s order
    (`eviction_order`'s): that order, with the pods PDBs hold back last.

    The Eviction API refuses (429) a pod whose PodDisruptionBudget the earlier evictions of the
    drain have used up; the executor retries it once the replacements are Ready, so it reaches the
    scheduler after the pods evicted at once, and they have taken their places by then.
    """
    at_once, held = _by_budget(evicted, covering)
    return _recreated_last(at_once) + held


def queue_order(evicted: Iterable[Pod], covering: Callable[[Pod], Sequence[Pdb]]) -> list[Pod]:
    """The order kube-scheduler takes the replacements from its queue when they wait there together:
    `arrival_order`'s, with the higher priorities first within the pods evicted at once and within
    those PDBs hold back.

    The executor evicts several pods at once, so their replacements can be pending side by side, and
    the scheduling queue is sorted by priority, then by the time each pod entered it (the PrioritySort
    plugin's `Less`, pkg/scheduler/framework/plugins/queuesort/priority_sort.go). A node whose pods
    mix priorities (a kube-dns replica, system-cluster-critical, beside the applications) has its
    high-priority replacements placed first, although the executor evicts them last.
    """
    at_once, held = _by_budget(evicted, covering)
    return sorted(_recreated_last(at_once), key=_higher_priority_first) + sorted(held, key=_higher_priority_first)


def _recreated_last(pods: list[Pod]) -> list[Pod]:
    """`pods` in the order their controllers recreate them: Job pods after the others, StatefulSet
    pods last, each group in order.

    A ReplicaSet creates a replacement as soon as the evicted pod is terminating. The Job controller
    batches the pod events of a Job and syncs it one second later (`syncJobBatchPeriod`,
    pkg/controller/job/job_controller.go), after the executor's evictions of the drain have gone out.
    A StatefulSet recreates a pod under the same name only once the old one is gone, after its
    termination grace period (pkg/controller/statefulset/stateful_set_control.go waits for a
    terminating pod to be deleted). So the other replacements reach the scheduler first."""
    if not any(pod.controller_kind in _RECREATED_LATER for pod in pods):
        return pods
    return sorted(pods, key=lambda pod: _RECREATED_LATER.get(pod.controller_kind or "", 0))  # stable


# How late a controller recreates an evicted pod, relative to the others (`_recreated_last`).
_RECREATED_LATER = {"Job": 1, "StatefulSet": 2}


def _higher_priority_first(pod: Pod) -> int:
    return -pod.priority  # a stable sort keeps the eviction order, the queue's timestamps, within a priority


def _by_budget(evicted: Iterable[Pod], covering: Callable[[Pod], Sequence[Pdb]]) -> tuple[list[Pod], list[Pod]]:
    """The pods the Eviction API lets go at once, in order, and those the earlier ones' PDBs hold back."""
    budgets: dict[tuple[str, str], int] = {}
    at_once: list[Pod] = []
    held: list[Pod] = []
    for pod in evicted:
        pdbs = covering(pod)
        if all(budgets.setdefault((pdb.namespace, pdb.name), pdb.disruptions_allowed) > 0 for pdb in pdbs):
            for pdb in pdbs:
                budgets[(pdb.namespace, pdb.name)] -= 1
            at_once.append(pod)
        else:
            held.append(pod)
    return at_once, held


def static_refusal(pod: Pod, node: Node, ignored_taints: frozenset[str] = frozenset()) -> str | None:
    """The first predicate that keeps `pod` off `node` whatever runs there: taints, nodeSelector, node affinity."""
    for taint in node.taints:
        if taint.key in ignored_taints or taint.effect not in SCHEDULING_EFFECTS:
            continue
        for toleration in pod.tolerations:  # a loop, not any(): the most called check of every simulation
            if toleration.tolerates(taint):
                break
        else:
            return "taint"
    for key, value in pod.node_selector:
        if node.labels.get(key) != value:
            return "nodeSelector"
    if pod.node_affinity is not None and not node_affinity_matches(pod.node_affinity, node.name, node.labels):
        return "node affinity"
    return None


def could_use(pod: Pod, node: Node, *, uncordoned: bool = False) -> bool:
    """Whether `pod` could run on `node` were it empty (and, with `uncordoned`, no longer cordoned).

    The static predicates and requests within allocatable. Uncordoning also takes away the
    unschedulable taint the node lifecycle controller put there for the cordon.
    """
    ignored = frozenset({UNSCHEDULABLE_TAINT}) if uncordoned else frozenset[str]()
    if static_refusal(pod, node, ignored) is not None:
        return False
    requests, allocatable = pod.requests, node.allocatable
    if requests.cpu_millis > allocatable.cpu_millis or requests.memory_bytes > allocatable.memory_bytes:
        return False
    available = dict(allocatable.extended)
    return all(amount <= available.get(name, 0) for name, amount in requests.extended)


def targets_for(view: ClusterView) -> list[NodeState]:
    """Nodes pods may move to; a Simulation orders them by load itself."""
    return [state for state in view.nodes.values() if state.schedulable]


def fits_in_every_order(
    view: ClusterView, source: NodeState, targets: Sequence[NodeState], pods: Sequence[Pod] | None = None
) -> bool:
    """Whether the source node's movable pods (or `pods`: a drain under way proves what is left of
    them with the pods already on their way to a node) fit however they come and however ties are broken:
    true when each passes every predicate on at least as many targets, as they are now, as there are
    pods, and no pod's constraint reaches past the node it lands on.

    The pods placed before any one of them land on fewer targets than there are pods, so at least
    one of its targets is left as it is now, and still takes it: the predicates that look at other
    pods look only at that node's (host ports, anti-affinity by hostname either way). Pod affinity,
    anti-affinity by a wider topology and spread constraints count pods over many nodes, so pods with
    them are left to the runs. Every `Simulation` of these pods, in any order, with any tie-break and
    any avoided nodes, then places every pod: the fit proof need run only its first. False says
    nothing: the proof then runs in full.
    """
    if pods is None:
        pods = source.movable_pods
    for pod in pods:
        if pod.pod_affinity or pod.spread_constraints:
            return False
        if any(term.topology_key != HOSTNAME_LABEL for term in pod.pod_anti_affinity):
            return False
    probe = Simulation(view, source, targets)
    needed = len(pods)
    for pod in pods:
        found = 0
        for target in probe.targets:
            if probe.why_not(pod, target) is None:
                found += 1
                if found == needed:
                    break
        else:
            return False
    return True


class Simulation:
    """One simulation per candidate node; the view and target order are shared."""

    def __init__(
        self,
        view: ClusterView,
        source: NodeState,
        targets: Sequence[NodeState],
        avoided: frozenset[str] = frozenset(),
        *,
        ties: TieBreak = "roomiest",
        source_is_domain: bool = True,
        spread_score: bool = False,
        balance: Balance = "after",
        booked: Booked | None = None,
    ) -> None:
        """`source_is_domain`: whether the source node, cordoned and emptying, still counts as a
        topology spread domain, as kube-scheduler counts it (`_spread_counts_before`). The Cluster
        Autoscaler's own simulation removes the node from its snapshot, and so does not.
        `spread_score`: score kube-scheduler's system-default topology spread too (`_spread_pick`).
        `balance`: which kube-scheduler's BalancedAllocation score to use (`Balance`).
        `booked`: pods already placed on the other nodes, as if this simulation had placed them first, in the
        booking's order, the source node's left out (`Booked`)."""
        self.view = view
        self.balance = balance
        # The most a pod's score can fall per unit of a target's larger share (`_score`): both
        # resource scores fall with it when the balance after placement is scored, only
        # LeastAllocated when the change is (the change's score is anywhere in 50-100).
        self._slope = 100 if balance == "after" else 50
        self.ties = ties
        self.spread_score = spread_score
        self._owner_counts: dict[tuple[str, str, str], Counter[str]] = {}
        self.source_is_domain = source_is_domain
        self.source = source
        self._given = targets
        # Nodes with a PreferNoSchedule taint: the scheduler's TaintToleration score puts pods
        # elsewhere first, so they are taken last here too.
        self.avoided = avoided
        self.usage: dict[str, _Usage] = {}
        # The booking's usage of a node, shared until this simulation changes it (`_usage` copies it then).
        self._borrowed: dict[str, _Usage] = {}
        self._booking: Booked | None = None
        # The nodes whose usage is this simulation's own: made here, or copied from the booking to change.
        self._own: list[str] = []
        if booked is not None and booked.usage:
            self._borrowed = booked.usage
            self._booking = booked
            self.usage = dict(booked.usage)
            self.usage.pop(source.name, None)
        self.source_zone = source.node.zone
        self._spread_counts: dict[tuple[str, SpreadConstraint], Counter[str]] = {}
        self._largest: tuple[int, int] | None = None  # the targets' largest allocatable cpu and memory
        # Node replacement's placeholders preempted in this run, by the node they held (`_preempt`).
        self._preempted: set[str] = set()

    @functools.cached_property
    def targets(self) -> list[NodeState]:
        """The nodes the pods may go to: those given but the source, in their order, made when first asked (the
        Cluster Autoscaler's pass makes a simulation for each node it judges, in a cluster of thousands, and
        finds its targets by name instead)."""
        targets = [target for target in self._given if target.name != self.source.name]
        self._given_count = len(targets)
        return targets

    def _targets_added(self) -> bool:
        """Whether nodes were added to `targets` since it was made: the indexes shared by view then do not hold."""
        return len(self.targets) != self._given_count  # `targets` first: making it counts them

    def run(self, pods: Iterable[Pod]) -> FitResult:
        """Place `pods` in the order given; a new Simulation for every order tried."""
        placements: dict[str, str] = {}
        heap, targets = self._start()
        source = self.source.name
        # How much more than the best so far a later (fuller) target must score to win: with ties to
        # the roomiest, more; otherwise as much, and the scan goes on through equal scores.
        margin = 1 if self.ties == "roomiest" else 0
        draws = self.ties if isinstance(self.ties, random.Random) else None
        for pod in pods:
            if pod.node_selector and self.targets:
                nowhere = self._refused_by_node_selector(pod)
                if nowhere is not None:
                    return FitResult(False, placements, self._explain(pod, nowhere))
            # One pass: the reasons gathered on the way explain a pod that fits nowhere.
            refusals: Counter[str] = Counter()
            if pod.preferred_node_affinity:
                picked = self._preferred_pick(pod, heap, targets, refusals) or self._preempt(pod, targets)
                if picked is None:
                    return FitResult(False, placements, self._explain(pod, refusals))
                self.place(pod, picked)
                placements[pod.key] = picked.name
                if picked.name in self._preempted:
                    _rerank(heap, targets, self._rank)
                continue
            if self.spread_score and _default_spread_owner(pod) is not None:
                picked = self._spread_pick(pod, heap, targets, refusals) or self._preempt(pod, targets)
                if picked is None:
                    return FitResult(False, placements, self._explain(pod, refusals))
                self.place(pod, picked)
                placements[pod.key] = picked.name
                if picked.name in self._preempted:
                    _rerank(heap, targets, self._rank)
                continue
            looked: list[_Entry] = []
            best: _Entry | None = None
            best_score = -1
            tied = 0
            # The pod raises a target's larger share by at least its smaller share of the largest node.
            slope = self._slope
            ceiling = _BEST_POSSIBLE - slope * self._least_rise(pod) + 1e-9
            while heap:
                entry = heap[0]
                if best is not None and (entry[0] > best[0] or int(ceiling - slope * entry[1]) < best_score + margin):
                    break  # an avoided target, or none left that could score as high
                if best is not None and margin == 0 and len(looked) >= MAX_TIE_SCAN:
                    break
                heapq.heappop(heap)
                looked.append(entry)
                target = targets[entry[3]]
                if target.name == source:
                    continue  # in the shared starting order, which serves every source node
                score = self._score(pod, target) if best is not None else None
                if score is not None and score < best_score + margin:
                    continue  # it could not win: no need to know whether it fits
                why = self.why_not(pod, target)
                if why is not None:
                    refusals[why] += 1
                    continue
                if score is None:
                    score = self._score(pod, target)
                if best is None or score > best_score:
                    best, best_score, tied = entry, score, 1
                elif score == best_score and margin == 0:
                    tied += 1  # the fullest so far, or one of the tied at random
                    if draws is None or draws.randrange(tied) == 0:
                        best = entry
            if best is not None:
                target = targets[best[3]]
                self.place(pod, target)
                placements[pod.key] = target.name
                for entry in looked:
                    if entry is not best:
                        heapq.heappush(heap, entry)
                heapq.heappush(heap, (*self._rank(target), target.name, best[3]))
                continue
            for entry in looked:
                heapq.heappush(heap, entry)
            victim = self._preempt(pod, targets)
            if victim is None:
                return FitResult(False, placements, self._explain(pod, refusals))  # every target refused it
            self.place(pod, victim)
            placements[pod.key] = victim.name
            _rerank(heap, targets, self._rank)
        return FitResult(True, placements)

    def _preempt(self, pod: Pod, targets: Sequence[NodeState]) -> NodeState | None:
        """kube-scheduler's preemption, as far as node replacement needs it: a pod that fits on no node as
        it is takes a node whose placeholder (priority PLACEHOLDER_PRIORITY) holds the room it needs, and the
        placeholder goes. Only then: a pod that fits elsewhere never preempts one. None when no placeholder
        makes room for it (or the pod's priority is not above a placeholder's)."""
        held = self.view.preemptible
        if not held or pod.priority <= PLACEHOLDER_PRIORITY:
            return None
        by_name = {target.name: target for target in targets if target.name in held}
        for name in sorted(held.keys() - self._preempted):
            target = by_name.get(name)
            if target is None or name == self.source.name:
                continue
            usage = self._usage(target)
            room = held[name]
            usage.cpu -= room.cpu_millis
            usage.memory -= room.memory_bytes
            usage.pods -= 1
            if self.why_not(pod, target) is None:
                self._preempted.add(name)
                return target
            usage.cpu += room.cpu_millis
            usage.memory += room.memory_bytes
            usage.pods += 1
        return None

    def _spread_pick(
        self, pod: Pod, heap: list[_Entry], targets: Sequence[NodeState], refusals: Counter[str]
    ) -> NodeState | None:
        """The target kube-scheduler picks for `pod` when it scores the system-default topology spread
        beside the resources (`_spread_scores`), among the `MAX_TIE_SCAN` least allocated targets that
        hold it (the others only when none of those the scheduler does not avoid holds it); None when
        no target holds it. The heap gets back every target looked at, the picked one re-ranked."""
        looked: list[_Entry] = []
        feasible: list[tuple[_Entry, NodeState]] = []
        while heap:
            entry = heap[0]
            if feasible and (entry[0] > feasible[0][0][0] or len(feasible) >= MAX_TIE_SCAN):
                break  # an avoided target while others hold it, or enough looked at
            heapq.heappop(heap)
            looked.append(entry)
            target = targets[entry[3]]
            if target.name == self.source.name:
                continue
            why = self.why_not(pod, target)
            if why is not None:
                refusals[why] += 1
                continue
            feasible.append((entry, target))
        best: tuple[_Entry, NodeState] | None = None
        if feasible:
            spread = self._spread_scores(pod, [target for _, target in feasible])
            best_score = -1
            for (entry, target), extra in zip(feasible, spread, strict=True):
                score = self._score(pod, target) + DEFAULT_SPREAD_WEIGHT * extra
                if score > best_score:  # ties: the roomiest, the first in heap order
                    best, best_score = (entry, target), score
        for entry in looked:
            if best is None or entry is not best[0]:
                heapq.heappush(heap, entry)
        if best is None:
            return None
        entry, target = best
        heapq.heappush(heap, (*self._rank(target), target.name, entry[3]))
        return target

    def _preferred_pick(
        self, pod: Pod, heap: list[_Entry], targets: Sequence[NodeState], refusals: Counter[str]
    ) -> NodeState | None:
        """The target kube-scheduler picks for a pod with preferred node affinity: its NodeAffinity score
        (`node_affinity_scores`, weight 2) beside the resource scores (and the system-default spread's
        with `spread_score`), over every target that holds it, since a preferred one may be the fullest;
        the targets the scheduler avoids only when no other holds it, as for every pod. Ties as `ties`
        says. None when no target holds it; the heap gets back every target, the picked one re-ranked."""
        looked = sorted(heap)
        heap.clear()
        feasible: list[tuple[_Entry, NodeState]] = []
        for entry in looked:
            target = targets[entry[3]]
            if target.name == self.source.name:
                continue
            why = self.why_not(pod, target)
            if why is not None:
                refusals[why] += 1
                continue
            feasible.append((entry, target))
        best: tuple[_Entry, NodeState] | None = None
        if feasible:
            preferring = node_affinity_scores(pod, [target for _, target in feasible])
            spread = (
                self._spread_scores(pod, [target for _, target in feasible])
                if self.spread_score and _default_spread_owner(pod) is not None
                else [0] * len(feasible)
            )
            unavoided = not feasible[0][0][0]  # sorted: the targets the scheduler does not avoid come first
            draws = self.ties if isinstance(self.ties, random.Random) else None
            best_score, tied = -1, 0
            for (entry, target), preference, extra in zip(feasible, preferring, spread, strict=True):
                if unavoided and entry[0]:
                    break
                score = self._score(pod, target) + NODE_AFFINITY_WEIGHT * preference + DEFAULT_SPREAD_WEIGHT * extra
                if score > best_score:
                    best, best_score, tied = (entry, target), score, 1
                elif score == best_score and self.ties != "roomiest":
                    tied += 1  # the fullest so far, or one of the tied at random
                    if draws is None or draws.randrange(tied) == 0:
                        best = (entry, target)
        for entry in looked:
            if best is None or entry is not best[0]:
                heap.append(entry)
        if best is None:
            heapq.heapify(heap)
            return None
        entry, target = best
        heap.append((*self._rank(target), target.name, entry[3]))
        heapq.heapify(heap)
        return target

    def _spread_scores(self, pod: Pod, feasible: list[NodeState]) -> list[int]:
        """PodTopologySpread's normalized score (0-100) of each feasible target under the system
        defaults: `kubernetes.io/hostname` maxSkew 3 and `topology.kubernetes.io/zone` maxSkew 5 over
        the pods of the pod's owner (podtopologyspread/scoring.go: count x log(domains + 2) + maxSkew -
        1 per constraint, rounded, then 100 x (max + min - score) / max). The owner stands for the
        Services and ReplicaSets that select the pod."""
        owner = _default_spread_owner(pod)
        assert owner is not None
        counts = self._owner_counts.get(owner)
        if counts is None:
            counts = Counter()
            for other in self.view.pods_by_namespace.get(pod.namespace, ()):
                if other.node_name and other.node_name != self.source.name and _default_spread_owner(other) == owner:
                    counts[other.node_name] += 1
            for name, usage in self.usage.items():
                counts[name] += sum(1 for placed in usage.placed if _default_spread_owner(placed) == owner)
            self._owner_counts[owner] = counts
        zones = {target.node.zone for target in feasible if target.node.zone is not None}
        by_zone: Counter[str] = Counter()
        for name, count in counts.items():
            holder = self.view.nodes.get(name)
            if holder is not None and holder.node.zone in zones:
                by_zone[holder.node.zone or ""] += count
        host_weight = math.log(len(feasible) + 2)
        zone_weight = math.log(len(zones) + 2)
        raw = []
        for target in feasible:
            score = counts[target.name] * host_weight + 2
            if target.node.zone is not None:
                score += by_zone[target.node.zone] * zone_weight + 4
            raw.append(round(score))
        highest, lowest = max(raw), min(raw)
        if highest == 0:
            return [100] * len(raw)
        return [100 * (highest + lowest - score) // highest for score in raw]

    def _refused_by_node_selector(self, pod: Pod) -> Counter[str] | None:
        """When no target carries the labels of `pod`'s nodeSelector, what the scan of every target
        would find (each refuses it for a taint or for the nodeSelector), without the scan; else None.

        A pod pinned to one node by its hostname fits nowhere else: this is the common failed
        simulation, and looking at every target one by one made it the most costly part of a plan.
        """
        matching: set[str] | None = None
        for key, value in pod.node_selector:
            labelled = self._names_labelled(key, value)
            matching = labelled - {self.source.name} if matching is None else matching & labelled
            if not matching:
                break
        if matching:
            return None  # some target may take it: the scan decides
        refusals: Counter[str] = Counter()
        tainted = sum(1 for t in self.targets if t.node.taints and static_refusal(pod, t.node) == "taint")
        selector = len(self.targets) - tainted
        if tainted and selector and tainted == selector:
            # Equal counts are listed in the order the scan would meet them: the first target's reason first.
            first = min(self.targets, key=lambda target: (*self._rank(target), target.name))
            first_reason = static_refusal(pod, first.node)
            assert first_reason is not None
            refusals[first_reason] = 0
        if tainted:
            refusals["taint"] += tainted
        if selector:
            refusals["nodeSelector"] += selector
        return refusals

    def _names_labelled(self, key: str, value: str) -> set[str]:
        """The names of the targets whose label `key` is `value`, indexed once per view, targets and key."""
        if self._targets_added():  # no shared index
            return {target.name for target in self.targets if target.node.labels.get(key) == value}
        cache_key = (id(self._given), key)
        shared = self.view.target_labels.get(cache_key)
        if shared is None or shared[0] is not self._given:
            index: dict[str, set[str]] = {}
            for target in self._given:
                found = target.node.labels.get(key)
                if found is not None:
                    index.setdefault(found, set()).add(target.name)
            shared = (self._given, index)
            self.view.target_labels[cache_key] = shared
        return shared[1].get(value, _NO_NAMES)

    def _start(self) -> tuple[list[_Entry], Sequence[NodeState]]:
        """The targets as a heap of (avoided, larger share, name, index into the sequence returned
        beside it): the least allocated target the scheduler does not avoid on top.

        Before anything is placed the order depends only on the targets and the avoided nodes, so one
        heap, of every target given, is made once per view and copied for each run (a plan simulates
        up to 25 candidates, each in two orders or more, over thousands of targets).
        """
        if self.usage or self._targets_added():
            heap = [(*self._rank(target), target.name, index) for index, target in enumerate(self.targets)]
            heapq.heapify(heap)
            return heap, self.targets
        key = (id(self._given), self.avoided)
        shared = self.view.start_heaps.get(key)
        if shared is None or shared[0] is not self._given:
            heap = [(*self._rank(target), target.name, index) for index, target in enumerate(self._given)]
            heapq.heapify(heap)
            shared = (self._given, heap)
            self.view.start_heaps[key] = shared
        return list(shared[1]), self._given

    def _rank(self, target: NodeState) -> tuple[bool, float]:
        return target.name in self.avoided, self._load(target)

    def _load(self, target: NodeState) -> float:
        """How allocated a target is now: the larger of its cpu and memory shares (a resource the node
        has none of counts 0). A pod placed on it scores at most `_BEST_POSSIBLE` - 100 x this."""
        allocatable = target.node.allocatable
        cpu, memory = self._allocated(target)
        cpu_share = cpu / allocatable.cpu_millis if allocatable.cpu_millis > 0 else 0.0
        memory_share = memory / allocatable.memory_bytes if allocatable.memory_bytes > 0 else 0.0
        return max(cpu_share, memory_share)

    def _allocated(self, target: NodeState) -> tuple[int, int]:
        """The cpu and memory requested on `target` now: its own pods' and those placed on it (and a
        placeholder's, until it is preempted)."""
        usage = self.usage.get(target.name)
        if usage is None:
            requested = target.requested
            held = self._held(target)
            if held is None:
                return requested.cpu_millis, requested.memory_bytes
            return requested.cpu_millis + held.cpu_millis, requested.memory_bytes + held.memory_bytes
        return usage.cpu, usage.memory

    def _held(self, target: NodeState) -> Resources | None:
        """The room a node replacement placeholder on `target` still holds in this run (None: none, or preempted)."""
        held = self.view.preemptible
        if not held or target.name in self._preempted:
            return None
        return held.get(target.name)

    def _least_rise(self, pod: Pod) -> float:
        """The least `pod` can add to any target's larger share: the smaller of its cpu and memory
        shares of the largest allocatable among the targets."""
        largest = self._largest
        if largest is None:
            largest = self._largest = (
                max((target.node.allocatable.cpu_millis for target in self.targets), default=0),
                max((target.node.allocatable.memory_bytes for target in self.targets), default=0),
            )
        cpu = pod.requests.cpu_millis / largest[0] if largest[0] > 0 else 0.0
        memory = pod.requests.memory_bytes / largest[1] if largest[1] > 0 else 0.0
        return min(cpu, memory)

    def _score(self, pod: Pod, target: NodeState) -> int:
        """kube-scheduler's NodeResourcesFit (LeastAllocated) plus NodeResourcesBalancedAllocation score
        for `pod` on `target`, both weighted 1 in the default profile, as integers the way it computes
        them (pkg/scheduler/framework/plugins/noderesources: least_allocated.go, balanced_allocation.go).

        Together they come to 200 - 100 x the larger of the two shares after placement, less rounding:
        (100 - 50 (c + m)) + (100 - 50 |c - m|). With `balance="change"` (1.36) the second term is
        50 + (50 + after - before) / 2 instead, before and after being that balance without and with
        the pod: at most 200 - 50 x the larger share after placement. Called only for a pod the
        target can hold."""
        allocatable = target.node.allocatable
        cpu_before, memory_before = self._allocated(target)
        cpu = cpu_before + pod.requests.cpu_millis
        memory = memory_before + pod.requests.memory_bytes
        least = 0
        for used, capacity in ((cpu, allocatable.cpu_millis), (memory, allocatable.memory_bytes)):
            if capacity > 0:
                least += (capacity - used) * 100 // capacity if used <= capacity else 0
        after = balanced_resource_score(allocatable.cpu_millis, allocatable.memory_bytes, cpu, memory)
        if self.balance == "after":
            return least // 2 + after
        before = balanced_resource_score(allocatable.cpu_millis, allocatable.memory_bytes, cpu_before, memory_before)
        return least // 2 + 50 + (50 + after - before) // 2

    # -- bookkeeping --------------------------------------------------------------------------

    def _usage(self, target: NodeState) -> _Usage:
        """`target`'s usage in this simulation, to change: made when first asked, copied from the booking when
        borrowed from it."""
        usage = self.usage.get(target.name)
        if usage is None:
            usage = self.usage[target.name] = _fresh_usage(target, self._held(target))
            self._own.append(target.name)
        elif self._borrowed and usage is self._borrowed.get(target.name):
            usage = self.usage[target.name] = usage.copy()
            self._own.append(target.name)
        return usage

    def place(self, pod: Pod, target: NodeState) -> None:
        self._usage(target).add(pod)
        owner = _default_spread_owner(pod) if self._owner_counts else None
        if owner is not None and owner in self._owner_counts:
            self._owner_counts[owner][target.name] += 1
        for (namespace, constraint), counts in self._spread_counts.items():
            if namespace == pod.namespace and selector_matches(constraint.selector, pod.labels):
                self._count_move(counts, constraint, pod, target)

    def _count_move(self, counts: Counter[str], constraint: SpreadConstraint, pod: Pod, target: NodeState) -> None:
        """A matching pod lands on `target`; if it came from the source node, it has left that node's domain."""
        domain = target.node.labels.get(constraint.topology_key)
        if domain is not None and domain in counts:
            counts[domain] += 1
        if pod.node_name == self.source.name:
            left = self.source.node.labels.get(constraint.topology_key)
            if left is not None and left in counts:
                counts[left] -= 1

    def _pods_on(self, target: NodeState) -> Iterable[Pod]:
        usage = self.usage.get(target.name)
        if usage is None or not usage.placed:
            return target.pods
        return [*target.pods, *usage.placed]

    # -- predicates ---------------------------------------------------------------------------

    def why_not(self, pod: Pod, target: NodeState) -> str | None:
        """None when `pod` fits `target` now; else the name of the first failing predicate."""
        node = target.node
        # Static predicates first: they name the real reason (a GPU pod is kept off a
        # general-purpose node by its taint, not by its cpu). The most called check of every simulation: a
        # node without taints and a pod without node selector or affinity need no call.
        if node.taints or pod.node_selector or pod.node_affinity is not None:
            refusal = static_refusal(pod, node)
            if refusal is not None:
                return refusal
        if pod.pvc_names and node.zone != self.source_zone:
            return "zone of its volume"
        usage = self.usage.get(target.name)
        requests = pod.requests
        if usage is None:
            requested = target.requested
            cpu, memory, count = requested.cpu_millis, requested.memory_bytes, len(target.pods)
            if self.view.preemptible:
                held = self._held(target)
                if held is not None:  # a placeholder's room is taken
                    cpu, memory, count = cpu + held.cpu_millis, memory + held.memory_bytes, count + 1
        else:
            cpu, memory, count = usage.cpu, usage.memory, usage.pods
        if requests.extended:
            short = self._extended_shortfall(pod, target)
            if short is not None:
                return short
        if cpu + requests.cpu_millis > node.allocatable.cpu_millis:
            return "cpu"
        if memory + requests.memory_bytes > node.allocatable.memory_bytes:
            return "memory"
        if count + 1 > node.allocatable_pods:
            return "pod count"
        if pod.host_ports and self._host_port_clash(pod, target):
            return "host port"
        if not self._anti_affinity_ok(pod, target):
            return "pod anti-affinity"
        if pod.pod_affinity and not self._affinity_ok(pod, target):
            return "pod affinity"
        if pod.spread_constraints and not self._spread_ok(pod, target):
            return "topology spread"
        return None

    def _extended_shortfall(self, pod: Pod, target: NodeState) -> str | None:
        """The first extended resource (GPU, ephemeral storage, ...) the target lacks, if any."""
        usage = self.usage.get(target.name)
        used = usage.extended if usage is not None else dict(target.requested.extended)
        allocatable = dict(target.node.allocatable.extended)
        for name, amount in pod.requests.extended:
            if used.get(name, 0) + amount > allocatable.get(name, 0):
                return name
        return None

    def _host_port_clash(self, pod: Pod, target: NodeState) -> bool:
        for other in self._pods_on(target):
            for used in other.host_ports:
                if any(port.clashes_with(used) for port in pod.host_ports):
                    return True
        return False

    def _anti_affinity_ok(self, pod: Pod, target: NodeState) -> bool:
        # The incoming pod's own terms.
        for term in pod.pod_anti_affinity:
            if any(_term_matches(term, other) for other in self._pods_in_domain(term.topology_key, target)):
                return False
        # Existing pods whose anti-affinity forbids the incoming pod (the scheduler checks both ways).
        known = self.view.host_anti_terms.get(target.name)
        if known is None or known[0] is not target.pods:
            terms = tuple(
                term for other in target.pods for term in other.pod_anti_affinity if term.topology_key == HOSTNAME_LABEL
            )
            known = self.view.host_anti_terms[target.name] = (target.pods, terms)
        for term in known[1]:
            if _term_matches(term, pod):
                return False
        usage = self.usage.get(target.name)
        for other in usage.placed if usage is not None else ():
            for term in other.pod_anti_affinity:
                if term.topology_key == HOSTNAME_LABEL and _term_matches(term, pod):
                    return False
        return True

    def _affinity_ok(self, pod: Pod, target: NodeState) -> bool:
        for term in pod.pod_affinity:
            if term.topology_key not in target.node.labels:
                return False
            if any(_term_matches(term, other) for other in self._pods_in_domain(term.topology_key, target)):
                continue
            # The scheduler lets the first pod of a self-affine group go anywhere it fits.
            anywhere = any(_term_matches(term, other) for other in self._all_pods_except_source())
            if anywhere or not _term_matches(term, pod):
                return False
        return True

    def _pods_in_domain(self, topology_key: str, target: NodeState) -> Iterable[Pod]:
        value = target.node.labels.get(topology_key)
        if value is None:
            return ()
        if topology_key == HOSTNAME_LABEL:
            return self._pods_on(target)
        pods: list[Pod] = []
        for state in self.view.nodes.values():
            if state.name != self.source.name and state.node.labels.get(topology_key) == value:
                pods.extend(self._pods_on(state))
        return pods

    def _all_pods_except_source(self) -> Iterable[Pod]:
        for state in self.view.nodes.values():
            if state.name != self.source.name:
                yield from self._pods_on(state)

    def _spread_ok(self, pod: Pod, target: NodeState) -> bool:
        for constraint in pod.spread_constraints:
            domain = target.node.labels.get(constraint.topology_key)
            if domain is None:
                return False
            counts = self._spread_counts_for(pod, constraint)
            left = self._own_domain(pod, constraint, counts)
            if left is not None:
                counts[left] -= 1  # the pod was evicted before its replacement reached the scheduler
            skew = counts[domain] + 1 - min(counts.values(), default=0)
            if left is not None:
                counts[left] += 1
            if skew > constraint.max_skew:
                return False
        return True

    def _own_domain(self, pod: Pod, constraint: SpreadConstraint, counts: Counter[str]) -> str | None:
        """The domain where `pod` itself is still counted: the source node's, if it matches its own selector."""
        if pod.node_name != self.source.name or not selector_matches(constraint.selector, pod.labels):
            return None
        domain = self.source.node.labels.get(constraint.topology_key)
        return domain if domain is not None and domain in counts else None

    def _spread_counts_for(self, pod: Pod, constraint: SpreadConstraint) -> Counter[str]:
        """Matching pods per domain over the nodes the pod may use, as the scheduler counts them now.

        kube-scheduler's PodTopologySpread counts every node that matches the pod's node selector
        and required affinity as a domain, a cordoned one too: `nodeTaintsPolicy` defaults to Ignore,
        so the cordon's node.kubernetes.io/unschedulable taint does not take it out
        (pkg/scheduler/framework/plugins/podtopologyspread/filtering.go; kubernetes#106127). So
        the source node stays a domain until the Cluster Autoscaler deletes it: the pods on it that
        have not been placed yet still count there (the executor has not evicted them, or a PDB
        holds them back), and once they are gone its domain counts what is left, zero for a
        hostname spread or a zone it is alone in, and caps the skew of every other domain. A pod
        the simulation has placed counts where it went, and no longer where it was.
        """
        key = (pod.namespace, constraint)
        counts = self._spread_counts.get(key)
        if counts is None:
            counts = Counter(self._spread_counts_before(pod, constraint))
            if not self._count_booked(counts, pod.namespace, constraint):
                for usage in self.usage.values():
                    self._count_placed(counts, pod.namespace, constraint, usage)
            self._spread_counts[key] = counts
        return counts

    def _count_booked(self, counts: Counter[str], namespace: str, constraint: SpreadConstraint) -> bool:
        """Count every pod placed on the targets into `counts` when a booking is shared: the booked pods the
        constraint selects from the booking's files (`Booked.matching`), but those on the nodes this simulation
        does not share with it (its source, left out, and those it changed), then this simulation's own nodes pod
        by pod. False, counting nothing, when there is no booking."""
        booking = self._booking
        if booking is None:
            return False
        unshared = {self.source.name, *self._own}
        for pod, usage in booking.matching(namespace, constraint.selector):
            if usage.target.name not in unshared:
                self._count_move(counts, constraint, pod, usage.target)
        for name in self._own:
            self._count_placed(counts, namespace, constraint, self.usage[name])
        return True

    def _count_placed(self, counts: Counter[str], namespace: str, constraint: SpreadConstraint, usage: _Usage) -> None:
        for placed in usage.placed:
            if placed.namespace == namespace and selector_matches(constraint.selector, placed.labels):
                self._count_move(counts, constraint, placed, usage.target)

    def _spread_counts_before(self, pod: Pod, constraint: SpreadConstraint) -> Counter[str]:
        """`_spread_counts_for` before the simulation placed anything: the same for every order and
        tie-break a node's proof tries, so found once per view and source node (do not change it).

        Made from the counts with every node a domain (`_spread_counts_everywhere`, once per view): a source
        node that is no domain takes its domain out only when no other node the pod may use has it."""
        shared_key = (
            self.source.name,
            self.source_is_domain,
            pod.namespace,
            constraint,
            pod.node_selector,
            pod.node_affinity,
        )
        counts = self.view.spread_counts.get(shared_key)
        if counts is None:
            everywhere, nodes_per_domain = self._spread_counts_everywhere(pod, constraint)
            counts = everywhere
            source = self.view.nodes.get(self.source.name)
            if not self.source_is_domain and source is not None:
                domain = spread.domain_for(pod, constraint, source.node)
                if domain is not None and nodes_per_domain[domain] == 1:
                    counts = Counter(everywhere)
                    del counts[domain]
            self.view.spread_counts[shared_key] = counts
        return counts

    def _spread_counts_everywhere(self, pod: Pod, constraint: SpreadConstraint) -> tuple[Counter[str], Counter[str]]:
        """Matching pods per domain over every node the pod may use (each node a domain: the domains of the nodes
        that match its node selector and required affinity, an empty one counting for the minimum), and how many
        such nodes each domain has. Once per view."""
        key = ("everywhere", pod.namespace, constraint, pod.node_selector, pod.node_affinity)
        nodes_key = ("nodes", *key[1:])
        view = self.view
        counts = view.spread_counts.get(key)
        nodes_per_domain = view.spread_counts.get(nodes_key)
        if (counts is None or nodes_per_domain is None) and view.spread_carry is not None:
            found = view.spread_carry.everywhere(
                view.nodes, lambda: view.pods_by_namespace.get(pod.namespace, ()), pod, constraint
            )
            if found is not None:
                counts, nodes_per_domain = found
                view.spread_counts[key], view.spread_counts[nodes_key] = found
        if counts is None or nodes_per_domain is None:
            nodes_per_domain = self._nodes_per_domain(pod, constraint)
            in_namespace = view.pods_by_namespace.get(pod.namespace, ())
            counts = spread.in_domains(spread.matching(view.nodes, in_namespace, constraint), nodes_per_domain)
            view.spread_counts[key] = counts
            view.spread_counts[nodes_key] = nodes_per_domain
        return counts, nodes_per_domain

    def _nodes_per_domain(self, pod: Pod, constraint: SpreadConstraint) -> Counter[str]:
        """How many nodes the pod may use each domain has, in the order of the view's nodes. Once per view for
        every constraint with the same topology key and pods with the same node selector and required affinity:
        a cluster's Deployments differ in their selectors, not in these, and a count over every node for each
        of them made the pass's cost the cluster's nodes times its Deployments."""
        key = ("domains", constraint.topology_key, pod.node_selector, pod.node_affinity)
        nodes_per_domain = self.view.spread_counts.get(key)
        if nodes_per_domain is None:
            nodes_per_domain = self.view.spread_counts[key] = spread.nodes_per_domain(self.view.nodes, pod, constraint)
        return nodes_per_domain

    # -- explanation --------------------------------------------------------------------------

    def _explain(self, pod: Pod, reasons: Counter[str]) -> str:
        requests = pod.requests
        asked = f"cpu {requests.cpu_millis}m, memory {mebibytes(requests.memory_bytes)}"
        asked += "".join(f", {name} {thousandths(amount)}" for name, amount in requests.extended)
        if not self.targets:
            return f"pod {pod.key} ({asked}) has no other Ready, schedulable node to go to"
        # Every other target was looked at and refused it: say how many, and what each one lacked.
        detail = ", ".join(f"{count} with {refusal(reason)}" for reason, count in reasons.most_common())
        return f"pod {pod.key} ({asked}) fits on no other node ({sum(reasons.values())} checked: {detail})"


# PodTopologySpread's weight in kube-scheduler's default profile (default_plugins.go), against 1 for
# each resource score.
DEFAULT_SPREAD_WEIGHT = 2
# NodeAffinity's weight there, and the most a normalized score plugin gives (framework.MaxNodeScore).
NODE_AFFINITY_WEIGHT = 2
MAX_NODE_SCORE = 100


def node_affinity_scores(pod: Pod, feasible: Sequence[NodeState]) -> list[int]:
    """kube-scheduler's NodeAffinity score (0-100) of each feasible node for a pod's preferred node affinity: the
    sum of the weights of the terms the node matches (nodeaffinity/node_affinity.go, Score), normalized to
    100 x that sum / the highest over the feasible nodes, all 0 when none matches
    (helper/normalize_score.go, DefaultNormalizeScore), in integers; kubernetes v1.36.3. All 0 for a pod
    without preferred terms (the plugin skips it)."""
    raw = [preferred_weight(pod.preferred_node_affinity, target.name, target.node.labels) for target in feasible]
    highest = max(raw, default=0)
    if highest <= 0:
        return [0] * len(raw)
    return [MAX_NODE_SCORE * weight // highest for weight in raw]


# Owners whose pods get the system-default spread constraints: a Service, ReplicationController,
# ReplicaSet or StatefulSet selects them (podtopologyspread/plugin.go); Job pods have none.
_DEFAULT_SPREAD_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})


def _default_spread_owner(pod: Pod) -> tuple[str, str, str] | None:
    """The owner the system-default spread counts `pod`'s siblings by, or None when it gets none: a
    pod with constraints of its own gets no defaults."""
    if pod.spread_constraints or pod.controller_kind not in _DEFAULT_SPREAD_OWNERS or pod.controller_name is None:
        return None
    return pod.namespace, pod.controller_kind, pod.controller_name


def _term_matches(term: PodAffinityTerm, pod: Pod) -> bool:
    if not term.all_namespaces and pod.namespace not in term.namespaces:
        return False
    return selector_matches(term.selector, pod.labels)


def balanced_resource_score(cpu_capacity: int, memory_capacity: int, cpu: int, memory: int) -> int:
    """balancedResourceScore: 100 x (1 - the standard deviation of the cpu and memory shares, each
    capped at 1), truncated as Go does; a resource the node has none of is left out (no spread). The
    proof's `_score` and the simulator's kube-scheduler both score with it."""
    if cpu_capacity <= 0 or memory_capacity <= 0:
        return 100
    spread = abs(min(1.0, cpu / cpu_capacity) - min(1.0, memory / memory_capacity)) / 2
    return int((1 - spread) * 100)
