"""The fit proof under kube-scheduler 1.36's NodeResourcesBalancedAllocation score.

1.36 scores the change a pod makes to a node's balance, 50 + (50 + after - before) / 2
(balancedResourceScorer, kubernetes/kubernetes#135573); 1.35 and earlier score the balance after
placement. The two can send the same pod to different nodes, and a proof that models only one
can prove a drain whose last pod then finds no place. The case below is that: two e2-standard-4
targets, `x` (1800m, 6 GiB requested) and `y` (1500m, 6 GiB). The small pod arrives first (lower
priority: evicted first): the older score sends it to `x` (139 against 138), 1.36's to `y` (117
against 115), and the 2170m pod, which only `y` holds, then fits nowhere.
"""

from __future__ import annotations

from compactor.core import fit, proof
from compactor.core.cluster import ClusterView
from compactor.core.model import Pod
from tests.builders import make_config, make_node, make_pod, make_snapshot

# e2-standard-4's allocatable (compactor/core/prices/machines.py).
CPU, MEMORY = "3920m", "13948518Ki"


def view() -> ClusterView:
    nodes = [
        make_node("src", cpu=CPU, memory=MEMORY),
        make_node("x", cpu=CPU, memory=MEMORY, marked_since=None),
        make_node("y", cpu=CPU, memory=MEMORY, marked_since=None),
    ]
    pods = [
        make_pod("small-1", node="src", cpu="500m", memory="2Gi", priority=0),
        make_pod("large-1", node="src", cpu="2170m", memory="100Mi", priority=1000),
        make_pod("xload-1", node="x", cpu="1800m", memory="6Gi"),
        make_pod("yload-1", node="y", cpu="1500m", memory="6Gi"),
    ]
    return ClusterView(make_snapshot(nodes, pods), make_config())


def place(balance: fit.Balance) -> dict[str, str]:
    cluster = view()
    source = cluster.nodes["src"]
    pods: list[Pod] = fit.eviction_order(source.movable_pods)
    assert [pod.name for pod in pods] == ["small-1", "large-1"], "the lower priority is evicted first"
    result = fit.Simulation(cluster, source, fit.targets_for(cluster), balance=balance).run(pods)
    return dict(result.placements) if result.fits else {}


def test_the_two_scores_send_the_first_pod_to_different_nodes() -> None:
    assert place("after") == {"default/small-1": "x", "default/large-1": "y"}
    assert place("change") == {}, "under 1.36's score the small pod takes y and the large one fits nowhere"


def test_the_proof_refuses_a_drain_that_only_the_older_score_would_fit() -> None:
    cluster = view()
    source = cluster.nodes["src"]
    result = proof.prove(cluster, source, fit.targets_for(cluster), frozenset())
    assert isinstance(result, str), f"proved a fit: {result}"
    assert "1.36" in result


def test_the_simulators_scheduler_places_the_small_pod_as_the_proof_does_under_1_36() -> None:
    """The simulator's kube-scheduler (compactor/simulation/scheduler.py) scores as 1.36 does: the same
    pod goes to `y`, the node the proof's `balance="change"` run picks."""
    cluster = view()
    source = cluster.nodes["src"]
    first = fit.eviction_order(source.movable_pods)[0]
    run = fit.Simulation(cluster, source, fit.targets_for(cluster), balance="change")
    assert run.run([first]).placements == {"default/small-1": "y"}
    from compactor.simulation.scheduler import _balanced_allocation, _least_allocated

    scores = {}
    for name in ("x", "y"):
        target = cluster.nodes[name]
        used = [target.requested.cpu_millis, target.requested.memory_bytes]
        scores[name] = _least_allocated(target, used, first) + _balanced_allocation(target, used, first)
    assert scores["y"] > scores["x"], scores
