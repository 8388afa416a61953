"""Turns Kubernetes JSON (Node, Pod, PodDisruptionBudget) into the planner's records.

One reader serves both the `plan --snapshot FILE` command (a `kubectl get
nodes,pods,poddisruptionbudgets -A -o json` List, cut into items and decoded
one item at a time, so a 300,000-pod file never sits in memory whole) and the
live reader, which hands it one page of a paginated list at a time.

The fast path decodes bytes straight into `compactor.kube.decoding`'s typed
Structs (only the fields the planner reads) and builds the records from them.
An object the Structs refuse, or whose values do not read (a bad quantity or
time), is read again as plain JSON by the functions that take mappings
(`parse_node`, `parse_pod`, `parse_pdb`, also used for single objects), which
either accept it or raise `SnapshotError` naming the object and the field.
Our own node annotations are kept verbatim: the planner judges their values
and explains what it makes of a bad one, instead of refusing the cluster.
"""

from __future__ import annotations

import gc
import io
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

import msgspec
import orjson

from compactor.core import requests as pod_requests
from compactor.core import timing
from compactor.core.model import (
    CREATED_AT,
    DELETION_COST,
    DO_NOT_DISRUPT,
    EMPTY,
    MIRROR_POD,
    PLACEHOLDER_LABEL,
    REPLACES,
    SAFE_TO_EVICT,
    STEERED_COST,
    ZERO,
    Claim,
    ComputeClass,
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
    PreferredTerm,
    ReplicaSet,
    Requirement,
    Resources,
    Snapshot,
    SpreadConstraint,
    Taint,
    Toleration,
)
from compactor.errors import SnapshotError
from compactor.kube import decoding, quantity, workloads

MAX_REPORTED_PROBLEMS = 20

_Record = TypeVar("_Record")
_Key = TypeVar("_Key", bytes, tuple[str, bytes])


