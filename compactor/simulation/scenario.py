"""Scenario files: a cluster's pools, machine sizes and workloads with their daily replica curves.

JSON, camelCase, validated with pydantic; unknown keys are errors, and every
problem is reported with its path, as for node-compactor's configuration
(`BadInputError`, exit code 2). The `compactor` section is a node-compactor
configuration and is validated as one (`ConfigError`).

Replicas are a number, `{"points": [[hour, replicas], ...]}` (linear between
points, repeating every 24 h) or `{"profile": NAME, "peak": N}` with a
profile of the file's `profiles` ([[hour, fraction of the peak], ...]).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from compactor.core.prices import machines, pricing
from compactor.errors import BadInputError
from compactor.kube import quantity
from compactor.settings import config as config_module
from compactor.settings.config import Config
from compactor.simulation import objects, prices, rollouts
from compactor.simulation.model import (
    AutoscalerSettings,
    CronJobSpec,
    Curve,
    DaemonSetSpec,
    JsonObject,
    MigrationSettings,
    PoolSpec,
    Setup,
    WorkloadSpec,
)

Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
Quantity = Annotated[str, StringConstraints(min_length=1)]
Hour = Annotated[float, Field(ge=0, le=24)]
# A workload's `spec.replicas` is an int32 in the Kubernetes API; more cannot be asked of a controller.
Replicas = Annotated[int, Field(ge=0, le=2**31 - 1)]

DEFAULT_POOL_SETTINGS: dict[str, Any] = {"enabled": True, "scaleDownCPURequestRatioLimit": 0.75}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Requests(_Strict):
    cpu: Quantity
    memory: Quantity

    @model_validator(mode="after")
    def _quantities(self) -> Requests:
        # The API server's bounds: cpu in int64 thousandths, memory in int64 bytes.
        for field_name, read in (("cpu", quantity.millis), ("memory", quantity.units)):
            try:
                read(getattr(self, field_name))
            except quantity.QuantityError as error:
                raise ValueError(f"{field_name}: {error}") from None
        return self

    def as_dict(self) -> dict[str, str]:
        return {"cpu": self.cpu, "memory": self.memory}


class Taint(_Strict):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Pool(_Strict):
    name: Name
    machine_type: str = Field(alias="machineType")
    allocatable: Requests | None = None
    zones: list[str] = Field(min_length=1)
    min_nodes: int = Field(1, alias="minNodes", ge=0)
    max_nodes: int = Field(100, alias="maxNodes", ge=1)
    initial_nodes: int | None = Field(None, alias="initialNodes", ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    # Spot VMs: the nodes carry cloud.google.com/gke-spot=true and are priced at Spot rates (`prices`).
    spot: bool = False
    # What one node costs per hour, in the price table's currency, over the configuration's and the table's.
    price_per_hour: float | None = Field(
        None, alias="pricePerHour", gt=0, le=config_module.MAX_PRICE_PER_HOUR, allow_inf_nan=False
    )
    # The node pool's own consolidation delay (GKE API NodeConfig.consolidationDelay, `gcloud container
    # node-pools create --consolidation-delay`): over its ComputeClass's consolidationDelayMinutes.
    consolidation_delay_seconds: int | None = Field(None, alias="consolidationDelaySeconds", ge=0, le=86400)
    # The pool's maximum pods per node (GKE Standard's default 110): the nodes' allocatable pods.
    max_pods_per_node: int = Field(machines.MAX_PODS, alias="maxPodsPerNode", ge=8, le=256)

    @model_validator(mode="after")
    def _sizes(self) -> Pool:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"minNodes {self.min_nodes} is above maxNodes {self.max_nodes}")
        if self.allocatable is None and self.machine_type not in machines.MACHINES:
            raise ValueError(f"unknown machineType {self.machine_type!r}: give `allocatable` (cpu, memory)")
        spot_label = self.labels.get(pricing.SPOT_LABEL)
        if self.spot and spot_label not in (None, "true"):
            raise ValueError(f"spot is true but labels set {pricing.SPOT_LABEL} to {spot_label!r}")
        return self

    def node_labels(self) -> dict[str, str]:
        return {**self.labels, pricing.SPOT_LABEL: "true"} if self.spot else dict(self.labels)


class Points(_Strict):
    points: list[tuple[Hour, Annotated[float, Field(ge=0, le=2**31 - 1)]]] = Field(min_length=1)


class ProfileRef(_Strict):
    profile: str
    peak: Replicas


class Pdb(_Strict):
    min_available: int | str | None = Field(None, alias="minAvailable")
    max_unavailable: int | str | None = Field(None, alias="maxUnavailable")

    @model_validator(mode="after")
    def _one(self) -> Pdb:
        if (self.min_available is None) == (self.max_unavailable is None):
            raise ValueError("give exactly one of minAvailable and maxUnavailable")
        for value in (self.min_available, self.max_unavailable):
            if isinstance(value, str) and not (value.endswith("%") and value[:-1].isdigit()):
                raise ValueError(f"{value!r} is neither a number nor a percentage like '25%'")
        return self


class NodeSelectorRequirement(_Strict):
    """A matchExpressions entry, as Kubernetes writes it."""

    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values(self) -> NodeSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"{self.operator} needs values")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"{self.operator} takes no values")
        if self.operator in ("Gt", "Lt") and (len(self.values) != 1 or not self.values[0].lstrip("-").isdigit()):
            raise ValueError(f"{self.operator} takes one integer value")
        return self


class NodePreference(_Strict):
    match_expressions: list[NodeSelectorRequirement] = Field(min_length=1, alias="matchExpressions")


class PreferredSchedulingTerm(_Strict):
    """A preferredDuringSchedulingIgnoredDuringExecution entry of node affinity, as Kubernetes writes it."""

    weight: int = Field(ge=1, le=100)
    preference: NodePreference


class Workload(_Strict):
    name: Name
    namespace: Name = "default"
    pool: str | None = None
    requests: Requests
    replicas: Replicas | Points | ProfileRef
    pdb: Pdb | None = None
    startup_seconds: int = Field(30, alias="startupSeconds", ge=0)
    priority: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    anti_affinity: bool = Field(False, alias="antiAffinity")  # required, one pod per node
    zone_spread: bool = Field(False, alias="zoneSpread")  # DoNotSchedule across zones, maxSkew 1
    local_storage: bool = Field(False, alias="localStorage")  # an emptyDir on disk
    tolerations: list[dict[str, str]] = Field(default_factory=list)
    # spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution of its pods
    preferred_node_affinity: list[PreferredSchedulingTerm] = Field(default_factory=list, alias="preferredNodeAffinity")
    # More of spec.nodeSelector beside `pool`'s: e.g. cloud.google.com/machine-family, which node auto-creation reads.
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")


class RolloutStrategy(_Strict):
    """A Deployment's spec.strategy: how a rollout (a restart) replaces its pods."""

    type: Literal["RollingUpdate", "Recreate"] = "RollingUpdate"
    max_surge: int | str | None = Field(None, alias="maxSurge")  # absent: the API's default, 25%
    max_unavailable: int | str | None = Field(None, alias="maxUnavailable")

    @model_validator(mode="after")
    def _values(self) -> RolloutStrategy:
        for name, value in (("maxSurge", self.max_surge), ("maxUnavailable", self.max_unavailable)):
            if isinstance(value, int) and value < 0:
                raise ValueError(f"{name} {value} is negative")
            if isinstance(value, str) and not (value.endswith("%") and value[:-1].isdigit()):
                raise ValueError(f"{name} {value!r} is neither a number nor a percentage like '25%'")
        if self.type == "Recreate" and (self.max_surge is not None or self.max_unavailable is not None):
            raise ValueError("maxSurge and maxUnavailable belong to RollingUpdate, not Recreate")
        return self


