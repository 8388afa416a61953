"""The fit proof's shortcut (`fit.fits_in_every_order`): when it may skip the proof's other runs, and when not.

Each refused case is a cluster where the first run (largest first, ties to the roomiest) places every
pod but another order the proof tries does not: the shortcut taking it would have proved a drain
that strands a pod. `test_planner_properties` checks the same over random clusters.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from compactor.core import fit, planner
from compactor.core.cluster import ClusterView
from compactor.core.model import HOSTNAME_LABEL as HOSTNAME
from compactor.core.model import LabelSelector, Node, Pod, Snapshot, SpreadConstraint
from compactor.core.plan import Plan
from tests.builders import (
    NOW,
    affinity_term,
    anti_affinity,
    blockers_of,
    host_port,
    make_config,
    make_node,
    make_pod,
    make_snapshot,
    spread,
)


def target(name: str, cpu: str = "1", zone: str = "zone-a") -> Node:
    return make_node(name, cpu=cpu, zone=zone, marked_since=None)


def source() -> Node:
    return make_node("src", cpu="4", zone="zone-a")


def claims(snapshot: Snapshot) -> bool:
    view = ClusterView(snapshot, make_config())
    return fit.fits_in_every_order(view, view.nodes["src"], fit.targets_for(view))


def without_shortcut(snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch) -> Plan:
    with monkeypatch.context() as patched:
        patched.setattr(fit, "fits_in_every_order", lambda *_: False)
        return planner.plan(snapshot, make_config(), now=NOW)


def test_pods_that_look_only_at_their_own_node_skip_the_other_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Host ports and anti-affinity by hostname, three pods, three targets or more each (api-0's node
    refuses api-1): every order fits."""
    pods = [
        make_pod("web-1", node="src", cpu="300m", host_ports=(host_port(8080),)),
        make_pod("web-2", node="src", cpu="300m", host_ports=(host_port(8080),)),
        make_pod("api-1", node="src", cpu="300m", pod_anti_affinity=(anti_affinity({"app": "api"}),)),
        make_pod("api-0", node="t0", cpu="100m"),
    ]
    snapshot = make_snapshot([source(), *(target(f"t{i}") for i in range(4))], pods)
    assert claims(snapshot)
    plan = planner.plan(snapshot, make_config(), now=NOW)
    assert plan.decision.action == "drain" and plan.decision.node == "src"
    assert plan == without_shortcut(snapshot, monkeypatch)


def test_fewer_targets_than_pods_leave_it_to_the_runs() -> None:
    """The 900m pod fits only on t0; the 100m pod, evicted first (lower priority), takes t0 as the
    roomiest, and the 900m pod is left without a place."""
    pods = [
        make_pod("big", node="src", cpu="900m", priority=100),
        make_pod("small", node="src", cpu="100m", priority=0),
        make_pod("filler", node="t1", cpu="800m"),
    ]
    snapshot = make_snapshot([source(), target("t0", cpu="950m"), target("t1")], pods)
    assert not claims(snapshot)
    plan = planner.plan(snapshot, make_config(), now=NOW)
    assert plan.decision.action == "none"
    assert "default/big" in blockers_of(plan, "src") and "eviction order" in blockers_of(plan, "src")


def test_anti_affinity_by_zone_is_left_to_the_runs() -> None:
    """y-small, evicted first, goes to t2 (zone-b, the roomiest); y-big fits only in zone-b, where
    the zone anti-affinity now keeps it out."""
    terms = (anti_affinity({"app": "y"}, "topology.kubernetes.io/zone"),)
    pods = [
        make_pod("y-big", node="src", cpu="900m", priority=100, labels={"app": "y"}, pod_anti_affinity=terms),
        make_pod("y-small", node="src", cpu="100m", priority=0, labels={"app": "y"}, pod_anti_affinity=terms),
        make_pod("filler-a", node="t0", cpu="500m"),
        make_pod("filler-b", node="t1", cpu="50m"),
    ]
    nodes = [source(), target("t0"), target("t1", zone="zone-b"), target("t2", zone="zone-b")]
    snapshot = make_snapshot(nodes, pods)
    assert not claims(snapshot)
    assert planner.plan(snapshot, make_config(), now=NOW).decision.action == "none"


