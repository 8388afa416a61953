"""Node replacement in the model: the placeholder's admission, scale-up and preemption, and a whole cycle.

The Cluster Autoscaler adds a node of the target pool for a Pending placeholder (priority -10, its
expendable cutoff), kube-scheduler preempts the placeholder for a pod that fits nowhere else, a
placeholder never preempts anything, and node-compactor's planner and executor, through
`strategies.NodeCompactor`, replace a node end to end. The shipped scenarios do not replace.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from compactor.actuation import placeholders
from compactor.core import planner
from compactor.core.model import (
    PLACEHOLDER_PRIORITY_CLASS,
    REPLACED_BY,
    REPLACES,
    UNDERUTILIZED_SINCE,
    ZONE_LABELS,
    Resources,
)
from compactor.core.plan import Replacement
from compactor.core.timing import format_stamp
from compactor.errors import BadInputError
from compactor.kube import quantity
from compactor.kube.answers import ConflictError
from compactor.settings.config import DEFAULT_POOL_LABEL, Config
from compactor.simulation import report, runner, scenario
from compactor.simulation.runner import Cluster
from compactor.simulation.scheduler import Scheduler
from compactor.simulation.strategies import NodeCompactor
from compactor.simulation.world import World
from tests.simulation.builders import (
    LONG_AGO,
    START,
    add_node,
    add_pdb,
    add_pod,
    cluster_from,
    pool_spec,
    scenario_data,
    world,
)

BIG, SMALL = "big-pool", "small-pool"
ZONE = "europe-west1-b"
NAMESPACE = "node-compactor"
CONFIG = Config.model_validate({})
NEW_SCENARIOS = (
    "examples/scenarios/oversized-large-nodes.json",
    "examples/scenarios/cpu-pods-on-highmem.json",
    "examples/scenarios/spot-batch-beside-on-demand.json",
)
# Multi-shape scenarios shipped later, priced and with replacement on like the three above.
LATER_SCENARIOS = (
    "examples/scenarios/three-shapes-dearest-busy.json",
    "examples/scenarios/memory-cpu-mix.json",
    "examples/scenarios/spot-workers-preferred.json",
    "examples/scenarios/c3-busy-with-pool-auto-creation.json",
)


def placeholder_body(*, cpu: str = "3", pool: str = SMALL, zone: str = ZONE, name: str = "abc") -> dict[str, Any]:
    """The pod node-compactor's executor creates (`placeholders.manifest`), for a replacement into `pool`."""
    replacement = Replacement(
        "create",
        f"node-compactor-placeholder-{name}",
        ("gke-big-1",),
        pool,
        "a test",
        requests=Resources(quantity.millis(cpu), 2**30),
        node_selector=((DEFAULT_POOL_LABEL, pool), (ZONE_LABELS[0], zone)),
    )
    return placeholders.manifest(replacement, NAMESPACE, START)


def two_pools(*, big_nodes: int, small_nodes: int = 0, **changes: Any) -> dict[str, Any]:
    """big-pool (n2-standard-8) and small-pool (e2-standard-4) in one zone of europe-west1, no workload."""
    pools = [
        {"name": BIG, "machineType": "n2-standard-8", "zones": [ZONE], "minNodes": 0, "initialNodes": big_nodes},
        {"name": SMALL, "machineType": "e2-standard-4", "zones": [ZONE], "minNodes": 0, "initialNodes": small_nodes},
    ]
    return scenario_data(pools=pools, deployments=[], daemonSets=[], **changes)


def pending_placeholder(cluster: Cluster, **body: Any) -> str:
    created = cluster.world.create_pod(NAMESPACE, placeholder_body(**body), at=START)
    key = f"{NAMESPACE}/{created['metadata']['name']}"
    cluster.scheduler.schedule(START)
    return key


# -- admission and the Cluster Autoscaler --------------------------------------------------------------


