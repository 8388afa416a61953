"""Scenario files and machine types: what the examples describe, and what a GKE node leaves to pods."""

from __future__ import annotations

from datetime import datetime

import pytest

from compactor.core.cluster import ClusterView
from compactor.core.prices import machines
from compactor.errors import BadInputError
from compactor.kube import quantity
from compactor.simulation import runner, scenario
from tests.simulation.builders import SCENARIO, setup_from

EXAMPLES = (
    "examples/scenarios/diurnal-web.json",
    "examples/scenarios/batch-and-services.json",
    "examples/scenarios/two-pools-weekday.json",
    "examples/scenarios/steady-fragmented.json",
    "examples/scenarios/small-services-anti-affinity.json",
    "examples/scenarios/data-platform-etl.json",
    "examples/scenarios/single-replica-services.json",
)
IDS = [
    "diurnal-web",
    "batch-and-services",
    "two-pools-weekday",
    "steady-fragmented",
    "small-services-anti-affinity",
    "data-platform-etl",
    "single-replica-services",
]


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_the_example_scenarios_load_with_their_node_compactor_configuration(path: str) -> None:
    setup = scenario.load(path)
    assert setup.workloads
    assert all(setup.config.enabled_pool(pool.name) is not None for pool in setup.pools)


def test_the_diurnal_scenario_peaks_at_midday_with_three_times_the_night_replicas() -> None:
    setup = scenario.load(EXAMPLES[0])
    frontend = next(w for w in setup.workloads if w.owner_name.startswith("frontend-"))
    noon = frontend.replicas.at(datetime.fromisoformat("2026-11-20T12:30:00+00:00"))
    night = frontend.replicas.at(datetime.fromisoformat("2026-11-21T04:00:00+00:00"))
    assert noon == 360
    assert night == 120


def test_the_batch_scenario_has_budgets_stateful_sets_and_jobs() -> None:
    setup = scenario.load(EXAMPLES[1])
    assert [w.owner_name for w in setup.workloads if w.ordinal] == ["postgres", "redis", "kafka"]
    assert len(setup.pdbs) >= 6
    assert {cron.name for cron in setup.cronjobs} == {"etl", "reports", "training"}


def test_the_two_pool_scenario_has_a_tainted_memory_pool_and_pods_from_150m_to_3_cpu() -> None:
    setup = scenario.load(EXAMPLES[2])
    pools = {pool.name: pool for pool in setup.pools}
    assert pools["general"].machine_type != pools["highmem"].machine_type
    assert not pools["general"].taints
    assert [taint["key"] for taint in pools["highmem"].taints] == ["workload"]
    on_highmem = [w for w in setup.workloads if w.pool == "highmem"]
    assert on_highmem
    assert all(w.template["spec"]["tolerations"] for w in on_highmem)
    cpus = sorted(_cpu_millis(w.template) for w in setup.workloads if w.namespace != "kube-system")
    assert (cpus[0], cpus[-1]) == (150, 3000)
    with_budget = {pdb["metadata"]["name"] for pdb in setup.pdbs}
    assert len(with_budget) >= 0.75 * len(setup.workloads)
    assert setup.sources, "the file says where its numbers come from"
    flat = [w for w in setup.workloads if len(w.replicas.points) == 1 and w.namespace != "kube-system"]
    assert flat, "a flat service beside the curve"


def test_the_steady_scenario_starts_every_node_above_the_autoscalers_50_percent_and_60_percent_on_average() -> None:
    setup = scenario.load(EXAMPLES[3])
    cluster = runner.build(setup)
    view = ClusterView(cluster.world.snapshot(setup.start), setup.config)
    ratios = [state.cpu_ratio or 0.0 for state in view.nodes.values()]
    assert len(ratios) == 24
    assert min(ratios) >= 0.5, ratios
    assert sum(ratios) / len(ratios) == pytest.approx(0.6, abs=0.03)
    assert all(w.replicas.extremes()[0] == w.replicas.extremes()[1] for w in setup.workloads)


