"""The configuration: its schema (DESIGN.md "Configuration") and where it comes from.

A file written for estafette-k8s-node-compactor loads unchanged and means the
same. Unknown keys are errors (a typo must never silently switch a safety
rule off), and every problem is reported with its field path.

Sources: on the command line an explicit `--config FILE` is the
configuration, whatever the environment says (a person who names a file
means that file). Otherwise, and always in the function, first match wins:
the Firestore document named by `COMPACTOR_FIRESTORE_DOCUMENT`, then the
`COMPACTOR_CONFIG` environment variable. `load_with_source` also says which
source was used and which set ones it passed over. Reading Firestore is the
`firestore` adapter's job; this module only receives its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from compactor.errors import ConfigError
from compactor.settings import cron, names, strictjson

DEFAULT_POOL_LABEL = "cloud.google.com/gke-nodepool"

# Environment variables of estafette-k8s-node-compactor that set field defaults.
ENV_DEFAULTS = {
    "NEEDED_MARKED_TIME_FOR_REMOVAL_SECONDS": "neededMarkedTimeSeconds",
    "MINIMUM_NODE_AGE_SECONDS": "minimumNodeAgeSeconds",
}

ENV_CONFIG = "COMPACTOR_CONFIG"
# Firestore's own limit for a document; a configuration of a thousand pools stays far below it.
MAX_FILE_BYTES = 1024 * 1024
ENV_FIRESTORE_DOCUMENT = "COMPACTOR_FIRESTORE_DOCUMENT"
ENV_FIRESTORE_DATABASE = "COMPACTOR_FIRESTORE_DATABASE"


class DisruptionWindow(BaseModel):
    """When drains may start: from each time `schedule` fires, for `durationMinutes` (Karpenter's budget windows)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schedule: str = Field(min_length=1)
    duration_minutes: int = Field(alias="durationMinutes", ge=1, le=366 * 24 * 60)

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        problem = cron.schedule_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


# The most a node may cost per hour, as a sanity bound on prices from the configuration or a price file:
# Compute Engine's largest machines list near 100 USD per hour (and a few currencies count ten times more).
MAX_PRICE_PER_HOUR = 10_000.0
DEFAULT_PLACEHOLDER_NAMESPACE = "node-compactor"


# A Compute Engine machine type's name (series-kind-size, as n2-standard-8 or c2d-highcpu-16, or with its GPU count
# as a2-highgpu-1g); whether the price table knows it is the planner's check (a warning), since a price file may add
# types.
_MACHINE_TYPE = re.compile(r"[a-z][a-z0-9]*-[a-z0-9]+(-[0-9]+g?)?")


class Replacement(BaseModel):
    """Node replacement (DESIGN "Node replacement"): drain up to `maxNodes` nodes of the pool once 1..`maxNewNodes`
    new, cheaper nodes of one target (a target pool, or a machine type GKE creates a pool for) are up, when their
    pods fit on them and the other nodes."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    enabled: bool = False
    target_pools: tuple[str, ...] = Field((), alias="targetPools")
    # Shapes GKE may create a node pool for (node auto-provisioning, or a ComputeClass with nodePoolAutoCreation);
    # used only where a run reads that the cluster creates pools.
    machine_types: tuple[str, ...] = Field((), alias="machineTypes")
    # Whether the machine types' new nodes may be Spot (for the pods that tolerate Spot).
    spot: bool = False
    # Karpenter's multi-node consolidation replaces up to this many nodes with one.
    max_nodes: int = Field(3, alias="maxNodes", ge=1, le=10)
    # New nodes one replacement may ask for (one placeholder each).
    max_new_nodes: int = Field(2, alias="maxNewNodes", ge=1, le=10)
    min_savings_percent: float = Field(20.0, alias="minSavingsPercent", ge=0, lt=100, allow_inf_nan=False)
    # How long the placeholders may wait for their nodes (a stockout, a quota, a pool at its maximum).
    timeout_seconds: int = Field(900, alias="timeoutSeconds", ge=60, le=24 * 3600)

    @field_validator("target_pools", "machine_types", mode="before")
    @classmethod
    def _list_of_names(cls, value: Any) -> Any:
        # JSON has lists, not tuples; strict mode accepts a tuple only.
        return tuple(value) if isinstance(value, list) else value

    @field_validator("target_pools")
    @classmethod
    def _distinct_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name for name in value):
            raise ValueError("a target pool name is empty")
        repeated = sorted({name for name in value if value.count(name) > 1})
        if repeated:
            raise ValueError(f"target pool(s) named more than once: {', '.join(repeated)}")
        return value

    @field_validator("machine_types")
    @classmethod
    def _known_shapes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({name for name in value if value.count(name) > 1})
        if repeated:
            raise ValueError(f"machine type(s) named more than once: {', '.join(repeated)}")
        for name in value:
            if not _MACHINE_TYPE.fullmatch(name):
                raise ValueError(f"machine type {name!r} is not a Compute Engine machine type name (as e2-standard-4)")
        return value

    @model_validator(mode="after")
    def _targets_when_enabled(self) -> Replacement:
        if self.enabled and not self.target_pools and not self.machine_types:
            raise ValueError("targetPools or machineTypes must name at least one target when replacement is enabled")
        return self


class PoolConfig(BaseModel):
    """How one node pool (by its `poolLabel` value) is compacted."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    enabled: bool = False
    cpu_limit: float | None = Field(None, alias="scaleDownCPURequestRatioLimit", gt=0, le=1)
    memory_limit: float | None = Field(None, alias="scaleDownMemoryRequestRatioLimit", gt=0, le=1)
    required_underutilized: int = Field(1, alias="scaleDownRequiredUnderutilizedNodeCount", ge=0)
    needed_marked_seconds: int = Field(300, alias="neededMarkedTimeSeconds", ge=0)
    minimum_node_age_seconds: int = Field(1200, alias="minimumNodeAgeSeconds", ge=0)
    min_nodes: int = Field(1, alias="minNodes", ge=0)
    scale_up_cooldown_seconds: int = Field(600, alias="scaleUpCooldownSeconds", ge=0)
    drain_timeout_seconds: int = Field(900, alias="drainTimeoutSeconds", ge=0)
    removal_timeout_seconds: int = Field(1800, alias="removalTimeoutSeconds", ge=0)
    retry_backoff_seconds: int = Field(1800, alias="retryBackoffSeconds", ge=0)
    # Pipelined removal: emptied nodes that may wait for the Cluster Autoscaler while the next drain starts.
    max_awaiting_removal: int = Field(2, alias="maxNodesAwaitingRemoval", ge=0)
    # node-refiner's trigger: start a drain only when the pool's excess nodes (as reported) reach this.
    excess_nodes_threshold: int | None = Field(None, alias="excessNodesThreshold", ge=1)
    # node-refiner's time gap: least time between two drain starts in the pool.
    drain_interval_seconds: int = Field(0, alias="drainIntervalSeconds", ge=0)
    # When drains may start (absent: always); marks are kept outside the windows.
    disruption_windows: list[DisruptionWindow] | None = Field(None, alias="disruptionWindows")
    # Move the only pod of a Deployment (or one a PDB holds only because minAvailable is its replica
    # count) by a surging rolling restart instead of an eviction, so it is never without a Ready pod
    # (core.surge). Off by default: it reads Deployments, ReplicaSets and PVCs, and patches Deployments.
    surge_single_replicas: bool = Field(False, alias="surgeSingleReplicas")
    # The consolidationThreshold of the GKE ComputeClass the pool's nodes follow, as a fraction (75 -> 0.75).
    # The Cluster Autoscaler removes the nodes below it itself, so node-compactor's cpu limit must be above
    # it to add anything (docs/savings.md, "Beside a ComputeClass threshold"); a limit at or below it is refused.
    compute_class_threshold: float | None = Field(None, alias="computeClassConsolidationThreshold", gt=0, le=1)
    # What one node of the pool costs per hour, over the built-in table and the priceFile (`core.prices.pricing`).
    # A running pod owned by a Job: "wait" (a node with one is not drained: eviction would throw its work
    # away; the node keeps its mark and soft taint so new Job pods go elsewhere) or "evict".
    job_pods: Literal["wait", "evict"] = Field("wait", alias="jobPods")
    price_per_hour: float | None = Field(None, alias="pricePerHour", gt=0, le=MAX_PRICE_PER_HOUR, allow_inf_nan=False)
    replacement: Replacement | None = None

    @model_validator(mode="before")
    @classmethod
    def _environment_defaults(cls, data: Any, info: ValidationInfo) -> Any:
        defaults = (info.context or {}).get("pool_defaults") or {}
        if isinstance(data, dict) and defaults:
            return {**defaults, **data}
        return data

    @model_validator(mode="after")
    def _enabled_needs_cpu_limit(self) -> PoolConfig:
        if self.enabled and self.cpu_limit is None:
            raise ValueError("scaleDownCPURequestRatioLimit is required when the pool is enabled")
        return self

    @model_validator(mode="after")
    def _limit_above_compute_class(self) -> PoolConfig:
        threshold, limit = self.compute_class_threshold, self.cpu_limit
        if self.enabled and threshold is not None and limit is not None and limit <= threshold:
            raise ValueError(
                f"scaleDownCPURequestRatioLimit ({limit}) must be above computeClassConsolidationThreshold "
                f"({threshold}): the Cluster Autoscaler removes the nodes below the threshold itself, so "
                "node-compactor only acts on nodes between the two (0.9 beside a threshold of 0.75, for example)"
            )
        return self

    @property
    def replacing(self) -> Replacement | None:
        """The pool's replacement settings when it replaces nodes (the pool and its replacement enabled); else None."""
        if self.enabled and self.replacement is not None and self.replacement.enabled:
            return self.replacement
        return None

    @model_validator(mode="after")
    def _replacement_needs_the_pool(self) -> PoolConfig:
        if self.replacement is not None and self.replacement.enabled and not self.enabled:
            raise ValueError("replacement.enabled needs the pool enabled: a replaced node is drained like any other")
        return self

    @model_validator(mode="after")
    def _surge_needs_time(self) -> PoolConfig:
        if self.surge_single_replicas and self.drain_timeout_seconds == 0:
            raise ValueError(
                "surgeSingleReplicas needs drainTimeoutSeconds above 0: a drain waits that long at most "
                "for the restarted pod to be Ready elsewhere"
            )
        return self


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    node_pools: dict[str, PoolConfig] = Field(default_factory=dict, alias="nodePools")
    pool_label: str = Field(DEFAULT_POOL_LABEL, alias="poolLabel", min_length=1)
    skip_nodes_with_local_storage: bool = Field(True, alias="skipNodesWithLocalStorage")
    skip_nodes_with_system_pods: bool = Field(True, alias="skipNodesWithSystemPods")
    dry_run: bool = Field(False, alias="dryRun")
    # Marked nodes carry a PreferNoSchedule taint, so pods moved by a drain go to the fuller nodes first.
    soft_taint_marked_nodes: bool = Field(True, alias="softTaintMarkedNodes")
    # When no node's pods fit as they are, a drain may keep room on one or two nodes for its last pods,
    # with a PreferNoSchedule taint on them while it runs (planner: reservations).
    reserve_room_for_drains: bool = Field(True, alias="reserveRoomForDrains")
    # The ReplicaSet pods of each enabled pool's least utilized node get a pod-deletion-cost of -1, so
    # the pods a scale-down removes come from there first and the node empties with fewer evictions
    # (core.steering).
    steer_scale_down: bool = Field(True, alias="steerScaleDown")
    # The IANA time zone of every pool's disruptionWindows.
    time_zone: str = Field("UTC", alias="timeZone", min_length=1)
    # The Cluster Autoscaler removes an empty node only while what stays on it (DaemonSet and mirror pods)
    # requests less than this share of its allocatable (its --scale-down-utilization-threshold; 0.5 on GKE).
    ca_utilization_threshold: float = Field(0.5, alias="clusterAutoscalerUtilizationThreshold", gt=0, le=1)
    # The order of the moves (DESIGN rule 8): "savings" puts the largest saving per hour per disrupted pod
    # first wherever every node involved has a price (rule 8's order where they cost the same);
    # "disruption" keeps rule 8's order alone (`core.ranking`).
    ranking: Literal["savings", "disruption"] = Field("savings", alias="ranking")
    # A price file written by `python -m compactor prices --refresh --out FILE`, read over the built-in table.
    price_file: str | None = Field(None, alias="priceFile", min_length=1)
    # Where replacement's placeholder pods live (their PriorityClass and this namespace come from terraform).
    placeholder_namespace: str = Field(DEFAULT_PLACEHOLDER_NAMESPACE, alias="placeholderNamespace")

    @field_validator("placeholder_namespace")
    @classmethod
    def _namespace_name(cls, value: str) -> str:
        problem = names.namespace_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("time_zone")
    @classmethod
    def _known_time_zone(cls, value: str) -> str:
        cron.zone(value)  # raises ValueError naming the zone
        return value

    @model_validator(mode="after")
    def _replacement_targets_are_other_pools(self) -> Config:
        for name, pool in self.node_pools.items():
            if pool.replacement is not None and name in pool.replacement.target_pools:
                raise ValueError(
                    f"nodePools.{name}.replacement.targetPools names the pool itself: a node of the same "
                    "pool costs the same, so replacing one with another saves nothing"
                )
        return self

    def pool(self, name: str | None) -> PoolConfig | None:
        """The pool's settings, or None when the pool is not configured."""
        if name is None:
            return None
        return self.node_pools.get(name)

    def enabled_pool(self, name: str | None) -> PoolConfig | None:
        pool = self.pool(name)
        return pool if pool is not None and pool.enabled else None

    @property
    def surges(self) -> bool:
        """Whether an enabled pool sets surgeSingleReplicas: only then are Deployments, ReplicaSets and
        PVCs read, and Deployments patched."""
        return any(pool.enabled and pool.surge_single_replicas for pool in self.node_pools.values())


def parse(text: str | bytes, *, source: str, env: Mapping[str, str] | None = None) -> Config:
    """Validate configuration JSON; `source` names where it came from in messages."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise ConfigError(f"{source}: not valid JSON: {error}{_yaml_hint(text)}") from error
    try:
        strictjson.reject_duplicate_keys(text)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None
    return validate(data, source=source, env=env)


def _yaml_hint(text: str | bytes) -> str:
    """A hint for a configuration written as YAML (estafette's Helm values are): only JSON is read."""
    head = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).lstrip()
    if head and head[0] not in '{["' and ":" in head.split("\n", 1)[0]:
        return (
            " (this looks like YAML; the configuration is JSON, e.g. "
            '{"nodePools": {"default-pool": {"enabled": true, "scaleDownCPURequestRatioLimit": 0.75}}})'
        )
    return ""


def validate(data: object, *, source: str, env: Mapping[str, str] | None = None) -> Config:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a JSON object")
    pool_defaults = environment_defaults(env or {}, source=source)
    try:
        return Config.model_validate(data, context={"pool_defaults": pool_defaults})
    except ValidationError as error:
        problems = [f"{source}: {_path(item['loc'])}: {_reason(item)}" for item in error.errors()]
        raise ConfigError(f"{source}: invalid configuration ({len(problems)} problem(s))", problems) from None


def environment_defaults(env: Mapping[str, str], *, source: str = "environment") -> dict[str, int]:
    defaults: dict[str, int] = {}
    problems = []
    for variable, key in ENV_DEFAULTS.items():
        text = env.get(variable)
        if text is None or text == "":
            continue
        try:
            value = int(text.strip(), 0)
        except ValueError:
            problems.append(f"{variable}: {text!r} is not a whole number of seconds")
            continue
        if value < 0:
            problems.append(f"{variable}: {value} is negative")
            continue
        defaults[key] = value
    if problems:
        raise ConfigError("invalid environment defaults", problems)
    return defaults


def _path(location: tuple[int | str, ...]) -> str:
    # pydantic adds the name of a failing validator to the location; drop it.
    parts = [str(part) for part in location if not str(part).startswith("function-")]
    return ".".join(parts) or "(top level)"


def _reason(item: Mapping[str, Any]) -> str:
    message = str(item["msg"])
    if item["type"] == "extra_forbidden":
        return "unknown key (check its spelling)"
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return message


def read_file(path: str) -> bytes:
    """A configuration file's bytes, read no further than MAX_FILE_BYTES (`--config /dev/zero` ends at once)."""
    try:
        with open(path, "rb") as stream:
            content = stream.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror or error}") from error
    if len(content) > MAX_FILE_BYTES:
        raise ConfigError(
            f"config file {path} is larger than {MAX_FILE_BYTES // 1024} KiB; "
            "a configuration is a few KiB of JSON (is this the right file?)"
        )
    return content


