"""Topology spread counts kept from view to view (`core.spread.Carried`) are those counted afresh in each view."""

from __future__ import annotations

import random
from collections import Counter

from compactor.core import spread
from compactor.core.cluster import ClusterView, NodeState, node_state
from compactor.core.fit import Simulation
from compactor.core.model import Node, Pod, SpreadConstraint
from tests.builders import make_config, make_node, make_pod, make_snapshot, node_affinity
from tests.builders import spread as spread_constraint

POOL_LABEL = "cloud.google.com/gke-nodepool"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CONFIG = make_config()


def _asking() -> list[tuple[Pod, SpreadConstraint]]:
    """Pods asking for counts: by zone and by hostname, one held to a pool, one to two zones, in two namespaces."""
    return [
        (make_pod("web-x", node=None, labels={"app": "web"}), spread_constraint({"app": "web"})),
        (make_pod("web-y", node=None, labels={"app": "web"}), spread_constraint({"app": "web"}, HOSTNAME)),
        (
            make_pod("api-x", node=None, namespace="team", labels={"app": "api"}, node_selector=((POOL_LABEL, "big"),)),
            spread_constraint({"app": "api"}),
        ),
        (
            make_pod(
                "api-y",
                node=None,
                namespace="team",
                labels={"app": "api"},
                node_affinity=node_affinity(ZONE, "In", "zone-a", "zone-b"),
            ),
            spread_constraint({"app": "api"}, HOSTNAME),
        ),
    ]


class _Cluster:
    """Nodes and pods changed at random; each view keeps the state of a node whose node and pods are the same."""

    def __init__(self, draws: random.Random) -> None:
        self.draws = draws
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, list[Pod]] = {}
        self.states: dict[str, NodeState] = {}
        self.made = 0
        for _ in range(12):
            self._add_node()

    def _add_node(self) -> None:
        name = f"node-{self.made}"
        self.made += 1
        pool = self.draws.choice(("default-pool", "big"))
        self.nodes[name] = make_node(name, pool=pool, zone=self.draws.choice(("zone-a", "zone-b", "zone-c")))
        self.pods[name] = [self._pod(name) for _ in range(self.draws.randrange(4))]

    def _pod(self, node: str) -> Pod:
        self.made += 1
        namespace, app = self.draws.choice((("default", "web"), ("team", "api"), ("team", "web"), ("default", "db")))
        return make_pod(f"{app}-{self.made}", node=node, namespace=namespace, labels={"app": app})

    def change(self) -> None:
        """One to three changes: a node added or gone, a node moved to another zone, pods landing or leaving."""
        for _ in range(self.draws.randrange(1, 4)):
            roll = self.draws.random()
            names = sorted(self.nodes)
            if roll < 0.15 or len(names) < 4:
                self._add_node()
            elif roll < 0.3:
                gone = self.draws.choice(names)
                del self.nodes[gone], self.pods[gone]
            elif roll < 0.4:
                name = self.draws.choice(names)
                pool = self.nodes[name].labels[POOL_LABEL]
                self.nodes[name] = make_node(name, pool=pool, zone=self.draws.choice(("zone-a", "zone-d")))
            elif roll < 0.7:
                name = self.draws.choice(names)
                self.pods[name] = [*self.pods[name], self._pod(name)]
            else:
                name = self.draws.choice(names)
                if self.pods[name]:
                    self.pods[name] = self.pods[name][1:]

    def view(self, carry: spread.Carried | None) -> ClusterView:
        states: dict[str, NodeState] = {}
        for name, node in self.nodes.items():
            prior = self.states.get(name)
            pods = tuple(self.pods[name])
            same = prior is not None and prior.node is node and prior.pods == pods
            states[name] = prior if same and prior is not None else node_state(node, POOL_LABEL, pods, prior)
        self.states = states
        every_pod = [pod for pods in self.pods.values() for pod in pods]
        view = ClusterView(make_snapshot(self.nodes.values(), every_pod), CONFIG, grouped=([], [], states))
        if carry is not None:
            carry.advance(view.nodes)
            view.spread_carry = carry
        return view


def _counts(view: ClusterView, pod: Pod, constraint: SpreadConstraint) -> tuple[Counter[str], Counter[str]]:
    source = next(iter(view.nodes.values()))
    return Simulation(view, source, list(view.nodes.values()))._spread_counts_everywhere(pod, constraint)


def test_counts_kept_from_view_to_view_are_those_counted_afresh_as_nodes_and_pods_come_and_go() -> None:
    draws = random.Random(7)
    cluster = _Cluster(draws)
    first = cluster.view(None)
    carry = spread.Carried(first.nodes)
    first.spread_carry = carry
    asking = _asking()
    compared = 0
    for step in range(120):
        cluster.change()
        view = cluster.view(carry)
        fresh = ClusterView(view.snapshot, CONFIG, grouped=([], [], dict(view.nodes)))
        for pod, constraint in asking:
            if draws.random() < 0.4 and step < 110:
                continue  # asked now and then: the counts kept fall several views behind
            kept = _counts(view, pod, constraint)
            assert kept == _counts(fresh, pod, constraint), (step, pod.name)
            compared += 1
    assert compared > 250


def test_a_view_other_than_the_last_one_advanced_to_counts_afresh() -> None:
    cluster = _Cluster(random.Random(3))
    earlier = cluster.view(None)
    carry = spread.Carried(earlier.nodes)
    earlier.spread_carry = carry
    cluster.pods["node-0"] = [*cluster.pods["node-0"], cluster._pod("node-0")]
    cluster.view(carry)  # the carry moves on; the earlier view still asks for its own counts
    pod, constraint = _asking()[0]
    assert carry.everywhere(earlier.nodes, lambda: (), pod, constraint) is None
    fresh = ClusterView(earlier.snapshot, CONFIG, grouped=([], [], dict(earlier.nodes)))
    assert _counts(earlier, pod, constraint) == _counts(fresh, pod, constraint)


def test_counts_further_behind_than_the_views_kept_are_made_afresh() -> None:
    cluster = _Cluster(random.Random(11))
    first = cluster.view(None)
    carry = spread.Carried(first.nodes)
    first.spread_carry = carry
    pod, constraint = _asking()[1]
    _counts(first, pod, constraint)
    for _ in range(spread.KEPT_VIEWS + 5):
        cluster.change()
        view = cluster.view(carry)
    fresh = ClusterView(view.snapshot, CONFIG, grouped=([], [], dict(view.nodes)))
    assert _counts(view, pod, constraint) == _counts(fresh, pod, constraint)
