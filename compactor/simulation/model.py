"""What a simulation starts from: pools, workloads and their replica curves, autoscaler settings.

Plain frozen data, built from a scenario file (`scenario`) or a kubectl
snapshot (`kubectl`). Pod templates and PodDisruptionBudgets are Kubernetes
JSON, so everything downstream reads objects the way the live code does.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from compactor.core import coexistence
from compactor.settings.config import Config

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Curve:
    """Replicas over the day: points (hour of day, replicas), linear between them, repeating every 24 h."""

    points: tuple[tuple[float, float], ...]

    @staticmethod
    def constant(replicas: int) -> Curve:
        return Curve(((0.0, float(replicas)),))

    def at(self, moment: datetime) -> int:
        """The replicas at `moment`; the last moment's answer is kept (each loop of a step asks again)."""
        last = self.__dict__.get("_last")
        if last is not None and last[0] == moment:
            return int(last[1])
        hour = moment.hour + moment.minute / 60 + moment.second / 3600
        replicas = int(self.value(hour) + 0.5)
        object.__setattr__(self, "_last", (moment, replicas))
        return replicas

    @functools.cached_property
    def _hours(self) -> list[float]:
        return [point[0] for point in self.points]

    def value(self, hour: float) -> float:
        points = self.points
        if len(points) == 1:
            return points[0][1]
        index = bisect.bisect_right(self._hours, hour)
        before = points[index - 1] if index > 0 else (points[-1][0] - 24, points[-1][1])
        after = points[index] if index < len(points) else (points[0][0] + 24, points[0][1])
        span = after[0] - before[0]
        if span <= 0:
            return after[1]
        return before[1] + (after[1] - before[1]) * (hour - before[0]) / span

    def extremes(self) -> tuple[int, int]:
        values = [int(value + 0.5) for _, value in self.points]
        return min(values), max(values)


@dataclass(frozen=True)
class PoolSpec:
    name: str
    machine_type: str
    allocatable: Mapping[str, str]
    zones: tuple[str, ...]
    min_nodes: int
    max_nodes: int
    initial_nodes: int | None = None  # None: as many as the starting workload needs
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[JsonObject, ...] = ()
    # The scenario's `pricePerHour`: what one node costs, over the configuration's and the price table's.
    price_per_hour: float | None = None
    # The node pool's own consolidation delay (GKE API NodeConfig.consolidationDelay), in seconds: how long its
    # nodes stay unneeded before removal, over its ComputeClass's delay and the profile's; None: not set.
    consolidation_delay_seconds: int | None = None
    # A pool GKE's node auto-provisioning creates (a scenario's `autoCreation`): it grows only for pods that
    # select its machine family or machine type.
    auto_created: bool = False


@dataclass(frozen=True)
class PoolPrice:
    """What one node of a pool costs per hour (`simulation.prices`), or why it has no price."""

    per_hour: float | None  # in the Setup's `currency`; None: unknown, and `problem` says why
    source: str  # where the price comes from: a pricePerHour, or the price table and its date
    spot: bool = False
    region: str | None = None
    problem: str | None = None
    as_of: str | None = None  # the price table's date, when the price is the table's


@dataclass(frozen=True)
class DaemonSetSpec:
    """A pod on every node of the named pools (all pools when None); `mirror` for static pods."""

    namespace: str
    name: str
    template: JsonObject
    pools: tuple[str, ...] | None = None
    mirror: bool = False


@dataclass(frozen=True)
class WorkloadSpec:
    """A Deployment's ReplicaSet (or any owner that recreates its pods), or a StatefulSet (`ordinal`)."""

    namespace: str
    owner_kind: str
    owner_name: str
    template: JsonObject
    replicas: Curve
    pool: str | None = None  # where its pods go, for the lower bound of pending pods
    startup_seconds: int = 30
    ordinal: bool = False  # StatefulSet: pods <name>-0, -1, ...; scale down from the highest
    claims: tuple[str, ...] = ()  # StatefulSet volumeClaimTemplates: one PersistentVolumeClaim per pod
    # A Deployment's ReplicaSet: the Deployment's name and spec.strategy (None: the API's default,
    # RollingUpdate with 25% each), which `rollouts` follows when a restart rolls it out.
    deployment: str | None = None
    strategy: JsonObject | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.owner_kind, self.owner_name)


