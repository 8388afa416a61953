"""The pool's lower bound of nodes in a plan is DESIGN rule 9's: ceil(total requests / node allocatable), the
larger of cpu and memory, which `excessNodesThreshold` counts from. The simulator's `lower-bound` entry, a
yardstick and not a trigger, also counts pods per node and replicas that repel one another
(tests/simulation/test_lower_bound.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from compactor.core import pools
from compactor.core.model import Pod
from tests.builders import anti_affinity, make_node, make_pod, run_plan


def tiny(count: int, nodes: int, **fields: Any) -> list[Pod]:
    """`count` small pods of one ReplicaSet spread over n0..n(nodes-1)."""
    pods = [make_pod(f"tiny-{i}", node=f"n{i % nodes}", cpu="10m", memory="16Mi", **fields) for i in range(count)]
    return [msgspec.structs.replace(pod, controller_name="tiny") for pod in pods]


def test_the_plans_bound_is_requests_over_allocatable_as_the_rule_says() -> None:
    nodes = [make_node(f"n{i}", pods=32) for i in range(4)]
    repelling = tiny(90, 4, labels={"app": "solo"}, pod_anti_affinity=(anti_affinity({"app": "solo"}),))
    (pool,) = run_plan(nodes, repelling).pools
    # 0.9 cpu and 1.4 GiB of requests on 4-cpu nodes: one node by the rule, whatever the pod count.
    assert pool.lower_bound_nodes == 1 and pool.excess_nodes == 3


def test_replicas_repel_one_another_only_on_the_hostname_and_by_their_own_labels() -> None:
    assert pools.repels_itself(make_pod(labels={"app": "solo"}, pod_anti_affinity=(anti_affinity({"app": "solo"}),)))
    by_zone = anti_affinity({"app": "z"}, "topology.kubernetes.io/zone")
    assert not pools.repels_itself(make_pod(labels={"app": "z"}, pod_anti_affinity=(by_zone,)))
    assert not pools.repels_itself(make_pod(labels={"app": "a"}, pod_anti_affinity=(anti_affinity({"app": "b"}),)))