class DeploymentWorkload(Workload):
    strategy: RolloutStrategy | None = None  # absent: RollingUpdate with the API's defaults


class StatefulSet(Workload):
    volume_claims: list[Name] = Field(default_factory=lambda: ["data"], alias="volumeClaims")


class CronJob(_Strict):
    name: Name
    namespace: Name = "default"
    pool: str | None = None
    requests: Requests
    every_minutes: int = Field(alias="everyMinutes", ge=1, le=1440)
    parallelism: int = Field(ge=1)
    duration_minutes: tuple[int, int] = Field(alias="durationMinutes")
    active_hours: list[tuple[Hour, Hour]] | None = Field(None, alias="activeHours")
    priority: int = 0
    annotations: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, str]] = Field(default_factory=list)
    preferred_node_affinity: list[PreferredSchedulingTerm] = Field(default_factory=list, alias="preferredNodeAffinity")

    @model_validator(mode="after")
    def _durations(self) -> CronJob:
        low, high = self.duration_minutes
        if low < 1 or high < low:
            raise ValueError("durationMinutes is [shortest, longest], both at least 1")
        return self


class DaemonSet(_Strict):
    name: Name
    namespace: Name = "kube-system"
    requests: Requests
    pools: list[str] | None = None


class Autoscaler(_Strict):
    utilization_threshold: float = Field(0.5, alias="scaleDownUtilizationThreshold", gt=0, le=1)
    unneeded_seconds: int = Field(600, alias="scaleDownUnneededSeconds", ge=0)
    delay_after_add_seconds: int = Field(600, alias="scaleDownDelayAfterAddSeconds", ge=0)
    provisioning_seconds: int = Field(210, alias="nodeProvisioningSeconds", ge=0)
    max_pod_eviction_seconds: int = Field(120, alias="maxPodEvictionSeconds", ge=0)
    system_pod_blocking_seconds: int | None = Field(None, alias="systemPodBlockingSeconds", ge=0)
    # Which pool a scale-up grows when pods may use several: upstream's least-waste (the published figures'),
    # or GKE's gke-price as `simulation.autoscaler` models it.
    expander: Literal["least-waste", "price"] = "least-waste"
    # --scan-interval (10 s, config/flags/flags.go): the autoscaler's loops inside each step.
    scan_interval_seconds: int = Field(10, alias="scanIntervalSeconds", ge=1, le=600)
    # --unremovable-node-recheck-timeout (5 minutes, config/flags/flags.go): how long a node found unremovable
    # is left out of the planner's passes.
    unremovable_recheck_seconds: int = Field(300, alias="unremovableRecheckSeconds", ge=1, le=86400)
    # The defrag processor's flags, for gke-class-priorities' active migration (`simulation.migration`).
    active_migration: ActiveMigration = Field(
        default_factory=lambda: ActiveMigration.model_validate({}), alias="activeMigration"
    )