FirestoreReader = Callable[[str, str | None], str]
"""Reads the JSON text of a Firestore document: (collection/document, database) -> text."""


@dataclass(frozen=True)
class Loaded:
    """A configuration and where it came from."""

    config: Config
    # "--config FILE", "firestore:collection/document", "COMPACTOR_CONFIG" or "defaults".
    source: str
    # The sources that were set but not used (an explicit --config passes over the function's own).
    ignored: tuple[str, ...] = ()

    def notice(self) -> str | None:
        """The sentence that says which source won when another one was set too, else None."""
        if not self.ignored:
            return None
        also = " and ".join(self.ignored)
        verb = "are" if len(self.ignored) > 1 else "is"
        return f"configuration from {self.source}; {also} {verb} also set and not used"


def load(
    env: Mapping[str, str],
    *,
    config_file: str | None = None,
    read_firestore: FirestoreReader | None = None,
    required: bool = True,
) -> Config:
    """The configuration from its source (DESIGN.md order: --config FILE, else Firestore, else COMPACTOR_CONFIG)."""
    return load_with_source(env, config_file=config_file, read_firestore=read_firestore, required=required).config


def load_with_source(
    env: Mapping[str, str],
    *,
    config_file: str | None = None,
    read_firestore: FirestoreReader | None = None,
    required: bool = True,
) -> Loaded:
    """The configuration and its source. An explicit `config_file` wins and is never passed over: a file
    that is missing or invalid is an error even when the environment holds a configuration."""
    document = env.get(ENV_FIRESTORE_DOCUMENT)
    env_text = env.get(ENV_CONFIG)
    if config_file is not None:
        ambient = [f"{ENV_FIRESTORE_DOCUMENT}={document}"] if document else []
        ambient += [ENV_CONFIG] if env_text else []
        loaded = parse(read_file(config_file), source=config_file, env=env)
        return Loaded(loaded, f"--config {config_file}", tuple(ambient))
    if document:
        if read_firestore is None:
            raise ConfigError(f"{ENV_FIRESTORE_DOCUMENT} is set but Firestore cannot be read from here")
        document_text = read_firestore(document, env.get(ENV_FIRESTORE_DATABASE) or None)
        ignored = (ENV_CONFIG,) if env_text else ()
        return Loaded(parse(document_text, source=f"firestore:{document}", env=env), f"firestore:{document}", ignored)
    if env_text:
        return Loaded(parse(env_text, source=ENV_CONFIG, env=env), ENV_CONFIG)
    if required:
        raise ConfigError(f"no configuration: pass --config FILE, or set {ENV_FIRESTORE_DOCUMENT} or {ENV_CONFIG}")
    return Loaded(validate({}, source="defaults", env=env), "defaults")
