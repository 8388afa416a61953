"""Node pool auto-creation in the model: a scenario's `autoCreation` gives a pending pod that selects a machine
family or machine type a pool of that shape, as GKE's node auto-provisioning does."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from compactor.errors import BadInputError
from compactor.simulation import runner
from compactor.simulation.model import ComputeClass
from compactor.simulation.strategies import ClusterAutoscalerAlone
from tests.simulation.builders import setup_from

FAMILY = "cloud.google.com/machine-family"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def cluster_with(
    *, selector: dict[str, str] | None, machine_types: list[str], spot: bool = False, replicas: int = 2
) -> dict[str, Any]:
    """One full e2 pool; the batch pods arrive an hour in, and select what `selector` says."""
    batch: dict[str, Any] = {
        "name": "batch",
        "requests": {"cpu": "1", "memory": "2Gi"},
        "replicas": {"points": [[12, 0], [12.99, 0], [13, replicas], [24, replicas]]},
    }
    if selector:
        batch["nodeSelector"] = selector
    if spot:
        batch["tolerations"] = [
            {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ]
    return {
        "name": "auto",
        "seed": 2,
        "start": "2026-11-20T12:00:00Z",
        "hours": 2,
        "warmupHours": 0,
        "stepSeconds": 60,
        "pools": [
            {
                "name": "e2-pool",
                "machineType": "e2-standard-4",
                "zones": ["europe-west1-b"],
                "minNodes": 1,
                "maxNodes": 1,
                "initialNodes": 1,
            },
        ],
        "daemonSets": [],
        "deployments": [batch],
        "autoCreation": {"machineTypes": machine_types, "spot": spot},
    }


def run_until(cluster: runner.Cluster, minutes: int) -> None:
    start = cluster.autoscaler.setup.start
    for minute in range(minutes):
        cluster.step(ClusterAutoscalerAlone(), start + timedelta(minutes=minute))


def batch_pools(cluster: runner.Cluster) -> list[str]:
    world = cluster.world
    return sorted(
        (world.node_pool(pod.node_name) or "") if pod.node_name else "pending"
        for _, pod in world.pod_records()
        if pod.name.startswith("batch")
    )


@pytest.mark.parametrize(
    ("selector", "machine_types", "pool"),
    [
        pytest.param({FAMILY: "n2"}, ["n2-standard-8"], "nap-n2-standard-8", id="machine-family"),
        pytest.param(
            {INSTANCE_TYPE: "n2d-standard-4"},
            ["n2-standard-8", "n2d-standard-4"],
            "nap-n2d-standard-4",
            id="instance-type-among-several",
        ),
    ],
)
def test_a_pending_pod_that_selects_a_shape_gets_a_node_of_a_new_pool_of_it(
    selector: dict[str, str], machine_types: list[str], pool: str
) -> None:
    cluster = runner.build(setup_from(cluster_with(selector=selector, machine_types=machine_types)))
    assert [p.name for p in cluster.autoscaler.setup.pools if p.auto_created] == [
        f"nap-{machine}" for machine in machine_types
    ]
    run_until(cluster, 61)
    assert batch_pools(cluster) == ["pending", "pending"]  # the hour's pods: a VM on its way
    run_until(cluster, 66)  # the model's 3.5 minutes of provisioning, as for any scale-up
    assert batch_pools(cluster) == [pool, pool]


def test_a_pod_that_selects_no_shape_never_gets_an_auto_created_pool() -> None:
    cluster = runner.build(setup_from(cluster_with(selector=None, machine_types=["n2-standard-8"], replicas=6)))
    run_until(cluster, 70)
    assert "pending" in batch_pools(cluster)
    assert not any(name.startswith("gke-sim-nap") for name in cluster.world.nodes)


def test_a_compute_class_rung_gets_its_auto_created_pool_for_pods_that_select_no_shape() -> None:
    # A class with nodePoolAutoCreation (the rungs `migration.user_classes` writes): GKE creates the rung's pool for
    # the class's pods, which need not select a machine type.
    setup = setup_from(cluster_with(selector=None, machine_types=["n2-standard-8"], replicas=6))
    cluster = runner.build(setup)
    classes = (ComputeClass("nap-first", ("nap-n2-standard-8", "e2-pool")),)
    cluster.autoscaler.settings = dataclasses.replace(cluster.autoscaler.settings, classes=classes)
    run_until(cluster, 70)
    assert "nap-n2-standard-8" in batch_pools(cluster) and "pending" not in batch_pools(cluster)


def test_spot_auto_creation_makes_a_tainted_spot_pool() -> None:
    setup = setup_from(cluster_with(selector={FAMILY: "n2"}, machine_types=["n2-standard-8"], spot=True))
    (pool,) = [p for p in setup.pools if p.auto_created]
    assert pool.name == "nap-n2-standard-8-spot"
    assert pool.labels["cloud.google.com/gke-spot"] == "true"
    assert setup.prices[pool.name].spot


def test_an_unknown_machine_type_is_an_error_naming_it() -> None:
    with pytest.raises(BadInputError) as raised:
        setup_from(cluster_with(selector=None, machine_types=["n2-standard-8", "n9-giant-1"]))
    assert any(
        "autoCreation.machineTypes.1: unknown machine type 'n9-giant-1'" in problem for problem in raised.value.problems
    ), raised.value.problems
