"""The snapshot indexed once for every stage: pods by node, pools, PDBs by namespace."""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor.core import coexistence, spread
from compactor.core.model import TERMINAL_PHASES, Node, Pdb, Pod, PodAffinityTerm, Resources, Snapshot
from compactor.core.selectors import selector_matches
from compactor.settings.config import Config


@dataclass(frozen=True, slots=True)
class NodeState:
    node: Node
    pool: str | None
    pods: tuple[Pod, ...]  # non-terminal pods bound to the node
    requested: Resources  # their summed requests
    movable_pods: tuple[Pod, ...]  # the pods a drain must evict: all but DaemonSet and mirror pods
    name: str  # the node's, read at every step of every stage
    # A node new pods may land on: Ready, not cordoned, and not being removed by the autoscaler. Found once: every
    # simulation's filter asks it of every node.
    schedulable: bool = field(init=False)

    def __post_init__(self) -> None:
        node = self.node
        object.__setattr__(
            self, "schedulable", node.ready and not node.unschedulable and not node.being_deleted_by_autoscaler
        )

    @property
    def cpu_ratio(self) -> float | None:
        allocatable = self.node.allocatable.cpu_millis
        return self.requested.cpu_millis / allocatable if allocatable > 0 else None

    @property
    def memory_ratio(self) -> float | None:
        allocatable = self.node.allocatable.memory_bytes
        return self.requested.memory_bytes / allocatable if allocatable > 0 else None

    @property
    def free(self) -> Resources:
        """The cpu and memory its pods leave free (none below zero)."""
        allocatable, requested = self.node.allocatable, self.requested
        return Resources(
            max(0, allocatable.cpu_millis - requested.cpu_millis),
            max(0, allocatable.memory_bytes - requested.memory_bytes),
        )