def test_a_created_placeholder_gets_its_priority_class_value_and_policy() -> None:
    cluster = cluster_from(two_pools(big_nodes=1))
    key = pending_placeholder(cluster)
    spec = cluster.world.pods[key]["spec"]
    assert spec["priorityClassName"] == PLACEHOLDER_PRIORITY_CLASS
    assert (spec["priority"], spec["preemptionPolicy"]) == (-10, "Never")
    record = cluster.world.pod_record(key)
    assert record.priority == -10
    assert record.unschedulable, "no node of small-pool yet"
    assert record.placeholder is not None and record.placeholder.replaces == ("gke-big-1",)


def test_a_second_create_of_the_same_placeholder_is_a_conflict() -> None:
    cluster = cluster_from(two_pools(big_nodes=1))
    pending_placeholder(cluster)
    with pytest.raises(ConflictError):
        cluster.world.create_pod(NAMESPACE, placeholder_body(), at=START)


def test_the_placeholder_makes_the_autoscaler_add_a_node_of_its_target_pool_in_its_zone() -> None:
    data = two_pools(big_nodes=1)
    data["pools"][1]["zones"] = [ZONE, "europe-west1-c"]  # left to itself, the autoscaler would take the first
    cluster = cluster_from(data)
    key = pending_placeholder(cluster, zone="europe-west1-c")
    assert cluster.autoscaler.scale_up(START)
    (new,) = cluster.autoscaler.upcoming
    assert (new.pool, new.zone) == (SMALL, "europe-west1-c")
    cluster.autoscaler.provision(new.ready_at)
    cluster.scheduler.schedule(new.ready_at)
    assert cluster.world.pod_record(key).node_name == new.name
    assert cluster.world.recorder.unplaceable == set()


@pytest.mark.parametrize(
    ("priority", "scales_up"),
    [
        pytest.param(-10, True, id="at-the-cutoff"),
        pytest.param(-11, False, id="below-the-cutoff-expendable"),
    ],
)
def test_the_autoscaler_ignores_only_pods_below_the_expendable_cutoff(priority: int, scales_up: bool) -> None:
    cluster = cluster_from(two_pools(big_nodes=1))
    body = placeholder_body()
    del body["spec"]["priorityClassName"]
    body["spec"]["priority"] = priority
    cluster.world.create_pod(NAMESPACE, body, at=START)
    cluster.scheduler.schedule(START)
    assert cluster.autoscaler.scale_up(START) is scales_up


def test_a_running_placeholder_keeps_its_node_from_being_removed() -> None:
    cluster = cluster_from(two_pools(big_nodes=1, small_nodes=1))
    key = pending_placeholder(cluster, cpu="1")
    node = cluster.world.pod_record(key).node_name
    assert cluster.world.node_pool(node or "") == SMALL
    for minute in range(30):
        cluster.autoscaler.step(START + timedelta(minutes=minute))
    assert node in cluster.world.nodes, "a pod without a controller blocks the node's removal"
    cluster.world.delete_placeholder(key, START + timedelta(minutes=30))
    for minute in range(30, 45):
        cluster.autoscaler.step(START + timedelta(minutes=minute))
    assert node not in cluster.world.nodes, "empty again: removed after 10 minutes unneeded"


def test_the_planner_reads_placeholders_apart_and_the_scheduler_with_the_pods() -> None:
    cluster = cluster_from(two_pools(big_nodes=1, small_nodes=1))
    key = pending_placeholder(cluster, cpu="1")
    apart = cluster.world.snapshot(START, placeholders_apart=True)
    together = cluster.world.snapshot(START)
    assert [pod.key for pod in apart.placeholders] == [key]
    assert key not in {pod.key for pod in apart.pods}
    assert key in {pod.key for pod in together.pods}
    assert together.placeholders == ()


# -- kube-scheduler's preemption ---------------------------------------------------------------------------


def full_node_with_a_placeholder(cluster: World) -> str:
    """n1 (4 cpu) held by a 3.5-cpu placeholder; n2 (4 cpu) with 3 cpu used."""
    add_node(cluster, "n1")
    add_node(cluster, "n2")
    add_pod(cluster, "busy", node="n2", cpu="3", owner=("ReplicaSet", "busy"))
    created = cluster.create_pod(NAMESPACE, placeholder_body(cpu="3500m"), at=START)
    key = f"{NAMESPACE}/{created['metadata']['name']}"
    cluster.bind(key, "n1", START)
    return key


