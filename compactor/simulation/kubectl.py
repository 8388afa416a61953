"""A simulation that starts from a kubectl snapshot (`kubectl get nodes,pods,poddisruptionbudgets -A -o json`).

The snapshot's nodes, pods and PodDisruptionBudgets are the starting
cluster as they are, annotations included. What the file cannot say is
inferred, and documented in docs/savings.md: every pool's machine is its
largest node, with `minNodes` 1 and `maxNodes` twice its size (at least 10
more); DaemonSet and static pods are stamped onto new nodes from the ones
seen in the pool; every owner keeps the replica count it has (a day of
constant load; a scenario file describes a changing one). A pod without an
owner is never recreated.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

from compactor.core import coexistence, timing
from compactor.core.model import MIRROR_POD
from compactor.errors import SnapshotError
from compactor.kube import integrity
from compactor.kube import snapshot as parsing
from compactor.settings import config as config_module
from compactor.settings import jsonfiles
from compactor.settings.config import Config
from compactor.simulation import objects, prices
from compactor.simulation.model import (
    AutoscalerSettings,
    Curve,
    DaemonSetSpec,
    JsonObject,
    PoolSpec,
    Setup,
    WorkloadSpec,
)
from compactor.simulation.scenario import default_config
from compactor.simulation.world import owner_of

NODE_SPECIFIC_LABELS = ("kubernetes.io/hostname", objects.ZONE_LABEL, "failure-domain.beta.kubernetes.io/zone")
# What `plan --snapshot` reads as one document when it is not in kubectl's layout (compactor.kube.snapshot).
MAX_SNAPSHOT_BYTES = 1 << 30
TRANSIENT_TAINTS = ("node.kubernetes.io/", "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler")


def load(path: str, *, config: Config | None, hours: float) -> Setup:
    """The Setup a kubectl snapshot describes: read item by item when kubectl laid it out (any size, as
    `plan --snapshot` reads it), else as one document of at most `MAX_SNAPSHOT_BYTES`."""
    items = parsing.read_items(path)
    if items is None:
        data = jsonfiles.read_object(path, what="snapshot", limit=MAX_SNAPSHOT_BYTES, error=SnapshotError)
        if not isinstance(data.get("items"), list):
            raise SnapshotError(f"{path}: expected a List with an `items` array (kubectl get ... -o json)")
        items = data["items"]
    builder = parsing.SnapshotBuilder()
    builder.add_mixed(items)
    parsed = builder.build()  # every problem at once, before anything else
    nodes = [item for item in items if isinstance(item, dict) and item.get("kind") == "Node"]
    pods = [
        item
        for item in items
        if isinstance(item, dict)
        and item.get("kind") == "Pod"
        and (item.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    pdbs = [item for item in items if isinstance(item, dict) and item.get("kind") == "PodDisruptionBudget"]
    if not nodes:
        raise SnapshotError(integrity.no_nodes_problem(path, len(pods), "simulate"))
    pool_label = config.pool_label if config is not None else config_module.DEFAULT_POOL_LABEL
    pool_of_node = {node["metadata"]["name"]: (node["metadata"].get("labels") or {}).get(pool_label) for node in nodes}
    pools = _pools(nodes, pool_label)
    if config is None:
        config = default_config([pool.name for pool in pools], pool_label)
    table = prices.table_for(config)
    return Setup(
        name=path.rsplit("/", 1)[-1],
        description=f"{len(nodes)} nodes and {len(pods)} pods from {path}, each owner at its current replica count",
        seed=1,
        start=_start(nodes, pods),
        hours=hours,
        warmup_hours=0,
        step_seconds=60,
        night_plateau=None,
        pools=pools,
        daemonsets=_daemonsets(pods, pool_of_node),
        workloads=_workloads(pods, pool_of_node),
        cronjobs=(),
        pdbs=tuple(pdbs),
        autoscaler=AutoscalerSettings(),
        config=config,
        initial_nodes=tuple(nodes),
        initial_pods=tuple(pods),
        source=path,
        compute_classes=coexistence.class_thresholds(parsed, pool_label),
        compute_class_delays=coexistence.class_delays(parsed, pool_label),
        prices=prices.of_pools(pools, config, table),
        currency=table.currency,
    )


def _start(nodes: list[JsonObject], pods: list[JsonObject]) -> datetime:
    """The snapshot's moment: its newest object, to the next whole minute."""
    newest = datetime(1970, 1, 1, tzinfo=UTC)
    for obj in [*nodes, *pods]:
        text = (obj.get("metadata") or {}).get("creationTimestamp")
        if isinstance(text, str):
            try:
                newest = max(newest, timing.parse_rfc3339(text))
            except ValueError:
                continue
    return newest.replace(second=0, microsecond=0) + timedelta(minutes=1)