class ActiveMigration(_Strict):
    """GKE's defrag flags for gke-class-priorities (`model.MigrationSettings`): GKE sets them and publishes none."""

    candidate_limit: int = Field(10, alias="candidateLimit", ge=1, le=100)
    scale_up_timeout_seconds: int = Field(600, alias="scaleUpTimeoutSeconds", ge=10, le=86400)
    scale_down_timeout_seconds: int = Field(300, alias="scaleDownTimeoutSeconds", ge=10, le=86400)
    max_loops_before_admission: int = Field(5, alias="maxLoopsBeforeAdmission", ge=1, le=1000)
    backoff_seconds: int = Field(300, alias="backoffSeconds", ge=0, le=86400)


class AutoCreation(_Strict):
    """GKE's node auto-provisioning, as far as the model has it: for a pending pod that selects one of these
    machine types (node.kubernetes.io/instance-type) or their family (cloud.google.com/machine-family), a pool
    of that shape, Spot when `spot`."""

    machine_types: list[str] = Field(alias="machineTypes", min_length=1)
    spot: bool = False


class SchedulerSettings(_Strict):
    # kube-scheduler's NodeResourcesBalancedAllocation score beside LeastAllocated (default profile)
    balanced_allocation: bool = Field(True, alias="balancedAllocation")
    # PodTopologySpread's score with the system default constraints (default profile, weight 2)
    topology_spread: bool = Field(True, alias="topologySpread")


