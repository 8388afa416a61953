"""The HPA floor's records and decisions: plain frozen data, no I/O.

Annotation names are estafette-k8s-hpa-scaler's (read unchanged) and ours
(`node-compactor.dev/hpa-*`, the state we keep on the HPA).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# estafette-k8s-hpa-scaler's annotations (main.go), read unchanged.
ENABLED = "estafette.io/hpa-scaler"
PROMETHEUS_QUERY = "estafette.io/hpa-scaler-prometheus-query"
REQUESTS_PER_REPLICA = "estafette.io/hpa-scaler-requests-per-replica"
DELTA = "estafette.io/hpa-scaler-delta"
PROMETHEUS_SERVER_URL = "estafette.io/hpa-scaler-prometheus-server-url"
SCALE_DOWN_MAX_RATIO = "estafette.io/hpa-scaler-scale-down-max-ratio"
ROLLOUT_CHECK = "estafette.io/hpa-scaler-enable-scale-down-ratio-deployment-checking"
# estafette's own record of what it did: we never write it.
ESTAFETTE_STATE = "estafette.io/hpa-scaler-state"
# kube-downscaler's annotations: an HPA it manages is left alone.
DOWNSCALER_PREFIX = "downscaler/"

# Ours.
BASE_MIN_REPLICAS = "node-compactor.dev/hpa-base-min-replicas"
MIN_REPLICAS_REASON = "node-compactor.dev/hpa-min-replicas-reason"

DEFAULT_LOWER_BOUND = 3  # estafette's MINIMUM_REPLICAS_LOWER_BOUND default


@dataclass(frozen=True, slots=True)
class Hpa:
    """One autoscaling/v2 HorizontalPodAutoscaler, as much of it as the floors need."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    min_replicas: int  # spec.minReplicas (the API server defaults it to 1)
    max_replicas: int
    current_replicas: int | None  # status.currentReplicas; None before the controller reported
    target_kind: str
    target_name: str
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Cluster:
    """What a run reads: the HPAs, and per Deployment how many of its ReplicaSets have replicas."""

    hpas: tuple[Hpa, ...]
    # (namespace, Deployment name) -> ReplicaSets it controls with status.replicas > 0.
    active_replica_sets: Mapping[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Settings:
    """The job's settings (environment variables, estafette's names where it has one)."""

    lower_bound: int = DEFAULT_LOWER_BOUND
    # Hosts (`host` or `host:port`) a per-HPA prometheus-server-url may name.
    allowed_hosts: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Query:
    """One instant query; `server` None is the default endpoint (Managed Prometheus or PROMETHEUS_SERVER_URL)."""

    server: str | None
    query: str


@dataclass(frozen=True, slots=True)
class Answer:
    """A query's value, or why there is none (`problem`)."""

    value: float | None = None
    problem: str | None = None

    @staticmethod
    def failed(problem: str) -> Answer:
        return Answer(None, problem)


Action = Literal["raise", "lower", "restore", "none", "skip", "fail"]


@dataclass(frozen=True, slots=True)
class Floor:
    """One floor: its value when it applies (None when it does not) and how it was found."""

    name: Literal["query", "ratio", "lowerBound", "base"]
    value: int | None
    detail: str
    result: float | None = None  # the query's value, for the query floor


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one HPA and why; `patch` is the JSON merge patch to send, None for no write."""

    hpa: Hpa
    action: Action
    new_min_replicas: int | None
    reason: str
    floors: tuple[Floor, ...] = ()
    capped: bool = False
    problems: tuple[str, ...] = ()
    patch: Mapping[str, Any] | None = None

    @property
    def enabled(self) -> bool:
        return self.hpa.annotations.get(ENABLED) == "true"


@dataclass(frozen=True, slots=True)
class Plan:
    decisions: tuple[Decision, ...]

    def count(self, action: Action) -> int:
        return sum(1 for decision in self.decisions if decision.action == action)