@dataclass(frozen=True)
class CronJobSpec:
    """Starts a Job every `every_minutes` (within `active_hours`); each pod runs for a drawn duration."""

    namespace: str
    name: str
    template: JsonObject
    every_minutes: int
    parallelism: int
    duration_minutes: tuple[int, int]
    active_hours: tuple[tuple[float, float], ...] | None = None
    pool: str | None = None

    def active_at(self, moment: datetime) -> bool:
        if self.active_hours is None:
            return True
        hour = moment.hour + moment.minute / 60
        for start, end in self.active_hours:
            if (start <= hour < end) if start <= end else (hour >= start or hour < end):
                return True
        return False


@dataclass(frozen=True)
class ComputeClass:
    """A custom ComputeClass over node pools (`migration`): its `priorities`, one rung a pool, the first
    preferred, and whether `activeMigration.optimizeRulePriority` is on."""

    name: str
    rungs: tuple[str, ...]  # pool names, highest priority first
    optimize_rule_priority: bool = True

    def rung(self, pool: str | None) -> int | None:
        """The pool's priority index in the class (0 highest), None when no rule matches it."""
        return self.rungs.index(pool) if pool in self.rungs else None


@dataclass(frozen=True)
class MigrationSettings:
    """The flags of GKE's defrag processor as the model sets them (GoogleCloudPlatform/cluster-autoscaler,
    pkg/config/options/cli/flags.go, their defaults; GKE publishes the values it sets, as for every flag, nowhere):
    --defrag-candidate-limit, --defrag-scale-up-timeout, --defrag-scale-down-timeout, --defrag-scale-down-delay,
    --max-loops-before-admission, and the high-priority-migration plugin's backoff (5 minutes, fixed in its
    `BackoffDuration`). --defrag-candidate-node-limit matters only with partial defrag, an experiment: atomic
    candidates keep their first node (pkg/defrag/processor/processor.go, `newCandidate`)."""

    candidate_limit: int = 10
    scale_up_timeout_seconds: int = 600
    scale_down_timeout_seconds: int = 300
    scale_down_delay_seconds: int = 0
    max_loops_before_admission: int = 5
    backoff_seconds: int = 300


@dataclass(frozen=True)
class AutoscalerSettings:
    """The Cluster Autoscaler's flags as the model sets them. GKE runs its own fork and publishes none of
    its values: these are upstream's defaults (cluster-autoscaler/FAQ.md) and the CA FAQ's node start-up
    time on GCE, assumptions that docs/savings.md varies in its sensitivity table."""

    utilization_threshold: float = 0.5
    unneeded_seconds: int = 600
    delay_after_add_seconds: int = 600
    # "on GCE it usually takes 3 to 4 minutes from CA request to when pods can be scheduled on newly
    # created nodes" (cluster-autoscaler/FAQ.md, "How fast is HPA when combined with CA?").
    provisioning_seconds: int = 210
    max_pod_eviction_seconds: int = 120
    # upstream's --blocking-system-pod-distruption-timeout (1 hour, kubernetes/autoscaler#7914); None: a
    # kube-system pod without a PodDisruptionBudget blocks its node for as long as it runs, as GKE documents.
    system_pod_blocking_seconds: int | None = None
    # A custom ComputeClass's autoscalingPolicy on a pool: consolidationThreshold and
    # consolidationDelayMinutes, per pool name (`compute_class`).
    pool_thresholds: Mapping[str, float] = field(default_factory=dict)
    pool_unneeded_seconds: Mapping[str, int] = field(default_factory=dict)
    # Which pool a scale-up grows when pods may use several: "least-waste", or "price", GKE's gke-price as far
    # as `autoscaler` models it (a scenario's `autoscaler.expander`).
    expander: str = "least-waste"
    # --scan-interval (10 s by default, config/flags/flags.go): the autoscaler loops this often inside a step.
    scan_interval_seconds: int = 10
    # --unremovable-node-recheck-timeout (5 minutes by default, config/flags/flags.go).
    unremovable_recheck_seconds: int = 300
    # Custom ComputeClasses with priorities (`migration`): scale-up tries their rungs in order, and those with
    # activeMigration.optimizeRulePriority move pods up their rungs. Empty: no class orders anything.
    classes: tuple[ComputeClass, ...] = ()
    migration: MigrationSettings = field(default_factory=MigrationSettings)


# GKE's `optimize-utilization` autoscaling profile, as far as Google documents it (docs/savings.md): scale-down
# "more aggressive" and "faster" (modelled as 1 minute of unneeded time instead of 10), and kube-scheduler
# preferring the nodes that already have the most requested (MostAllocated). GKE publishes no flag values.
OPTIMIZE_UTILIZATION_UNNEEDED_SECONDS = 60