def test_the_scheduler_preempts_the_placeholder_for_a_pod_that_fits_nowhere_else() -> None:
    cluster = world()
    placeholder = full_node_with_a_placeholder(cluster)
    pod = add_pod(cluster, "web", cpu="2", owner=("ReplicaSet", "web"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(pod).node_name == "n1"
    assert placeholder not in cluster.pods
    recorder = cluster.recorder
    assert recorder.preempted_placeholders == 1
    assert recorder.disruptions() == 0, "a placeholder holds room for no workload: its preemption disrupts nothing"


def test_a_pod_that_fits_without_preemption_leaves_the_placeholder_alone() -> None:
    cluster = world()
    placeholder = full_node_with_a_placeholder(cluster)
    pod = add_pod(cluster, "web", cpu="500m", owner=("ReplicaSet", "web"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(pod).node_name == "n2"
    assert placeholder in cluster.pods


@pytest.mark.parametrize(
    ("policy", "preempts"),
    [
        pytest.param("Never", False, id="never-as-the-placeholder"),
        pytest.param("PreemptLowerPriority", True, id="the-default"),
    ],
)
def test_a_placeholder_never_preempts_anything(policy: str, preempts: bool) -> None:
    cluster = world()
    add_node(cluster, "n1")
    victim = add_pod(cluster, "filler", node="n1", cpu="3500m", owner=("ReplicaSet", "filler"), priority=-100)
    body = placeholder_body(cpu="1", pool="default-pool")
    body["spec"]["nodeSelector"] = {}
    body["spec"]["preemptionPolicy"] = policy  # the admission keeps a policy the pod sets
    created = cluster.create_pod(NAMESPACE, body, at=START)
    key = f"{NAMESPACE}/{created['metadata']['name']}"
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert (victim not in cluster.pods) is preempts
    assert (cluster.pod_record(key).node_name == "n1") is preempts


def test_preemption_takes_the_node_whose_victims_have_the_lowest_priority() -> None:
    cluster = world()
    for name in ("n1", "n2"):
        add_node(cluster, name)
    low = add_pod(cluster, "low", node="n1", cpu="3500m", owner=("ReplicaSet", "low"), priority=-50)
    higher = add_pod(cluster, "higher", node="n2", cpu="3500m", owner=("ReplicaSet", "higher"), priority=-5)
    pod = add_pod(cluster, "web", cpu="2", owner=("ReplicaSet", "web"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(pod).node_name == "n1"
    assert low not in cluster.pods and higher in cluster.pods
    assert cluster.recorder.preempted["kube-scheduler"] == 1
    assert cluster.recorder.deleted["kube-scheduler"] == 1, "a workload's pod preempted is a disruption"


def test_preemption_avoids_a_node_where_a_victim_would_break_its_budget() -> None:
    cluster = world()
    for name in ("n1", "n2"):
        add_node(cluster, name)
    guarded = add_pod(
        cluster, "guarded", node="n1", cpu="3500m", app="guarded", owner=("ReplicaSet", "g"), priority=-50
    )
    add_pdb(cluster, "guarded", minAvailable=1)
    free = add_pod(cluster, "free", node="n2", cpu="3500m", owner=("ReplicaSet", "free"), priority=-5)
    pod = add_pod(cluster, "web", cpu="2", owner=("ReplicaSet", "web"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(pod).node_name == "n2", "fewest PDB violations comes before the victims' priority"
    assert guarded in cluster.pods and free not in cluster.pods
    assert cluster.recorder.pdb_violations["kube-scheduler"] == 0


# -- a whole replacement through node-compactor -------------------------------------------------------------


def replaceable(max_new_nodes: int = 1) -> dict[str, Any]:
    """Two n2-standard-8 nodes hold 4 x 1.2 cpu each (61%): neither takes all of the other's pods, so no node
    can simply go; one e2-standard-4 (61% cheaper) and the other big node take one big node's pods. With
    `max_new_nodes` 2, the other big node, busy by then, is replaced by two more."""
    data = two_pools(big_nodes=2, hours=2)
    data["daemonSets"] = [{"name": "agent", "requests": {"cpu": "100m", "memory": "200Mi"}}]
    data["deployments"] = [
        {
            "name": "web",
            "requests": {"cpu": "1200m", "memory": "1Gi"},
            "replicas": 8,
            "pdb": {"maxUnavailable": 1},
        }
    ]
    settings = {
        "enabled": True,
        "scaleDownCPURequestRatioLimit": 0.75,
        "minimumNodeAgeSeconds": 600,
        "neededMarkedTimeSeconds": 120,
        "minNodes": 0,
    }
    data["compactor"] = {
        "nodePools": {
            BIG: {
                **settings,
                "replacement": {"enabled": True, "targetPools": [SMALL], "maxNewNodes": max_new_nodes},
            }
        },
    }
    return data


def run_node_compactor(data: dict[str, Any], minutes: int) -> tuple[Cluster, NodeCompactor]:
    setup = scenario.parse(json.dumps(data), source="test.json")
    cluster = runner.build(setup)
    strategy = NodeCompactor(cluster.world, setup.config, cluster.settle, setup.run_budget_seconds)
    for minute in range(minutes):
        cluster.step(strategy, setup.start + timedelta(minutes=minute))
    return cluster, strategy


def pools_of(cluster: Cluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in cluster.world.nodes:
        pool = cluster.world.node_pool(name) or ""
        counts[pool] = counts.get(pool, 0) + 1
    return counts


def test_a_replacement_cycle_ends_with_the_replaced_node_drained_and_removed() -> None:
    cluster, strategy = run_node_compactor(replaceable(), minutes=60)
    world_ = cluster.world
    assert strategy.summary()["placeholdersCreated"] == 1
    assert strategy.summary()["drainsCompleted"] == 1
    assert pools_of(cluster) == {BIG: 1, SMALL: 1}
    assert not world_.pending()
    assert not any(world_.is_placeholder(key) for key in world_.pods), "the placeholder is gone"
    recorder = world_.recorder
    assert recorder.pdb_violations == {} and recorder.no_place == {}
    assert recorder.evicted["node-compactor"] >= 1
    assert recorder.events["NodeCompactorReplacementStarted"] == 1
    assert not strategy.failures
    annotations = [node["metadata"].get("annotations") or {} for node in world_.nodes.values()]
    assert not any("node-compactor.dev/replaced-by" in found for found in annotations)


def test_a_busy_node_is_replaced_by_two_new_nodes_each_asked_for_by_its_own_placeholder() -> None:
    cluster, strategy = run_node_compactor(replaceable(max_new_nodes=2), minutes=60)
    world_ = cluster.world
    started = [event for event in world_.events if event[2] == "NodeCompactorReplacementStarted"]
    assert len(started) == 2
    assert "-> one e2-standard-4" in started[0][3]
    assert "-> 2 e2-standard-4" in started[1][3]  # the second big node, 92% busy by then
    summary = strategy.summary()
    assert summary["replacementsStarted"] == 2 and summary["placeholdersCreated"] == 3
    assert summary["drainsCompleted"] == 2
    assert pools_of(cluster) == {SMALL: 3}
    assert not world_.pending()
    assert not any(world_.is_placeholder(key) for key in world_.pods), "every placeholder is gone"
    recorder = world_.recorder
    assert recorder.pdb_violations == {} and recorder.no_place == {}
    assert not strategy.failures
    # simulate --json lists each replacement: its nodes, target, new nodes and saving.
    assert [(item["target"], item["newNodes"]) for item in recorder.replacements] == [(SMALL, 1), (SMALL, 2)]
    assert all(float(str(item["savingsPerHour"])) > 0 for item in recorder.replacements)


def test_simulate_json_lists_each_replacement_started() -> None:
    data = replaceable(max_new_nodes=2)
    data["hours"] = 1
    setup = scenario.parse(json.dumps(data), source="test.json")
    document = report.summarize(runner.run(setup, strategies=("node-compactor",)))
    (compactor,) = [item for item in document["strategies"] if item["name"] == "node-compactor"]
    started = compactor["replacements"]["started"]
    assert [item["newNodes"] for item in started] == [1, 2]
    assert compactor["replacements"]["made"] == 3
    first = started[0]
    assert set(first) == {
        "at",
        "nodes",
        "target",
        "newNodes",
        "spot",
        "removedPricePerHour",
        "pricePerHour",
        "savingsPerHour",
    }
    assert first["savingsPerHour"] == pytest.approx(first["removedPricePerHour"] - first["pricePerHour"], abs=1e-3)


# -- the shipped scenarios -------------------------------------------------------------------------------


def test_no_scenario_shipped_before_node_replacement_replaces_or_prices_its_scale_ups() -> None:
    for path in sorted(Path("examples/scenarios").glob("*.json")):
        if str(path) in NEW_SCENARIOS + LATER_SCENARIOS or path.name.startswith("config-"):
            continue
        data = json.loads(path.read_text())
        assert (data.get("autoscaler") or {}).get("expander", "least-waste") == "least-waste", path
        pools = (data.get("compactor") or {}).get("nodePools") or {}
        assert not any("replacement" in pool for pool in pools.values()), path


def test_steady_fragmented_keeps_its_published_node_hours() -> None:
    # docs/savings.md's figures, measured before node replacement was modelled.
    results = runner.run(
        scenario.load("examples/scenarios/steady-fragmented.json"), strategies=("ca-alone", "node-compactor")
    )
    figures = {s.name: s for s in results.strategies}
    step_hours = results.setup.step_seconds / 3600
    assert round(sum(figures["ca-alone"].series.nodes) * step_hours, 1) == 576.0
    assert round(sum(figures["node-compactor"].series.nodes) * step_hours, 1) == 366.6
    assert figures["node-compactor"].recorder.preempted_placeholders == 0


@pytest.mark.parametrize("path", NEW_SCENARIOS, ids=[Path(p).stem for p in NEW_SCENARIOS])
def test_the_replacement_scenarios_replace_nodes_and_break_nothing(path: str) -> None:
    setup = scenario.load(path)
    assert setup.autoscaler.expander == "price"
    assert any(pool.replacement is not None for pool in setup.config.node_pools.values())
    # The whole day: with rule 10's wait (`replaceable-since`) cpu-pods-on-highmem's first replacement comes
    # after the first eight hours.
    # (No node count is checked against the node lower bound: that counts each pool's own pods in its own
    # shape, and a replacement moves them to another; the cost bound is the bound across shapes.)
    results = runner.run(setup, strategies=("ca-alone", "node-compactor"))
    compactor = next(s for s in results.strategies if s.name == "node-compactor")
    assert compactor.summary.get("placeholdersCreated", 0) >= 1
    assert compactor.recorder.pdb_violations == {}
    assert compactor.recorder.no_place == {}
    assert not compactor.failures


def test_busy_c3_nodes_are_replaced_by_machine_types_gke_creates_pools_for() -> None:
    setup = scenario.load("examples/scenarios/c3-busy-with-pool-auto-creation.json")
    results = runner.run(setup, strategies=("node-compactor",))
    (compactor,) = results.strategies
    started = compactor.recorder.replacements
    assert started and {item["target"] for item in started} <= {"e2-standard-8", "n2d-standard-8"}
    assert compactor.summary.get("replacementsGivenUp", 0) == 0, "every placeholder fits the node GKE creates"
    assert compactor.recorder.pdb_violations == {} and compactor.recorder.no_place == {}
    assert not compactor.failures


def test_a_scenario_may_ask_for_the_price_expander_only_by_name() -> None:
    data = two_pools(big_nodes=1, autoscaler={"expander": "cheapest"})
    with pytest.raises(BadInputError):
        cluster_from(data)


def test_with_the_price_expander_a_scale_up_grows_the_cheaper_pool() -> None:
    # The same machine type on-demand and Spot: least-waste sees the same waste and takes the first pool
    # by name; gke-price takes the Spot pool.
    def cluster_with(expander: str) -> Cluster:
        data = two_pools(big_nodes=0, autoscaler={"expander": expander})
        data["pools"] = [
            {"name": "a-on-demand", "machineType": "n2-standard-8", "zones": [ZONE], "minNodes": 0, "initialNodes": 0},
            {"name": "b-spot", "machineType": "n2-standard-8", "zones": [ZONE], "minNodes": 0, "spot": True},
        ]
        return cluster_from(data)

    grown = {}
    for expander in ("least-waste", "price"):
        cluster = cluster_with(expander)
        add_pod(cluster.world, "web", cpu="2", owner=("ReplicaSet", "web"))
        cluster.scheduler.schedule(START)
        assert cluster.autoscaler.scale_up(START)
        grown[expander] = cluster.autoscaler.upcoming[0].pool
    assert grown == {"least-waste": "a-on-demand", "price": "b-spot"}


# -- a live-path defect the model shows ------------------------------------------------------------------

SPOT_TAINT = {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def a_replacement_draining_od_1() -> tuple[World, Config]:
    """od-1 (4 cpu) holds batch (1.5 cpu, tolerates Spot) and svc (1 cpu, does not); od-2 has 1.5 cpu free,
    room for one of them; the new Spot node spot-1 runs the placeholder (3.5 cpu)."""
    cluster = world(pool_spec("od-pool"), pool_spec("spot-pool"))
    add_node(cluster, "od-1", pool="od-pool")
    add_node(cluster, "od-2", pool="od-pool")
    add_node(cluster, "spot-1", pool="spot-pool", taints=[SPOT_TAINT])
    add_pod(cluster, "batch", node="od-1", cpu="1500m", owner=("ReplicaSet", "batch"), tolerations=[SPOT_TOLERATION])
    add_pod(cluster, "svc", node="od-1", cpu="1", owner=("ReplicaSet", "svc"))
    add_pod(cluster, "filler", node="od-2", cpu="2500m", owner=("ReplicaSet", "filler"))
    body = placeholder_body(cpu="3500m", pool="spot-pool", zone="zone-a", name="0123456789")
    body["metadata"]["annotations"][REPLACES] = "od-1"
    created = cluster.create_pod(NAMESPACE, body, at=START)
    cluster.bind(f"{NAMESPACE}/{created['metadata']['name']}", "spot-1", START)
    annotations = {REPLACED_BY: created["metadata"]["name"], UNDERUTILIZED_SINCE: format_stamp(LONG_AGO)}
    cluster.patch_node("od-1", {"metadata": {"annotations": annotations}})
    settings = {"enabled": True, "scaleDownCPURequestRatioLimit": 0.75, "neededMarkedTimeSeconds": 0}
    replace_settings = {"enabled": True, "targetPools": ["spot-pool"]}
    config = Config.model_validate(
        {"nodePools": {"od-pool": {**settings, "pricePerHour": 0.43, "replacement": replace_settings}}}
    )
    return cluster, config


def test_a_replaced_nodes_pod_that_cannot_use_the_new_node_keeps_its_place() -> None:
    """od-1 holds batch (1.5 cpu, tolerates Spot) and svc (1 cpu, does not); od-2 has 1.5 cpu free; the new
    Spot node is full of its placeholder. Evicted largest first, batch's replacement fits od-2 without
    preempting anything and takes the room svc needed, which then fits nowhere (spot-1 is tainted for it).
    The proof keeps the placeholder's room taken until a pod that fits nowhere else preempts it, as
    kube-scheduler does, so it does not prove this drain: svc keeps its place."""
    cluster, config = a_replacement_draining_od_1()
    now = START + timedelta(minutes=5)
    snapshot = cluster.snapshot(now, placeholders_apart=True)
    plan = planner.plan(snapshot, config, now=now)
    assert (plan.decision.action, plan.decision.node) != ("drain", "od-1"), plan.decision.reason
    report = next(node for node in plan.nodes if node.name == "od-1")
    assert any("default/svc" in blocker for blocker in report.blockers), report.blockers
    assert cluster.pending() == []
    assert {pod.key for pod in snapshot.pods if pod.node_name == "od-1"} >= {"default/batch", "default/svc"}
