"""The pool's lower bound of nodes (DESIGN rule 9) counts what requests alone miss: the pods a node takes
(its allocatable pods, 110 by default on GKE Standard, less the DaemonSet pods every node carries) and
replicas that need a node each (required anti-affinity on kubernetes.io/hostname)."""

from __future__ import annotations

from typing import Any

import msgspec

from compactor.core.model import Pod
from tests.builders import anti_affinity, make_node, make_pod, run_plan


def tiny(count: int, nodes: int, **fields: Any) -> list[Pod]:
    """`count` small pods of one ReplicaSet spread over n0..n(nodes-1)."""
    pods = [make_pod(f"tiny-{i}", node=f"n{i % nodes}", cpu="10m", memory="16Mi", **fields) for i in range(count)]
    return [msgspec.structs.replace(pod, controller_name="tiny") for pod in pods]


def test_many_tiny_pods_need_the_nodes_their_count_needs() -> None:
    nodes = [make_node(f"n{i}", pods=32) for i in range(4)]
    daemons = [make_pod(f"agent-{i}", node=f"n{i}", cpu="10m", owner="DaemonSet") for i in range(4)]
    (pool,) = run_plan(nodes, [*tiny(90, 4), *daemons]).pools
    assert pool.lower_bound_nodes == 3, "90 pods, 31 a node beside its DaemonSet pod; requests alone say 1"


def test_replicas_that_repel_one_another_need_a_node_each() -> None:
    nodes = [make_node(f"n{i}") for i in range(5)]
    repelling = tiny(4, 4, labels={"app": "solo"}, pod_anti_affinity=(anti_affinity({"app": "solo"}),))
    (pool,) = run_plan(nodes, repelling).pools
    assert pool.lower_bound_nodes == 4 and pool.excess_nodes == 1


def test_anti_affinity_on_another_topology_or_other_pods_does_not_count() -> None:
    nodes = [make_node(f"n{i}") for i in range(4)]
    by_zone = tiny(
        4, 4, labels={"app": "z"}, pod_anti_affinity=(anti_affinity({"app": "z"}, "topology.kubernetes.io/zone"),)
    )
    (pool,) = run_plan(nodes, by_zone).pools
    assert pool.lower_bound_nodes == 1
    others = tiny(4, 4, labels={"app": "a"}, pod_anti_affinity=(anti_affinity({"app": "b"}),))
    (pool,) = run_plan(nodes, others).pools
    assert pool.lower_bound_nodes == 1
