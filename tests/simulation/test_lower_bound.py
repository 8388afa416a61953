"""The simulation's lower bounds: the `lower-bound` entry counts the pods a node takes and replicas that need a
node each, not only cpu and memory; the cost lower bound is the cheapest fractional capacity that holds every
pod (a linear program), and no strategy on any shipped scenario is billed less at any step."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from compactor.core.model import Pod
from compactor.settings.config import DEFAULT_POOL_LABEL
from compactor.simulation import bound, runner
from compactor.simulation.runner import Results
from tests.simulation import shipped
from tests.simulation.builders import POOL, add_pod, scenario_data, setup_from, world

GIB = 2**30


def nodes_bound(**pool: object) -> int:
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
    assert nodes_bound() == 6, "106 small pods fit one node by requests and by the default 110 pods"


def test_the_pools_max_pods_per_node_bounds_the_pods_a_node_takes() -> None:
    assert nodes_bound(maxPodsPerNode=16) == 8, "106 pods, 15 a node beside the DaemonSet pod"


# -- the cost lower bound on hand-built pools -------------------------------------------------------------------
#
# Two pools as in the issue that found the old rule wrong: n2-standard-8-like nodes (8 cpu, 32 GiB of room) at
# 0.40 an hour and n2-highmem-8-like nodes (8 cpu, 64 GiB) at 0.54, rooms given as they are so the arithmetic
# stays by hand.

STANDARD, HIGHMEM = "standard", "highmem"
ROOMS = {STANDARD: bound.Room(8000, 32 * GIB, 110), HIGHMEM: bound.Room(8000, 64 * GIB, 110)}


def capacity(
    *, zones: tuple[str, ...] = ("zone-a",), min_nodes: int = 0, taints: dict[str, list[dict[str, str]]] | None = None
) -> bound.CheapestCapacity:
    pools = [
        {
            "name": name,
            "machineType": machine,
            "zones": list(zones),
            "minNodes": min_nodes,
            "maxNodes": 50,
            "pricePerHour": price,
            "taints": (taints or {}).get(name, []),
        }
        for name, machine, price in ((STANDARD, "n2-standard-8", 0.40), (HIGHMEM, "n2-highmem-8", 0.54))
    ]
    setup = setup_from(scenario_data(pools=pools, daemonSets=[], deployments=[], compactor={"nodePools": {}}))
    return bound.CheapestCapacity(setup, ROOMS, DEFAULT_POOL_LABEL)


def pod(cpu: str, memory: str, **template: Any) -> Pod:
    target = world()
    return target.pod_record(add_pod(target, "p", cpu=cpu, memory=memory, **template))


def group(
    name: str,
    cpu_millis: int,
    memory_gib: float,
    pods: int,
    *,
    home: str = STANDARD,
    zone: str | None = None,
    **spec: Any,
) -> bound.Demand:
    one = pod(f"{cpu_millis}m", f"{int(memory_gib * 1024)}Mi", **spec)
    return bound.Demand(home, name, one, cpu_millis * pods, int(memory_gib * GIB) * pods, pods, zone=zone)


def caches() -> bound.Demand:
    return group("caches", 1000, 12, 10, home=HIGHMEM)  # 10 cpu, 120 GiB


def bidders(**spec: Any) -> bound.Demand:
    return group("bidders", 2000, 1, 10, **spec)  # 20 cpu, 10 GiB


def test_memory_heavy_and_cpu_heavy_pods_are_mixed_where_a_pool_may_hold_both() -> None:
    # Group by group, the caches' cheapest pool is highmem (120 GiB / 64 = 1.875 nodes, 1.0125 an hour, against
    # 3.75 standard nodes, 1.50) and the bidders' is standard (20 cpu / 8 = 2.5 nodes, 1.00 against 1.35): 2.0125.
    # Together they need 30 cpu and 130 GiB, between the two pools' shapes: cpu and memory both bind when
    # n_s + n_h = 30 / 8 and 32 n_s + 64 n_h = 130, so n_h = 5/16 and n_s = 55/16, 1.54375 an hour; the
    # highmem nodes take 15/92 of the caches and 1/23 of the bidders (2.5 cpu, 20 GiB), the rest fill standard.
    mix = 0.40 * 55 / 16 + 0.54 * 5 / 16
    per_group = 0.54 * 1.875 + 0.40 * 2.5
    cheapest = capacity()
    assert cheapest.per_hour([caches(), bidders()]) == pytest.approx(mix, rel=1e-9)
    assert mix < per_group * 0.8, "the old group-by-group figure was no bound"
    only_standard = 0.40 * max(30 / 8, 130 / 32)
    assert mix < only_standard, "nor is one pool for everything the cheapest"


def test_pods_that_may_use_one_pool_only_are_not_mixed() -> None:
    caches_on_highmem = group("caches-1", 1000, 12, 10, home=HIGHMEM, node_selector={DEFAULT_POOL_LABEL: HIGHMEM})
    bidders_on_standard = group("bidders-1", 2000, 1, 10, node_selector={DEFAULT_POOL_LABEL: STANDARD})
    cheapest = capacity()
    assert cheapest.allowed(bidders_on_standard) == ((STANDARD, "zone-a"),)
    assert cheapest.allowed(bidders()) == ((STANDARD, "zone-a"), (HIGHMEM, "zone-a"))
    assert cheapest.per_hour([caches_on_highmem, bidders_on_standard]) == pytest.approx(0.54 * 1.875 + 0.40 * 2.5)


def test_a_taint_keeps_the_pods_that_do_not_tolerate_it_out_of_its_pool() -> None:
    # Only the caches may use highmem: a share a of them goes there (1.875 a nodes by memory) and the rest fill
    # standard beside the bidders, max((30 - 10a) / 8, (130 - 120a) / 32) nodes; both bind at a = 1/8.
    taint = {"key": "dedicated", "value": "caches", "effect": "NoSchedule"}
    tolerating = [{"key": "dedicated", "operator": "Equal", "value": "caches", "effect": "NoSchedule"}]
    cheapest = capacity(taints={HIGHMEM: [taint]})
    tolerant_caches = group("caches-1", 1000, 12, 10, home=HIGHMEM, tolerations=tolerating)
    assert cheapest.allowed(bidders()) == ((STANDARD, "zone-a"),)
    assert cheapest.allowed(tolerant_caches) == ((STANDARD, "zone-a"), (HIGHMEM, "zone-a"))
    cost = cheapest.per_hour([tolerant_caches, bidders()])
    assert cost == pytest.approx(0.54 * 15 / 64 + 0.40 * 115 / 32, rel=1e-9)
    assert cost > capacity().per_hour([caches(), bidders()])


def test_replicas_that_repel_each_other_on_the_hostname_need_a_node_each() -> None:
    anti_affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "p"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    solo = group("solo", 100, 0.125, 6, affinity=anti_affinity)
    alike = group("alike", 100, 0.125, 6)
    assert capacity().per_hour([alike]) == pytest.approx(0.40 * 0.6 / 8, rel=1e-9)
    assert capacity().per_hour([solo]) == pytest.approx(0.40 * 6, rel=1e-9), "six standard nodes, the cheaper"


def test_a_pools_min_nodes_are_paid_for_and_their_room_used() -> None:
    # Two nodes of each pool are there anyway, and hold it all: highmem the caches and three bidders (16 cpu,
    # 123 GiB), standard the other seven (14 cpu, 7 GiB). Group by group, standard would need 2.5 nodes.
    cheapest = capacity(min_nodes=2)
    assert cheapest.per_hour([]) == pytest.approx(2 * 0.40 + 2 * 0.54, rel=1e-9)
    assert cheapest.per_hour([caches(), bidders()]) == pytest.approx(2 * 0.40 + 2 * 0.54, rel=1e-9)


def test_the_pods_a_node_takes_bound_the_nodes() -> None:
    tiny = group("tiny", 10, 0.015625, 330)  # 3.3 cpu, 5.2 GiB: half a node by requests, 3 by pod count
    assert capacity().per_hour([tiny]) == pytest.approx(0.40 * 3, rel=1e-9)


def test_pods_whose_volumes_are_bound_to_different_zones_share_no_node() -> None:
    two_zones = ("zone-a", "zone-b")
    pinned = [
        group("cache", 1000, 48, 1, home=HIGHMEM, zone="zone-a"),
        group("encoders", 6000, 4, 1, home=HIGHMEM, zone="zone-b"),
    ]
    unpinned = [bound.Demand(g.home, f"{g.owner}-anywhere", g.pod, g.cpu_millis, g.memory_bytes) for g in pinned]
    cheapest = capacity(zones=two_zones)
    assert cheapest.allowed(pinned[0]) == ((HIGHMEM, "zone-a"),), "48 GiB fits no standard node"
    assert cheapest.allowed(pinned[1]) == ((STANDARD, "zone-b"), (HIGHMEM, "zone-b"))
    # Unpinned, the cache's highmem node takes 10/11 of the encoders, until its cpu binds as well as its memory.
    assert cheapest.per_hour(unpinned) == pytest.approx(0.54 * (1 + 6 * 10 / 11) / 8 + 0.40 * 6 / 8 / 11, rel=1e-9)
    # Pinned apart: zone-a, the cache's 48 GiB on highmem (3/4 of a node); zone-b, 6 cpu on standard (3/4).
    assert cheapest.per_hour(pinned) == pytest.approx(0.54 * 3 / 4 + 0.40 * 3 / 4, rel=1e-9)


def test_pods_no_node_of_any_pool_can_hold_cost_nothing() -> None:
    too_big = group("too-big", 9000, 1, 3)
    assert capacity().allowed(too_big) == ()
    assert capacity().per_hour([too_big, bidders()]) == pytest.approx(0.40 * 2.5, rel=1e-9)


def test_the_program_is_solved_once_for_a_demand_seen_before() -> None:
    cheapest = capacity()
    for _ in range(3):
        cheapest.per_hour([caches(), bidders()])
    # The same shapes in other groups (ten owners of one cache each) merge into the same program.
    ten = [group(f"cache-{i}", 1000, 12, 1, home=HIGHMEM) for i in range(10)]
    cheapest.per_hour([*ten, bidders()])
    assert cheapest.solves == 1


# -- every shipped scenario ---------------------------------------------------------------------------------------


def test_the_only_files_among_the_scenarios_that_are_not_scenarios_are_configurations() -> None:
    for path in shipped.CONFIGURATIONS:
        data = json.loads(path.read_text())
        assert "nodePools" in data and "pools" not in data, f"{path} is not a configuration"


def billed_per_hour(results: Results, strategy: runner.StrategyResult, step: int) -> float:
    total = 0.0
    for pool, series in strategy.series.nodes_by_pool.items():
        if series[step]:
            price = results.setup.prices[pool].per_hour
            assert price is not None
            total += series[step] * price
    return total


@pytest.mark.parametrize("path", shipped.SCENARIOS, ids=[p.stem for p in shipped.SCENARIOS])
def test_no_strategy_is_billed_below_the_cost_lower_bound_at_any_step(path: Path) -> None:
    results = shipped.results(path)  # the day test_recorded compares with its recorded output, run once
    setup = results.setup
    # Every strategy this cluster has (gke-class-priorities and node-compactor beside it only where a pod may
    # use two pools or more).
    assert [s.name for s in results.strategies] == list(runner.applicable(setup))
    if not all(setup.prices[pool.name].per_hour is not None for pool in setup.pools):
        assert results.lower_bound_cost is None, "a scenario with an unpriced pool has no cost bound"
        return
    costs = results.lower_bound_cost
    assert costs is not None and len(costs) == len(results.lower_bound) > 0
    assert all(math.isfinite(cost) and cost > 0 for cost in costs)
    for strategy in results.strategies:
        below = [
            (step, round(billed, 4), round(cost, 4))
            for step, cost in enumerate(costs)
            if (billed := billed_per_hour(results, strategy, step)) < cost * (1 - 1e-6)
        ]
        assert not below, f"{strategy.name} is billed below the bound at (step, billed, bound) {below[:5]}"
