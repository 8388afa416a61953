"""The model's shortcuts change nothing it computes: loops after one that changed nothing are skipped until a
timer is due (`runner.Cluster.step`), a view is made again only when the cluster changed (`World.view`), and a
budget is counted again only when its pods changed or one turned Ready (`World._budget`)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

import pytest

from compactor.core.cluster import ClusterView
from compactor.core.model import TERMINAL_PHASES
from compactor.settings.config import DEFAULT_POOL_LABEL, Config
from compactor.simulation import runner
from compactor.simulation.autoscaler import Autoscaler
from compactor.simulation.strategies import ClusterAutoscalerAlone
from compactor.simulation.world import World
from tests.simulation.builders import START, add_node, add_pdb, add_pod, scenario_data, setup_from, world
from tests.simulation.test_class_priorities import CHEAP, WEB, two_pools, with_classes

# Hours of the day and the share of the peak: the builders' scenario starts at 17:00.
RISE_AND_FALL = [[17, 0.4], [17.4, 1.0], [18, 1.0], [18.2, 0.4], [24, 0.4]]
CONFIG = Config.model_validate({"poolLabel": DEFAULT_POOL_LABEL})


def test_a_view_is_made_again_only_when_the_cluster_changed_or_a_pod_turned_ready() -> None:
    cluster = world()
    add_node(cluster, "n1")
    add_pod(cluster, "web-1", node="n1", app="web")
    first = cluster.view(START, CONFIG)
    first.spread_counts[("memo",)] = None  # type: ignore[assignment]
    again = cluster.view(START + timedelta(seconds=10), CONFIG)
    assert again is first and not again.spread_counts  # the same view, its memos emptied
    add_pod(cluster, "web-2", node="n1", app="web", ready=False)  # Ready after its 30 s of startup
    changed = cluster.view(START + timedelta(seconds=10), CONFIG)
    assert changed is not first and len(changed.nodes["n1"].pods) == 2
    assert cluster.view(START + timedelta(seconds=20), CONFIG) is changed
    assert cluster.view(START + timedelta(seconds=40), CONFIG) is not changed  # web-2 turned Ready at 30 s
    assert cluster.view(START + timedelta(seconds=40), Config.model_validate({"poolLabel": "other"})) is not changed


def test_a_view_made_from_the_last_groups_only_the_changed_nodes_and_finds_what_regrouping_every_pod_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two hours of the builders' scenario (nodes added and removed, pods bound, evicted and pending): every view
    `World.view` makes from its last holds, node by node and in order, the pods a fresh `ClusterView` of the same
    snapshot finds, with the same sums, and the same pending pods; nodes whose pods did not change keep their
    state; the budgets' index is the last one while every budget is the same; its pods by namespace, asked in every
    view so that each is made from the last one's, are the pods of the snapshot bound to its nodes."""
    made = World.view
    compared = kept = kept_index = regrouped = 0

    def checked(self: World, at: datetime, config: Config) -> ClusterView:
        nonlocal compared, kept, kept_index, regrouped
        last = self._views.get(id(config))
        view = made(self, at, config)
        fresh = ClusterView(self.snapshot(at), config)
        assert [pod.key for pod in view.unschedulable_pods] == [pod.key for pod in fresh.unschedulable_pods]
        assert [pod.key for pod in view.arriving_pods] == [pod.key for pod in fresh.arriving_pods]
        assert list(view.nodes) == list(fresh.nodes)
        for name, state in fresh.nodes.items():
            mine = view.nodes[name]
            assert (mine.node, mine.pool) == (state.node, state.pool)
            assert mine.pods == state.pods and [pod.key for pod in mine.pods] == [pod.key for pod in state.pods]
            assert (mine.requested, mine.movable_pods) == (state.requested, state.movable_pods)
        regrouped += view.__dict__.get("_by_namespace_earlier") is not None
        bound: dict[str, list[str]] = defaultdict(list)
        for pod in fresh.snapshot.pods:
            if pod.node_name in fresh.nodes and pod.phase not in TERMINAL_PHASES:
                bound[pod.namespace].append(pod.key)
        by_namespace = {
            namespace: sorted(pod.key for pod in pods) for namespace, pods in view.pods_by_namespace.items()
        }
        assert by_namespace == {namespace: sorted(keys) for namespace, keys in bound.items()}
        if last is not None and view is not last.view:
            compared += 1
            kept += sum(view.nodes[name] is state for name, state in last.view.nodes.items() if name in view.nodes)
            kept_index += view.pdbs is last.view.pdbs
        return view

    monkeypatch.setattr(World, "view", checked)
    _run(True, monkeypatch)
    assert compared > 100 and kept > compared  # most views kept most nodes' states
    assert regrouped > 100
    assert 0 < kept_index < compared  # budgets changed in some views, not in all