class _FieldError(Exception):
    """A field that cannot be read; `path` is relative to the object."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# -- small typed accessors --------------------------------------------------------------


def _dict(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return EMPTY
    if not isinstance(value, dict):
        raise _FieldError(_join(path, key), f"expected an object, got {_kind_of(value)}")
    return value


def _list(parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _FieldError(_join(path, key), f"expected a list, got {_kind_of(value)}")
    return value


def _str(parent: Mapping[str, Any], key: str, path: str, default: str = "") -> str:
    value = parent.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _FieldError(_join(path, key), f"expected a string, got {_kind_of(value)}")
    return value


def _int(parent: Mapping[str, Any], key: str, path: str, default: int = 0) -> int:
    value = parent.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _FieldError(_join(path, key), f"expected an integer, got {_kind_of(value)}")
    return value


def _int_or_string(parent: Mapping[str, Any], key: str, path: str) -> str | None:
    """An IntOrString field as written ("1", "50%"); None when absent."""
    value = parent.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _FieldError(_join(path, key), f"expected an integer or a string, got {_kind_of(value)}")
    return str(value)


def _string_map(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, str]:
    value = _dict(parent, key, path)
    for name, item in value.items():
        if not isinstance(item, str):
            raise _FieldError(_join(path, key, name), f"expected a string, got {_kind_of(item)}")
    return value


def _join(*parts: str) -> str:
    return ".".join(part for part in parts if part)


def _kind_of(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"


# A cluster repeats a few hundred request maps and toleration lists across 150,000 pods:
# each is parsed once, and the pods share one immutable record (less time, less memory).
_CACHE_LIMIT = 20_000
_resources_cache: dict[tuple[tuple[str, Any], ...], Resources] = {}
_tolerations_cache: dict[tuple[tuple[tuple[str, Any], ...], ...], tuple[Toleration, ...]] = {}


def _cache_key(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...] | None:
    key = tuple(mapping.items())
    try:
        hash(key)
    except TypeError:
        return None  # a nested value: parse it the long way, which names the problem
    return key


def _resources(parent: Mapping[str, Any], key: str, path: str) -> Resources:
    return _amounts(_dict(parent, key, path), key, path)


def _amounts(amounts: Mapping[str, Any] | None, key: str, path: str) -> Resources:
    """A resource map (`requests`, `allocatable`, `overhead`) as a record, shared by equal maps."""
    if not amounts:
        return ZERO
    cache_key = _cache_key(amounts)
    if cache_key is not None:
        cached = _resources_cache.get(cache_key)
        if cached is not None:
            return cached
    parsed = _parse_resources(amounts, key, path)
    if cache_key is not None and len(_resources_cache) < _CACHE_LIMIT:
        _resources_cache[cache_key] = parsed
    return parsed


def _parse_resources(amounts: Mapping[str, Any], key: str, path: str) -> Resources:
    cpu = memory = 0
    extended: list[tuple[str, int]] = []
    for name, value in amounts.items():
        try:
            if name == "cpu":
                cpu = quantity.millis(value)
            elif name == "memory":
                memory = quantity.units(value)
            elif name != "pods":
                extended.append((sys.intern(name), quantity.millis(value)))
        except quantity.QuantityError as error:
            raise _FieldError(_join(path, key, name), str(error)) from error
    extended.sort()
    return Resources(cpu, memory, tuple(extended))


def _requirements(items: list[Any], path: str) -> tuple[Requirement, ...]:
    result = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise _FieldError(where, f"expected an object, got {_kind_of(item)}")
        values = _list(item, "values", where)
        if not all(isinstance(v, str) for v in values):
            raise _FieldError(_join(where, "values"), "expected a list of strings")
        operator = _str(item, "operator", where)
        if not operator:
            raise _FieldError(_join(where, "operator"), "missing")
        result.append(Requirement(_str(item, "key", where), operator, tuple(values)))
    return tuple(result)


def _label_selector(value: object, path: str) -> LabelSelector | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _FieldError(path, f"expected an object, got {_kind_of(value)}")
    match_labels = tuple(sorted(_string_map(value, "matchLabels", path).items()))
    expressions = _requirements(_list(value, "matchExpressions", path), _join(path, "matchExpressions"))
    return LabelSelector(match_labels, expressions)


# -- nodes ------------------------------------------------------------------------------------


def parse_node(obj: Mapping[str, Any]) -> Node:
    meta = _dict(obj, "metadata", "")
    name = _str(meta, "name", "metadata")
    if not name:
        raise _FieldError("metadata.name", "missing")
    try:
        return _node(obj, meta, name)
    except _FieldError as bad:
        raise SnapshotError(f"Node {name}: {bad}") from None


def _node(obj: Mapping[str, Any], meta: Mapping[str, Any], name: str) -> Node:
    spec = _dict(obj, "spec", "")
    status = _dict(obj, "status", "")
    allocatable = _resources(status, "allocatable", "status")
    pods_text = _dict(status, "allocatable", "status").get("pods")
    try:
        max_pods = quantity.units(pods_text) if pods_text is not None else 0
    except quantity.QuantityError as error:
        raise _FieldError("status.allocatable.pods", str(error)) from error
    taints = []
    for index, item in enumerate(_list(spec, "taints", "spec")):
        where = f"spec.taints[{index}]"
        if not isinstance(item, dict):
            raise _FieldError(where, f"expected an object, got {_kind_of(item)}")
        taints.append(Taint(_str(item, "key", where), _str(item, "value", where), _str(item, "effect", where)))
    ready = False
    for index, condition in enumerate(_list(status, "conditions", "status")):
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            ready = _str(condition, "status", f"status.conditions[{index}]") == "True"
    created_text = _str(meta, "creationTimestamp", "metadata")
    try:
        created = timing.parse_rfc3339(created_text) if created_text else None
    except ValueError:
        raise _FieldError("metadata.creationTimestamp", f"{created_text!r} is not an RFC 3339 time") from None
    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise _FieldError("spec.unschedulable", f"expected true or false, got {_kind_of(unschedulable)}")
    return Node(
        name=name,
        allocatable=allocatable,
        allocatable_pods=max_pods,
        labels=_string_map(meta, "labels", "metadata"),
        annotations=_string_map(meta, "annotations", "metadata"),
        taints=tuple(taints),
        unschedulable=unschedulable,
        ready=ready,
        created=created,
    )


# -- pods -------------------------------------------------------------------------------------


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    meta = _dict(obj, "metadata", "")
    name = _str(meta, "name", "metadata")
    namespace = _str(meta, "namespace", "metadata", "default")
    if not name:
        raise SnapshotError(f"Pod in namespace {namespace}: metadata.name: missing")
    try:
        return _pod(obj, meta, sys.intern(namespace), name)
    except _FieldError as bad:
        raise SnapshotError(f"Pod {namespace}/{name}: {bad}") from None


def _pod(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> Pod:
    spec = _dict(obj, "spec", "")
    status = _dict(obj, "status", "")
    annotations = _string_map(meta, "annotations", "metadata")

    controller_kind = controller_name = None
    for index, owner in enumerate(_list(meta, "ownerReferences", "metadata")):
        if isinstance(owner, dict) and owner.get("controller") is True:
            where = f"metadata.ownerReferences[{index}]"
            controller_kind = sys.intern(_str(owner, "kind", where))
            controller_name = _str(owner, "name", where)

    containers = _list(spec, "containers", "spec")
    app = [_container_requests(c, "containers", i) for i, c in enumerate(containers)]
    init_containers = _list(spec, "initContainers", "spec")
    overhead = _resources(spec, "overhead", "spec") if "overhead" in spec else ZERO
    if not init_containers and overhead is ZERO and len(app) == 1:
        requests = app[0]  # the common shape, without the general formula
    else:
        init = [
            (_container_requests(c, "initContainers", i), c.get("restartPolicy") == "Always")
            for i, c in enumerate(init_containers)
        ]
        requests = pod_requests.pod_requests(app, init, overhead)

    local_storage: list[str] = []
    pvc_names: list[str] = []
    for index, volume in enumerate(_list(spec, "volumes", "spec")):
        if not isinstance(volume, dict):
            raise _FieldError(f"spec.volumes[{index}]", f"expected an object, got {_kind_of(volume)}")
        volume_name = _str(volume, "name", f"spec.volumes[{index}]")
        if "hostPath" in volume:
            local_storage.append(volume_name)
        elif "emptyDir" in volume:
            empty_dir = volume["emptyDir"] or {}
            if not isinstance(empty_dir, dict) or empty_dir.get("medium") != "Memory":
                local_storage.append(volume_name)
        elif "persistentVolumeClaim" in volume:
            claim = _dict(volume, "persistentVolumeClaim", f"spec.volumes[{index}]")
            pvc_names.append(_str(claim, "claimName", f"spec.volumes[{index}].persistentVolumeClaim"))
        elif "ephemeral" in volume:
            # A generic ephemeral volume is a PVC named <pod>-<volume>, bound to a zone like any other.
            pvc_names.append(f"{name}-{volume_name}")

    safe_to_evict_text = annotations.get(SAFE_TO_EVICT)
    safe_to_evict = None if safe_to_evict_text is None else safe_to_evict_text.strip().lower() == "true"
    if safe_to_evict_text is not None and safe_to_evict_text.strip().lower() not in ("true", "false"):
        safe_to_evict = None
    deletion_cost, deletion_cost_set, steered = deletion_cost_of(annotations)

    node_name = _str(spec, "nodeName", "spec") or None
    unschedulable = False
    # Only a pod not bound to a node waits for room: a bound pod's conditions are not read.
    for condition in _list(status, "conditions", "status") if node_name is None else ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            unschedulable = True

    affinity = _dict(spec, "affinity", "spec")
    no_affinity: tuple[PodAffinityTerm, ...] = ()
    pod = Pod(
        namespace=namespace,
        name=name,
        node_name=node_name,
        phase=sys.intern(_str(status, "phase", "status", "Pending")),
        requests=requests,
        labels=_string_map(meta, "labels", "metadata"),
        controller_kind=controller_kind,
        controller_name=controller_name,
        # A static pod's mirror carries the annotation and is owned by its Node.
        is_mirror=MIRROR_POD in annotations or controller_kind == "Node",
        safe_to_evict=safe_to_evict,
        do_not_disrupt=annotations.get(DO_NOT_DISRUPT, "").strip().lower() == "true",
        deletion_cost=deletion_cost,
        deletion_cost_set=deletion_cost_set,
        steered=steered,
        priority=_int(spec, "priority", "spec"),
        local_storage=tuple(local_storage),
        pvc_names=tuple(pvc_names),
        tolerations=_tolerations(spec),
        node_selector=tuple(sorted(_string_map(spec, "nodeSelector", "spec").items())),
        node_affinity=_node_affinity(affinity) if affinity else None,
        preferred_node_affinity=_preferred_node_affinity(affinity) if affinity else (),
        host_ports=_host_ports(containers, init_containers),
        pod_affinity=_pod_affinity_terms(affinity, "podAffinity", namespace) if affinity else no_affinity,
        pod_anti_affinity=_pod_affinity_terms(affinity, "podAntiAffinity", namespace) if affinity else no_affinity,
        spread_constraints=_spread_constraints(spec) if "topologySpreadConstraints" in spec else (),
        unschedulable=unschedulable and node_name is None,
        terminating=meta.get("deletionTimestamp") is not None,
    )
    if controller_kind == "Job":  # a pool's jobPods "wait" says since when
        pod = msgspec.structs.replace(pod, created=timing.parse_stamp(_str(meta, "creationTimestamp", "metadata")))
    return _as_placeholder(pod, annotations) if REPLACES in annotations else pod


def _container_requests(container: object, kind: str, index: int) -> Resources:
    if not isinstance(container, dict):
        raise _FieldError(f"spec.{kind}[{index}]", f"expected an object, got {_kind_of(container)}")
    resources = container.get("resources")
    if isinstance(resources, dict):
        requests = resources.get("requests")
        if not requests:
            return ZERO
        if isinstance(requests, dict):
            cache_key = _cache_key(requests)
            cached = _resources_cache.get(cache_key) if cache_key is not None else None
            if cached is not None:
                return cached
    elif resources is None:
        return ZERO
    path = f"spec.{kind}[{index}]"
    return _resources(_dict(container, "resources", path), "requests", f"{path}.resources")


_NO_TOLERATIONS: tuple[Toleration, ...] = ()


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    return _tolerations_of(_list(spec, "tolerations", "spec"))


def _tolerations_of(items: list[Any] | None) -> tuple[Toleration, ...]:
    if not items:
        return _NO_TOLERATIONS
    keys = [_cache_key(item) if isinstance(item, dict) else None for item in items]
    if all(key is not None for key in keys):
        cache_key = tuple(key for key in keys if key is not None)
        cached = _tolerations_cache.get(cache_key)
        if cached is None:
            cached = _parse_tolerations(items)
            if len(_tolerations_cache) < _CACHE_LIMIT:
                _tolerations_cache[cache_key] = cached
        return cached
    return _parse_tolerations(items)


def _parse_tolerations(items: list[Any]) -> tuple[Toleration, ...]:
    result = []
    for index, item in enumerate(items):
        where = f"spec.tolerations[{index}]"
        if not isinstance(item, dict):
            raise _FieldError(where, f"expected an object, got {_kind_of(item)}")
        result.append(
            Toleration(
                _str(item, "key", where),
                _str(item, "operator", where, "Equal"),
                _str(item, "value", where),
                _str(item, "effect", where),
            )
        )
    return tuple(result)


def _node_affinity(affinity: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...] | None:
    node_affinity = _dict(affinity, "nodeAffinity", "spec.affinity")
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    if not isinstance(required, dict):
        raise _FieldError(path, f"expected an object, got {_kind_of(required)}")
    terms = []
    for index, term in enumerate(_list(required, "nodeSelectorTerms", path)):
        where = f"{path}.nodeSelectorTerms[{index}]"
        if not isinstance(term, dict):
            raise _FieldError(where, f"expected an object, got {_kind_of(term)}")
        terms.append(
            NodeSelectorTerm(
                _requirements(_list(term, "matchExpressions", where), f"{where}.matchExpressions"),
                _requirements(_list(term, "matchFields", where), f"{where}.matchFields"),
            )
        )
    return tuple(terms)


def _preferred_node_affinity(affinity: Mapping[str, Any]) -> tuple[PreferredTerm, ...]:
    node_affinity = _dict(affinity, "nodeAffinity", "spec.affinity")
    path = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    terms = []
    for index, item in enumerate(_list(node_affinity, "preferredDuringSchedulingIgnoredDuringExecution", path)):
        where = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise _FieldError(where, f"expected an object, got {_kind_of(item)}")
        preference = _dict(item, "preference", where)
        terms.append(
            PreferredTerm(
                _int(item, "weight", where),
                NodeSelectorTerm(
                    _requirements(_list(preference, "matchExpressions", where), f"{where}.preference.matchExpressions"),
                    _requirements(_list(preference, "matchFields", where), f"{where}.preference.matchFields"),
                ),
            )
        )
    return tuple(terms)


def _pod_affinity_terms(affinity: Mapping[str, Any], kind: str, namespace: str) -> tuple[PodAffinityTerm, ...]:
    section = _dict(affinity, kind, "spec.affinity")
    path = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
    items = _list(section, "requiredDuringSchedulingIgnoredDuringExecution", f"spec.affinity.{kind}")
    terms = []
    for index, term in enumerate(items):
        where = f"{path}[{index}]"
        if not isinstance(term, dict):
            raise _FieldError(where, f"expected an object, got {_kind_of(term)}")
        topology_key = _str(term, "topologyKey", where)
        if not topology_key:
            raise _FieldError(f"{where}.topologyKey", "missing")
        namespaces = _list(term, "namespaces", where)
        if not all(isinstance(n, str) for n in namespaces):
            raise _FieldError(f"{where}.namespaces", "expected a list of strings")
        namespace_selector = term.get("namespaceSelector")
        all_namespaces = namespace_selector is not None
        terms.append(
            PodAffinityTerm(
                selector=_label_selector(term.get("labelSelector"), f"{where}.labelSelector"),
                namespaces=tuple(namespaces) if namespaces or all_namespaces else (namespace,),
                all_namespaces=all_namespaces,
                topology_key=topology_key,
            )
        )
    return tuple(terms)


def _spread_constraints(spec: Mapping[str, Any]) -> tuple[SpreadConstraint, ...]:
    return _spread_constraints_of(_list(spec, "topologySpreadConstraints", "spec"))


def _spread_constraints_of(items: list[Any]) -> tuple[SpreadConstraint, ...]:
    result = []
    for index, item in enumerate(items):
        where = f"spec.topologySpreadConstraints[{index}]"
        if not isinstance(item, dict):
            raise _FieldError(where, f"expected an object, got {_kind_of(item)}")
        if _str(item, "whenUnsatisfiable", where, "DoNotSchedule") != "DoNotSchedule":
            continue
        result.append(
            SpreadConstraint(
                max_skew=max(1, _int(item, "maxSkew", where, 1)),
                topology_key=_str(item, "topologyKey", where),
                selector=_label_selector(item.get("labelSelector"), f"{where}.labelSelector"),
            )
        )
    return tuple(result)


def _host_ports(containers: list[Any], init_containers: list[Any]) -> tuple[HostPort, ...]:
    ports = []
    sidecars = [c for c in init_containers if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    for container in [*containers, *sidecars]:
        for index, port in enumerate(_list(container, "ports", "spec.containers[].ports")):
            if not isinstance(port, dict):
                continue
            host_port = port.get("hostPort")
            if isinstance(host_port, int) and not isinstance(host_port, bool) and host_port > 0:
                ports.append(
                    HostPort(
                        _str(port, "protocol", f"ports[{index}]", "TCP"),
                        host_port,
                        _str(port, "hostIP", f"ports[{index}]"),
                    )
                )
    return tuple(ports)


# -- PodDisruptionBudgets ----------------------------------------------------------------------


def parse_pdb(obj: Mapping[str, Any]) -> Pdb:
    meta = _dict(obj, "metadata", "")
    name = _str(meta, "name", "metadata")
    namespace = _str(meta, "namespace", "metadata", "default")
    try:
        spec = _dict(obj, "spec", "")
        status = _dict(obj, "status", "")
        return Pdb(
            namespace=namespace,
            name=name,
            selector=_label_selector(spec.get("selector"), "spec.selector"),
            # Missing status means the disruption controller has not counted yet: allow nothing.
            disruptions_allowed=_int(status, "disruptionsAllowed", "status", 0),
            min_available=_int_or_string(spec, "minAvailable", "spec"),
            max_unavailable=_int_or_string(spec, "maxUnavailable", "spec"),
        )
    except _FieldError as bad:
        raise SnapshotError(f"PodDisruptionBudget {namespace}/{name}: {bad}") from None


# -- the typed fast path ------------------------------------------------------------------------
#
# The same records from `compactor.kube.decoding`'s Structs, field for field as the functions above
# build them from dicts. The Structs only admit well-typed values; anything these functions
# cannot accept as it is (a bad quantity or time, an odd nested value) raises, and the object
# is read again the long way above, which names the object and the field.

_NO_METADATA = decoding.Metadata()
_NO_SPEC = decoding.Spec()
_NO_STATUS = decoding.Status()
_UNREADABLE = (_FieldError, quantity.QuantityError, ValueError, TypeError)
_UNSET = msgspec.UNSET


def _node_of(item: decoding.Item, recent: _Recent | None = None) -> Node:
    meta = item.metadata or _NO_METADATA
    if not meta.name:
        raise _FieldError("metadata.name", "missing")
    spec = item.spec or _NO_SPEC
    status = item.status or _NO_STATUS
    amounts = status.allocatable
    pods_text = amounts.get("pods") if amounts else None
    ready = False
    for condition in _conditions_of(status):
        if condition.type == "Ready":
            ready = condition.status == "True"
    return Node(
        name=meta.name,
        allocatable=_amounts(amounts, "allocatable", "status"),
        allocatable_pods=quantity.units(pods_text) if pods_text is not None else 0,
        labels=(decoding.LABELS.decode(meta.labels) or EMPTY) if meta.labels else EMPTY,
        annotations=meta.annotations if meta.annotations is not None else EMPTY,
        taints=tuple(Taint(t.key, t.value, t.effect) for t in spec.taints) if spec.taints else (),
        unschedulable=spec.unschedulable,
        ready=ready,
        created=timing.parse_rfc3339(meta.creationTimestamp) if meta.creationTimestamp else None,
    )


class _Recent:
    """The texts of the last pod read that pods share (labels, requests, tolerations, affinity), each
    with the record made of it. A List comes sorted by namespace and name, so the pods of a workload
    come one after another and mostly repeat the texts of the pod before: comparing a text in place
    (`msgspec.Raw` compares its bytes) costs less than copying it to look it up. Each builder has its
    own (it is filled by one thread); a text differing from the last is looked up as before."""

    __slots__ = ("affinity", "labels", "requests", "tolerations")

    def __init__(self) -> None:
        self.labels: tuple[msgspec.Raw | None, Mapping[str, str]] = (None, EMPTY)
        self.requests: tuple[list[msgspec.Raw | None] | None, Resources] = (None, ZERO)
        self.tolerations: tuple[msgspec.Raw | None, tuple[Toleration, ...]] = (None, ())
        self.affinity: tuple[str, msgspec.Raw | None, _Affinity] = ("", None, _NO_AFFINITY)


def _pod_of(item: decoding.Item, recent: _Recent | None = None) -> Pod:
    if recent is None:
        recent = _Recent()
    meta = item.metadata or _NO_METADATA
    name = meta.name
    if not name:
        raise _FieldError("metadata.name", "missing")
    namespace = sys.intern(meta.namespace)
    spec = item.spec or _NO_SPEC
    status = item.status or _NO_STATUS
    annotations = meta.annotations if meta.annotations is not None else EMPTY

    controller_kind = controller_name = None
    for owner in meta.ownerReferences or ():
        if owner.controller is True:
            controller_kind = sys.intern(owner.kind)
            controller_name = owner.name

    containers = spec.containers or _NO_CONTAINERS
    init_containers = spec.initContainers or _NO_CONTAINERS
    # The common pod (no init containers, no overhead) by the texts of its containers' requests:
    # one lookup for the whole pod, none when they are the last pod's texts.
    if init_containers or spec.overhead:
        requests = _requests_of_pod(containers, init_containers, spec.overhead)
    else:
        raws = [None if c.resources is None else c.resources.requests for c in containers]
        last_raws, requests = recent.requests
        if raws != last_raws:
            texts = tuple([b"" if raw is None else bytes(raw) for raw in raws])
            known = _requests_by_texts.get(texts)
            if known is None:
                known = _requests_of_pod(containers, init_containers, spec.overhead)
                if len(_requests_by_texts) < _CACHE_LIMIT:
                    _requests_by_texts[texts] = known
            requests = known
            recent.requests = (raws, requests)

    local_storage: list[str] = []
    pvc_names: list[str] = []
    for volume in spec.volumes or ():
        if volume.hostPath is not _UNSET:
            local_storage.append(volume.name)
        elif volume.emptyDir is not _UNSET:
            empty_dir = volume.emptyDir or {}
            if not isinstance(empty_dir, dict) or empty_dir.get("medium") != "Memory":
                local_storage.append(volume.name)
        elif volume.persistentVolumeClaim is not _UNSET:
            claim = volume.persistentVolumeClaim
            claim_name = claim.get("claimName") if isinstance(claim, dict) else _unreadable(claim)
            pvc_names.append("" if claim_name is None else claim_name if isinstance(claim_name, str) else _unreadable())
        elif volume.ephemeral is not _UNSET:
            pvc_names.append(f"{name}-{volume.name}")

    safe_to_evict = None
    do_not_disrupt = False
    deletion_cost = 0
    deletion_cost_set = steered = False
    is_mirror = controller_kind == "Node"
    if annotations:  # most pods carry none of the annotations read here
        safe_to_evict_text = annotations.get(SAFE_TO_EVICT)
        if safe_to_evict_text is not None and safe_to_evict_text.strip().lower() in ("true", "false"):
            safe_to_evict = safe_to_evict_text.strip().lower() == "true"
        if DELETION_COST in annotations:
            deletion_cost, deletion_cost_set, steered = deletion_cost_of(annotations)
        do_not_disrupt_text = annotations.get(DO_NOT_DISRUPT)
        do_not_disrupt = do_not_disrupt_text is not None and do_not_disrupt_text.strip().lower() == "true"
        is_mirror = is_mirror or MIRROR_POD in annotations

    unschedulable = False
    if not spec.nodeName:  # only a pod not bound to a node waits for room; a bound one's are not read
        for condition in _conditions_of(status):
            if condition.type == "PodScheduled" and condition.status == "False" and condition.reason == "Unschedulable":
                unschedulable = True

    node_affinity, preferred_node_affinity, pod_affinity, pod_anti_affinity = _NO_AFFINITY
    raw = spec.affinity
    if raw:
        last_namespace, last_raw, affinity = recent.affinity
        if namespace != last_namespace or raw != last_raw:
            text = bytes(raw)
            # The namespace is read only by pod (anti)affinity terms: node affinity alone, as every
            # DaemonSet pod has, is shared across namespaces (a text with an escape may spell a key any way).
            key = (namespace if b"podA" in text or b"\\u" in text else "", text)
            affinity = _affinity_by_text.get(key) or _shared(
                _affinity_by_text, key, lambda v: _affinity_from(v, namespace)
            )
            recent.affinity = (namespace, raw, affinity)
        node_affinity, preferred_node_affinity, pod_affinity, pod_anti_affinity = affinity
    tolerations = _NO_TOLERATIONS
    raw = spec.tolerations
    if raw:
        last_raw, tolerations = recent.tolerations
        if raw != last_raw:
            text = bytes(raw)
            tolerations = _tolerations_by_text.get(text) or _shared(_tolerations_by_text, text, _tolerations_from)
            recent.tolerations = (raw, tolerations)
    spread = spec.topologySpreadConstraints
    spread_constraints = () if spread is _UNSET else _shared(_spread_by_text, bytes(spread), _spread_constraints_from)
    node_name = spec.nodeName or None
    labels: Mapping[str, str] = EMPTY
    raw = meta.labels
    if raw:
        last_raw, labels = recent.labels
        if raw != last_raw:
            labels_text = bytes(raw)
            shared = _labels_by_text.get(labels_text)  # an empty map is kept too: `is None`, not falsy
            labels = shared if shared is not None else _shared_labels(labels_text)
            recent.labels = (raw, labels)
    # Positional, in the order of Pod's fields: a Struct matches keyword arguments by name, which
    # costs more than the rest of making the record. A field out of place shows in
    # test_the_typed_path_reads_every_object_as_the_long_way_does (the long way names them).
    pod = Pod(
        namespace,
        name,
        node_name,
        sys.intern(status.phase),  # phase
        requests,
        labels,
        controller_kind,
        controller_name,
        is_mirror,
        safe_to_evict,
        do_not_disrupt,
        deletion_cost,
        deletion_cost_set,
        steered,
        spec.priority,
        tuple(local_storage) if local_storage else (),
        tuple(pvc_names) if pvc_names else (),
        tolerations,
        tuple(sorted(spec.nodeSelector.items())) if spec.nodeSelector else (),  # node_selector
        node_affinity,
        _host_ports_of(containers, init_containers),
        pod_affinity,
        pod_anti_affinity,
        spread_constraints,
        unschedulable and node_name is None,  # unschedulable
        meta.deletionTimestamp is not None,  # terminating
    )
    if controller_kind == "Job" and meta.creationTimestamp:  # a pool's jobPods "wait" says since when
        pod = msgspec.structs.replace(pod, created=timing.parse_stamp(meta.creationTimestamp))
    if preferred_node_affinity:  # few pods have it: the common record is made without naming the field
        pod = msgspec.structs.replace(pod, preferred_node_affinity=preferred_node_affinity)
    if annotations and REPLACES in annotations:  # a placeholder carries the annotation; others almost never
        return _as_placeholder(pod, annotations)
    return pod


def _as_placeholder(pod: Pod, annotations: Mapping[str, str]) -> Pod:
    """A pod labelled as node replacement's placeholder, with what its annotations say (`core.replacement`);
    any other pod as it is (the annotation alone makes no placeholder)."""
    if pod.labels.get(PLACEHOLDER_LABEL) != "true":
        return pod
    replaces = tuple(name.strip() for name in annotations.get(REPLACES, "").split(",") if name.strip())
    return msgspec.structs.replace(pod, placeholder=Placeholder(replaces, annotations.get(CREATED_AT)))


def deletion_cost_of(annotations: Mapping[str, str]) -> tuple[int, bool, bool]:
    """The pod's own pod-deletion-cost, whether the annotation is there, and whether node-compactor
    wrote it (`STEERED_COST` holds the same text): then the pod's own cost is 0, the default."""
    text = annotations.get(DELETION_COST)
    if text is None:
        return 0, False, False
    if annotations.get(STEERED_COST) == text:
        return 0, True, True
    try:
        return int(text), True, False
    except ValueError:
        return 0, True, False  # the ReplicaSet controller ignores an unreadable cost too


