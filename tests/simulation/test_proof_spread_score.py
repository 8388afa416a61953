"""The fit proof scores kube-scheduler's system-default topology spread: a drain whose fit holds only
if a small pod goes where the resource scores send it is refused when the spread score sends it
elsewhere (two-pools-weekday at 01:05 with node-compactor's limit at 0.9, reduced).

`src` holds a 100m pod of `small` (evicted first: lower priority), a 1500m pod and a 1000m pod. t1
(zone a) has 1600m free and three pods of `small`; t2 (zone b) has `t2_free` free. By the resource
scores the small pod goes to t1, the roomier, and the two big ones fit (1500m on t1, 1000m on t2);
the spread score sends the small pod to t2, away from its siblings, and with 1050m free there the
1000m pod then finds no node. The priorities only order the evictions, as in the scenario reduced here,
where no pod outranks another: the replacements do not preempt (`preemptionPolicy: Never`), else the
1000m pod would take the small pod's place on t2.
"""

from __future__ import annotations

from compactor.core import planner
from compactor.core.model import UNDERUTILIZED_SINCE
from compactor.core.timing import format_stamp
from compactor.settings.config import Config
from compactor.simulation.scheduler import Scheduler
from compactor.simulation.world import World
from tests.simulation.builders import LONG_AGO, POOL, START, add_node, add_pod, pool_spec, world

# No soft taint on marked nodes: t1, underutilized, would then be taken last, which refuses the drain for
# another reason.
CONFIG = Config.model_validate(
    {"nodePools": {POOL: {"enabled": True, "scaleDownCPURequestRatioLimit": 0.7}}, "softTaintMarkedNodes": False}
)


def cluster_with(t2_free_millis: int) -> World:
    cluster = world(pool_spec(zones=("zone-a", "zone-b")))
    for name, zone in (("src", "zone-a"), ("t1", "zone-a"), ("t2", "zone-b")):
        add_node(cluster, name, zone=zone)
    cluster.patch_node("src", {"metadata": {"annotations": {UNDERUTILIZED_SINCE: format_stamp(LONG_AGO)}}})
    add_pod(cluster, "small-src", node="src", cpu="100m", memory="64Mi", app="small", owner=("ReplicaSet", "small"))
    add_pod(cluster, "large", node="src", cpu="1500m", memory="64Mi", owner=("ReplicaSet", "large"), priority=10)
    add_pod(cluster, "medium", node="src", cpu="1000m", memory="64Mi", owner=("ReplicaSet", "medium"), priority=10)
    for index in range(3):
        add_pod(
            cluster, f"small-{index}", node="t1", cpu="100m", memory="64Mi", app="small", owner=("ReplicaSet", "small")
        )
    add_pod(cluster, "base-t1", node="t1", cpu="2100m", memory="64Mi", owner=("ReplicaSet", "base"))
    add_pod(cluster, "base-t2", node="t2", cpu=f"{4000 - t2_free_millis}m", memory="64Mi", owner=("ReplicaSet", "base"))
    return cluster


def drain_as_the_scheduler_would(cluster: World) -> list[str]:
    """Evict src's pods; their replacements reach the scheduler in eviction order; the pods left pending."""
    for key in list(cluster.pods_on("src")):
        cluster.evict(key, actor="node-compactor", at=START)
    cluster.patch_node("src", {"spec": {"unschedulable": True}})
    add_pod(cluster, "small-new", cpu="100m", memory="64Mi", app="small", owner=("ReplicaSet", "small"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    for name, cpu in (("large", "1500m"), ("medium", "1000m")):
        add_pod(
            cluster,
            f"{name}-new",
            cpu=cpu,
            memory="64Mi",
            owner=("ReplicaSet", name),
            priority=10,
            preemption_policy="Never",
        )
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    return cluster.pending()


def test_the_spread_score_strands_the_medium_pod_when_t2_has_1050m_free() -> None:
    cluster = cluster_with(1050)
    assert drain_as_the_scheduler_would(cluster) == ["default/medium-new"]
    assert cluster.pod_record("default/small-new").node_name == "t2"


def test_the_planner_does_not_start_that_drain() -> None:
    plan = planner.plan(cluster_with(1050).snapshot(START), CONFIG, now=START)
    assert plan.decision.action == "none", plan.decision
    blockers = " | ".join(next(node for node in plan.nodes if node.name == "src").blockers)
    assert "default topology spread score" in blockers


def test_with_room_for_the_spread_placement_too_the_drain_goes_ahead() -> None:
    plan = planner.plan(cluster_with(1100).snapshot(START), CONFIG, now=START)
    assert plan.decision.action == "drain" and plan.decision.node == "src", plan.decision
    assert drain_as_the_scheduler_would(cluster_with(1100)) == []