class ClusterView:
    def __init__(
        self,
        snapshot: Snapshot,
        config: Config,
        pdbs: PdbIndex | None = None,
        earlier: ClusterView | None = None,
        moved: Mapping[str, Sequence[Pod]] | None = None,
        *,
        same_classes: bool = True,
        grouped: Grouped | None = None,
    ) -> None:
        """`earlier` may be the view of a snapshot this one was made from (the consolidation path's
        previous step): a node that holds the same pods as there takes what was derived from them.

        With `moved` too, the snapshot is `earlier`'s after a drain (`core.path`): the same pods but
        for those of nodes it no longer lists, and the drained pods, which `moved` gives by their new
        node and the snapshot lists after every other pod. Each node's pods are then its pods in
        `earlier` followed by those moved to it, exactly what regrouping every pod would find.

        `same_classes` False: `earlier` is a view of the same cluster at another moment (the simulator's
        last one), whose nodes may differ: only its per-node sums are taken, not its verdicts on the
        ComputeClasses.

        `grouped`: the snapshot's pods already grouped as `_regrouped` would group them (the unschedulable
        pods, the arriving ones, each node's state), by a caller that keeps them as the cluster changes (the
        simulator's `World.view`)."""
        self.snapshot = snapshot
        self.config = config
        # The view this one was made from (the consolidation path's step before, or the simulator's last view),
        # when it made `pods_by_namespace`: its lists and its nodes, whose states a node whose pods did not change
        # shares. Kept instead of that view, so the views of a path do not hold one another.
        self._by_namespace_earlier: tuple[dict[str, list[Pod]], dict[str, NodeState]] | None = None
        # A view made from an earlier one (a drain on the consolidation path) keeps its verdicts on the
        # ComputeClasses: the classes and the pools' labels are the same.
        self._coexistence_before: coexistence.Coexistence | None = (
            earlier.__dict__.get("coexistence") if earlier is not None and same_classes else None
        )
        if earlier is not None and moved is not None:
            self.unschedulable_pods: list[Pod] = earlier.unschedulable_pods
            self.arriving_pods: list[Pod] = earlier.arriving_pods
            self.nodes: dict[str, NodeState] = _after_drain(snapshot, config.pool_label, earlier, moved)
        elif grouped is not None:
            self.unschedulable_pods, self.arriving_pods, self.nodes = grouped
        else:
            self.unschedulable_pods, self.arriving_pods, self.nodes = _regrouped(snapshot, config.pool_label, earlier)
        if (moved is not None or grouped is not None) and earlier is not None:
            known = earlier.__dict__.get("pods_by_namespace")
            if known is not None:
                self._by_namespace_earlier = (known, earlier.nodes)

        self.nodes_by_pool: dict[str | None, list[NodeState]] = defaultdict(list)
        # Counted once here: per node they would make candidate discovery quadratic in pool size.
        self.schedulable_in_pool: Counter[str | None] = Counter()
        self.nodes_in_pool_zone: Counter[tuple[str | None, str | None]] = Counter()
        for state in self.nodes.values():
            self.nodes_by_pool[state.pool].append(state)
            self.nodes_in_pool_zone[(state.pool, state.node.zone)] += 1
            if state.schedulable:
                self.schedulable_in_pool[state.pool] += 1
        # An index built for the same PDBs may be passed in, with what it already found (`core.path`).
        self.pdbs = pdbs if pdbs is not None else PdbIndex(snapshot.pdbs)
        # `fit`'s starting order of targets and its index of their labels, made once for all the
        # simulations on this view: by the id() of the target sequence (kept beside, so a reused id
        # never matches) and the avoided nodes, or the label key.
        self.start_heaps: dict[tuple[int, frozenset[str]], tuple[object, list[tuple[bool, float, str, int]]]] = {}
        self.target_labels: dict[tuple[int, str], tuple[object, dict[str, set[str]]]] = {}
        # Matching pods per domain for a spread constraint before anything moves (`fit`), per source node.
        self.spread_counts: dict[tuple[object, ...], Counter[str]] = {}
        # The counts behind them kept from the views made before this one, by a caller that makes one view of a
        # cluster after another (`spread.Carried`), else made afresh in each view.
        self.spread_carry: spread.Carried | None = None
        # The room node replacement's bound placeholders hold, by node: taken until a pod of a higher
        # priority that fits on no node as it is preempts the placeholder (`fit.Simulation`).
        self.preemptible: dict[str, Resources] = _preemptible(snapshot.placeholders)
        # The hostname anti-affinity terms of each node's pods (`fit`'s filter checks them both ways), by node,
        # beside the pods tuple they were read from: shared with `earlier`, since a node whose pods did not
        # change keeps that tuple, and an entry whose tuple is not the node's is read again.
        self.host_anti_terms: dict[str, tuple[tuple[Pod, ...], tuple[PodAffinityTerm, ...]]] = (
            earlier.host_anti_terms if earlier is not None else {}
        )

    @functools.cached_property
    def coexistence(self) -> coexistence.Coexistence:
        """Each enabled pool's ComputeClass threshold, the pools left to the Cluster Autoscaler, and the
        warnings about both (`core.coexistence`)."""
        before = self._coexistence_before
        if before is not None:
            return before
        nodes = {pool: [state.node for state in members] for pool, members in self.nodes_by_pool.items()}
        return coexistence.judge(self.snapshot, self.config, nodes)

    @functools.cached_property
    def pods_by_namespace(self) -> dict[str, list[Pod]]:
        """The pods of the view's nodes (each node's non-terminal pods), by namespace, in no order the readers
        rely on: they count them (made when first asked: only topology spread needs them). Made from the view
        this one was made from (after a drain on the consolidation path, or the simulator's last view) when that
        one made them: its lists with the pods of the nodes whose pods changed (a drain's source and the nodes
        its pods moved to) or that are gone taken out, and those nodes' pods now put in."""
        earlier, self._by_namespace_earlier = self._by_namespace_earlier, None
        if earlier is not None:
            return self._regrouped_by_namespace(*earlier)
        by_namespace: dict[str, list[Pod]] = defaultdict(list)
        for state in self.nodes.values():
            for pod in state.pods:
                by_namespace[pod.namespace].append(pod)
        return by_namespace

    def _regrouped_by_namespace(
        self, known: dict[str, list[Pod]], before: dict[str, NodeState]
    ) -> dict[str, list[Pod]]:
        taken: dict[str, set[int]] = defaultdict(set)
        put: dict[str, list[Pod]] = defaultdict(list)
        for name, state in self.nodes.items():
            prior = before.get(name)
            if prior is not None and prior.pods is state.pods:
                continue
            for pod in prior.pods if prior is not None else ():
                taken[pod.namespace].add(id(pod))
            for pod in state.pods:
                put[pod.namespace].append(pod)
        for name in before.keys() - self.nodes.keys():
            for pod in before[name].pods:
                taken[pod.namespace].add(id(pod))
        by_namespace = defaultdict(list, known)  # the lists not changed here are shared with the view before
        for namespace in taken.keys() | put.keys():
            ids = taken.get(namespace, ())
            pods = [pod for pod in known.get(namespace, ()) if id(pod) not in ids]
            pods.extend(put.get(namespace, ()))
            if pods:
                by_namespace[namespace] = pods
            else:
                by_namespace.pop(namespace, None)
        return by_namespace


