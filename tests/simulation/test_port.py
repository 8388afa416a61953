"""The live executor through the in-memory ClusterPort: the same state machine, on simulated time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from compactor.actuation.executor import Budget, Executor, Outcome
from compactor.core import planner
from compactor.core.model import DRAIN_STARTED_AT, RESERVED_TAINT
from compactor.settings import config as config_module
from compactor.settings.config import Config
from compactor.simulation.port import SimulatedCluster
from compactor.simulation.scheduler import Scheduler
from compactor.simulation.world import World
from tests.simulation.builders import POOL, START, add_node, add_pdb, add_pod, world

NOW = START + timedelta(minutes=5)
CONFIG = config_module.validate(
    {
        "nodePools": {
            POOL: {
                "enabled": True,
                "scaleDownCPURequestRatioLimit": 0.75,
                "neededMarkedTimeSeconds": 0,
                "minimumNodeAgeSeconds": 0,
                "scaleUpCooldownSeconds": 0,
            }
        }
    },
    source="test",
)
NO_RESERVATIONS = CONFIG.model_copy(update={"reserve_room_for_drains": False})


def two_web_pods_under_a_budget_of_one() -> World:
    cluster = world()
    add_node(cluster, "n1")
    add_node(cluster, "n2")
    add_pod(cluster, "web-1", node="n1", app="web")
    add_pod(cluster, "web-2", node="n1", app="web")
    add_pod(cluster, "keeper", node="n2", owner=None)  # a bare pod: n2 is never the one drained
    cluster.set_scale(("default", "ReplicaSet", "rs"), 2)
    add_pdb(cluster, "web", maxUnavailable=1)
    return cluster


def replacing_on(cluster: World, node: str) -> Callable[[datetime], None]:
    """A ReplicaSet controller and scheduler in one: each evicted pod comes back on `node`, Ready 30 s later."""
    serial = [0]

    def settle(at: datetime) -> None:
        cluster.now = at
        for owner, actors in cluster.owed.items():
            for _ in list(actors):
                serial[0] += 1
                add_pod(cluster, f"web-new-{serial[0]}", node=node, app="web", owner=(owner[1], owner[2]), ready=False)

    return settle


def run_once(
    cluster: World, settle: Callable[[datetime], None], config: Config = CONFIG, *, threads: bool = True
) -> Outcome:
    snapshot = cluster.snapshot(NOW)
    plan = planner.plan(snapshot, config, now=NOW)
    assert (plan.decision.action, plan.decision.node) == ("drain", "n1")
    port = SimulatedCluster(cluster, actor="node-compactor", run_start=NOW, settle=settle, budget_seconds=240)
    port.expect_evictions(plan.decision.evictions)
    budget = Budget(deadline=240, monotonic=port.monotonic, sleep=port.sleep)
    run = Executor(port, config, clock=lambda: NOW, budget=budget, dry_run=False, threads=threads)
    outcome = run.execute(plan, snapshot)
    port.check_consumed()
    return outcome


def test_the_executor_cordons_and_drains_a_node_through_the_port() -> None:
    cluster = two_web_pods_under_a_budget_of_one()
    outcome = run_once(cluster, replacing_on(cluster, "n2"))
    assert outcome.drain_started and outcome.drain_completed
    node = cluster.nodes["n1"]
    assert node["spec"]["unschedulable"] is True
    assert DRAIN_STARTED_AT in node["metadata"]["annotations"]
    assert not [key for key in cluster.pods_on("n1") if not cluster.pod_record(key).stays_on_node]
    assert cluster.recorder.events["NodeCompactorDrainStarted"] == 1


def test_a_refused_eviction_succeeds_in_the_same_run_once_the_replacement_is_ready() -> None:
    cluster = two_web_pods_under_a_budget_of_one()
    outcome = run_once(cluster, replacing_on(cluster, "n2"))
    assert sorted(outcome.evicted) == ["default/web-1", "default/web-2"]
    assert not outcome.waiting
    assert cluster.recorder.evicted["node-compactor"] == 2
    assert not cluster.recorder.pdb_violations


def test_a_budget_that_stays_at_zero_leaves_the_pod_for_the_next_run() -> None:
    cluster = two_web_pods_under_a_budget_of_one()
    outcome = run_once(cluster, lambda at: None)  # no controller: the budget never recovers
    assert outcome.evicted == ["default/web-1"]
    assert list(outcome.waiting) == ["default/web-2"]
    assert not outcome.drain_completed
    assert "default/web-2" in cluster.pods
    assert not cluster.recorder.pdb_violations


def test_the_outcome_does_not_depend_on_how_the_threads_run() -> None:
    outcomes = set()
    for _ in range(5):
        cluster = two_web_pods_under_a_budget_of_one()
        outcome = run_once(cluster, replacing_on(cluster, "n2"))
        outcomes.add((tuple(sorted(outcome.evicted)), tuple(sorted(outcome.waiting)), tuple(sorted(cluster.pods))))
    assert len(outcomes) == 1


def test_without_threads_the_run_starts_none_and_ends_as_with_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's runs evict and write one at a time (`threads=False`): the port's timeline, played out as
    the pool's workers would, gives them the same answers, so the same pods are evicted or left waiting."""
    for settled in (True, False):  # a budget that recovers, and one that stays at zero
        outcomes = []
        for threads in (True, False):
            cluster = two_web_pods_under_a_budget_of_one()
            settle = replacing_on(cluster, "n2") if settled else (lambda at: None)
            with monkeypatch.context() as patched:
                if not threads:
                    patched.setattr(threading.Thread, "start", _no_thread)
                outcome = run_once(cluster, settle, threads=threads)
            outcomes.append((outcome.evicted, dict(outcome.waiting), outcome.drain_completed, sorted(cluster.pods)))
        assert outcomes[0] == outcomes[1]


