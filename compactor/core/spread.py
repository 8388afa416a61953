"""Topology spread counts kept from one view of a cluster to the next.

kube-scheduler's PodTopologySpread filter counts, for a pod and one of its constraints, the pods the constraint
selects in each domain of the nodes the pod may use (`fit.Simulation._spread_counts_everywhere`). Made afresh,
that walks every pod of the namespace and every node, once per view for every constraint asked. A caller that
makes view after view of the same cluster as it changes (the simulator's world, once a loop) keeps a `Carried`:
each new view's nodes are compared with the last's by identity, and the counts made before are brought up to
date from the nodes that changed instead of counted again. The counts are the same either way.

Pure, like the rest of the core.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from compactor.core.model import Node, Pod, SpreadConstraint
from compactor.core.selectors import node_affinity_matches, selector_matches

# How many views' changes are kept: counts last brought up to date further back are made afresh.
KEPT_VIEWS = 64

# What a constraint's counts depend on: the pod's namespace, the constraint, and the nodes the pod may use.
Key = tuple[str, SpreadConstraint, object, object]


class Holder(Protocol):
    """A node and the pods on it (`cluster.NodeState`)."""

    @property
    def node(self) -> Node: ...

    @property
    def pods(self) -> tuple[Pod, ...]: ...


def key_of(pod: Pod, constraint: SpreadConstraint) -> Key:
    return (pod.namespace, constraint, pod.node_selector, pod.node_affinity)


def domain_for(pod: Pod, constraint: SpreadConstraint, node: Node) -> str | None:
    """The node's domain for the constraint when the pod may use the node (its node selector and required
    affinity), else None."""
    domain = node.labels.get(constraint.topology_key)
    if domain is None or any(node.labels.get(k) != v for k, v in pod.node_selector):
        return None
    return domain if node_affinity_matches(pod.node_affinity, node.name, node.labels) else None


@dataclass(slots=True)
class _Counts:
    version: int  # the view they are up to date with
    pod: Pod  # a pod of the key: its namespace, node selector and required affinity
    constraint: SpreadConstraint
    matching: Counter[str]  # the pods the constraint selects, per value of its topology key, on every node
    domains: Counter[str]  # the nodes the pod may use, per value of the topology key
    counts: Counter[str]  # `matching` in each of `domains`: what `everywhere` gives (a copy of)


class _Change:
    """The nodes one view changed, and what each counts needs of them, found once for every counts brought up to
    date through it."""

    def __init__(self, changed: list[tuple[Holder | None, Holder | None]]) -> None:
        # A node new, gone or replaced: its domain may have changed.
        self.nodes = [(old, new) for old, new in changed if old is None or new is None or old.node is not new.node]
        self._changed = changed
        self._pods: dict[str, list[tuple[Node | None, tuple[Pod, ...], Node | None, tuple[Pod, ...]]]] | None = None

    def pods(self, namespace: str) -> list[tuple[Node | None, tuple[Pod, ...], Node | None, tuple[Pod, ...]]]:
        """Per node whose pods of `namespace` changed (or whose node did): its node and those pods before and
        after."""
        if self._pods is None:
            self._pods = {}
            for old, new in self._changed:
                before = _by_namespace(old.pods if old is not None else ())
                after = _by_namespace(new.pods if new is not None else ())
                old_node = old.node if old is not None else None
                new_node = new.node if new is not None else None
                for name in before.keys() | after.keys():
                    old_pods, new_pods = tuple(before.get(name, ())), tuple(after.get(name, ()))
                    if old_node is new_node and _same(old_pods, new_pods):
                        continue
                    self._pods.setdefault(name, []).append((old_node, old_pods, new_node, new_pods))
        return self._pods.get(namespace, [])


class Carried:
    """The spread counts of the views of one cluster, each view made after the last (`advance`)."""

    def __init__(self, nodes: Mapping[str, Holder]) -> None:
        self._nodes = nodes  # the nodes of the view the counts are for
        self._version = 0
        # What each of the last views changed.
        self._changes: deque[_Change] = deque(maxlen=KEPT_VIEWS)
        self._counts: dict[Key, _Counts] = {}

    def advance(self, nodes: Mapping[str, Holder]) -> None:
        """The cluster's next view has `nodes`: a node whose state is not the same object has changed. Nothing to
        compare while no counts were asked for."""
        before = self._nodes
        if not self._counts:
            self._nodes = nodes
            return
        changed: list[tuple[Holder | None, Holder | None]] = [
            (old, state) for name, state in nodes.items() if (old := before.get(name)) is not state
        ]
        if len(nodes) - sum(1 for old, _ in changed if old is None) != len(before):
            changed.extend((state, None) for name, state in before.items() if name not in nodes)
        self._nodes = nodes
        self._version += 1
        self._changes.append(_Change(changed))

    def everywhere(
        self,
        nodes: Mapping[str, Holder],
        in_namespace: Callable[[], Iterable[Pod]],
        pod: Pod,
        constraint: SpreadConstraint,
    ) -> tuple[Counter[str], Counter[str]] | None:
        """For the view whose nodes are `nodes`: the pods `constraint` selects per domain of the nodes `pod` may
        use (each such domain counted, an empty one at zero), and how many such nodes each domain has, both the
        caller's to keep; None when `nodes` are not those of the last view advanced to. `in_namespace`: the pods
        on the view's nodes in the pod's namespace, asked only to count afresh."""
        if nodes is not self._nodes:
            return None
        key = key_of(pod, constraint)
        counts = self._counts.get(key)
        behind = self._version - counts.version if counts is not None else len(self._changes) + 1
        if counts is None or behind > len(self._changes):
            counts = self._counts[key] = _fresh(self._version, nodes, in_namespace(), pod, constraint)
        elif behind:
            for change in itertools.islice(self._changes, len(self._changes) - behind, None):
                _bring(counts, change)
            counts.version = self._version
        return Counter(counts.counts), Counter(counts.domains)


def _fresh(
    version: int, nodes: Mapping[str, Holder], in_namespace: Iterable[Pod], pod: Pod, constraint: SpreadConstraint
) -> _Counts:
    domains = nodes_per_domain(nodes, pod, constraint)
    found = matching(nodes, in_namespace, constraint)
    return _Counts(version, pod, constraint, found, domains, in_domains(found, domains))


def nodes_per_domain(nodes: Mapping[str, Holder], pod: Pod, constraint: SpreadConstraint) -> Counter[str]:
    """How many of `nodes` the pod may use each domain of the constraint has, in the order of `nodes`."""
    found: Counter[str] = Counter()
    for state in nodes.values():
        domain = domain_for(pod, constraint, state.node)
        if domain is not None:
            found[domain] += 1
    return found


def matching(nodes: Mapping[str, Holder], pods: Iterable[Pod], constraint: SpreadConstraint) -> Counter[str]:
    """Of `pods` (one namespace's), those `constraint` selects per value of its topology key on the node in
    `nodes` each is bound to."""
    key = constraint.topology_key
    found: Counter[str] = Counter()
    for other in pods:
        if selector_matches(constraint.selector, other.labels):
            holder = nodes.get(other.node_name or "")
            value = holder.node.labels.get(key) if holder is not None else None
            if value is not None:
                found[value] += 1
    return found


def in_domains(found: Counter[str], domains: Iterable[str]) -> Counter[str]:
    """`found` in each of `domains`, an empty domain at zero: what the filter counts a domain's pods by."""
    return Counter({domain: found[domain] for domain in domains})


def _bring(counts: _Counts, change: _Change) -> None:
    """`counts` brought up to date through one view's `change`: the domains of the nodes new, gone or replaced,
    the pods of the nodes whose pods of the namespace changed."""
    pod, constraint = counts.pod, counts.constraint
    key, selector = constraint.topology_key, constraint.selector
    for old, new in change.nodes:
        if old is not None and (value := domain_for(pod, constraint, old.node)) is not None:
            _domain(counts, value, -1)
        if new is not None and (value := domain_for(pod, constraint, new.node)) is not None:
            _domain(counts, value, 1)
    for old_node, old_pods, new_node, new_pods in change.pods(pod.namespace):
        if old_node is not None and (value := old_node.labels.get(key)) is not None:
            found = sum(1 for other in old_pods if selector_matches(selector, other.labels))
            if found:
                _matching(counts, value, -found)
        if new_node is not None and (value := new_node.labels.get(key)) is not None:
            found = sum(1 for other in new_pods if selector_matches(selector, other.labels))
            if found:
                _matching(counts, value, found)


def _domain(counts: _Counts, value: str, change: int) -> None:
    total = counts.domains[value] + change
    if total:
        counts.domains[value] = total
        counts.counts.setdefault(value, counts.matching[value])
    else:
        del counts.domains[value]
        del counts.counts[value]


def _matching(counts: _Counts, value: str, change: int) -> None:
    total = counts.matching[value] + change
    if total:
        counts.matching[value] = total
    else:
        del counts.matching[value]
    if value in counts.counts:
        counts.counts[value] = total


def _by_namespace(pods: Iterable[Pod]) -> dict[str, list[Pod]]:
    found: dict[str, list[Pod]] = {}
    for pod in pods:
        found.setdefault(pod.namespace, []).append(pod)
    return found


def _same(old: tuple[Pod, ...], new: tuple[Pod, ...]) -> bool:
    return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))