def test_a_budget_counts_a_pod_that_turned_ready_since_it_was_last_counted() -> None:
    cluster = world()
    add_node(cluster, "n1")
    add_pod(cluster, "web-1", node="n1", app="web")
    add_pod(cluster, "web-2", node="n1", app="web", ready=False)
    cluster.set_scale(("default", "ReplicaSet", "rs"), 2)
    key = add_pdb(cluster, "web", maxUnavailable=1)
    assert cluster.disruptions_allowed(key, START + timedelta(seconds=29)) == 0
    assert cluster.disruptions_allowed(key, START + timedelta(seconds=30)) == 1
    assert cluster.evict("default/web-1", actor="test", at=START + timedelta(seconds=30)).status == "evicted"
    assert cluster.disruptions_allowed(key, START + timedelta(seconds=30)) == 0  # one pod left of two


def _two_hours(cluster: runner.Cluster, quiet: bool, monkeypatch: pytest.MonkeyPatch) -> int:
    """Two hours of `cluster`, a step a minute, with or without quiet loops skipped: how many autoscaler loops ran."""
    loops = 0
    step = Autoscaler.step

    def counted(self: Autoscaler, now: object) -> None:
        nonlocal loops
        loops += 1
        step(self, now)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(Autoscaler, "step", counted)
        if not quiet:
            patched.setattr(Autoscaler, "quiet_loops", lambda self: False)
        strategy = ClusterAutoscalerAlone()
        for index in range(120):
            cluster.step(strategy, cluster.autoscaler.setup.start + timedelta(minutes=index))
    return loops


