"""A drain's free pods may land anywhere they fit: the fit proof leaves its constrained pods room anyway.

The cluster of data-platform-etl at 20:50, reduced: the drained node holds a query pod held to its zone
by a DoNotSchedule zone spread and a kube-dns pod free to go anywhere. The proof's resource scores send
kube-dns to the roomier zone; kube-scheduler's default topology spread score sends it to the zone that
just lost its kube-dns pod, onto the only zone-a room the query pod was counted on. The simulator's
scheduler shows the strand; the planner must not start that drain.
"""

from __future__ import annotations

from compactor.core import planner
from compactor.core.model import UNDERUTILIZED_SINCE
from compactor.core.timing import format_stamp
from compactor.settings.config import Config
from compactor.simulation import objects
from compactor.simulation.scheduler import Scheduler
from compactor.simulation.world import World
from tests.simulation.builders import LONG_AGO, POOL, START, add_node, add_pod, pool_spec, world

CONFIG = Config.model_validate(
    {"nodePools": {POOL: {"enabled": True, "scaleDownCPURequestRatioLimit": 0.5, "neededMarkedTimeSeconds": 60}}}
)
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "query"}},
    }
]
DNS_PRIORITY = 2_000_000_000


def query(cluster: World, name: str, node: str | None) -> str:
    return add_pod(
        cluster, name, node=node, cpu="1", memory="128Mi", app="query", owner=("ReplicaSet", "query"), spread=SPREAD
    )


def dns(cluster: World, name: str, node: str | None) -> str:
    return add_pod(
        cluster,
        name,
        node=node,
        cpu="260m",
        memory="128Mi",
        app="kube-dns",
        namespace="kube-system",
        owner=("ReplicaSet", "kube-dns"),
        priority=DNS_PRIORITY,
    )


def cluster_with(zone_a_room_cpu: str, *, dns_in_zone_b: bool = True) -> World:
    """src (zone a, to drain): a query pod and a kube-dns pod. a1 (zone a): a query pod and a filler
    leaving `zone_a_room_cpu` free. b1 (zone b): two query pods and (`dns_in_zone_b`) a kube-dns pod;
    1.74 cpu free with it."""
    cluster = world(pool_spec(zones=("zone-a", "zone-b")))
    for name, zone in (("src", "zone-a"), ("a1", "zone-a"), ("b1", "zone-b")):
        add_node(cluster, name, zone=zone)
    cluster.patch_node("src", {"metadata": {"annotations": {UNDERUTILIZED_SINCE: format_stamp(LONG_AGO)}}})
    query(cluster, "query-src", "src")
    dns(cluster, "kube-dns-src", "src")
    query(cluster, "query-a1", "a1")
    filler_millis = 4000 - 1000 - int(zone_a_room_cpu.removesuffix("m"))
    add_pod(cluster, "filler", node="a1", cpu=f"{filler_millis}m", memory="128Mi", owner=("ReplicaSet", "filler"))
    query(cluster, "query-b1", "b1")
    query(cluster, "query-b2", "b1")
    if dns_in_zone_b:
        dns(cluster, "kube-dns-b1", "b1")
    # kube-dns's budget, as GKE ships it: without one, a kube-system pod blocks its node's drain.
    cluster.add_pdb(
        objects.pdb_object("kube-system", "kube-dns", {"app": "kube-dns"}, min_available=None, max_unavailable=1)
    )
    return cluster


def drain_as_the_scheduler_would(cluster: World) -> list[str]:
    """Evict src's pods, let their replacements (created at once, as a ReplicaSet does) reach the
    scheduler together, and return the pods left without a node."""
    for key in list(cluster.pods_on("src")):
        cluster.evict(key, actor="node-compactor", at=START)
    cluster.patch_node("src", {"spec": {"unschedulable": True}})
    query(cluster, "query-new", None)
    dns(cluster, "kube-dns-new", None)
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    return cluster.pending()


def test_a_free_pod_the_scheduler_sends_elsewhere_strands_the_zone_held_pod() -> None:
    """The strand is real: with 1.2 cpu free in zone a, kube-dns goes there and the query pod finds no node."""
    assert drain_as_the_scheduler_would(cluster_with("1200m")) == ["default/query-new"]


def test_the_planner_does_not_start_that_drain() -> None:
    """The proof's pass with the default spread score finds it (kube-dns goes to zone a there too)."""
    plan = planner.plan(cluster_with("1200m").snapshot(START), CONFIG, now=START)
    assert plan.decision.action == "none", plan.decision
    assert "default/query-src" in " | ".join(next(node for node in plan.nodes if node.name == "src").blockers)


def test_nor_when_only_a_score_the_proof_does_not_model_could_send_the_free_pod_there() -> None:
    """Without a kube-dns sibling in zone b the spread score does not prefer zone a, but any other
    score (image locality, a preferred affinity) may: the free pods go first where they hurt most."""
    plan = planner.plan(cluster_with("1200m", dns_in_zone_b=False).snapshot(START), CONFIG, now=START)
    assert plan.decision.action == "none", plan.decision
    blockers = " | ".join(next(node for node in plan.nodes if node.name == "src").blockers)
    assert "default/query-src" in blockers and "without placement constraints land first" in blockers


def test_with_room_for_both_in_the_zone_the_drain_goes_ahead_and_places_every_pod() -> None:
    plan = planner.plan(cluster_with("1300m").snapshot(START), CONFIG, now=START)
    assert plan.decision.action == "drain" and plan.decision.node == "src", plan.decision
    assert drain_as_the_scheduler_would(cluster_with("1300m")) == []
