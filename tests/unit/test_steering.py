"""Scale-down steering (core.steering): which node's pods get node-compactor's pod-deletion-cost."""

from __future__ import annotations

from compactor.core import ranking, steering
from compactor.core.cluster import ClusterView
from compactor.core.model import DELETION_COST, STEERED_COST, Node, Pod
from compactor.kube.snapshot import deletion_cost_of
from tests.builders import busy, make_config, make_node, make_pod, make_snapshot, run_plan


def nodes_at(*names: str, pool: str = "default-pool") -> list[Node]:
    return [make_node(name, pool=pool, marked_since=None) for name in names]


def test_the_least_utilized_node_of_each_enabled_pool_is_steered() -> None:
    nodes = [*nodes_at("a1", "a2", "a3"), *nodes_at("b1", "b2", pool="batch"), *nodes_at("c1", "c2", pool="off")]
    pods = [
        busy("a1-busy", "a1", cpu="3"),
        busy("a2-light", "a2", cpu="1"),
        busy("a3-mid", "a3", cpu="2"),
        busy("b1-light", "b1", cpu="500m"),
        busy("b2-busy", "b2", cpu="3"),
        busy("c1-light", "c1", cpu="100m"),
        busy("c2-busy", "c2", cpu="3"),
    ]
    config = make_config(pools={"default-pool": {}, "batch": {}, "off": {"enabled": False}})
    plan = run_plan(nodes, pods, config=config)
    assert plan.steered_nodes == ("a2", "b1")
    assert plan.deletion_costs_add == ("default/a2-light", "default/b1-light")
    assert plan.deletion_costs_remove == ()


def test_only_replicaset_pods_without_a_cost_of_their_own_are_written() -> None:
    pods = [
        make_pod("web", node="n1"),
        make_pod("db-0", node="n1", owner="StatefulSet"),
        make_pod("etl", node="n1", owner="Job"),
        make_pod("agent", node="n1", owner="DaemonSet"),
        make_pod("mine", node="n1", deletion_cost=5, deletion_cost_set=True),
        make_pod("closing", node="n1", terminating=True),
        busy("k2", "n2"),
    ]
    plan = run_plan(nodes_at("n1", "n2"), pods)
    assert plan.steered_nodes == ("n1",)
    assert plan.deletion_costs_add == ("default/web",)


def test_a_node_a_drain_may_not_take_is_passed_over_for_the_next_least_utilized() -> None:
    nodes = [
        make_node("bare", marked_since=None),
        make_node("cordoned", marked_since=None, unschedulable=True),
        make_node("opted-out", marked_since=None, annotations={"node-compactor.dev/disabled": "true"}),
        make_node("open", marked_since=None),
        make_node("full", marked_since=None),
    ]
    pods = [
        make_pod("bare-pod", node="bare", owner=None),
        make_pod("c", node="cordoned"),
        make_pod("o", node="opted-out"),
        make_pod("web", node="open", cpu="1"),
        busy("k", "full"),
    ]
    plan = run_plan(nodes, pods)
    assert plan.steered_nodes == ("open",)


def test_a_pool_at_its_min_nodes_is_not_steered_and_its_old_costs_are_taken_back() -> None:
    pods = [make_pod("web", node="n1", steered=True, deletion_cost_set=True), busy("k2", "n2")]
    plan = run_plan(nodes_at("n1", "n2"), pods, config=make_config(pools={"default-pool": {"minNodes": 2}}))
    assert plan.steered_nodes == ()
    assert plan.deletion_costs_remove == ("default/web",)


def test_the_node_a_drain_evicts_is_steered_and_so_is_the_next_least_utilized() -> None:
    # n1 is marked long enough and drained now; n2 is the least utilized of the others.
    nodes = [make_node("n1"), *nodes_at("n2", "n3", "n4")]
    pods = [
        make_pod("web-1", node="n1"),
        busy("k2", "n2", cpu="2"),
        busy("k3", "n3", cpu="2500m"),
        busy("k4", "n4", cpu="2500m"),
    ]
    plan = run_plan(nodes, pods, config=make_config(reserveRoomForDrains=False))
    assert (plan.decision.action, plan.decision.node) == ("drain", "n1")
    assert plan.steered_nodes == ("n1", "n2")


def test_costs_are_taken_back_before_new_ones_are_written_within_the_bound_of_a_run() -> None:
    many = steering.MAX_WRITES_PER_RUN
    pods = [
        *(make_pod(f"old-{i:03}", node="n2", cpu="10m", steered=True, deletion_cost_set=True) for i in range(many - 2)),
        *(make_pod(f"new-{i}", node="n1", cpu="10m") for i in range(5)),
        busy("k2", "n2"),
    ]
    plan = run_plan(nodes_at("n1", "n2"), pods)
    assert len(plan.deletion_costs_remove) == many - 2
    assert plan.deletion_costs_add == ("default/new-0", "default/new-1")


def test_steering_off_takes_back_every_cost_node_compactor_wrote() -> None:
    pods = [make_pod("web", node="n1", steered=True, deletion_cost_set=True), make_pod("new", node="n1")]
    plan = run_plan(nodes_at("n1", "n2"), pods, config=make_config(steerScaleDown=False))
    assert (plan.steered_nodes, plan.deletion_costs_add) == ((), ())
    assert plan.deletion_costs_remove == ("default/web",)


def test_the_cost_is_node_compactors_only_while_it_equals_the_recorded_value() -> None:
    assert deletion_cost_of({}) == (0, False, False)
    assert deletion_cost_of({DELETION_COST: "-1", STEERED_COST: "-1"}) == (0, True, True)
    assert deletion_cost_of({DELETION_COST: "7", STEERED_COST: "-1"}) == (7, True, False)
    assert deletion_cost_of({DELETION_COST: "-1"}) == (-1, True, False)
    assert deletion_cost_of({DELETION_COST: "many"}) == (0, True, False)


def test_the_ranking_reads_the_pods_own_cost_not_node_compactors() -> None:
    steered = [make_pod("web", node="n1", steered=True, deletion_cost_set=True)]
    plain = [make_pod("web", node="n1")]
    config = make_config()

    def cost(pods: list[Pod]) -> tuple[int, int, int, float, float, str]:
        return ranking.disruption_cost(ClusterView(make_snapshot(nodes_at("n1"), pods), config).nodes["n1"])

    assert cost(steered) == cost(plain)
    assert steered[0].scale_down_cost == -1 and plain[0].scale_down_cost == 0