def _run(quiet: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[runner.Cluster, int]:
    """Two hours of the builders' scenario, its load rising from 40% to its peak and back (nodes added, then
    removed), with or without quiet loops skipped; the cluster and how many autoscaler loops ran."""
    cluster = runner.build(setup_from(scenario_data(hours=2, profiles={"evening": RISE_AND_FALL})))
    return cluster, _two_hours(cluster, quiet, monkeypatch)


def test_skipping_quiet_loops_leaves_the_cluster_as_running_every_loop_does(monkeypatch: pytest.MonkeyPatch) -> None:
    every, every_loops = _run(False, monkeypatch)
    skipping, skipping_loops = _run(True, monkeypatch)
    assert every_loops == 120 * 6
    assert skipping_loops < every_loops * 0.7  # most loops of a quiet evening are skipped
    assert every.world.recorder.nodes_added > 0 and every.world.recorder.nodes_removed > 0  # timers were due
    assert sorted(skipping.world.nodes) == sorted(every.world.nodes)
    assert {key: pod.node_name for key, pod in skipping.world.pod_records()} == {
        key: pod.node_name for key, pod in every.world.pod_records()
    }
    assert skipping.world.recorder == every.world.recorder
    assert skipping.autoscaler.unneeded_since == every.autoscaler.unneeded_since


MIGRATIONS = {
    # Pods moved to the cheaper rung, a PDB holding the drain to one pod at a time, then nothing left to move.
    "moves-then-idle": two_pools(dear_nodes=3, pdbs={"maxUnavailable": 1}),
    # The cheaper rung at its maximum: each candidate is given up, its node backed off for 5 minutes, then a
    # candidate again once the backoff ends (a timer the skipped loops must stop at).
    "backed-off-again-and-again": two_pools(
        dear_nodes=1,
        cheap={"maxNodes": 1, "initialNodes": 1},
        deployments=[
            {"name": "filler", "pool": CHEAP, "requests": {"cpu": "1500m", "memory": "1Gi"}, "replicas": 2},
            {**WEB, "replicas": 2},
        ],
    ),
}


def _run_migrating(name: str, quiet: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[runner.Cluster, int]:
    """Two hours of GKE's active migration (`MIGRATIONS`), with or without quiet loops skipped; the cluster and
    how many autoscaler loops ran."""
    cluster = with_classes({**MIGRATIONS[name], "hours": 2})
    return cluster, _two_hours(cluster, quiet, monkeypatch)


@pytest.mark.parametrize("name", sorted(MIGRATIONS))
def test_skipping_quiet_loops_beside_active_migration_counts_and_draws_as_every_loop(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop skipped after one whose defrag search found nothing counts towards the fairness enforcer and
    draws its search's shuffle, and the skipping stops where a node's backoff ends: the migration's loop
    count, seeded draws and what it did end as when every loop runs."""
    every, every_loops = _run_migrating(name, False, monkeypatch)
    skipping, skipping_loops = _run_migrating(name, True, monkeypatch)
    assert every_loops == 120 * 6
    assert skipping_loops < every_loops * 0.5
    migrated, skipped = every.autoscaler.migration, skipping.autoscaler.migration
    assert migrated is not None and skipped is not None
    if name == "moves-then-idle":
        assert migrated.summary()["nodesMigrated"] >= 2  # nodes moved before the loops went quiet
    else:
        assert migrated.given_up["no-scale-up-options"] >= 10  # a candidate again after every backoff
    assert skipped.summary() == migrated.summary()
    assert skipped.loop == migrated.loop == every_loops
    assert skipped._draw.getstate() == migrated._draw.getstate()
    assert sorted(skipping.world.nodes) == sorted(every.world.nodes)
    assert {key: pod.node_name for key, pod in skipping.world.pod_records()} == {
        key: pod.node_name for key, pod in every.world.pod_records()
    }
    assert skipping.world.recorder == every.world.recorder


# A cluster whose replicas hold still but for one rise, with a CronJob every 15 minutes: most steps begin in the
# quiet the last one ended in, some at a slot or a rise they must not skip.
STILL_WITH_JOBS = scenario_data(
    hours=2,
    profiles={"step-up": [[17, 0.5], [17.75, 0.5], [17.76, 1.0], [24, 1.0]]},
    deployments=[
        {
            "name": "web",
            "pool": "default-pool",
            "requests": {"cpu": "300m", "memory": "512Mi"},
            "replicas": {"profile": "step-up", "peak": 20},
        }
    ],
    cronJobs=[
        {
            "name": "report",
            "namespace": "batch",
            "requests": {"cpu": "1", "memory": "1Gi"},
            "everyMinutes": 15,
            "parallelism": 2,
            "durationMinutes": [5, 7],
        }
    ],
)


class _EveryFiveMinutes(ClusterAutoscalerAlone):
    """A strategy due every fifth minute, two minutes after each five, that records when it acted."""

    def __init__(self) -> None:
        super().__init__("every-five-minutes")
        self.acted: list[datetime] = []

    def due(self, now: datetime) -> bool:
        return now.minute % 5 == 2  # never at a CronJob slot

    def act(self, now: datetime) -> None:
        if self.due(now):
            self.acted.append(now)


def _still_with_jobs(quiet: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[runner.Cluster, _EveryFiveMinutes, int]:
    """Two hours of `STILL_WITH_JOBS`, with or without quiet loops (and steps) skipped: the cluster, the strategy
    and how often a step's first moment was provisioned for."""
    cluster = runner.build(setup_from(STILL_WITH_JOBS))
    strategy = _EveryFiveMinutes()
    heads = 0
    provision = Autoscaler.provision

    def counted(self: Autoscaler, now: datetime) -> None:
        nonlocal heads
        heads += now.second == 0  # the step's own provisioning, or its first loop's
        provision(self, now)

    with monkeypatch.context() as patched:
        patched.setattr(Autoscaler, "provision", counted)
        if not quiet:
            patched.setattr(Autoscaler, "quiet_loops", lambda self: False)
        for index in range(120):
            cluster.step(strategy, cluster.autoscaler.setup.start + timedelta(minutes=index))
    return cluster, strategy, heads


def test_a_step_begun_in_the_last_steps_quiet_is_skipped_but_not_at_a_run_a_cronjob_slot_or_a_new_replica_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    every, every_strategy, every_heads = _still_with_jobs(False, monkeypatch)
    skipping, skipping_strategy, skipping_heads = _still_with_jobs(True, monkeypatch)
    start = every.autoscaler.setup.start
    assert every_strategy.acted == skipping_strategy.acted == [start + timedelta(minutes=m) for m in range(2, 120, 5)]
    assert skipping_heads < every_heads / 2  # most steps began quiet
    jobs = {key for key, pod in every.world.pod_records() if pod.namespace == "batch"}
    assert every.world.recorder.nodes_added > 0  # the rise at 17:45 needed a node
    assert sorted(skipping.world.nodes) == sorted(every.world.nodes)
    assert {key: pod.node_name for key, pod in skipping.world.pod_records()} == {
        key: pod.node_name for key, pod in every.world.pod_records()
    }
    assert {key for key, pod in skipping.world.pod_records() if pod.namespace == "batch"} == jobs
    assert skipping.world.recorder == every.world.recorder
    assert skipping.controllers.state() == every.controllers.state()  # the same Jobs started and ended


def test_a_reconcile_asked_for_the_same_replicas_still_ends_the_job_pods_whose_work_is_done() -> None:
    """A reconcile on a cluster as the last one left it, for the same replicas, changes nothing (and is skipped),
    but not once a Job pod's work is done: that pod ends and its Job counts the success."""
    cluster = runner.build(setup_from(STILL_WITH_JOBS))
    controllers, world = cluster.controllers, cluster.world
    start = cluster.autoscaler.setup.start
    cluster.settle(start, start)
    ends = sorted(world.finish_at.values())
    assert ends  # the CronJob's pods run
    changes = world.changes
    cluster.settle(start, ends[0] - timedelta(seconds=1))
    assert world.changes == changes  # nothing to do yet
    cluster.settle(start, ends[0])
    assert world.changes > changes
    assert sum(job.succeeded for job in controllers.jobs.values()) >= 1
    assert sorted(world.finish_at.values()) == [end for end in ends if end > ends[0]]