def _conditions_of(status: decoding.Status) -> list[decoding.Condition]:
    return (decoding.CONDITIONS.decode(status.conditions) or []) if status.conditions else []


def _requests_of_pod(
    containers: list[decoding.Container], init_containers: list[decoding.Container], overhead_amounts: Any
) -> Resources:
    app = tuple([_requests_of(container) for container in containers])
    overhead = _amounts(overhead_amounts, "overhead", "spec") if overhead_amounts else ZERO
    if not init_containers and overhead is ZERO and len(app) == 1:
        return app[0]
    init = tuple([(_requests_of(c), c.restartPolicy == "Always") for c in init_containers])
    formula_key = (app, init, overhead)
    shared = _pod_requests_cache.get(formula_key)
    if shared is None:
        shared = pod_requests.pod_requests(app, init, overhead)
        if len(_pod_requests_cache) < _CACHE_LIMIT:
            _pod_requests_cache[formula_key] = shared
    return shared


def _requests_of(container: decoding.Container) -> Resources:
    resources = container.resources
    if resources is None or not resources.requests:
        return ZERO
    text = bytes(resources.requests)
    found = _requests_by_text.get(text)
    return found if found is not None else _shared(_requests_by_text, text, _requests_from)


_NO_CONTAINERS: list[decoding.Container] = []