def test_spread_constraints_are_left_to_the_runs() -> None:
    constraint = (spread({"app": "y"}, max_skew=1),)
    pods = [
        make_pod("y0", node="src", cpu="500m", labels={"app": "y"}, spread_constraints=constraint),
        make_pod("y1", node="src", cpu="800m", priority=100, labels={"app": "y"}, spread_constraints=constraint),
        make_pod("r0", node="t0", cpu="100m", labels={"app": "y"}),
        make_pod("r1", node="t1", cpu="400m", labels={"app": "z"}),
    ]
    nodes = [source(), target("t0", zone="zone-b"), target("t1"), target("t2", zone="zone-b")]
    snapshot = make_snapshot(nodes, pods)
    assert not claims(snapshot)
    plan = planner.plan(snapshot, make_config(), now=NOW)
    assert plan.decision.action == "none"
    assert "topology spread" in blockers_of(plan, "src")


def test_pod_affinity_is_left_to_the_runs() -> None:
    """The first y pod placed may go anywhere, the next ones only to its zone: with ties broken
    another way, zone-a's two 1-cpu nodes cannot hold all three."""
    term = (affinity_term({"app": "y"}, "topology.kubernetes.io/zone"),)
    pods: list[Pod] = [
        make_pod(f"y{i}", node="src", cpu="500m", priority=100 if i == 0 else 0, labels={"app": "y"}, pod_affinity=term)
        for i in range(3)
    ]
    nodes = [source(), target("t0"), target("t1"), target("t2", zone="zone-b")]
    snapshot = make_snapshot(nodes, pods)
    assert not claims(snapshot)
    plan = planner.plan(snapshot, make_config(), now=NOW)
    assert plan.decision.action == "none"
    assert "pod affinity" in blockers_of(plan, "src") and "breaks ties" in blockers_of(plan, "src")


def test_a_booking_leaves_a_target_as_placing_its_pods_one_by_one() -> None:
    nodes = [source(), target("t1", cpu="8"), target("t2", cpu="8")]
    booked = [
        make_pod(
            f"b{index}",
            node="elsewhere",
            cpu=f"{100 + index}m",
            extended={"example.com/dongle": "1"} if index % 2 else None,
        )
        for index in range(5)
    ]
    view = ClusterView(make_snapshot(nodes=nodes, pods=[make_pod("own", node="t1", cpu="500m")]), make_config())
    booking = fit.Booked(view)
    booking.book(booked[:2], view.nodes["t1"])
    booking.book(booked[2:], view.nodes["t1"])

    def simulated(at_once: bool) -> fit.Simulation:
        if at_once:
            return fit.Simulation(view, view.nodes["src"], fit.targets_for(view), booked=booking)
        simulation = fit.Simulation(view, view.nodes["src"], fit.targets_for(view))
        for pod in booked:
            simulation.place(pod, view.nodes["t1"])
        return simulation

    one_by_one, at_once = simulated(False), simulated(True)
    assert at_once.usage == one_by_one.usage
    assert at_once.usage["t1"].cpu == 500 + sum(100 + index for index in range(5))
    assert at_once.usage["t1"].extended == {"example.com/dongle": 2000}
    probe = make_pod("probe", node="src", cpu="7")
    assert at_once.why_not(probe, view.nodes["t1"]) == one_by_one.why_not(probe, view.nodes["t1"]) is not None


