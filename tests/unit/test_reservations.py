"""Room reserved for a drain's last pods: when the planner reserves, what, and when it lets go."""

from __future__ import annotations

from compactor.core.model import DRAIN_STARTED_AT, PREFER_NO_SCHEDULE, RESERVED_TAINT, Node, Pod
from tests.builders import ago, blockers_of, busy, make_config, make_node, make_pod, run_plan, stamp, taint

RESERVED = taint(RESERVED_TAINT, "true", PREFER_NO_SCHEDULE)


def tight(n3_keeper: str = "3400m") -> tuple[list[Node], list[Pod]]:
    """n1's 1-cpu pod fits only on n2 (1000m free); it has the higher priority, so it is evicted after
    its four 300m pods, which would fill n2 first."""
    nodes = [make_node("n1"), *(make_node(n, marked_since=None) for n in ("n2", "n3", "n4"))]
    keepers = [busy("k2", "n2", cpu="3", memory="0"), busy("k3", "n3", cpu=n3_keeper, memory="0")]
    keepers.append(busy("k4", "n4", cpu="3400m", memory="0"))
    movers = [
        make_pod("z-big", cpu="1", memory="0", priority=1000),
        *(make_pod(f"a-small-{i}", cpu="300m", memory="0") for i in range(4)),
    ]
    return nodes, [*movers, *keepers]


def test_a_drain_that_fits_as_it_is_reserves_nothing() -> None:
    nodes, pods = tight(n3_keeper="2000m")  # n3 has room for the big pod whatever comes first
    plan = run_plan(nodes, pods)
    assert (plan.decision.action, plan.decision.node) == ("drain", "n1")
    assert plan.decision.reserved == ()
    assert "room kept" not in plan.decision.reason


def test_the_roomiest_node_is_reserved_when_nothing_fits_without() -> None:
    nodes, pods = tight()
    plan = run_plan(nodes, pods)
    assert plan.decision.reserved == ("n2",)
    assert "with room kept on n2" in plan.decision.reason
    assert plan.reservations_remove == ()


def test_no_reservation_when_switched_off_and_the_node_says_why() -> None:
    nodes, pods = tight()
    plan = run_plan(nodes, pods, config=make_config(reserveRoomForDrains=False))
    assert plan.decision.action == "none"
    assert "pod default/z-big" in blockers_of(plan, "n1")


def test_only_nodes_the_big_pod_could_use_are_reserved() -> None:
    # n2 and n5 (8 cpu, 2000m free) have the most room but a taint n1's pods do not tolerate:
    # reserving them would keep nothing for the big pod. n3, the roomiest it can use, is kept.
    gpu = (taint("dedicated", "gpu"),)
    nodes = [
        make_node("n1"),
        *(make_node(n, cpu="8", marked_since=None, taints=gpu) for n in ("n2", "n5")),
        *(make_node(n, marked_since=None) for n in ("n3", "n4", "n6")),
    ]
    keepers = [busy(f"k{n}", n, cpu="6", memory="0") for n in ("n2", "n5")]
    keepers += [busy("k3", "n3", cpu="3", memory="0")]
    keepers += [busy(f"k{n}", n, cpu="3400m", memory="0") for n in ("n4", "n6")]
    movers = [
        make_pod("z-big", cpu="1", memory="0", priority=1000),
        *(make_pod(f"a-small-{i}", cpu="300m", memory="0") for i in range(4)),
    ]
    plan = run_plan(nodes, [*movers, *keepers])
    assert (plan.decision.action, plan.decision.node) == ("drain", "n1")
    assert plan.decision.reserved == ("n3",)
    assert dict(plan.decision.placements)["default/z-big"] == "n3"


def draining(node: str = "n1", started: float = 60) -> Node:
    return make_node(node, unschedulable=True, annotations={DRAIN_STARTED_AT: stamp(ago(started))})


def test_reservations_stay_while_a_drain_evicts_and_come_off_once_none_does() -> None:
    kept = make_node("n2", marked_since=None, taints=(RESERVED,))
    others = [make_node("n3", marked_since=None)]
    pods = [busy("k2", "n2"), busy("k3", "n3")]
    evicting = run_plan([draining(), kept, *others], [make_pod("web"), *pods])
    assert evicting.decision.action == "continue-drain"
    assert evicting.reservations_remove == ()
    emptied = run_plan([draining(), kept, *others], pods)  # n1 now only awaits removal
    assert emptied.reservations_remove == ("n2",)
    timed_out = run_plan([draining(started=901), kept, *others], [make_pod("web"), *pods])
    assert timed_out.decision.action == "rollback"
    assert timed_out.reservations_remove == ("n2",)


def test_a_cordoned_node_keeps_its_reservation_taint_as_it_is() -> None:
    # Someone cordoned n2 after the drain reserved it: node-compactor does not write to it.
    cordoned = make_node("n2", marked_since=None, unschedulable=True, taints=(RESERVED,))
    plan = run_plan([make_node("n1", marked_since=None), cordoned], [busy("k1", "n1"), busy("k2", "n2")])
    assert plan.reservations_remove == ()
