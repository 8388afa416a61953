"""The fit proof places a pod with preferred node affinity where kube-scheduler's NodeAffinity score sends it.

GKE's Spot pattern: batch pods prefer `cloud.google.com/gke-spot=true` nodes. The scheduler weighs NodeAffinity
2 against 1 for each resource score, the matched weights normalized to 100: a pod preferring Spot goes to a
Spot node that holds it, however full. Below, `spot` (also the only `disk=ssd` node) has 1420m free and
`plain` is empty. The batch pod (1 cpu, evicted first: lower priority) goes to `plain` by the resource
scores alone, and the database pod (1 cpu, nodeSelector disk=ssd) then fits on `spot`; preferring Spot, the
batch pod takes `spot`'s room first and the database pod finds no node. A proof blind to the preference
would prove a drain that leaves the database pending.
"""

from __future__ import annotations

from compactor.core import fit, proof
from compactor.core.cluster import ClusterView
from compactor.core.model import NodeSelectorTerm, PreferredTerm, Requirement
from tests.builders import make_config, make_node, make_pod, make_snapshot

CPU, MEMORY = "3920m", "13948518Ki"  # e2-standard-4's allocatable
SPOT = "cloud.google.com/gke-spot"


def prefers(*terms: tuple[int, str, str]) -> tuple[PreferredTerm, ...]:
    return tuple(
        PreferredTerm(weight, NodeSelectorTerm((Requirement(key, "In", (value,)),))) for weight, key, value in terms
    )


def view(*, preferring: bool = True) -> ClusterView:
    nodes = [
        make_node("src", cpu=CPU, memory=MEMORY),
        make_node("spot", cpu=CPU, memory=MEMORY, marked_since=None, labels={SPOT: "true", "disk": "ssd"}),
        make_node("plain", cpu=CPU, memory=MEMORY, marked_since=None),
    ]
    preference = prefers((100, SPOT, "true")) if preferring else ()
    pods = [
        make_pod("batch-1", node="src", cpu="1", memory="1Gi", priority=0, preferred_node_affinity=preference),
        make_pod("db-1", node="src", cpu="1", memory="1Gi", priority=1000, node_selector=(("disk", "ssd"),)),
        make_pod("resident-1", node="spot", cpu="2500m", memory="1Gi"),
    ]
    return ClusterView(make_snapshot(nodes, pods), make_config())


def in_eviction_order(cluster: ClusterView) -> fit.FitResult:
    source = cluster.nodes["src"]
    pods = fit.eviction_order(source.movable_pods)
    assert [pod.name for pod in pods] == ["batch-1", "db-1"], "the lower priority is evicted first"
    return fit.Simulation(cluster, source, fit.targets_for(cluster)).run(pods)


def test_a_pod_preferring_spot_takes_the_spot_nodes_room_in_the_simulation() -> None:
    result = in_eviction_order(view())
    assert not result.fits
    assert result.placements == {"default/batch-1": "spot"}
    assert "db-1" in (result.failure or "")


def test_without_the_preference_the_resource_scores_send_it_to_the_emptier_node() -> None:
    result = in_eviction_order(view(preferring=False))
    assert result.fits
    assert result.placements == {"default/batch-1": "plain", "default/db-1": "spot"}


def test_the_proof_refuses_a_drain_that_only_fits_when_the_preference_is_ignored() -> None:
    cluster = view()
    assert isinstance(proof.prove(cluster, cluster.nodes["src"], fit.targets_for(cluster), frozenset()), str)
    plain = view(preferring=False)
    assert not isinstance(proof.prove(plain, plain.nodes["src"], fit.targets_for(plain), frozenset()), str)


def test_the_node_matching_the_heavier_term_wins_over_a_roomier_one() -> None:
    nodes = [
        make_node("src", cpu=CPU, memory=MEMORY),
        make_node("fast", cpu=CPU, memory=MEMORY, marked_since=None, labels={"cpu": "fast"}),
        make_node("ssd", cpu=CPU, memory=MEMORY, marked_since=None, labels={"disk": "ssd"}),
    ]
    pods = [
        make_pod(
            "db-1", node="src", cpu="500m", preferred_node_affinity=prefers((10, "cpu", "fast"), (90, "disk", "ssd"))
        ),
        make_pod("resident-1", node="ssd", cpu="2"),
    ]
    cluster = ClusterView(make_snapshot(nodes, pods), make_config())
    source = cluster.nodes["src"]
    result = fit.Simulation(cluster, source, fit.targets_for(cluster)).run(source.movable_pods)
    assert result.placements == {"default/db-1": "ssd"}


def test_node_affinity_scores_normalize_the_matched_weights_by_the_highest() -> None:
    cluster = view()
    pod = make_pod("x", node=None, preferred_node_affinity=prefers((10, SPOT, "true"), (30, "disk", "ssd")))
    targets = [cluster.nodes["spot"], cluster.nodes["plain"]]
    assert fit.node_affinity_scores(pod, targets) == [100, 0]
    assert fit.node_affinity_scores(make_pod("y", node=None), targets) == [0, 0]
