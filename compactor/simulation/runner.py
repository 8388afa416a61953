"""The time loop: one starting cluster, each strategy on its own copy of it, metrics at every step.

The starting cluster is built once: pools at their initial size (or a
kubectl snapshot's objects), the workload created and scheduled, nodes added
until every pod runs, then `warmup_hours` with the Cluster Autoscaler alone,
so every strategy starts from the state a day of GKE leaves behind. Each
strategy then runs on a deep copy of it for `hours` in steps of
`step_seconds`. A step: provisioned VMs join, controllers and the scheduler
settle, the strategy acts (node-compactor every 5 minutes), the cluster
settles, the Cluster Autoscaler loops every `--scan-interval` (10 s) with the
cluster settling after each loop, and the step is measured. `ca-optimize-utilization` is the Cluster
Autoscaler alone on a copy whose autoscaler and scheduler follow GKE's
optimize-utilization profile from the end of the warm-up on;
`gke-consolidation-threshold` the Cluster Autoscaler with a custom
ComputeClass on each pool node-compactor consolidates (`consolidationThreshold`
at the pool's cpu limit, `consolidationDelayMinutes` at its default), and
`node-compactor+threshold` node-compactor on such a cluster, configured as
docs/compute-class.md tells an operator to (`model.coexisting`: the class's threshold
declared, its cpu limit above it), `node-compactor+priorities` node-compactor
configured the same way on `gke-class-priorities`' cluster (its classes'
priorities and active migration as well), and
`node-compactor+surge` node-compactor with `surgeSingleReplicas` on in every
enabled pool (single-replica Deployments moved by a rolling restart,
`rollouts`), beside `node-compactor` with the configuration as given.

With `jobs` above 1 the strategies run in worker processes forked after the warm-up (`workers`), each on its
own copy as in one process, so the results are the same; only their results come back.

The lower bound is measured on the Cluster Autoscaler's run (the workload is
the same in every run): per pool, the fewest nodes of the pool's machine
type whose allocatable, less the DaemonSet pods every node carries, holds
the requests of all pods that are not DaemonSet pods, cpu and memory each;
beside it, when every pool has a price, the cost lower bound: the cheapest
fractional capacity the same requests may use, a linear program (`bound`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import math
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from compactor.core import pools
from compactor.core.model import Resources
from compactor.kube import snapshot as parsing
from compactor.settings.config import Config
from compactor.simulation import availability, bound, migration, prices, rollouts, workers
from compactor.simulation.autoscaler import BOOTSTRAP_AGE, Autoscaler
from compactor.simulation.controllers import Controllers
from compactor.simulation.metrics import Recorder, Series
from compactor.simulation.model import PoolSpec, Setup, coexisting, compute_class, optimize_utilization
from compactor.simulation.scheduler import Scheduler
from compactor.simulation.strategies import (
    ClassPriorities,
    ClusterAutoscalerAlone,
    Estafette,
    NodeCompactor,
    NoFit,
    Strategy,
)
from compactor.simulation.world import World

STRATEGIES = (
    "ca-alone",
    "ca-optimize-utilization",
    "gke-consolidation-threshold",
    "gke-class-priorities",
    "estafette",
    "node-compactor",
    "node-compactor+surge",
    "node-compactor+threshold",
    "node-compactor+priorities",
)
# The strategies from the dearest to simulate to the cheapest, as measured on the shipped scenarios and on
# bench.synth's 1,000 nodes for a day (docs/benchmarks.md): the order in which worker processes start them.
# `ca-alone` measures the lower bounds beside its run (the cost bound a linear program), which makes it dearer
# than the other native strategies on the scenarios.
COST_ORDER = (
    "node-compactor+priorities",
    "node-compactor+surge",
    "node-compactor+threshold",
    "node-compactor",
    "gke-class-priorities",
    "ca-alone",
    "estafette",
    "gke-consolidation-threshold",
    "ca-optimize-utilization",
)
# What GKE offers without node-compactor: the strategies a user can pick by configuration alone.
NATIVE = ("ca-alone", "ca-optimize-utilization", "gke-consolidation-threshold", "gke-class-priorities")
# Strategies that exist only on some clusters: GKE's class priorities where some pod may use two pools or more.
CLASS_PRIORITIES = "gke-class-priorities"
# node-compactor on gke-class-priorities' cluster, configured as beside gke-consolidation-threshold.
BESIDE_PRIORITIES = "node-compactor+priorities"
BOOTSTRAP_ROUNDS = 50

Progress = Callable[[str, float], None]
T = TypeVar("T")


@dataclass
class Cluster:
    world: World
    controllers: Controllers
    scheduler: Scheduler
    autoscaler: Autoscaler
    # The quiet the last step ended in, and the strategy it ended under (`step`).
    _carried: tuple[Strategy, _Quiet] | None = field(default=None, repr=False)

    def settle(self, desired_at: datetime, at: datetime) -> None:
        self.controllers.reconcile(desired_at, at)
        self.scheduler.schedule(at)

    def step(self, strategy: Strategy, now: datetime) -> None:
        """One step; inside it the Cluster Autoscaler loops every `scan_interval_seconds` (--scan-interval,
        10 s), the cluster settling after each loop, the workloads' replica counts those of the step.

        A step that begins in the quiet the last one ended in (`_quiet_after`: no timer due yet), under the
        same strategy, with no run of it due and the controllers asked for the same replicas, begins as a
        loop that changed nothing: its settling, the strategy's turn and its first loop would change nothing
        either, and are skipped as the quiet loops are."""
        self.world.now = now
        carried, self._carried = self._carried, None
        quiet: _Quiet | None = None
        if (
            carried is not None
            and carried[0] is strategy
            and carried[1].holds_at(now)
            and not strategy.due(now)
            and self.controllers.asks_as_before(now)
        ):
            quiet = carried[1]
        else:
            self.autoscaler.provision(now)
            self.settle(now, now)
            strategy.act(now)
            self.settle(now, now)
        step_seconds = self.autoscaler.setup.step_seconds
        interval = max(1, self.autoscaler.settings.scan_interval_seconds)
        skipping = self.autoscaler.quiet_loops()
        state = self._state() if skipping else None
        for offset in range(0, max(1, step_seconds), interval):
            at = now + timedelta(seconds=offset)
            if quiet is not None and quiet.holds_at(at):
                self.autoscaler.skip()
                continue  # the same as the loop that changed nothing: nothing again
            self.world.now = at
            self.autoscaler.step(at)
            self.settle(now, at)
            if skipping:
                before, state = state, self._state()
                quiet = self._quiet_after(at) if state == before and self.autoscaler.idle() else None
        self.world.now = now
        if quiet is not None:
            self._carried = (strategy, quiet)

    def _state(self) -> tuple[object, ...]:
        return (
            self.world.changes,
            self.autoscaler.state(),
            self.controllers.state(),
            self.scheduler.state(),
        )

    def _quiet_after(self, at: datetime) -> _Quiet:
        """A loop at `at` changed nothing: so will every later loop of the step (the same desired replicas, the
        same cluster) until a timer is due: a pod turns Ready (budgets and rollouts read it), a Job pod ends, or
        one of the autoscaler's timers (`Autoscaler.next_timers`, a migration's backoff among them). Beside GKE's
        active migration, only after a loop whose defrag search ran and found nothing (`Autoscaler.idle`); each
        loop skipped then counts and draws as that search would (`Autoscaler.skip`)."""
        at_or_after, ripe = self.autoscaler.next_timers(at)
        moments = [
            moment
            for moment in (at_or_after, self.world.next_ready(at), self.controllers.next_timer(at))
            if moment is not None
        ]
        return _Quiet(min(moments, default=None), ripe)


@dataclass(frozen=True, slots=True)
class _Quiet:
    """Until when loops after one that changed nothing change nothing either: before `until` (a timer due at
    or after it), and not after `ripe` (a node ripe strictly after its unneeded time)."""

    until: datetime | None
    ripe: datetime | None

    def holds_at(self, at: datetime) -> bool:
        return (self.until is None or at < self.until) and (self.ripe is None or at <= self.ripe)


@dataclass
class StrategyResult:
    name: str
    recorder: Recorder
    series: Series
    summary: dict[str, int]
    failures: list[str]
    seconds: float
    # The pods that most often held node-compactor's runs back by fitting nowhere else (`NodeCompactor.no_fit`).
    no_fit: list[NoFit] = field(default_factory=list)
    usage: Usage | None = None


@dataclass(frozen=True)
class Usage:
    """What measuring a strategy cost its process: CPU seconds, and the process's peak resident memory when it
    ended (the strategy's own in a worker process; in-process, the peak of everything run before it too)."""

    cpu_seconds: float
    peak_rss_bytes: int


@dataclass
class Results:
    setup: Setup
    strategies: list[StrategyResult]
    lower_bound: list[int]
    lower_bound_by_pool: dict[str, list[int]]
    seconds: float = 0.0
    start_nodes: int = 0
    # The cost lower bound at each step (`bound.CheapestCapacity`), per hour in the setup's currency;
    # None when a pool has no price.
    lower_bound_cost: list[float] | None = None


def build(setup: Setup) -> Cluster:
    """The starting cluster, before the warm-up."""
    begin = setup.start - timedelta(hours=setup.warmup_hours)
    world = World(start=begin, pool_label=setup.config.pool_label, pools=setup.pools)
    controllers = Controllers(world, setup)
    scheduler = Scheduler(
        world,
        setup.config,
        setup.seed,
        balanced_allocation=setup.balanced_allocation,
        topology_spread=setup.topology_spread,
    )
    autoscaler = Autoscaler(world, setup, controllers)
    cluster = Cluster(world, controllers, scheduler, autoscaler)
    for pdb in setup.pdbs:
        world.add_pdb(pdb)
    for node in setup.initial_nodes:
        world.add_node(node)
    for pod in setup.initial_pods:
        world.add_pod(pod, ready=True)
    for pool in setup.pools:
        for index in range(pool.initial_nodes or 0):
            zone = pool.zones[index % len(pool.zones)]
            autoscaler.add_node(pool, zone, autoscaler.new_node_name(pool.name), begin - BOOTSTRAP_AGE)
    for _ in range(BOOTSTRAP_ROUNDS):
        cluster.settle(begin, begin)
        if not autoscaler.scale_up(begin, instant=True):
            break
    cluster.settle(begin, begin)
    return cluster


def run(
    setup: Setup, *, progress: Progress | None = None, strategies: tuple[str, ...] = STRATEGIES, jobs: int = 1
) -> Results:
    """Every strategy of `strategies` this cluster has (`applicable`), each on a copy of the warmed-up cluster;
    with `jobs` above 1, in up to `jobs` worker processes at once (`workers`), with the same results."""
    started = time.monotonic()
    base = build(setup)
    warmup_steps = int(setup.warmup_hours * 3600 // setup.step_seconds)
    begin = setup.start - timedelta(hours=setup.warmup_hours)
    alone = ClusterAutoscalerAlone()
    for index in range(warmup_steps):
        base.step(alone, begin + timedelta(seconds=index * setup.step_seconds))
        if progress is not None and index % 30 == 0:
            progress("warm-up", index / max(1, warmup_steps))
    results = Results(setup, [], [], {}, start_nodes=base.autoscaler.billed_nodes())
    # The warm cluster (and the scenario or snapshot it came from) lives to the end: out of the collector's
    # reach, a full collection no longer walks it (9 s each at 5,000 nodes), and a forked worker's collections
    # leave its pages shared. Given back to the collector at the end, for a process that runs more.
    gc.collect()
    gc.freeze()
    try:
        # The lower bound is measured on the first strategy's run, whichever process runs it.
        names = applicable(setup, strategies)
        # A forked worker has the warm cluster to itself: it measures on it, without a copy.
        forked = jobs > 1 and len(names) > 1
        tasks = [
            (name, functools.partial(_measure_copy, setup, base, name, index == 0, not forked))
            for index, name in enumerate(names)
        ]
        measured = _run_forked(tasks, jobs, progress) if forked else [task(progress) for _, task in tasks]
    finally:
        gc.unfreeze()
    for result, bounds in measured:
        if bounds is not None:
            results.lower_bound, results.lower_bound_by_pool = bounds.nodes, bounds.nodes_by_pool
            results.lower_bound_cost = bounds.cost
        results.strategies.append(result)
    for result in results.strategies:
        result.series.lower_bound = results.lower_bound
    results.seconds = time.monotonic() - started
    return results


def _run_forked(tasks: Sequence[tuple[str, workers.Task[T]]], jobs: int, progress: Progress | None) -> list[T]:
    """`tasks`' values in their order, the dearest strategies started first (`COST_ORDER`), so the workers
    end near together instead of one starting the dearest when the others are done."""
    order = sorted(range(len(tasks)), key=lambda index: COST_ORDER.index(tasks[index][0]))
    values = workers.run_all([tasks[index] for index in order], jobs, progress)
    return [value for _, value in sorted(zip(order, values, strict=True), key=lambda pair: pair[0])]


@dataclass
class Bounds:
    """The lower bounds at each step of the measured period (`Results.lower_bound*`)."""

    nodes: list[int] = field(default_factory=list)
    nodes_by_pool: dict[str, list[int]] = field(default_factory=dict)
    cost: list[float] | None = None


def _measure_copy(
    setup: Setup, base: Cluster, name: str, with_bounds: bool, copied: bool, progress: Progress | None
) -> tuple[StrategyResult, Bounds | None]:
    """`name` measured on a copy of `base` (on `base` itself when not `copied`: a forked worker's own), and with
    `with_bounds` the lower bounds beside it."""
    cluster = copy.deepcopy(base) if copied else base
    cluster.world.recorder = Recorder()
    bounds = Bounds() if with_bounds else None
    return _measure(setup, cluster, name, bounds, progress), bounds


def applicable(setup: Setup, strategies: tuple[str, ...] = STRATEGIES) -> tuple[str, ...]:
    """The strategies this cluster has: `gke-class-priorities` only where some pod may use two pools or more
    (elsewhere a class has one rung, and the strategy would be `gke-consolidation-threshold` under another name)."""
    if not migration.user_classes(setup):
        return tuple(name for name in strategies if name not in (CLASS_PRIORITIES, BESIDE_PRIORITIES))
    return strategies


def _strategy(name: str, setup: Setup, cluster: Cluster) -> Strategy:
    if name == "ca-alone":
        return ClusterAutoscalerAlone()
    if name == "ca-optimize-utilization":
        cluster.autoscaler.settings = optimize_utilization(cluster.autoscaler.settings)
        cluster.scheduler.most_allocated = True
        return ClusterAutoscalerAlone(name)
    if name == "gke-consolidation-threshold":
        thresholds = consolidation_thresholds(setup)
        cluster.autoscaler.settings = compute_class(cluster.autoscaler.settings, thresholds, _class_delays(setup))
        return ClusterAutoscalerAlone(name)
    if name in (CLASS_PRIORITIES, BESIDE_PRIORITIES):
        # The classes a user writes (`migration.user_classes`), each with the consolidationThreshold
        # gke-consolidation-threshold gives its pools, priorities and activeMigration.optimizeRulePriority on.
        thresholds = consolidation_thresholds(setup)
        settings = compute_class(cluster.autoscaler.settings, thresholds, _class_delays(setup))
        cluster.autoscaler.settings = dataclasses.replace(settings, classes=migration.user_classes(setup))
        if name == BESIDE_PRIORITIES:
            return _node_compactor(coexisting(setup.config, thresholds), setup, cluster, name)
        autoscaler = cluster.autoscaler
        return ClassPriorities(name, lambda: autoscaler.migration.summary() if autoscaler.migration else {})
    if name == "estafette":
        return Estafette(cluster.world, setup.config, setup.seed)
    if name == "node-compactor":
        return _node_compactor(setup.config, setup, cluster, name)
    if name == "node-compactor+surge":
        return _node_compactor(rollouts.surging(setup.config), setup, cluster, name)
    if name == "node-compactor+threshold":
        thresholds = consolidation_thresholds(setup)
        cluster.autoscaler.settings = compute_class(cluster.autoscaler.settings, thresholds, _class_delays(setup))
        return _node_compactor(coexisting(setup.config, thresholds), setup, cluster, name)
    raise ValueError(f"unknown strategy {name}")


def _node_compactor(config: Config, setup: Setup, cluster: Cluster, name: str) -> NodeCompactor:
    """node-compactor with `config`; when a pool surges, its snapshots carry the Deployments and it restarts them."""
    surges = config.surges
    if surges:
        cluster.world.workload_records = cluster.controllers.rollouts.records
    rollouts_port = cluster.controllers.rollouts if surges else None
    return NodeCompactor(
        cluster.world, config, cluster.settle, setup.run_budget_seconds, name=name, rollouts=rollouts_port
    )


def _class_delays(setup: Setup) -> dict[str, int]:
    """A kubectl snapshot's ComputeClass delays, for the pools whose threshold is the snapshot's class."""
    return {pool: seconds for pool, seconds in setup.compute_class_delays.items() if pool in setup.compute_classes}


def consolidation_thresholds(setup: Setup) -> dict[str, float]:
    """The ComputeClass a user would write instead of node-compactor: on each pool node-compactor
    consolidates, `consolidationThreshold` at the pool's `scaleDownCPURequestRatioLimit` (GKE reads it
    for cpu and memory both), or at the pool's `computeClassConsolidationThreshold` when the
    configuration declares one. A kubectl snapshot's own ComputeClasses come first, on every pool
    whose nodes carry one (`simulate --snapshot` with `computeclasses` in the List): that is the
    class the cluster has, as a run reads it (`core.coexistence`)."""
    thresholds = dict(setup.compute_classes)
    for pool in setup.pools:
        settings = setup.config.enabled_pool(pool.name)
        if pool.name in thresholds:
            continue
        if settings is not None and settings.compute_class_threshold is not None:
            thresholds[pool.name] = settings.compute_class_threshold
        elif settings is not None and settings.cpu_limit is not None:
            thresholds[pool.name] = settings.cpu_limit
    return thresholds


def _measure(
    setup: Setup, cluster: Cluster, name: str, bounds: Bounds | None, progress: Progress | None
) -> StrategyResult:
    started, cpu_started = time.monotonic(), time.process_time()
    strategy = _strategy(name, setup, cluster)
    steps = int(setup.hours * 3600 // setup.step_seconds)
    series = Series()
    world = cluster.world
    capacity = _cheapest_capacity(setup, cluster) if bounds is not None else None
    if bounds is not None and capacity is not None:
        bounds.cost = []
    bounded_at = -1
    by_pool: dict[str, int] = {}
    cost: float | None = None
    for index in range(steps):
        now = setup.start + timedelta(seconds=index * setup.step_seconds)
        cluster.step(strategy, now)
        availability.close(world, now)
        pending = sum(1 for key in world.pending() if not world.is_placeholder(key))  # workload pods only
        world.recorder.pending_pod_seconds += pending * setup.step_seconds
        series.minutes.append(index * setup.step_seconds / 60)
        series.nodes.append(cluster.autoscaler.billed_nodes())
        series.pending.append(pending)
        series.decisions.append(strategy.decision)
        for pool, count in cluster.autoscaler.billed_by_pool().items():
            series.nodes_by_pool.setdefault(pool, [0] * index).append(count)
        for pool_series in series.nodes_by_pool.values():
            if len(pool_series) < index + 1:
                pool_series.append(0)
        if bounds is not None:
            if world.changes != bounded_at:
                # The bounds read only the world's pods and nodes: a step that changed nothing keeps them.
                bounded_at = world.changes
                demand = pod_demand(setup, cluster)
                by_pool = lower_bound(setup, cluster, demand)
                cost = capacity.per_hour(demand) if capacity is not None else None
            for pool, count in by_pool.items():
                bounds.nodes_by_pool.setdefault(pool, []).append(count)
            bounds.nodes.append(sum(by_pool.values()))
            if cost is not None and bounds.cost is not None:
                bounds.cost.append(cost)
        if progress is not None and index % 20 == 0:
            progress(name, index / max(1, steps))
    availability.finish(world, setup.start + timedelta(seconds=steps * setup.step_seconds))
    if progress is not None:
        progress(name, 1.0)
    elapsed = time.monotonic() - started
    usage = Usage(time.process_time() - cpu_started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return StrategyResult(
        name, world.recorder, series, strategy.summary(), list(strategy.failures), elapsed, strategy.no_fit(), usage
    )


def lower_bound(setup: Setup, cluster: Cluster, demand: list[bound.Demand] | None = None) -> dict[str, int]:
    """Per pool, the fewest nodes of its machine type that hold its pods: by cpu, by memory, by pod count (the
    pool's max pods per node less its DaemonSet pods) and by the replicas that repel one another on
    kubernetes.io/hostname (k of them need k nodes: `pools.repels_itself`), at least the pool's minimum."""
    wanted: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    repelling: dict[tuple[str, object], int] = defaultdict(int)  # an owner's groups, one per volume zone
    for group in demand if demand is not None else pod_demand(setup, cluster):
        totals = wanted[group.home]
        totals[0] += group.cpu_millis
        totals[1] += group.memory_bytes
        totals[2] += group.pods
        if pools.repels_itself(group.pod):
            repelling[(group.home, group.owner)] += group.pods
            totals[3] = max(totals[3], repelling[(group.home, group.owner)])
    bounds = {}
    for pool in setup.pools:
        cpu, memory, count, one_each = wanted.get(pool.name, [0, 0, 0, 0])
        room_cpu, room_memory = _room(pool, cluster)
        room_pods = _max_pods(pool.allocatable) - len(cluster.controllers.daemon_templates(pool.name))
        by_cpu = math.ceil(cpu / room_cpu) if room_cpu > 0 else 0
        by_memory = math.ceil(memory / room_memory) if room_memory > 0 else 0
        by_pods = math.ceil(count / room_pods) if room_pods > 0 else 0
        bounds[pool.name] = max(by_cpu, by_memory, by_pods, one_each, pool.min_nodes)
    return bounds


def pod_demand(setup: Setup, cluster: Cluster) -> list[bound.Demand]:
    """The requests of every pod that is not a DaemonSet pod (nor node replacement's placeholder), running or
    pending, by owner, home pool (its node's pool, else the pool its workload names, else the first) and the
    zone its volumes are bound to."""
    world = cluster.world
    groups: dict[tuple[str, object, str | None], bound.Demand] = {}
    first_pool = setup.pools[0].name if setup.pools else ""
    node_pools: dict[str, str | None] = {}
    for key, pod in world.pod_records():
        if pod.stays_on_node or pod.is_terminal or pod.placeholder is not None:
            continue
        if pod.node_name is not None:
            if pod.node_name in node_pools:
                home = node_pools[pod.node_name]
            else:
                home = node_pools[pod.node_name] = world.node_pool(pod.node_name)
        else:
            home = world.pool_hint.get(key)
        home = home or first_pool
        owner = world.pod_owner(key) or key
        zone = world.volume_zone(key) if pod.pvc_names else None
        group = groups.get((home, owner, zone))
        if group is None:
            requests = pod.requests
            groups[(home, owner, zone)] = bound.Demand(
                home, owner, pod, requests.cpu_millis, requests.memory_bytes, zone=zone
            )
        else:
            group.cpu_millis += pod.requests.cpu_millis
            group.memory_bytes += pod.requests.memory_bytes
            group.pods += 1
    return list(groups.values())


def _room(pool: PoolSpec, cluster: Cluster) -> tuple[int, int]:
    """A node's allocatable less the DaemonSet pods every node of the pool carries: cpu, memory."""
    allocatable = _allocatable(pool.allocatable)
    daemons = cluster.controllers.daemon_requests(pool.name)
    return allocatable.cpu_millis - daemons.cpu_millis, allocatable.memory_bytes - daemons.memory_bytes


def _cheapest_capacity(setup: Setup, cluster: Cluster) -> bound.CheapestCapacity | None:
    if not prices.complete(setup):
        return None
    rooms = {
        pool.name: bound.Room(
            *_room(pool, cluster), _max_pods(pool.allocatable) - len(cluster.controllers.daemon_templates(pool.name))
        )
        for pool in setup.pools
    }
    return bound.CheapestCapacity(setup, rooms, cluster.world.pool_label)


def _max_pods(amounts: Mapping[str, str]) -> int:
    return parsing.parse_node({"metadata": {"name": "pool"}, "status": {"allocatable": dict(amounts)}}).allocatable_pods


def _allocatable(amounts: Mapping[str, str]) -> Resources:
    return parsing.parse_node({"metadata": {"name": "pool"}, "status": {"allocatable": dict(amounts)}}).allocatable