class PdbIndex:
    """Which PodDisruptionBudgets cover a pod, without matching every PDB of its namespace.

    A PDB whose selector has matchLabels is filed under one of its label pairs; a pod
    can only be covered by PDBs filed under a pair it carries. PDBs selecting by
    expressions only (or everything) are always checked.
    """

    def __init__(self, pdbs: tuple[Pdb, ...], *, filed_like: PdbIndex | None = None) -> None:
        """`filed_like`: an index of budgets with the same namespaces, names and selectors in the same order
        (`updated` checks it), whose filing this one shares."""
        self.budgets = pdbs
        # What `blockers.pods_blockers` found for a node's pods, by the id() of their tuple (kept beside)
        # and the configuration's two pod rules: views along the consolidation path share the tuples. Beside
        # it the PDBs that cover any of those pods, each once.
        self.pods_found: dict[tuple[int, bool, bool], tuple[tuple[Pod, ...], list[Any], tuple[Pdb, ...]]] = {}
        # What covers a labels map, by namespace and the map's id() (the map kept beside): the reader
        # gives the pods of a ReplicaSet one shared map, so each is matched once.
        self.covering_known: dict[tuple[str, int], tuple[Mapping[str, str], Sequence[Pdb]]] = {}
        # The last index's `covering_known` and its budgets' places, read when this one has not matched a map.
        self._earlier: tuple[dict[tuple[str, int], tuple[Mapping[str, str], Sequence[Pdb]]], dict[int, int]] | None
        self._earlier = None
        self._by_namespace: dict[str, _Indexed]
        if filed_like is not None:
            self._by_namespace = filed_like._by_namespace
            return
        # namespace -> label key -> label value -> places of the PDBs filed under that pair. PDBs of a
        # namespace mostly select on one key ("app"), so a pod needs one or two lookups.
        by_label: dict[str, dict[str, dict[str, list[int]]]] = {}
        always: dict[str, list[int]] = {}
        for place, pdb in enumerate(pdbs):
            if pdb.selector is None:
                continue  # selects no pod
            if pdb.selector.match_labels:
                key, value = pdb.selector.match_labels[0]
                by_key = by_label.setdefault(pdb.namespace, {})
                by_key.setdefault(key, {}).setdefault(value, []).append(place)
            else:
                always.setdefault(pdb.namespace, []).append(place)
        # Per namespace, in one lookup: the PDBs always checked, and per label key the PDBs filed by
        # value, each with whether its pair is its whole selector (then finding it is matching it).
        self._by_namespace = {}
        for namespace in always.keys() | by_label.keys():
            keyed = tuple(
                (
                    key,
                    {
                        value: tuple((place, _whole(pdbs[place])) for place in filed)
                        for value, filed in by_value.items()
                    },
                )
                for key, by_value in by_label.get(namespace, {}).items()
            )
            self._by_namespace[namespace] = (tuple(always.get(namespace, ())), keyed)

    def updated(self, pdbs: tuple[Pdb, ...], nodes: Iterable[NodeState]) -> PdbIndex:
        """The index of `pdbs`, the budgets of the same cluster later (the simulator's next view, of `nodes`).
        Where they are this index's budgets in the same order with the same selectors (their status alone
        changed, as pods come and go), it shares this one's filing, takes its label matches as asked (each
        PDB replaced by its new record), and keeps the blockers found for a node's pods that are still a
        node's and whose covering PDBs are all the same records."""
        earlier = self.budgets
        if len(earlier) != len(pdbs) or any(
            old.namespace != new.namespace
            or old.name != new.name
            or (old.selector is not new.selector and old.selector != new.selector)
            for old, new in zip(earlier, pdbs, strict=True)
        ):
            return PdbIndex(pdbs)
        index = PdbIndex(pdbs, filed_like=self)
        places = {id(old): place for place, old in enumerate(earlier)}
        index._earlier = (self.covering_known, places)
        # An entry holds its tuple, so an id of a tuple a node holds now is that tuple's.
        held = {id(state.pods) for state in nodes}
        index.pods_found = {
            key: entry
            for key, entry in self.pods_found.items()
            if key[0] in held and all(pdbs[places[id(pdb)]] is pdb for pdb in entry[2])
        }
        return index

    def covering(self, pod: Pod) -> Sequence[Pdb]:
        """The PDBs whose selector matches the pod (plans along the consolidation path ask only for the
        pods of the nodes a drain changed, `blockers.node_pods_blockers`)."""
        index = self._by_namespace.get(pod.namespace)
        if index is None:
            return ()
        labels = pod.labels
        key = (pod.namespace, id(labels))
        known = self.covering_known.get(key)
        if known is not None and known[0] is labels:
            return known[1]
        earlier = self._earlier
        if earlier is not None and (carried := earlier[0].get(key)) is not None and carried[0] is labels:
            places, budgets = earlier[1], self.budgets
            found: Sequence[Pdb] = [budgets[places[id(pdb)]] for pdb in carried[1]] or ()
        else:
            found = self._matching(index, labels)
        if len(self.covering_known) < _COVERING_KEPT:
            self.covering_known[key] = (labels, found)
        return found

    def covering_each(self, pods: Iterable[Pod]) -> list[Pdb]:
        """The budgets covering each pod (`covering`), one after the other, a budget once for every pod it covers;
        a pod whose labels map was matched before without a call."""
        found: list[Pdb] = []
        known = self.covering_known
        for pod in pods:
            labels = pod.labels
            hit = known.get((pod.namespace, id(labels)))
            found.extend(hit[1] if hit is not None and hit[0] is labels else self.covering(pod))
        return found

    def _matching(self, index: _Indexed, labels: Mapping[str, str]) -> Sequence[Pdb]:
        always, keyed = index
        budgets = self.budgets
        found = (
            [pdb for place in always if selector_matches((pdb := budgets[place]).selector, labels)] if always else None
        )
        for key, by_value in keyed:
            value = labels.get(key)
            filed = by_value.get(value) if value is not None else None
            if filed:
                for place, whole in filed:
                    pdb = budgets[place]
                    if whole or selector_matches(pdb.selector, labels):
                        if found is None:
                            found = []
                        found.append(pdb)
        return found or ()


