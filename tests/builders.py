"""Small builders of planner records for unit tests: `make_node(cpu="4")`, `make_pod(node="n1", cpu="500m")`.

Defaults describe the common case (a Ready, old, marked-long-ago node in an
enabled pool; a ReplicaSet pod), so each test states only what it is about.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from compactor.core import planner, proof
from compactor.core.model import (
    PLACEHOLDER_LABEL,
    REPLACEMENT_LABEL,
    UNDERUTILIZED_SINCE,
    Claim,
    Deployment,
    HostPort,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pdb,
    Placeholder,
    Pod,
    PodAffinityTerm,
    PoolAutoscaling,
    ReplicaSet,
    Requirement,
    Resources,
    Snapshot,
    SpreadConstraint,
    Taint,
    Toleration,
)
from compactor.core.plan import NodeReport, Plan
from compactor.core.timing import format_stamp
from compactor.kube import quantity
from compactor.settings import config as config_module
from compactor.settings.config import Config

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=7)
POOL = "default-pool"


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def stamp(moment: datetime) -> str:
    return format_stamp(moment)


def resources(cpu: str = "0", memory: str = "0", **extended: str) -> Resources:
    return Resources(
        quantity.millis(cpu),
        quantity.units(memory),
        tuple(sorted((name.replace("__", "/").replace("_", "."), quantity.millis(v)) for name, v in extended.items())),
    )


def make_node(
    name: str = "n1",
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: int = 110,
    pool: str | None = POOL,
    zone: str = "zone-a",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    marked_since: datetime | None = LONG_AGO,
    taints: Iterable[Taint] = (),
    unschedulable: bool = False,
    ready: bool = True,
    created: datetime | None = LONG_AGO,
    extended: Mapping[str, str] | None = None,
) -> Node:
    all_labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    if pool is not None:
        all_labels["cloud.google.com/gke-nodepool"] = pool
    all_labels.update(labels or {})
    all_annotations = dict(annotations or {})
    if marked_since is not None:
        all_annotations.setdefault(UNDERUTILIZED_SINCE, stamp(marked_since))
    allocatable = Resources(
        quantity.millis(cpu),
        quantity.units(memory),
        tuple(sorted((k, quantity.millis(v)) for k, v in (extended or {}).items())),
    )
    return Node(
        name=name,
        allocatable=allocatable,
        allocatable_pods=pods,
        labels=all_labels,
        annotations=all_annotations,
        taints=tuple(taints),
        unschedulable=unschedulable,
        ready=ready,
        created=created,
    )


def make_pod(
    name: str = "p1",
    *,
    node: str | None = "n1",
    namespace: str = "default",
    cpu: str = "100m",
    memory: str = "128Mi",
    extended: Mapping[str, str] | None = None,
    owner: str | None = "ReplicaSet",
    labels: Mapping[str, str] | None = None,
    **fields: Any,
) -> Pod:
    requests = Resources(
        quantity.millis(cpu),
        quantity.units(memory),
        tuple(sorted((k, quantity.millis(v)) for k, v in (extended or {}).items())),
    )
    return Pod(
        namespace=namespace,
        name=name,
        node_name=node,
        phase=fields.pop("phase", "Running"),
        requests=requests,
        labels=dict(labels or {"app": name.split("-")[0]}),
        controller_kind=owner,
        controller_name=f"{name}-owner" if owner else None,
        **fields,
    )


def make_placeholder(
    name: str,
    replaces: tuple[str, ...],
    *,
    node: str | None = None,
    created: float = 60,
    phase: str | None = None,
    cpu: str = "4",
    pool: str = "small-pool",
    replacement: str | None = None,
) -> Pod:
    """Node replacement's placeholder pod in node-compactor's namespace, made `created` seconds ago, selecting
    `pool`; Running when bound to `node`; labelled with its replacement's id unless made before several new nodes
    (`replacement` None)."""
    labels = {PLACEHOLDER_LABEL: "true"}
    if replacement is not None:
        labels[REPLACEMENT_LABEL] = replacement
    return make_pod(
        name,
        node=node,
        namespace="node-compactor",
        owner=None,
        cpu=cpu,
        memory="4Gi",
        labels=labels,
        phase=phase or ("Running" if node else "Pending"),
        node_selector=(("cloud.google.com/gke-nodepool", pool),),
        placeholder=Placeholder(replaces, stamp(ago(created))),
    )


def make_pdb(name: str = "pdb", *, namespace: str = "default", match: Mapping[str, str], allowed: int = 1) -> Pdb:
    return Pdb(namespace, name, LabelSelector(tuple(sorted(match.items()))), allowed)


def toleration(key: str = "", value: str = "", effect: str = "", operator: str = "Equal") -> Toleration:
    return Toleration(key, operator, value, effect)


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Taint:
    return Taint(key, value, effect)


def anti_affinity(match: Mapping[str, str], topology_key: str = "kubernetes.io/hostname") -> PodAffinityTerm:
    return PodAffinityTerm(LabelSelector(tuple(sorted(match.items()))), ("default",), False, topology_key)


def affinity_term(match: Mapping[str, str], topology_key: str = "kubernetes.io/hostname") -> PodAffinityTerm:
    return anti_affinity(match, topology_key)


def node_affinity(key: str, operator: str, *values: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm((Requirement(key, operator, values),)),)


def spread(match: Mapping[str, str], key: str = "topology.kubernetes.io/zone", max_skew: int = 1) -> SpreadConstraint:
    return SpreadConstraint(max_skew, key, LabelSelector(tuple(sorted(match.items()))))


def host_port(port: int, protocol: str = "TCP", host_ip: str = "") -> HostPort:
    return HostPort(protocol, port, host_ip)


def make_config(*, pools: Mapping[str, Mapping[str, Any]] | None = None, **top: Any) -> Config:
    """Default: `default-pool` enabled with no waiting, so each test switches on only what it is about."""
    pool_settings: dict[str, Any] = {
        "enabled": True,
        "scaleDownCPURequestRatioLimit": 0.75,
        "neededMarkedTimeSeconds": 300,
        "minimumNodeAgeSeconds": 1200,
        "minNodes": 1,
        "scaleUpCooldownSeconds": 600,
    }
    data: dict[str, Any] = {"nodePools": {POOL: pool_settings}}
    if pools is not None:
        data["nodePools"] = {name: {**pool_settings, **settings} for name, settings in pools.items()}
    data.update(top)
    return config_module.validate(data, source="test")


def make_snapshot(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    pdbs: Iterable[Pdb] = (),
    pool_autoscaling: Mapping[str, PoolAutoscaling] | None = None,
) -> Snapshot:
    snapshot = Snapshot(tuple(nodes), tuple(pods), tuple(pdbs))
    if pool_autoscaling is not None:
        snapshot = Snapshot(snapshot.nodes, snapshot.pods, snapshot.pdbs, dict(pool_autoscaling))
    return snapshot


def run_plan(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    pdbs: Iterable[Pdb] = (),
    *,
    config: Config | None = None,
    now: datetime = NOW,
    pool_autoscaling: Mapping[str, PoolAutoscaling] | None = None,
) -> Plan:
    return planner.plan(make_snapshot(nodes, pods, pdbs, pool_autoscaling), config or make_config(), now=now)


def node_report(plan: Plan, name: str) -> NodeReport:
    return next(node for node in plan.nodes if node.name == name)


def blockers_of(plan: Plan, name: str) -> str:
    """All blockers of a node in one string, for `in` assertions."""
    return " | ".join(node_report(plan, name).blockers)


def busy(name: str, node: str, cpu: str = "3", memory: str = "1Gi", **fields: Any) -> Pod:
    """A pod that fills a node enough that it is not underutilized."""
    return make_pod(name, node=node, cpu=cpu, memory=memory, **fields)


def base_nodes(**light: Any) -> list[Node]:
    """n1 is light (a candidate; `light` sets its fields), n2 and n3 are 75% busy with 1 cpu free each."""
    return [make_node("n1", **light), make_node("n2", marked_since=None), make_node("n3", marked_since=None)]


def base_pods() -> list[Pod]:
    """The pods that keep n2 and n3 of `base_nodes` busy."""
    return [busy("b2", "n2"), busy("b3", "n3")]


def make_deployment(
    name: str = "web",
    *,
    namespace: str = "default",
    replicas: int = 1,
    strategy: str = "RollingUpdate",
    max_surge: str | None = "1",
    max_unavailable: str | None = "0",
    **fields: Any,
) -> Deployment:
    """A settled Deployment (observed, every replica updated and available) that surges by default."""
    settled: dict[str, Any] = {
        "paused": False,
        "generation": 2,
        "observed_generation": 2,
        "status_replicas": replicas,
        "updated_replicas": replicas,
        "available_replicas": replicas,
    }
    settled.update(fields)
    return Deployment(namespace, name, replicas, strategy, max_surge, max_unavailable, **settled)


def make_replica_set(
    name: str = "web-5d8f7", *, deployment: str | None = "web", namespace: str = "default", replicas: int = 1
) -> ReplicaSet:
    return ReplicaSet(namespace, name, deployment, replicas, replicas)


def make_claim(
    name: str = "data",
    *,
    namespace: str = "default",
    modes: Iterable[str] = ("ReadWriteOnce",),
    owner_pod: str | None = None,
) -> Claim:
    return Claim(namespace, name, tuple(modes), owner_pod)


def counting_proofs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every node `proof.prove` is called for from now on, in order (the test's monkeypatch undoes it)."""
    proved: list[str] = []
    real = proof.prove

    def counted(view: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
        proved.append(state.name)
        return real(view, state, *args, **kwargs)

    monkeypatch.setattr(proof, "prove", counted)
    return proved