def test_a_simulation_changes_its_own_copy_of_the_booking_and_leaves_its_source_out() -> None:
    nodes = [source(), target("t1", cpu="8"), target("t2", cpu="8")]
    view = ClusterView(make_snapshot(nodes=nodes, pods=[]), make_config())
    booking = fit.Booked(view)
    booking.book([make_pod("b1", node="elsewhere", cpu="1")], view.nodes["t1"])
    booking.book([make_pod("b2", node="elsewhere", cpu="1")], view.nodes["t2"])
    simulation = fit.Simulation(view, view.nodes["t2"], fit.targets_for(view), booked=booking)
    assert set(simulation.usage) == {"t1"}
    simulation.place(make_pod("p", node="t2", cpu="2"), view.nodes["t1"])
    assert simulation.usage["t1"].cpu == 3000
    assert booking.usage["t1"].cpu == 1000 and [pod.name for pod in booking.usage["t1"].placed] == ["b1"]
    again = fit.Simulation(view, view.nodes["src"], fit.targets_for(view), booked=booking)
    assert again.usage["t1"].cpu == 1000 and again.usage["t2"].cpu == 1000


def _slow_spread_counts(simulation: fit.Simulation, pod: Pod, constraint: SpreadConstraint) -> Counter[str]:
    """The counts as made without the booking's own counts: every placed pod of every target, one by one."""
    booking = simulation._booking
    cached = dict(simulation._spread_counts)
    simulation._booking = None
    simulation._spread_counts.clear()
    try:
        return Counter(simulation._spread_counts_for(pod, constraint))
    finally:
        simulation._booking = booking
        simulation._spread_counts.clear()
        simulation._spread_counts.update(cached)


@pytest.mark.parametrize("seed", range(40))
def test_spread_counts_from_the_booking_s_files_are_those_of_every_placed_pod(seed: int) -> None:
    """A simulation that borrows a booking counts the booked pods a spread constraint selects from the booking's
    files (`Booked.matching`, by namespace and label); counted walking every placed pod instead, the counts are
    the same, whatever was booked, unbooked (and booked again), changed by the simulation or left out as its
    source."""
    draw = random.Random(seed)
    zones = ["zone-a", "zone-b", "zone-c"]
    names = [f"n{index}" for index in range(8)]
    nodes = [make_node(name, cpu="64", memory="256Gi", zone=draw.choice(zones), marked_since=None) for name in names]
    apps = ["web", "api", "cache"]

    def pod(name: str, on: str) -> Pod:
        return make_pod(name, node=on, namespace=draw.choice(["default", "shop"]), labels={"app": draw.choice(apps)})

    running = [pod(f"r{index}", draw.choice(names)) for index in range(30)]
    view = ClusterView(make_snapshot(nodes=nodes, pods=running), make_config())
    keys = (HOSTNAME, "topology.kubernetes.io/zone")
    constraints = [spread({"app": app}, key=key) for app in apps for key in keys]
    # A selector without labels (every pod of the namespace) and none at all (no pod).
    constraints += [SpreadConstraint(1, key, selector) for key in keys for selector in (LabelSelector(), None)]
    booking = fit.Booked(view)
    for step in range(draw.randint(1, 12)):
        if booking.usage and draw.random() < 0.25:
            booking.unbook(draw.choice(sorted(booking.usage)))
        else:
            origin = draw.choice(names)
            moved = [pod(f"b{step}-{index}", origin) for index in range(draw.randint(1, 4))]
            booking.book(moved, view.nodes[draw.choice(names)])
    if not booking.usage:
        booking.book([pod("last", draw.choice(names))], view.nodes[draw.choice(names)])
    for source_name in draw.sample(names, 4):
        simulation = fit.Simulation(
            view, view.nodes[source_name], fit.targets_for(view), source_is_domain=False, booked=booking
        )
        for index in range(draw.randint(0, 6)):
            simulation.place(pod(f"s{index}", source_name), view.nodes[draw.choice(names)])
        for constraint in constraints:
            for namespace in ("default", "shop"):
                probe = make_pod("probe", node=source_name, namespace=namespace, labels={"app": "web"})
                fast = Counter(simulation._spread_counts_for(probe, constraint))
                assert fast == _slow_spread_counts(simulation, probe, constraint)