_Filed = tuple[tuple[int, bool], ...]
# Labels maps whose covering PDBs a PdbIndex keeps, at most: where each pod has its own map (pods made
# by hand, or read by another reader), the index holds this many entries and matches the rest each time.
_COVERING_KEPT = 20_000
# A namespace's PDBs by their place among the index's budgets: those always checked, and per label key those
# filed by value.
_Indexed = tuple[tuple[int, ...], tuple[tuple[str, dict[str, _Filed]], ...]]


def _whole(pdb: Pdb) -> bool:
    """Whether the label pair a PDB is filed under is all its selector asks."""
    selector = pdb.selector
    return selector is not None and len(selector.match_labels) == 1 and not selector.match_expressions


# A snapshot's pods grouped: those the scheduler found no node for, those it has not placed yet, each node's state.
Grouped = tuple[list[Pod], list[Pod], dict[str, NodeState]]


def _regrouped(snapshot: Snapshot, pool_label: str, earlier: ClusterView | None) -> Grouped:
    """Pods by node; the pods the scheduler found no node for; and those it has not placed yet."""
    pods_by_node: dict[str, list[Pod]] = defaultdict(list)
    unbound: list[Pod] = []
    for pod in snapshot.pods:
        if pod.phase in TERMINAL_PHASES:
            continue
        if pod.node_name is not None:
            pods_by_node[pod.node_name].append(pod)
        else:
            unbound.append(pod)
    unschedulable_pods, arriving_pods = pending_groups(unbound)
    before = earlier.nodes if earlier is not None else {}
    nodes = {
        node.name: node_state(node, pool_label, tuple(pods_by_node.get(node.name, ())), before.get(node.name))
        for node in snapshot.nodes
    }
    return unschedulable_pods, arriving_pods, nodes