def _no_thread(self: threading.Thread) -> None:
    raise AssertionError(f"a thread was started: {self.name}")


def stranding_cluster(n4_keeper_cpu: str) -> tuple[World, Callable[[datetime], None]]:
    """n1 holds one 1000m pod and four of 300m; n2 has 1000m free, n3 600m, n4 what is left beside its keeper.
    The big pod has the higher priority, so the executor evicts it after the small ones."""
    cluster = world()
    for name in ("n1", "n2", "n3", "n4"):
        add_node(cluster, name)
    for name, cpu in (("n2", "3"), ("n3", "3400m"), ("n4", n4_keeper_cpu)):
        add_pod(cluster, f"keeper-{name}", node=name, cpu=cpu, owner=None)
    sizes = {"big": "1", "small": "300m"}
    priorities = {"big": 1000, "small": 0}
    add_pod(cluster, "z-big", node="n1", cpu=sizes["big"], owner=("ReplicaSet", "big"), priority=priorities["big"])
    for index in range(4):
        add_pod(cluster, f"a-small-{index}", node="n1", cpu=sizes["small"], owner=("ReplicaSet", "small"))
    scheduler = Scheduler(cluster, CONFIG, seed=1)

    def settle(at: datetime) -> None:
        cluster.now = at
        for owner in cluster.disrupted:
            cluster.owed[owner].clear()
            add_pod(
                cluster,
                f"{owner[2]}-new-{len(cluster.pods)}",
                cpu=sizes[owner[2]],
                owner=(owner[1], owner[2]),
                priority=priorities[owner[2]],
            )
        cluster.disrupted.clear()
        scheduler.schedule(at)

    return cluster, settle


def test_a_drain_the_scheduler_would_strand_a_pod_of_is_not_started() -> None:
    # Evicted before the big pod, the small pods reach the scheduler first and fill n2, the least
    # allocated node; the big one would then find no place. The planner proves the eviction order too.
    cluster, _ = stranding_cluster("3400m")
    plan = planner.plan(cluster.snapshot(NOW), NO_RESERVATIONS, now=NOW)
    assert plan.decision.action == "none"
    n1 = next(node for node in plan.nodes if node.name == "n1")
    assert any("when they arrive in eviction order" in blocker for blocker in n1.blockers)


def test_with_room_reserved_on_the_roomiest_node_the_scheduler_places_every_pod_of_the_drain() -> None:
    # The same cluster, with reservations: n2 carries the reserved taint before the first eviction,
    # the scheduler's TaintToleration score sends the small pods to n3 and n4, and the big one finds n2.
    cluster, settle = stranding_cluster("3400m")
    outcome = run_once(cluster, settle)
    settle(NOW)
    assert outcome.reservations_added == ["n2"]
    assert outcome.drain_started and outcome.drain_completed
    assert cluster.pending() == []
    assert not cluster.recorder.no_place
    big = [key for key in cluster.pods_on("n2") if "big" in key]
    assert len(big) == 1
    # The drain is over: the next run takes the reservation off.
    later = NOW + timedelta(minutes=5)
    plan = planner.plan(cluster.snapshot(later), CONFIG, now=later)
    assert plan.reservations_remove == ("n2",)
    port = SimulatedCluster(cluster, actor="node-compactor", run_start=later, settle=settle, budget_seconds=240)
    budget = Budget(deadline=240, monotonic=port.monotonic, sleep=port.sleep)
    done = Executor(port, CONFIG, clock=lambda: later, budget=budget, dry_run=False).execute(
        plan, cluster.snapshot(later)
    )
    assert done.reservations_removed == ["n2"]
    assert not [t for t in cluster.nodes["n2"]["spec"].get("taints") or [] if t["key"] == RESERVED_TAINT]


def test_the_pods_of_a_proven_drain_all_find_a_place_once_the_scheduler_places_them() -> None:
    cluster, settle = stranding_cluster("2000m")  # n4 now has room for the big pod whatever comes first
    outcome = run_once(cluster, settle)
    settle(NOW)
    assert outcome.drain_completed
    assert cluster.pending() == []