def compute_class(
    settings: AutoscalerSettings, thresholds: Mapping[str, float], delays: Mapping[str, int] | None = None
) -> AutoscalerSettings:
    """The pools named in `thresholds` under a custom ComputeClass with that `consolidationThreshold`
    (a share, 0.75 for 75) and the `consolidationDelayMinutes` of `delays` (seconds, per pool), else left
    unset. Unset, GKE scales a node pool down "according to the chosen autoscaling profile" (the GKE
    API's NodePool `consolidationDelay`): the profile's unneeded time, 10 minutes under `balanced`
    (GKE's troubleshooting page for scale-down)."""
    given = delays or {}
    return dataclasses.replace(
        settings,
        pool_thresholds=dict(thresholds),
        pool_unneeded_seconds={pool: given.get(pool, settings.unneeded_seconds) for pool in thresholds},
    )


# node-compactor's cpu limit beside a ComputeClass threshold, above it (docs/savings.md, "Beside a ComputeClass
# threshold"): the threshold plus this, at most 1; also what a run's warning suggests.
COEXISTING_LIMIT_ABOVE = coexistence.LIMIT_ABOVE_THRESHOLD


def coexisting(config: Config, thresholds: Mapping[str, float]) -> Config:
    """node-compactor's configuration as docs/compute-class.md tells an operator to set it on pools that follow a
    ComputeClass: `computeClassConsolidationThreshold` at the class's threshold, and a cpu (and memory)
    limit at or below it raised to `COEXISTING_LIMIT_ABOVE` above it."""
    pools = {}
    for name, pool in config.node_pools.items():
        threshold = thresholds.get(name)
        if threshold is None:
            pools[name] = pool
            continue
        raised = min(1.0, round(threshold + COEXISTING_LIMIT_ABOVE, 4))
        changes: dict[str, Any] = {"compute_class_threshold": threshold}
        if pool.cpu_limit is not None and pool.cpu_limit <= threshold:
            changes["cpu_limit"] = raised
        if pool.memory_limit is not None and pool.memory_limit <= threshold:
            changes["memory_limit"] = raised
        pools[name] = pool.model_copy(update=changes)
    return config.model_copy(update={"node_pools": pools})


def optimize_utilization(settings: AutoscalerSettings) -> AutoscalerSettings:
    """The balanced profile's settings as the optimize-utilization profile changes them."""
    return dataclasses.replace(
        settings, unneeded_seconds=min(settings.unneeded_seconds, OPTIMIZE_UTILIZATION_UNNEEDED_SECONDS)
    )


@dataclass(frozen=True)
class Setup:
    name: str
    description: str
    seed: int
    start: datetime  # when the measured period begins
    hours: float
    warmup_hours: float  # simulated with the Cluster Autoscaler alone before `start`, shared by all strategies
    step_seconds: int
    night_plateau: tuple[float, float] | None  # hours of the day
    pools: tuple[PoolSpec, ...]
    daemonsets: tuple[DaemonSetSpec, ...]
    workloads: tuple[WorkloadSpec, ...]
    cronjobs: tuple[CronJobSpec, ...]
    pdbs: tuple[JsonObject, ...]
    autoscaler: AutoscalerSettings
    config: Config  # node-compactor's configuration; estafette reads the same pool settings
    # kube-scheduler scores NodeResourcesBalancedAllocation too (`simulation.scheduler`)
    balanced_allocation: bool = True
    topology_spread: bool = True  # and PodTopologySpread with the system default constraints
    initial_nodes: tuple[JsonObject, ...] = ()  # a kubectl snapshot's objects, when starting from one
    initial_pods: tuple[JsonObject, ...] = ()
    run_budget_seconds: float = 240.0  # a node-compactor run's time budget (COMPACTOR_RUN_BUDGET_SECONDS)
    source: str = ""
    sources: tuple[str, ...] = ()  # the scenario file's `sources`: where its numbers come from
    # A kubectl snapshot's ComputeClasses: per pool, the consolidationThreshold (a fraction) of the class
    # its nodes carry (`coexistence.class_thresholds`); empty for scenario files.
    compute_classes: Mapping[str, float] = field(default_factory=dict)
    # ... and the consolidationDelayMinutes of that class, in seconds, where it sets one (`coexistence.class_delays`).
    compute_class_delays: Mapping[str, int] = field(default_factory=dict)
    # Each pool's node price, resolved where the Setup is built (`prices.of_pools`): plain data, so a copy of the
    # cluster copies no price table. A pool missing here has no price.
    prices: Mapping[str, PoolPrice] = field(default_factory=dict)
    currency: str = "USD"

    def pool(self, name: str) -> PoolSpec | None:
        return next((pool for pool in self.pools if pool.name == name), None)