def test_the_small_services_scenario_spreads_forty_services_one_pod_per_node_each_with_a_budget() -> None:
    setup = scenario.load(EXAMPLES[4])
    services = [w for w in setup.workloads if w.namespace == "shop"]
    assert len(services) == 40
    for service in services:
        terms = service.template["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert [term["topologyKey"] for term in terms] == ["kubernetes.io/hostname"]
    assert {pdb["metadata"]["name"] for pdb in setup.pdbs} >= {w.owner_name.rsplit("-", 1)[0] for w in services}
    assert setup.sources


def test_the_data_platform_scenario_has_zone_spread_stateful_sets_with_volumes_and_hourly_etl() -> None:
    setup = scenario.load(EXAMPLES[5])
    spread = [w for w in setup.workloads if w.template["spec"].get("topologySpreadConstraints")]
    assert {c["whenUnsatisfiable"] for w in spread for c in w.template["spec"]["topologySpreadConstraints"]} == {
        "DoNotSchedule"
    }
    assert len(spread) >= 4
    stateful = [w for w in setup.workloads if w.ordinal]
    assert len(stateful) == 3 and all(w.claims for w in stateful)
    (etl,) = setup.cronjobs
    assert (etl.every_minutes, etl.active_hours) == (60, None)
    assert setup.sources


def _cpu_millis(template: dict[str, object]) -> int:
    spec = template["spec"]
    assert isinstance(spec, dict)
    return sum(quantity.millis(c["resources"]["requests"]["cpu"]) for c in spec["containers"])


@pytest.mark.parametrize(
    ("machine", "cpu", "memory_gib"),
    [
        pytest.param("e2-standard-4", "3920m", 13.3, id="e2-standard-4"),
        pytest.param("e2-standard-8", "7910m", 28.3, id="e2-standard-8"),
        pytest.param("n2-highmem-8", "7910m", 58.4, id="n2-highmem-8"),
    ],
)
def test_allocatable_follows_gke_reservations(machine: str, cpu: str, memory_gib: float) -> None:
    allocatable = machines.allocatable(machine)
    assert allocatable["cpu"] == cpu
    assert int(allocatable["memory"].removesuffix("Ki")) / 2**20 == pytest.approx(memory_gib, abs=0.05)


def test_the_balanced_allocation_score_is_on_unless_a_scenario_turns_it_off() -> None:
    assert setup_from(SCENARIO).balanced_allocation is True
    assert runner.build(setup_from(SCENARIO)).scheduler.balanced_allocation is True
    off = setup_from({**SCENARIO, "scheduler": {"balancedAllocation": False}})
    assert off.balanced_allocation is False
    assert runner.build(off).scheduler.balanced_allocation is False
    with pytest.raises(BadInputError) as refused:
        setup_from({**SCENARIO, "scheduler": {"balanced": True}})
    assert any("scheduler" in problem for problem in refused.value.problems), refused.value.problems


SPOT_FIRST = {
    "weight": 50,
    "preference": {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "In", "values": ["true"]}]},
}


def spot_beside_on_demand(**deployment: object) -> dict[str, object]:
    pools = [
        {"name": "on-demand", "machineType": "e2-standard-4", "zones": ["zone-a"], "initialNodes": 2},
        {"name": "spot", "machineType": "e2-standard-4", "zones": ["zone-a"], "initialNodes": 2, "spot": True},
    ]
    web = {"name": "web", "requests": {"cpu": "500m", "memory": "1Gi"}, "replicas": 6, **deployment}
    return {**SCENARIO, "pools": pools, "deployments": [web], "compactor": {}}


def test_a_deployment_preferring_spot_runs_on_the_spot_pool_while_it_has_room() -> None:
    """GKE's guidance for Spot VMs: preferred node affinity on cloud.google.com/gke-spot, so pods use Spot
    nodes when there are some and on-demand ones otherwise."""
    cluster = runner.build(setup_from(spot_beside_on_demand(preferredNodeAffinity=[SPOT_FIRST])))
    records = [record for _, record in cluster.world.pod_records() if record.labels.get("app") == "web"]
    assert len(records) == 6
    assert {cluster.world.node_pool(record.node_name) for record in records if record.node_name} == {"spot"}
    assert [term.weight for term in records[0].preferred_node_affinity] == [50]
    plain = runner.build(setup_from(spot_beside_on_demand()))
    pools = {
        plain.world.node_pool(r.node_name)
        for _, r in plain.world.pod_records()
        if r.labels.get("app") == "web" and r.node_name
    }
    assert pools == {"spot", "on-demand"}, "without the preference the resource scores spread them"


@pytest.mark.parametrize(
    ("term", "problem"),
    [
        pytest.param({**SPOT_FIRST, "weight": 0}, "weight", id="weight-below-1"),
        pytest.param({**SPOT_FIRST, "weight": 101}, "weight", id="weight-above-100"),
        pytest.param({"weight": 5, "preference": {"matchExpressions": []}}, "matchExpressions", id="empty-term"),
        pytest.param(
            {"weight": 5, "preference": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
            "In needs values",
            id="in-without-values",
        ),
        pytest.param(
            {"weight": 5, "preference": {"matchExpressions": [{"key": "k", "operator": "Near", "values": ["x"]}]}},
            "operator",
            id="unknown-operator",
        ),
    ],
)
def test_a_bad_preferred_node_affinity_term_is_a_bad_scenario(term: dict[str, object], problem: str) -> None:
    with pytest.raises(BadInputError) as refused:
        setup_from(spot_beside_on_demand(preferredNodeAffinity=[term]))
    assert any(problem in text for text in refused.value.problems), refused.value.problems


def test_a_cron_jobs_pods_carry_its_preferred_node_affinity_as_kubernetes_writes_it() -> None:
    cron = {
        "name": "etl",
        "requests": {"cpu": "1", "memory": "1Gi"},
        "everyMinutes": 60,
        "parallelism": 2,
        "durationMinutes": [10, 20],
        "preferredNodeAffinity": [SPOT_FIRST],
    }
    setup = setup_from({**spot_beside_on_demand(), "cronJobs": [cron]})
    affinity = setup.cronjobs[0].template["spec"]["affinity"]
    assert affinity == {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [SPOT_FIRST]}}