_Affinity = tuple[
    tuple[NodeSelectorTerm, ...] | None,
    tuple[PreferredTerm, ...],
    tuple[PodAffinityTerm, ...],
    tuple[PodAffinityTerm, ...],
]
_NO_AFFINITY: _Affinity = (None, (), (), ())


# Records by the JSON text they came from: thousands of pods repeat the same text.
_requests_by_text: dict[bytes, Resources] = {}
_tolerations_by_text: dict[bytes, tuple[Toleration, ...]] = {}
_spread_by_text: dict[bytes, tuple[SpreadConstraint, ...]] = {}
_affinity_by_text: dict[tuple[str, bytes], _Affinity] = {}
_pod_requests_cache: dict[tuple[Any, ...], Resources] = {}
_requests_by_texts: dict[tuple[bytes, ...], Resources] = {}
_labels_by_text: dict[bytes, Mapping[str, str]] = {}


def _shared_labels(text: bytes) -> Mapping[str, str]:
    """The labels map of this text, one for every pod that carries the same text (records never
    change a map they were given)."""
    labels = decoding.LABELS.decode(text) or EMPTY
    if len(_labels_by_text) < _CACHE_LIMIT:
        _labels_by_text[text] = labels
    return labels


def _shared(cache: dict[_Key, _Record], text: _Key, build: Callable[[object], _Record]) -> _Record:
    found = cache.get(text)
    if found is None:
        found = build(decoding.ANY.decode(text if isinstance(text, bytes) else text[1]))
        if len(cache) < _CACHE_LIMIT:
            cache[text] = found
    return found