class ScenarioFile(_Strict):
    name: str
    description: str = ""
    sources: list[str] = Field(default_factory=list)  # where the scenario's numbers come from; not simulated
    seed: int = 1
    start: datetime
    hours: float = Field(24, gt=0, le=24 * 14)
    warmup_hours: float = Field(6, alias="warmupHours", ge=0, le=48)
    step_seconds: int = Field(60, alias="stepSeconds", ge=10, le=600)
    night_plateau: tuple[Hour, Hour] | None = Field(None, alias="nightPlateau")
    run_budget_seconds: int = Field(240, alias="runBudgetSeconds", ge=30)
    profiles: dict[str, list[tuple[Hour, Annotated[float, Field(ge=0)]]]] = Field(default_factory=dict)
    pools: list[Pool] = Field(min_length=1)
    daemon_sets: list[DaemonSet] = Field(default_factory=list, alias="daemonSets")
    deployments: list[DeploymentWorkload] = Field(default_factory=list)
    stateful_sets: list[StatefulSet] = Field(default_factory=list, alias="statefulSets")
    cron_jobs: list[CronJob] = Field(default_factory=list, alias="cronJobs")
    autoscaler: Autoscaler = Field(default_factory=lambda: Autoscaler.model_validate({}))
    scheduler: SchedulerSettings = Field(default_factory=lambda: SchedulerSettings.model_validate({}))
    compactor: dict[str, Any] | None = None
    auto_creation: AutoCreation | None = Field(None, alias="autoCreation")

    @model_validator(mode="after")
    def _references(self) -> ScenarioFile:
        problems = []
        for index, machine in enumerate(self.auto_creation.machine_types if self.auto_creation else ()):
            if machine not in machines.MACHINES:
                problems.append(f"autoCreation.machineTypes.{index}: unknown machine type {machine!r}")
        pools = {pool.name for pool in self.pools}
        if len(pools) != len(self.pools):
            problems.append("pools: two pools have the same name")
        if self.start.tzinfo is None:
            problems.append("start: give a time zone (e.g. 2026-11-20T12:00:00Z)")
        entries: list[tuple[str, int, str, str, str | None, object]] = [
            *(("deployments", i, w.namespace, w.name, w.pool, w.replicas) for i, w in enumerate(self.deployments)),
            *(("statefulSets", i, w.namespace, w.name, w.pool, w.replicas) for i, w in enumerate(self.stateful_sets)),
            *(("cronJobs", i, c.namespace, c.name, c.pool, None) for i, c in enumerate(self.cron_jobs)),
        ]
        seen: set[tuple[str, str]] = set()
        for kind, index, namespace, name, pool, replicas in entries:
            if pool is not None and pool not in pools:
                problems.append(f"{kind}.{index}.pool: no pool named {pool!r}")
            if (namespace, name) in seen:
                problems.append(f"{kind}.{index}.name: {namespace}/{name} is defined twice")
            seen.add((namespace, name))
            if isinstance(replicas, ProfileRef) and replicas.profile not in self.profiles:
                problems.append(f"{kind}.{index}.replicas.profile: no profile named {replicas.profile!r}")
        for index, daemon in enumerate(self.daemon_sets):
            for pool in daemon.pools or ():
                if pool not in pools:
                    problems.append(f"daemonSets.{index}.pools: no pool named {pool!r}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def load(path: str, *, config: Config | None = None) -> Setup:
    """Read and validate a scenario; `config` (from --config) replaces its `compactor` section."""
    try:
        with open(path, "rb") as stream:
            content = stream.read()
    except OSError as error:
        raise BadInputError(f"cannot read scenario {path}: {error.strerror or error}") from error
    return parse(content, source=path, config=config)


def with_hours(setup: Setup, hours: float) -> Setup:
    return dataclasses.replace(setup, hours=hours)


def parse(content: bytes | str, *, source: str, config: Config | None = None) -> Setup:
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError as error:
        raise BadInputError(f"{source}: not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise BadInputError(f"{source}: a scenario is a JSON object")
    try:
        scenario = ScenarioFile.model_validate(data)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            path = ".".join(str(part) for part in item["loc"] if not str(part).startswith("function-"))
            message = str(item["msg"]).removeprefix("Value error, ")
            if item["type"] == "extra_forbidden":
                message = "unknown key (check its spelling)"
            for part in message.split("; "):
                problems.append(f"{source}: {path or '(top level)'}: {part}" if path else f"{source}: {part}")
        raise BadInputError(f"{source}: invalid scenario ({len(problems)} problem(s))", problems) from None
    return _setup(scenario, source=source, config=config)


def default_config(pool_names: list[str], pool_label: str = config_module.DEFAULT_POOL_LABEL) -> Config:
    """Every pool enabled with the documented defaults (cpu request ratio limit 0.75)."""
    data = {"poolLabel": pool_label, "nodePools": {name: dict(DEFAULT_POOL_SETTINGS) for name in pool_names}}
    return config_module.validate(data, source="default configuration")


def _setup(scenario: ScenarioFile, *, source: str, config: Config | None) -> Setup:
    if config is None:
        if scenario.compactor is not None:
            config = config_module.validate(scenario.compactor, source=f"{source}: compactor")
        else:
            config = default_config([pool.name for pool in scenario.pools])
    pool_label = config.pool_label
    pools = tuple(
        PoolSpec(
            name=pool.name,
            machine_type=pool.machine_type,
            allocatable={
                **(
                    pool.allocatable.as_dict()
                    if pool.allocatable is not None
                    else machines.allocatable(pool.machine_type)
                ),
                "pods": str(pool.max_pods_per_node),
            },
            zones=tuple(pool.zones),
            min_nodes=pool.min_nodes,
            max_nodes=pool.max_nodes,
            initial_nodes=pool.initial_nodes,
            labels=pool.node_labels(),
            taints=tuple(taint.model_dump(exclude_defaults=False) for taint in pool.taints),
            price_per_hour=pool.price_per_hour,
            consolidation_delay_seconds=pool.consolidation_delay_seconds,
        )
        for pool in scenario.pools
    )
    pools += _auto_created(scenario)
    daemonsets = tuple(
        DaemonSetSpec(
            namespace=daemon.namespace,
            name=daemon.name,
            template=objects.pod_template(
                namespace=daemon.namespace,
                labels={"app": daemon.name},
                requests=daemon.requests.as_dict(),
                priority=2000001000,
                tolerations=[{"operator": "Exists"}],
            ),
            pools=tuple(daemon.pools) if daemon.pools is not None else None,
        )
        for daemon in scenario.daemon_sets
    )
    workloads: list[WorkloadSpec] = []
    pdbs: list[JsonObject] = []
    for item in [*scenario.deployments, *scenario.stateful_sets]:
        stateful = isinstance(item, StatefulSet)
        owner_kind = "StatefulSet" if stateful else "ReplicaSet"
        owner_name = item.name if stateful else f"{item.name}-{objects.short_hash(item.namespace, item.name)}"
        labels = {"app": item.name, **item.labels}
        if not stateful:
            labels["pod-template-hash"] = owner_name.rsplit("-", 1)[1]
        workloads.append(
            WorkloadSpec(
                namespace=item.namespace,
                owner_kind=owner_kind,
                owner_name=owner_name,
                template=_template(item, labels, pool_label),
                replicas=_curve(item.replicas, scenario.profiles),
                pool=item.pool,
                startup_seconds=item.startup_seconds,
                ordinal=stateful,
                claims=tuple(item.volume_claims) if isinstance(item, StatefulSet) else (),
                deployment=None if stateful else item.name,
                strategy=rollouts.strategy_object(
                    item.strategy.type, item.strategy.max_surge, item.strategy.max_unavailable
                )
                if isinstance(item, DeploymentWorkload) and item.strategy is not None
                else None,
            )
        )
        if item.pdb is not None:
            pdbs.append(
                objects.pdb_object(
                    item.namespace,
                    item.name,
                    {"app": item.name},
                    min_available=item.pdb.min_available,
                    max_unavailable=item.pdb.max_unavailable,
                )
            )
    cronjobs = tuple(
        CronJobSpec(
            namespace=cron.namespace,
            name=cron.name,
            template=objects.pod_template(
                namespace=cron.namespace,
                labels={"app": cron.name},
                requests=cron.requests.as_dict(),
                annotations=cron.annotations,
                priority=cron.priority,
                node_selector={pool_label: cron.pool} if cron.pool else None,
                tolerations=[dict(t) for t in cron.tolerations],
                affinity=_node_preferences(cron.preferred_node_affinity),
            ),
            every_minutes=cron.every_minutes,
            parallelism=cron.parallelism,
            duration_minutes=cron.duration_minutes,
            active_hours=tuple(cron.active_hours) if cron.active_hours is not None else None,
            pool=cron.pool,
        )
        for cron in scenario.cron_jobs
    )
    settings = scenario.autoscaler
    table = prices.table_for(config)
    return Setup(
        name=scenario.name,
        description=scenario.description,
        seed=scenario.seed,
        start=scenario.start.astimezone(UTC),
        hours=scenario.hours,
        warmup_hours=scenario.warmup_hours,
        step_seconds=scenario.step_seconds,
        night_plateau=scenario.night_plateau,
        pools=pools,
        daemonsets=daemonsets,
        workloads=tuple(workloads),
        cronjobs=cronjobs,
        pdbs=tuple(pdbs),
        autoscaler=AutoscalerSettings(
            utilization_threshold=settings.utilization_threshold,
            unneeded_seconds=settings.unneeded_seconds,
            delay_after_add_seconds=settings.delay_after_add_seconds,
            provisioning_seconds=settings.provisioning_seconds,
            max_pod_eviction_seconds=settings.max_pod_eviction_seconds,
            system_pod_blocking_seconds=settings.system_pod_blocking_seconds,
            expander=settings.expander,
            scan_interval_seconds=settings.scan_interval_seconds,
            unremovable_recheck_seconds=settings.unremovable_recheck_seconds,
            migration=MigrationSettings(
                candidate_limit=settings.active_migration.candidate_limit,
                scale_up_timeout_seconds=settings.active_migration.scale_up_timeout_seconds,
                scale_down_timeout_seconds=settings.active_migration.scale_down_timeout_seconds,
                max_loops_before_admission=settings.active_migration.max_loops_before_admission,
                backoff_seconds=settings.active_migration.backoff_seconds,
            ),
        ),
        config=config,
        balanced_allocation=scenario.scheduler.balanced_allocation,
        topology_spread=scenario.scheduler.topology_spread,
        run_budget_seconds=float(scenario.run_budget_seconds),
        source=source,
        sources=tuple(scenario.sources),
        prices=prices.of_pools(pools, config, table),
        currency=table.currency,
    )


def _curve(replicas: int | Points | ProfileRef, profiles: dict[str, list[tuple[float, float]]]) -> Curve:
    if isinstance(replicas, int):
        return Curve.constant(replicas)
    if isinstance(replicas, Points):
        return Curve(tuple(sorted((float(h), float(v)) for h, v in replicas.points)))
    profile = profiles[replicas.profile]
    return Curve(tuple(sorted((float(h), fraction * replicas.peak) for h, fraction in profile)))


def _node_preferences(terms: list[PreferredSchedulingTerm]) -> JsonObject | None:
    """The pod's affinity with these preferred node affinity terms, in the API's spelling; None without."""
    if not terms:
        return None
    preferred = [term.model_dump(by_alias=True, exclude_defaults=True) for term in terms]
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}


# Node auto-provisioning's limits are the cluster's resource limits, not a pool's size: a scenario sets none.
AUTO_CREATED_MAX_NODES = 1000


def _auto_created(scenario: ScenarioFile) -> tuple[PoolSpec, ...]:
    """The pools node auto-provisioning would create, one a machine type, empty at the start, in the zones of
    the scenario's pools: `nap-<machine type>` (`-spot` for Spot, tainted as GKE taints Spot pools it creates)."""
    auto = scenario.auto_creation
    if auto is None:
        return ()
    zones = tuple(dict.fromkeys(zone for pool in scenario.pools for zone in pool.zones))
    spot_taint = {"key": pricing.SPOT_LABEL, "value": "true", "effect": "NoSchedule"}
    return tuple(
        PoolSpec(
            name=f"nap-{machine}{'-spot' if auto.spot else ''}",
            machine_type=machine,
            allocatable={**machines.allocatable(machine), "pods": str(machines.MAX_PODS)},
            zones=zones,
            min_nodes=0,
            max_nodes=AUTO_CREATED_MAX_NODES,
            initial_nodes=0,
            labels={pricing.SPOT_LABEL: "true"} if auto.spot else {},
            taints=(spot_taint,) if auto.spot else (),
            auto_created=True,
        )
        for machine in dict.fromkeys(auto.machine_types)
    )


def _template(item: Workload, labels: dict[str, str], pool_label: str) -> JsonObject:
    affinity = _node_preferences(item.preferred_node_affinity)
    if item.anti_affinity:
        affinity = (affinity or {}) | {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": item.name}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    spread = None
    if item.zone_spread:
        spread = [
            {
                "maxSkew": 1,
                "topologyKey": objects.ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": item.name}},
            }
        ]
    volumes = [{"name": "scratch", "emptyDir": {}}] if item.local_storage else None
    return objects.pod_template(
        namespace=item.namespace,
        labels=labels,
        requests=item.requests.as_dict(),
        annotations=item.annotations,
        priority=item.priority,
        node_selector={**item.node_selector, **({pool_label: item.pool} if item.pool else {})} or None,
        tolerations=[dict(t) for t in item.tolerations],
        affinity=affinity,
        volumes=volumes,
        spread=spread,
    )
