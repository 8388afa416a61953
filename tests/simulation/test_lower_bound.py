"""The simulation's `lower-bound` entry counts the pods a node takes and replicas that need a node each, not
only cpu and memory."""

from __future__ import annotations

from compactor.simulation import runner
from tests.simulation.builders import POOL, scenario_data, setup_from


def bound(**pool: object) -> int:
    deployments = [
        {"name": "tiny", "pool": POOL, "requests": {"cpu": "10m", "memory": "16Mi"}, "replicas": 100},
        {
            "name": "solo",
            "pool": POOL,
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "replicas": 6,
            "antiAffinity": True,
        },
    ]
    pools = [{"name": POOL, "machineType": "e2-standard-4", "zones": ["zone-a"], "minNodes": 1, **pool}]
    setup = setup_from(scenario_data(pools=pools, deployments=deployments))
    cluster = runner.build(setup)
    return runner.lower_bound(setup, cluster)[POOL]


def test_replicas_with_hostname_anti_affinity_need_a_node_each() -> None:
    assert bound() == 6, "106 small pods fit one node by requests and by the default 110 pods"


def test_the_pools_max_pods_per_node_bounds_the_pods_a_node_takes() -> None:
    assert bound(maxPodsPerNode=16) == 8, "106 pods, 15 a node beside the DaemonSet pod"