def pending_groups(pods: Iterable[Pod]) -> tuple[list[Pod], list[Pod]]:
    """Of `pods`, those bound to no node and not terminal: the ones the scheduler found no node for, and those it
    has not placed yet (a terminating pod in neither)."""
    unschedulable: list[Pod] = []
    arriving: list[Pod] = []
    for pod in pods:
        if pod.phase in TERMINAL_PHASES or pod.node_name is not None:
            continue
        if pod.unschedulable:
            unschedulable.append(pod)
        elif not pod.terminating:
            arriving.append(pod)
    return unschedulable, arriving


def node_state(node: Node, pool_label: str, pods: tuple[Pod, ...], same: NodeState | None) -> NodeState:
    """A node's state with its non-terminal pods, in the snapshot's order. `same`: the node's state in an
    earlier view, whose tuple (which `PdbIndex.pods_found` knows) and sums are taken when the pods are the
    same (one by one the same objects, or equal)."""
    if same is not None and same.pods == pods:
        pods, requested, movable = same.pods, same.requested, same.movable_pods
    else:
        requested = _sum_requests(pods)
        movable = tuple([pod for pod in pods if not pod.stays_on_node])
    return NodeState(node, node.labels.get(pool_label), pods, requested, movable, node.name)


def _after_drain(
    snapshot: Snapshot, pool_label: str, earlier: ClusterView, moved: Mapping[str, Sequence[Pod]]
) -> dict[str, NodeState]:
    nodes: dict[str, NodeState] = {}
    before = earlier.nodes
    for node in snapshot.nodes:
        same = before[node.name]
        added = moved.get(node.name)
        if added:
            pods = same.pods + tuple(added)
            requested = same.requested + _sum_requests(added)
            movable = same.movable_pods + tuple([pod for pod in added if not pod.stays_on_node])
            nodes[node.name] = NodeState(node, node.labels.get(pool_label), pods, requested, movable, node.name)
        elif same.node is node:
            nodes[node.name] = same
        else:
            nodes[node.name] = NodeState(
                node, node.labels.get(pool_label), same.pods, same.requested, same.movable_pods, node.name
            )
    return nodes


def _preemptible(placeholders: Sequence[Pod]) -> dict[str, Resources]:
    held: dict[str, list[Pod]] = defaultdict(list)
    for pod in placeholders:
        if pod.node_name is not None and pod.phase not in TERMINAL_PHASES and not pod.terminating:
            held[pod.node_name].append(pod)
    return {node: _sum_requests(pods) for node, pods in held.items()}


def _sum_requests(pods: Sequence[Pod]) -> Resources:
    cpu = memory = 0
    extended: dict[str, int] = {}
    for pod in pods:
        requests = pod.requests
        cpu += requests.cpu_millis
        memory += requests.memory_bytes
        if requests.extended:
            for name, amount in requests.extended:
                extended[name] = extended.get(name, 0) + amount
    return Resources(cpu, memory, tuple(sorted(extended.items())) if extended else ())