def _requests_from(value: object) -> Resources:
    if not value:
        return ZERO  # as the long way reads an empty or null `requests`
    if not isinstance(value, dict):
        raise _FieldError("spec.containers[].resources.requests", f"expected an object, got {_kind_of(value)}")
    return _amounts(value, "requests", "spec.containers[].resources")


def _tolerations_from(value: object) -> tuple[Toleration, ...]:
    return _tolerations_of(_as_list(value, "spec.tolerations"))


def _spread_constraints_from(value: object) -> tuple[SpreadConstraint, ...]:
    return _spread_constraints_of(_as_list(value, "spec.topologySpreadConstraints"))


def _affinity_from(value: object, namespace: str) -> _Affinity:
    """Shared per namespace too: pod affinity terms without namespaces mean the pod's own."""
    if not value:
        return _NO_AFFINITY
    if not isinstance(value, dict):
        raise _FieldError("spec.affinity", f"expected an object, got {_kind_of(value)}")
    return (
        _node_affinity(value),
        _preferred_node_affinity(value),
        _pod_affinity_terms(value, "podAffinity", namespace),
        _pod_affinity_terms(value, "podAntiAffinity", namespace),
    )


def _as_list(value: object, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _FieldError(path, f"expected a list, got {_kind_of(value)}")
    return value


def _host_ports_of(
    containers: list[decoding.Container], init_containers: list[decoding.Container]
) -> tuple[HostPort, ...]:
    ports = []
    for container in containers:
        for port in container.ports or ():
            if port.hostPort > 0:
                ports.append(HostPort(port.protocol, port.hostPort, port.hostIP))
    for container in init_containers:
        if container.restartPolicy == "Always":
            for port in container.ports or ():
                if port.hostPort > 0:
                    ports.append(HostPort(port.protocol, port.hostPort, port.hostIP))
    return tuple(ports)


def _pdb_of(item: decoding.Item, recent: _Recent | None = None) -> Pdb:
    meta = item.metadata or _NO_METADATA
    spec = item.spec or _NO_SPEC
    return Pdb(
        namespace=meta.namespace,
        name=meta.name,
        selector=_label_selector(spec.selector, "spec.selector"),
        disruptions_allowed=(item.status or _NO_STATUS).disruptionsAllowed,
        min_available=None if spec.minAvailable is None else str(spec.minAvailable),
        max_unavailable=None if spec.maxUnavailable is None else str(spec.maxUnavailable),
    )


def _unreadable(value: object = None) -> Any:
    """A value the fast path leaves to the long way (None included: the long way decides)."""
    raise _FieldError("", f"unexpected {_kind_of(value)}")


def parse_compute_class(obj: Mapping[str, Any]) -> ComputeClass:
    """A GKE ComputeClass: its name, `spec.autoscalingPolicy.consolidationThreshold` and
    `consolidationDelayMinutes`.

    Never raises: a threshold that is not a whole percent from 0 to 100 (the CRD's type and range) is
    kept as a `problem`, which `core.coexistence` reports and ignores; a delay that is not a whole number
    of minutes from 1 to 1440 (the CRD's range) reads as unset. No other field is read."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    name = name if isinstance(name, str) else ""
    spec = obj.get("spec")
    policy = spec.get("autoscalingPolicy") if isinstance(spec, Mapping) else None
    value = policy.get("consolidationThreshold") if isinstance(policy, Mapping) else None
    if not name:
        return ComputeClass("", None, "it has no metadata.name")
    if value is None:
        return ComputeClass(name, None)
    if isinstance(value, bool) or not isinstance(value, int):
        return ComputeClass(
            name, None, f"spec.autoscalingPolicy.consolidationThreshold {value!r} is not a whole percent"
        )
    if not 0 <= value <= 100:
        return ComputeClass(name, None, f"spec.autoscalingPolicy.consolidationThreshold {value} is outside 0 to 100")
    delay = policy.get("consolidationDelayMinutes") if isinstance(policy, Mapping) else None
    minutes = delay if isinstance(delay, int) and not isinstance(delay, bool) and 1 <= delay <= 1440 else None
    return ComputeClass(name, value, consolidation_delay_minutes=minutes)


# Kinds read from plain JSON only (few objects, fields of their own).
_PLAIN_KINDS = frozenset({"ComputeClass"})


_TYPED_BY_KIND: dict[str, tuple[Callable[[decoding.Item, _Recent], Any], Callable[[Mapping[str, Any]], Any], str]] = {
    "Node": (_node_of, parse_node, "nodes"),
    "Pod": (_pod_of, parse_pod, "pods"),
    "PodDisruptionBudget": (_pdb_of, parse_pdb, "pdbs"),
}


# -- whole snapshots --------------------------------------------------------------------------


@dataclass
class SnapshotBuilder:
    """Collects records from any number of pages; collects every problem before failing."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    pdbs: list[Pdb] = field(default_factory=list)
    # Read for pools with surgeSingleReplicas (`compactor.kube.workloads`).
    deployments: list[Deployment] = field(default_factory=list)
    replica_sets: list[ReplicaSet] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    # GKE ComputeClasses (`core.coexistence`), and why they could not be read (None when they were).
    compute_classes: list[ComputeClass] = field(default_factory=list)
    compute_classes_unread: str | None = None
    problems: list[str] = field(default_factory=list)
    _recent: _Recent = field(default_factory=_Recent, init=False, repr=False)
    # Changes a streaming list sent before its initial events ended (MODIFIED, DELETED): by attribute,
    # (position in that list when it came, key deleted or None for a replacement). Settled in `build`.
    _changes: dict[str, list[tuple[int, object]]] = field(default_factory=dict, init=False, repr=False)

    def add_nodes(self, items: Iterable[Mapping[str, Any]]) -> None:
        self._add(items, parse_node, self.nodes, "Node")

    def add_pods(self, items: Iterable[Mapping[str, Any]]) -> None:
        self._add(items, parse_pod, self.pods, "Pod")

    def add_pdbs(self, items: Iterable[Mapping[str, Any]]) -> None:
        self._add(items, parse_pdb, self.pdbs, "PodDisruptionBudget")

    def add_mixed(self, items: Iterable[object]) -> int:
        """Items of a kubectl `List`: dispatched on `kind`, other kinds ignored. Returns the count."""
        index = -1
        for index, item in enumerate(items):
            self._dispatch(item, index)
        return index + 1

    def add_encoded_items(self, batch: bytes, first_index: int) -> int:
        """Items of a kubectl `List` given as a JSON array of them, through the typed fast path.

        `first_index` is the first one's index in the List (for messages). Returns the count.
        Raises `decoding.DecodeError` when `batch` is not JSON at all (the caller knows the file)."""
        try:
            items = decoding.ITEMS.decode(batch)
        except (decoding.ValidationError, RecursionError):
            raws = decoding.RAW_ITEMS.decode(batch)
            for offset, raw in enumerate(raws):
                self.add_encoded_item(raw, first_index + offset)
            return len(raws)
        unread = []
        add_pod = self.pods.append
        recent = self._recent
        for offset, item in enumerate(items):
            if item.kind == "Pod":  # nine items in ten: without the general dispatch
                try:
                    add_pod(_pod_of(item, recent))
                except _UNREADABLE:
                    unread.append(offset)
            elif not self._add_typed(item, first_index + offset):
                unread.append(offset)
        if unread:
            raws = decoding.RAW_ITEMS.decode(batch)
            for offset in unread:
                self._dispatch(_decode_any(raws[offset], f"items[{first_index + offset}]"), first_index + offset)
        return len(items)

    def add_encoded_item(self, raw: bytes, index: int) -> None:
        """One item of a kubectl `List` as its JSON text; see `add_encoded_items`."""
        try:
            item = decoding.ITEM.decode(raw)
        except (decoding.ValidationError, RecursionError):
            item = None
        if item is None or not self._add_typed(item, index):
            self._dispatch(_decode_any(raw, f"items[{index}]"), index)

    def _add_typed(self, item: decoding.Item, index: int) -> bool:
        """False when the item must be read the long way, which names what is wrong with it."""
        if item.kind is None:
            self._problem(f"items[{index}]: no kind")
            return True
        typed = _TYPED_BY_KIND.get(item.kind)
        if typed is None:
            # Those are read from plain JSON; any other kind: ignored.
            return item.kind not in workloads.KINDS and item.kind not in _PLAIN_KINDS
        convert, _, attribute = typed
        try:
            getattr(self, attribute).append(convert(item, self._recent))
        except _UNREADABLE:
            return False
        return True

    def add_page(self, kind: str, page: bytes, *, what: str) -> None:
        """One page of a list answer (`NodeList`, `PodList`, ...) of `kind`, as the API server sent it."""
        convert, parse, attribute = _TYPED_BY_KIND[kind]
        into: list[Any] = getattr(self, attribute)
        try:
            decoded = decoding.PAGE.decode(page)
            if decoded.items is not None:
                recent = self._recent
                into.extend([convert(item, recent) for item in decoded.items])
                return
        except (decoding.DecodeError, RecursionError, *_UNREADABLE):
            pass
        # The long way, which names what is wrong (or accepts what the typed Structs were too strict for).
        try:
            document = decoding.ANY.decode(page)
        except RecursionError:
            raise SnapshotError(f"cannot {what}: the answer is {_TOO_DEEP}") from None
        except decoding.DecodeError as error:
            raise SnapshotError(f"cannot {what}: the API server sent invalid JSON ({error})") from error
        if not isinstance(document, dict) or not isinstance(document.get("items"), list):
            raise SnapshotError(f"cannot {what}: the answer is not a list")
        self._add(document["items"], parse, into, kind)

    def add_typed(self, kind: str, items: list[decoding.Item]) -> bool:
        """Decoded items of `kind`, all or none: False when one must be read the long way (`add_object`)."""
        convert, _, attribute = _TYPED_BY_KIND[kind]
        recent = self._recent
        try:
            records = [convert(item, recent) for item in items]
        except _UNREADABLE:
            return False
        getattr(self, attribute).extend(records)
        return True

    def add_object(self, kind: str, raw: bytes, *, what: str, replaces: bool = False) -> None:
        """One object of `kind` as its JSON text (a watch event's); with `replaces`, a newer copy of one added before.

        Typed when it can be, else the long way, which names what is wrong with it.
        """
        convert, parse, attribute = _TYPED_BY_KIND[kind]
        into: list[Any] = getattr(self, attribute)
        if replaces:
            self._changes.setdefault(attribute, []).append((len(into), None))
        try:
            into.append(convert(decoding.ITEM.decode(raw), self._recent))
            return
        except (decoding.DecodeError, RecursionError, *_UNREADABLE):
            pass
        document = _decode_any(raw, f"{kind} in {what}")
        if isinstance(document, _Undecodable):
            self._problem(document.message)
        elif not isinstance(document, dict):
            self._problem(f"{kind} in {what}: expected an object, got {_kind_of(document)}")
        else:
            self._one(document, parse, into, f"{kind} in {what}")

    def remove_object(self, kind: str, namespace: str | None, name: str) -> None:
        """Forget an object of `kind` added before (a watch's DELETED event): settled in `build`."""
        attribute = _TYPED_BY_KIND[kind][2]
        key: object = name if kind == "Node" else (namespace or "default", name)
        self._changes.setdefault(attribute, []).append((len(getattr(self, attribute)), key))

    def build(self, pool_autoscaling: Mapping[str, PoolAutoscaling] | None = None) -> Snapshot:
        for attribute, changes in self._changes.items():
            setattr(self, attribute, _settled(getattr(self, attribute), changes))
        self._changes.clear()
        if self.problems:
            raise SnapshotError(
                f"the cluster snapshot has {len(self.problems)} unreadable object(s)", list(self.problems)
            )
        pods = tuple(self.pods)
        placeholders = tuple([pod for pod in pods if pod.placeholder is not None])
        if placeholders:
            pods = tuple([pod for pod in pods if pod.placeholder is None])
        snapshot = Snapshot(tuple(self.nodes), pods, tuple(self.pdbs), placeholders=placeholders)
        if pool_autoscaling is not None:
            snapshot = msgspec.structs.replace(snapshot, pool_autoscaling=pool_autoscaling)
        if self.deployments or self.replica_sets or self.claims:
            snapshot = msgspec.structs.replace(
                snapshot,
                deployments=tuple(self.deployments),
                replica_sets=tuple(self.replica_sets),
                claims=tuple(self.claims),
            )
        if self.compute_classes or self.compute_classes_unread is not None:
            snapshot = msgspec.structs.replace(
                snapshot,
                compute_classes=tuple(self.compute_classes),
                compute_classes_unread=self.compute_classes_unread,
            )
        return snapshot

    def add_compute_classes(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The items of a ComputeClass list page (GKE's cloud.google.com/v1 `computeclasses`)."""
        self.compute_classes.extend(parse_compute_class(item) for item in items)

    def add_workload_page(self, kind: str, page: bytes, *, what: str) -> None:
        """One page of a list answer of Deployments, ReplicaSets or PersistentVolumeClaims (`workloads`)."""
        getattr(self, workloads.KINDS[kind]).extend(workloads.parse_page(kind, page, what=what))

    def _add(self, items: Iterable[Mapping[str, Any]], parse: Any, into: list[Any], kind: str) -> None:
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                self._problem(f"{kind} list item {index}: expected an object, got {_kind_of(item)}")
                continue
            self._one(item, parse, into, f"{kind} list item {index}")

    def _dispatch(self, item: object, index: int) -> None:
        if not isinstance(item, dict):
            if isinstance(item, _Undecodable):
                self._problem(item.message)
            else:
                self._problem(f"items[{index}]: expected an object, got {_kind_of(item)}")
            return
        kind = item.get("kind")
        if kind == "Pod":
            self._one(item, parse_pod, self.pods, f"Pod items[{index}]")
        elif kind == "Node":
            self._one(item, parse_node, self.nodes, f"Node items[{index}]")
        elif kind == "PodDisruptionBudget":
            self._one(item, parse_pdb, self.pdbs, f"PodDisruptionBudget items[{index}]")
        elif kind == "ComputeClass":
            self.compute_classes.append(parse_compute_class(item))
        elif isinstance(kind, str) and kind in workloads.KINDS:
            try:
                getattr(self, workloads.KINDS[kind]).append(workloads.parse(kind, item))
            except SnapshotError as error:
                self._problem(error.message)
        elif not isinstance(kind, str):
            self._problem(f"items[{index}]: no kind")

    def _one(self, item: Mapping[str, Any], parse: Any, into: list[Any], where: str | None = None) -> None:
        """`where` names an item whose own fields cannot (a list page's items carry no kind)."""
        try:
            into.append(parse(item))
        except SnapshotError as error:
            self._problem(error.message)
        except _FieldError as bad:
            self._problem(f"{where or item.get('kind', 'object')}: {bad}")

    def _problem(self, message: str) -> None:
        if len(self.problems) < MAX_REPORTED_PROBLEMS:
            self.problems.append(message)
        elif len(self.problems) == MAX_REPORTED_PROBLEMS:
            self.problems.append("... more problems not shown")


def _settled(records: list[Any], changes: list[tuple[int, object]]) -> list[Any]:
    """The records as they stand after a stream's changes: each object's last copy, in the place of its first,
    without those deleted after their last copy came. Runs only when a stream sent a change."""
    first_at: dict[object, int] = {}
    last: dict[object, tuple[int, Any]] = {}
    for index, record in enumerate(records):
        key: object = record.name if isinstance(record, Node) else (record.namespace, record.name)
        first_at.setdefault(key, index)
        last[key] = (index, record)
    for position, deleted in changes:
        if deleted is not None and deleted in last and last[deleted][0] < position:
            del last[deleted]
    return [record for key, (_, record) in sorted(last.items(), key=lambda kept: first_at[kept[0]])]


@dataclass(frozen=True)
class _Undecodable:
    """An item that is valid JSON syntax but cannot be decoded (too deep, a number out of range)."""

    message: str


_TOO_DEEP = (
    f"nested too deeply (the decoder stops at {sys.getrecursionlimit():,} levels; Kubernetes objects use a few dozen)"
)


def _decode_any(raw: bytes, where: str) -> object:
    """`raw` as plain JSON values; too deep is a problem of this item, not JSON is the caller's."""
    try:
        return decoding.ANY.decode(raw)
    except RecursionError:
        return _Undecodable(f"{where}: {_TOO_DEEP}")


def read_file(path: str) -> Snapshot:
    """Read what `kubectl get nodes,pods,poddisruptionbudgets -A -o json` prints."""
    try:
        with open(path, "rb") as stream:
            return read_stream(stream, name=path)
    except OSError as error:
        raise SnapshotError(f"cannot read snapshot {path}: {error.strerror or error}") from error


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic collector while parsing: it would rescan the growing heap of fresh dicts
    again and again, and parsed Kubernetes JSON makes no reference cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_stream(stream: BinaryIO, *, name: str = "snapshot") -> Snapshot:
    """A kubectl `List` from `stream`: item by item when kubectl laid it out, else as one document."""
    with paused_gc():
        head = stream.read(_HEAD_BYTES)
        _check_looks_like_json_object(head, name)
        match = _ITEMS_START.search(head)
        if match is not None:
            builder = SnapshotBuilder()
            try:
                count = 0
                for batch in _item_batches(stream, head, match):
                    count += builder.add_encoded_items(batch, count)
                return builder.build()
            except (_UnexpectedLayoutError, decoding.DecodeError, RecursionError):
                pass  # read again as one document, which says what is wrong with it
        size = stream.seek(0, io.SEEK_END)
        stream.seek(0)
        if size > MAX_DOCUMENT_BYTES:
            raise SnapshotError(
                f"{name}: {size / 1e6:,.0f} MB of JSON not laid out as kubectl prints it (indented, one item "
                f"after another); a file over {MAX_DOCUMENT_BYTES / 2**30:g} GiB is read only in kubectl's layout, "
                f"so that memory stays bounded: save the List again with "
                f"`kubectl get nodes,pods,poddisruptionbudgets -A -o json`"
            )
        return _read_document(stream.read(), name)


def read_items(path: str) -> list[Any] | None:
    """The `items` of the kubectl List in `path` as plain JSON values, read item by item when kubectl laid the
    file out, at any size (what `simulate --snapshot` models from); None when the file is not in that layout or
    its items do not decode, for the caller to read it as one document, which says what is wrong with it."""
    try:
        with open(path, "rb") as stream, paused_gc():
            head = stream.read(_HEAD_BYTES)
            match = _ITEMS_START.search(head)
            if match is None:
                return None
            items: list[Any] = []
            for batch in _item_batches(stream, head, match):
                items.extend(orjson.loads(batch))
            return items
    except (OSError, _UnexpectedLayoutError, orjson.JSONDecodeError, RecursionError):
        return None


# A file not laid out as kubectl prints it is decoded as one document, so it must fit in memory
# next to its records; kubectl's own output is read item by item at any size.
MAX_DOCUMENT_BYTES = 1 << 30
_HEAD_BYTES = 1 << 20


def _check_looks_like_json_object(head: bytes, name: str) -> None:
    """Refuse at once what is not a JSON object at all (a binary file, YAML, a bare array)."""
    text = head.lstrip(_WHITESPACE)
    if text.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark, as some editors write
        text = text[3:].lstrip(_WHITESPACE)
    if not text:
        raise SnapshotError(f"{name}: the file is empty; {_EXPECTED}")
    if text[:1] == b"[":
        raise SnapshotError(f"{name}: expected a List with an `items` array, found a bare array; {_EXPECTED}")
    if text[:1] != b"{":
        shown = text[:24].decode("utf-8", "replace")
        raise SnapshotError(f"{name}: not valid JSON: it starts with {shown!r}; {_EXPECTED}")


_EXPECTED = "expected what `kubectl get nodes,pods,poddisruptionbudgets -A -o json` prints"


def _read_document(content: bytes, name: str) -> Snapshot:
    try:
        document = decoding.DOCUMENT.decode(content)
    except RecursionError:
        raise SnapshotError(f"{name}: {_TOO_DEEP}") from None
    except decoding.ValidationError:
        raise SnapshotError(f"{name}: expected a List with an `items` array (kubectl get ... -o json)") from None
    except decoding.DecodeError as error:
        raise SnapshotError(f"{name}: not valid JSON ({error})") from error
    if document.items is msgspec.UNSET:
        raise SnapshotError(f"{name}: expected a List with an `items` array (kubectl get ... -o json)")
    builder = SnapshotBuilder()
    for index, raw in enumerate(document.items):
        try:
            builder.add_encoded_item(raw, index)
        except decoding.DecodeError as error:
            raise SnapshotError(f"{name}: items[{index}]: {error}") from error
    return builder.build()


# -- the fast path for pretty-printed lists ---------------------------------------------------
#
# kubectl prints JSON indented. A JSON string cannot hold a raw newline, so in such
# a file a line made of exactly the items' indentation and "}" can only close an
# item: each read is cut after its last complete item (bytes.rfind) and those items
# are decoded together, so a 300,000-pod file never sits in memory whole. Anything unexpected (an item that is
# not JSON, a stray separator, another layout) sends the whole file to the one-document
# path instead, which reads any valid JSON and names what is wrong.

_ITEMS_START = re.compile(rb'"items"\s*:\s*\[[ \t\r]*\n( +)\{')
_CHUNK = 1 << 18  # small reads keep the decoded batch in the CPU caches and the peak low
_WHITESPACE = b" \t\r\n"


class _UnexpectedLayoutError(Exception):
    pass


def _item_batches(stream: BinaryIO, buffer: bytes, match: re.Match[bytes]) -> Iterator[bytes]:
    """The items as JSON arrays of whole items, about one read's worth each."""
    closer = b"\n" + match.group(1) + b"}"
    prefix = buffer[: buffer.index(b"[", match.start())]
    position = match.end() - 1
    while True:
        end = buffer.rfind(closer, position)
        while end < 0:
            more = stream.read(_CHUNK)
            if not more:
                raise _UnexpectedLayoutError
            buffer, position = buffer[position:] + more, 0
            end = buffer.rfind(closer, position)
        stop = end + len(closer)
        yield b"".join((b"[", memoryview(buffer)[position:stop], b"]"))  # one copy, not two
        buffer, index = _significant(stream, buffer, stop)
        if buffer[index : index + 1] == b"]":
            _check_outside_items(prefix, buffer[index + 1 :] + stream.read())
            return
        if buffer[index : index + 1] != b",":
            raise _UnexpectedLayoutError
        buffer, position = _significant(stream, buffer, index + 1)
        if buffer[position : position + 1] != b"{":
            raise _UnexpectedLayoutError
        if buffer.find(closer, position) < 0:
            more = stream.read(_CHUNK)
            if more:
                buffer, position = buffer[position:] + more, 0


def _significant(stream: BinaryIO, buffer: bytes, index: int) -> tuple[bytes, int]:
    """The buffer and the index of its next byte that is not white space, reading more as needed."""
    while True:
        while index < len(buffer) and buffer[index] in _WHITESPACE:
            index += 1
        if index < len(buffer):
            return buffer, index
        more = stream.read(_CHUNK)
        if not more:
            raise _UnexpectedLayoutError
        buffer, index = buffer[index:] + more, 0


def _check_outside_items(prefix: bytes, suffix: bytes) -> None:
    """What surrounds the items must itself be a JSON object, as the one-document path would insist."""
    try:
        document = decoding.ANY.decode(prefix + b"[]" + suffix)
    except (decoding.DecodeError, RecursionError):
        raise _UnexpectedLayoutError from None
    if not isinstance(document, dict):
        raise _UnexpectedLayoutError