def _pools(nodes: list[JsonObject], pool_label: str) -> tuple[PoolSpec, ...]:
    members: dict[str, list[JsonObject]] = defaultdict(list)
    for node in nodes:
        pool = (node["metadata"].get("labels") or {}).get(pool_label)
        if pool is not None:
            members[pool].append(node)
    pools = []
    for name, group in sorted(members.items()):
        largest = max(group, key=lambda n: parsing.parse_node(n).allocatable.cpu_millis)
        labels = dict(largest["metadata"].get("labels") or {})
        for node in group:
            node_labels = node["metadata"].get("labels") or {}
            labels = {k: v for k, v in labels.items() if node_labels.get(k) == v}
        for key in (*NODE_SPECIFIC_LABELS, pool_label, objects.INSTANCE_TYPE_LABEL, "topology.kubernetes.io/region"):
            labels.pop(key, None)
        taints = [
            t
            for t in (largest.get("spec") or {}).get("taints") or []
            if not str(t.get("key", "")).startswith(TRANSIENT_TAINTS)
        ]
        zones = sorted({parsing.parse_node(node).zone or "zone-unknown" for node in group})
        pools.append(
            PoolSpec(
                name=name,
                machine_type=(largest["metadata"].get("labels") or {}).get(objects.INSTANCE_TYPE_LABEL, "unknown"),
                allocatable={k: str(v) for k, v in ((largest.get("status") or {}).get("allocatable") or {}).items()},
                zones=tuple(zones),
                min_nodes=1,
                max_nodes=max(2 * len(group), len(group) + 10),
                labels=labels,
                taints=tuple(copy.deepcopy(taints)),
            )
        )
    return tuple(pools)


def _template(pod: JsonObject) -> JsonObject:
    template = copy.deepcopy(pod)
    metadata = template["metadata"]
    for key in ("name", "uid", "resourceVersion", "creationTimestamp", "ownerReferences", "generateName"):
        metadata.pop(key, None)
    spec = template.get("spec") or {}
    spec.pop("nodeName", None)
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        term.pop("matchFields", None)  # a DaemonSet pod's pin to its node
    template["status"] = {"phase": "Pending"}
    return template


def _daemonsets(pods: list[JsonObject], pool_of_node: dict[str, str | None]) -> tuple[DaemonSetSpec, ...]:
    found: dict[tuple[str, str, bool], tuple[JsonObject, set[str]]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        owner = owner_of(pod)
        mirror = MIRROR_POD in (pod["metadata"].get("annotations") or {})
        if mirror and node:
            name = pod["metadata"]["name"].removesuffix(f"-{node}")
            key = (pod["metadata"].get("namespace", "default"), name, True)
        elif owner is not None and owner[1] == "DaemonSet":
            key = (owner[0], owner[2], False)
        else:
            continue
        _, pools = found.setdefault(key, (_template(pod), set()))
        pool = pool_of_node.get(node or "")
        if pool is not None:
            pools.add(pool)
    return tuple(
        DaemonSetSpec(namespace=ns, name=name, template=template, pools=tuple(sorted(pools)), mirror=mirror)
        for (ns, name, mirror), (template, pools) in sorted(found.items())
    )


def _workloads(pods: list[JsonObject], pool_of_node: dict[str, str | None]) -> tuple[WorkloadSpec, ...]:
    groups: dict[tuple[str, str, str], list[JsonObject]] = defaultdict(list)
    for pod in pods:
        owner = owner_of(pod)
        if owner is None or owner[1] in ("DaemonSet", "Node"):
            continue
        if MIRROR_POD in (pod["metadata"].get("annotations") or {}):
            continue
        groups[owner].append(pod)
    workloads = []
    for (namespace, kind, name), members in sorted(groups.items()):
        pools: Counter[str] = Counter()
        for pod in members:
            pool = pool_of_node.get((pod.get("spec") or {}).get("nodeName") or "")
            if pool is not None:
                pools[pool] += 1
        claims: list[str] = []
        if kind == "StatefulSet":
            first = members[0]
            for volume in (first.get("spec") or {}).get("volumes") or []:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName", "")
                suffix = f"-{first['metadata']['name']}"
                if claim.endswith(suffix):
                    claims.append(volume["name"])
        workloads.append(
            WorkloadSpec(
                namespace=namespace,
                owner_kind=kind,
                owner_name=name,
                template=_template(members[0]),
                replicas=Curve.constant(len(members)),
                pool=pools.most_common(1)[0][0] if pools else None,
                ordinal=kind == "StatefulSet" and all(_ordinal(p, name) for p in members),
                claims=tuple(claims),
            )
        )
    return tuple(workloads)


def _ordinal(pod: JsonObject, owner: str) -> bool:
    name: str = pod["metadata"]["name"]
    return name.removeprefix(f"{owner}-").isdigit()
