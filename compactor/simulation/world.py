"""The simulated cluster: Node, Pod and PodDisruptionBudget objects as Kubernetes JSON, and the API's rules.

Objects are stored as the API server would return them, with a
resourceVersion counter, and each also as the planner's parsed record
(`compactor.kube.snapshot`), kept in step so a snapshot costs no parsing. Objects
are replaced on every change, never mutated in place, so a dict handed out
stays valid. The API's rules live here: a merge patch with a resourceVersion
precondition, and the Eviction API, which refuses what a
PodDisruptionBudget does not allow (the disruption controller's arithmetic:
expected pods from the owners' scale, minAvailable and maxUnavailable as
numbers or percentages rounded up, unhealthy pods evictable while the budget
holds). A direct DELETE is never refused; one a budget did not allow counts
as a violation. A pod created through the API (`create_pod`: node
replacement's placeholders) goes through the Priority admission plugin: a
pod naming a PriorityClass gets its value and preemptionPolicy
(`PRIORITY_CLASSES`, the one class the model knows). Placeholder pods are
kept apart in the snapshot the planner reads, as `compactor.kube.snapshot`
keeps them (`snapshot(placeholders_apart=True)`); the scheduler and the
Cluster Autoscaler see them as the pods they are.

Not thread-safe: `port.SimulatedCluster` serializes the executor's calls.
"""

from __future__ import annotations

import bisect
import copy
import math
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from msgspec import structs

from compactor.core import spread
from compactor.core.cluster import ClusterView, Grouped, NodeState, node_state, pending_groups
from compactor.core.model import (
    PLACEHOLDER_PRIORITY_CLASS,
    TERMINAL_PHASES,
    Deployment,
    Node,
    Pdb,
    Pod,
    PoolAutoscaling,
    ReplicaSet,
    Snapshot,
)
from compactor.core.prices.pricing import SPOT_LABEL
from compactor.core.selectors import selector_matches
from compactor.core.timing import format_stamp
from compactor.kube import snapshot as parsing
from compactor.kube.answers import ConflictError, EvictionResult, NotFoundError
from compactor.settings.config import Config
from compactor.simulation import availability, objects
from compactor.simulation.metrics import Recorder
from compactor.simulation.model import JsonObject, PoolSpec

OwnerKey = tuple[str, str, str]  # namespace, kind, name
READY_LONG_AGO = timedelta(hours=1)


class ReadyTimes(dict[str, datetime]):
    """When each pod is (or was) Ready, by pod key, which also answers "the first Ready time after `at`"
    without reading every pod's: the times are kept sorted beside the mapping.

    A replaced or removed time stays in the sorted list until it is met, where it is passed over (its key
    maps to another time, or to none), and the list is made again once those outnumber the rest.
    """

    def __init__(self) -> None:
        super().__init__()
        self._sorted: list[tuple[datetime, str]] = []
        self._stale = 0

    def __setitem__(self, key: str, ready: datetime) -> None:
        if key in self:
            self._stale += 1
        super().__setitem__(key, ready)
        bisect.insort(self._sorted, (ready, key))

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._stale += 1

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            self._stale += 1
        return super().pop(key, *default)

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy (`copy.deepcopy`, pickling) is made from the mapping alone, its sorted list made again: the
        # default would set the items before the attributes exist, or add each to the copied list a second time.
        return (_ready_times, (dict(self),))

    def first_after(self, at: datetime) -> datetime | None:
        """The earliest time in the mapping later than `at` (`min` over the values later than it)."""
        if self._stale > len(self):
            self._sorted = sorted((ready, key) for key, ready in self.items())
            self._stale = 0
        entries = self._sorted
        index = bisect.bisect_right(entries, at, key=operator.itemgetter(0))
        get = self.get
        while index < len(entries):
            ready, key = entries[index]
            if get(key) == ready:
                return ready
            index += 1
        return None


def _ready_times(times: dict[str, datetime]) -> ReadyTimes:
    made = ReadyTimes()
    dict.update(made, times)
    made._sorted = sorted((ready, key) for key, ready in times.items())
    return made


# The PriorityClasses of the modelled cluster: name -> (value, preemptionPolicy). Only node replacement's,
# as deploy/replacement.yaml (and terraform) create it; the scenarios' pods set spec.priority themselves.
PRIORITY_CLASSES: dict[str, tuple[int, str]] = {PLACEHOLDER_PRIORITY_CLASS: (-10, "Never")}
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"


def pod_key(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    return f"{metadata.get('namespace', 'default')}/{metadata['name']}"


def owner_of(obj: Mapping[str, Any]) -> OwnerKey | None:
    metadata = obj["metadata"]
    for owner in metadata.get("ownerReferences") or ():
        if owner.get("controller") is True:
            return (metadata.get("namespace", "default"), owner["kind"], owner["name"])
    return None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new object and leaves both arguments alone."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class World:
    def __init__(self, *, start: datetime, pool_label: str, pools: Sequence[PoolSpec]) -> None:
        self.now = start
        self.pool_label = pool_label
        # A scenario with `autoCreation` is a cluster where GKE creates pools (node auto-provisioning).
        creates = any(pool.auto_created for pool in pools)
        self.pool_autoscaling = {pool.name: _autoscaling(pool, pool_label, creates) for pool in pools}
        self.recorder = Recorder()
        self._resource_version = 0
        # Bumped by every change to the objects, their bookkeeping or the recorder's counts: a loop that leaves
        # it (and the actors' own state) as it found it changed nothing (`runner.Cluster.step` skips the
        # loops after it until a timer is due).
        self.changes = 0
        self.nodes: dict[str, JsonObject] = {}
        self._node_records: dict[str, Node] = {}
        self.pods: dict[str, JsonObject] = {}
        self._pod_records: dict[str, Pod] = {}
        self._on_node: dict[str, dict[str, None]] = defaultdict(dict)
        # The change count at the last change to a node's pods (one bound there, removed, or its record replaced):
        # a node unchanged since the last view keeps its state in the next (`view`).
        self._pods_changed: dict[str, int] = {}
        self._labels: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}  # each labels map pods share
        self._pending: dict[str, None] = {}
        self._placeholders: dict[str, None] = {}  # node replacement's placeholder pods (`Pod.placeholder`)
        self._by_owner: dict[OwnerKey, dict[str, None]] = defaultdict(dict)
        # The owners a pod was added to or taken from since the controllers last reconciled (they empty it).
        self.owners_moved: set[OwnerKey] = set()
        self._owner: dict[str, OwnerKey] = {}
        self._seq: dict[str, int] = {}
        self._next_seq = 0
        self.bound_at: dict[str, datetime] = {}
        self.ready_at = ReadyTimes()
        self.created_at: dict[str, datetime] = {}  # metadata.creationTimestamp, read by the ReplicaSet's scale-in order
        self.startup: dict[str, int] = {}
        self.finish_at: dict[str, datetime] = {}  # Job pods, once running
        self.runtime: dict[str, float] = {}  # Job pods: seconds of work each must do
        self.displaced_by: dict[str, str] = {}  # replacement pod -> the actor that disrupted its predecessor
        self._tried: set[str] = set()  # displaced pods that already had a scheduling attempt
        self.owed: dict[OwnerKey, list[str]] = defaultdict(list)  # owner -> actors of its disrupted pods
        self.disrupted: list[OwnerKey] = []  # owners of disrupted pods, in the order it happened
        self.pool_hint: dict[str, str] = {}
        self.pvc_zone: dict[tuple[str, str], str] = {}
        self.scales: dict[OwnerKey, int] = {}
        self.pdbs: dict[str, JsonObject] = {}
        self._pdb_records: dict[str, Pdb] = {}
        self._pdb_members: dict[str, dict[str, None]] = {}
        # Per PDB, a count of the changes to its members or to which workload their owners belong, and its members
        # counted by workload as of that count (`_compute_budget`).
        self._pdb_membership: dict[str, int] = {}
        self._pdb_owners: dict[str, tuple[int, dict[OwnerKey | None, int]]] = {}
        # What a budget is computed from changes only with these: each PDB's version, moved when a member comes or
        # goes, is bound (its Ready time set) or an owner of its members is scaled; the PDBs of each pod; the PDBs
        # whose members an owner (or the Deployment it is part of) has had.
        self._pdb_version: dict[str, int] = {}
        self._pod_pdbs: dict[str, list[str]] = {}
        self._owner_pdbs: defaultdict[OwnerKey, set[str]] = defaultdict(set)
        self.events: list[tuple[datetime, str, str, str]] = []
        # A Deployment's ReplicaSets -> the Deployment (`rollouts.link_owner`): one workload for PDBs and
        # `availability`; and the Deployments and ReplicaSets a snapshot carries (set when a strategy reads them).
        self._workload: dict[OwnerKey, OwnerKey] = {}
        self._parts: dict[OwnerKey, list[OwnerKey]] = {}
        self.workload_records: Callable[[datetime], tuple[tuple[Deployment, ...], tuple[ReplicaSet, ...]]] | None = None
        # Each budget as last computed (`_budget`): its PDB's version and the moment it was computed at, its
        # figures, and when the next of its pods turns Ready after that moment (None: none will).
        self._budgets: dict[str, tuple[int, datetime, tuple[int, int, int] | None, datetime | None]] = {}
        # Budgets touched in all (`_touch`), and the last snapshot's budgets: (the touches then, the moment they
        # were found for, the first moment after it a member turns Ready, the budgets), the same while no budget
        # was touched and no member turned Ready (`_pdbs_at`).
        self._touches = 0
        self._pdbs_found: tuple[int, datetime, datetime | None, tuple[Pdb, ...]] | None = None
        # The last view made for each configuration (`view`): the changes count and moment, the view, and
        # when the next pod turns Ready after that moment (computed when first asked).
        self._views: dict[int, _View] = {}
        # Each PDB's record and its last snapshot object (`_pdb_snapshot`).
        self._pdb_snapshots: dict[str, tuple[Pdb, Pdb]] = {}

    # -- bookkeeping --------------------------------------------------------------------------

    def _bump(self) -> str:
        self._resource_version += 1
        self.changes += 1
        return str(self._resource_version)

    def _patched(self, current: JsonObject | None, patch: Mapping[str, Any], what: str) -> JsonObject:
        """`current` with the JSON merge patch applied and a new resourceVersion; a resourceVersion in
        the patch is a precondition, as on the API server."""
        if current is None:
            raise NotFoundError(f"{what} no longer exists")
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"].get("resourceVersion"):
            raise ConflictError(f"{what} changed since it was read")
        updated: JsonObject = merge_patch(current, patch)
        updated["metadata"]["resourceVersion"] = self._bump()
        return updated

    # -- nodes ----------------------------------------------------------------------------------

    def add_node(self, obj: JsonObject) -> None:
        name = obj["metadata"]["name"]
        stored = {**obj, "metadata": {**obj["metadata"], "resourceVersion": self._bump()}}
        self.nodes[name] = stored
        self._node_records[name] = parsing.parse_node(stored)

    def node_record(self, name: str) -> Node | None:
        return self._node_records.get(name)

    def node_pool(self, name: str) -> str | None:
        record = self._node_records.get(name)
        return record.labels.get(self.pool_label) if record is not None else None

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> JsonObject:
        """A JSON merge patch; `metadata.resourceVersion` in it is a precondition, as on the API server."""
        updated = self._patched(self.nodes.get(name), patch, f"node {name}")
        self.nodes[name] = updated
        self._node_records[name] = parsing.parse_node(updated)
        return updated

    def delete_node(self, name: str, *, actor: str, at: datetime) -> None:
        self.changes += 1
        for key in list(self._on_node.get(name, ())):
            record = self._pod_records[key]
            self._remove_pod(key, actor=actor, at=at, disrupted=not record.stays_on_node)
        self._on_node.pop(name, None)
        self.nodes.pop(name, None)
        self._node_records.pop(name, None)

    # -- pods -----------------------------------------------------------------------------------

    def add_pod(
        self,
        obj: JsonObject,
        *,
        startup_seconds: int = 30,
        runtime_seconds: float | None = None,
        pool_hint: str | None = None,
        ready: bool = False,
    ) -> str:
        key = pod_key(obj)
        if key in self.pods:
            raise ValueError(f"pod {key} exists")
        self.changes += 1
        record = parsing.parse_pod(obj)
        # Pods with the same labels share one map, as the live reader gives them one (a ReplicaSet's pods): what a
        # PdbIndex finds covering a map is found once for all of them.
        shared = self._labels.setdefault(tuple(record.labels.items()), record.labels)
        if shared is not record.labels:
            record = structs.replace(record, labels=shared)
        self.pods[key] = obj
        self._pod_records[key] = record
        if record.placeholder is not None:
            self._placeholders[key] = None
        self._seq[key] = self._next_seq
        self._next_seq += 1
        self.created_at[key] = _created(obj, self.now)
        self.startup[key] = startup_seconds
        if runtime_seconds is not None:
            self.runtime[key] = runtime_seconds
        if pool_hint is not None:
            self.pool_hint[key] = pool_hint
        owner = owner_of(obj)
        if owner is not None:
            self._owner[key] = owner
            self._by_owner[owner][key] = None
            self.owners_moved.add(owner)
            owed = self.owed.get(owner)
            if owed:
                self.displaced_by[key] = owed.pop(0)
        for pdb_key, pdb in self._pdb_records.items():
            if pdb.namespace == record.namespace and selector_matches(pdb.selector, record.labels):
                self._pdb_members[pdb_key][key] = None
                self._joined(pdb_key, key, owner)
        if record.node_name is None:
            self._pending[key] = None
        else:
            self._on_node[record.node_name][key] = None
            self._pods_changed[record.node_name] = self.changes
            node = self._node_records.get(record.node_name)
            if node is not None and node.zone is not None:
                for claim in record.pvc_names:
                    self.pvc_zone.setdefault((record.namespace, claim), node.zone)
            self.bound_at[key] = self.now - READY_LONG_AGO if ready else self.now
            self.ready_at[key] = self.now - READY_LONG_AGO if ready else self.now + timedelta(seconds=startup_seconds)
        return key

    def create_pod(self, namespace: str, body: Mapping[str, Any], *, at: datetime) -> JsonObject:
        """A POST of a pod (node replacement's placeholder): a name already taken is a ConflictError, as a 409.
        The Priority admission plugin fills spec.priority and spec.preemptionPolicy from the pod's
        PriorityClass; the pod is Pending, for the scheduler."""
        obj = admitted(copy.deepcopy(dict(body)))
        metadata = obj.setdefault("metadata", {})
        metadata["namespace"] = namespace
        key = pod_key(obj)
        if key in self.pods:
            raise ConflictError(f"pod {key} already exists")
        metadata.setdefault("uid", objects.uid("pod", namespace, metadata["name"], str(self._next_seq)))
        metadata.setdefault("creationTimestamp", format_stamp(at))
        metadata["resourceVersion"] = self._bump()
        obj["status"] = {"phase": "Pending"}
        self.add_pod(obj, startup_seconds=0)
        return obj

    def preemption_policy(self, key: str) -> str:
        return str(self.pods[key]["spec"].get("preemptionPolicy") or DEFAULT_PREEMPTION_POLICY)

    def patch_pod(self, key: str, patch: Mapping[str, Any]) -> JsonObject:
        """A JSON merge patch of a pod's metadata (the annotations node-compactor writes), with
        `metadata.resourceVersion` in it a precondition, as on the API server."""
        updated = self._patched(self.pods.get(key), patch, f"pod {key}")
        self.pods[key] = updated
        cost, cost_set, steered = parsing.deletion_cost_of(updated["metadata"].get("annotations") or {})
        record = self._pod_records[key] = structs.replace(
            self._pod_records[key], deletion_cost=cost, deletion_cost_set=cost_set, steered=steered
        )
        if record.node_name is not None:
            self._pods_changed[record.node_name] = self.changes
        return updated

    def pod_record(self, key: str) -> Pod:
        return self._pod_records[key]

    def pod_records(self) -> Iterable[tuple[str, Pod]]:
        return self._pod_records.items()

    def pod_owner(self, key: str) -> OwnerKey | None:
        return self._owner.get(key)

    def pods_on(self, node_name: str) -> list[str]:
        return list(self._on_node.get(node_name, ()))

    def owned(self, owner: OwnerKey) -> list[str]:
        return list(self._by_owner.get(owner, ()))

    def owned_count(self, owner: OwnerKey) -> int:
        """`len(owned(owner))` without the list."""
        return len(self._by_owner.get(owner, ()))

    def pending(self) -> list[str]:
        """Unbound pods in the scheduling queue's order: higher priority first, then oldest first."""
        return sorted(self._pending, key=lambda key: (-self._pod_records[key].priority, self._seq[key]))

    def sequence(self, key: str) -> int:
        return self._seq[key]

    def is_ready(self, key: str, at: datetime) -> bool:
        ready = self.ready_at.get(key)
        return ready is not None and ready <= at

    def bind(self, key: str, node_name: str, at: datetime) -> None:
        self.changes += 1
        obj = self.pods[key]
        status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
        self.pods[key] = {**obj, "spec": {**obj["spec"], "nodeName": node_name}, "status": status}
        record = self._pod_records[key]
        self._pod_records[key] = structs.replace(record, node_name=node_name, phase="Running", unschedulable=False)
        self._pending.pop(key, None)
        self._on_node[node_name][key] = None
        self._pods_changed[node_name] = self.changes
        self.bound_at[key] = at
        self.ready_at[key] = at + timedelta(seconds=self.startup.get(key, 0))
        self._touch(self._pod_pdbs.get(key, ()))
        if key in self.runtime:
            self.finish_at[key] = at + timedelta(seconds=self.runtime[key])
        self.displaced_by.pop(key, None)
        node = self._node_records.get(node_name)
        zone = node.zone if node is not None else None
        if zone is not None:
            for claim in record.pvc_names:
                self.pvc_zone.setdefault((record.namespace, claim), zone)

    def mark_unschedulable(self, key: str) -> bool:
        """PodScheduled=False, reason Unschedulable. True on the pod's first failed attempt."""
        record = self._pod_records[key]
        if not record.unschedulable:
            obj = self.pods[key]
            condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            self.pods[key] = {**obj, "status": {"phase": "Pending", "conditions": [condition]}}
            self._pod_records[key] = structs.replace(record, unschedulable=True)
        first = key not in self._tried
        if first or not record.unschedulable:
            self.changes += 1
        self._tried.add(key)
        return first

    def volume_zone(self, key: str) -> str | None:
        """The zone a pod's PersistentVolumeClaims are bound to; None while unbound."""
        record = self._pod_records[key]
        for claim in record.pvc_names:
            zone = self.pvc_zone.get((record.namespace, claim))
            if zone is not None:
                return zone
        return None

    def evict(self, key: str, *, actor: str, at: datetime) -> EvictionResult:
        """The Eviction API (policy/v1): refuses (429) what a PodDisruptionBudget does not allow."""
        if key not in self.pods:
            return EvictionResult("gone", f"pods {key!r} not found")
        covering = self.covering_pdbs(key)
        if len(covering) > 1:
            return EvictionResult("retry", "this pod has more than one PodDisruptionBudget (HTTP 500)")
        for pdb_key in covering:
            if not self._eviction_allowed(pdb_key, key, at):
                return EvictionResult(
                    "blocked", f"Cannot evict pod as it would violate the pod's disruption budget {pdb_key}."
                )
        self._remove_pod(key, actor=actor, at=at, disrupted=True)
        self.recorder.evicted[actor] += 1
        return EvictionResult("evicted")

    def delete_pod(self, key: str, *, actor: str, at: datetime) -> None:
        """A direct DELETE: never refused; a disruption the pod's budget did not allow is a violation."""
        if key not in self.pods:
            return
        if any(self.is_ready(key, at) and self.disruptions_allowed(pdb, at) <= 0 for pdb in self.covering_pdbs(key)):
            self.recorder.pdb_violations[actor] += 1
        self._remove_pod(key, actor=actor, at=at, disrupted=True)
        self.recorder.deleted[actor] += 1

    def delete_placeholder(self, key: str, at: datetime) -> None:
        """A DELETE of node replacement's placeholder (terminationGracePeriodSeconds 0: gone at once). It holds
        room for no workload, so it is no disruption; a missing pod is a NotFoundError, as a 404."""
        if key not in self.pods:
            raise NotFoundError(f"pod {key} not found")
        self._remove_pod(key, actor="", at=at, disrupted=False)

    def preempt(self, key: str, *, actor: str, at: datetime) -> None:
        """kube-scheduler deletes a victim of preemption (graceful termination is instant in the model): a
        placeholder goes as no disruption (`preempted_placeholders`), any other pod as a DELETE by `actor`."""
        if key in self._placeholders:
            self.recorder.preempted_placeholders += 1
            self.delete_placeholder(key, at)
            return
        self.recorder.preempted[actor] += 1
        self.delete_pod(key, actor=actor, at=at)

    def is_placeholder(self, key: str) -> bool:
        return key in self._placeholders

    def scale_down(self, key: str, at: datetime) -> None:
        """A controller removes a pod it no longer wants: not a disruption."""
        self._remove_pod(key, actor="", at=at, disrupted=False)

    def finish_jobs(self, at: datetime) -> list[OwnerKey]:
        """Remove Job pods whose work is done by `at` (phase Succeeded); returns their Jobs, one per pod."""
        done = sorted((key for key, end in self.finish_at.items() if end <= at), key=lambda key: self._seq[key])
        jobs = []
        for key in done:
            owner = self._owner.get(key)
            if owner is not None:
                jobs.append(owner)
            self._remove_pod(key, actor="", at=at, disrupted=False)
        return jobs

    def _remove_pod(self, key: str, *, actor: str, at: datetime, disrupted: bool) -> None:
        self.changes += 1
        availability.removed(self, key, actor=actor, disrupted=disrupted, at=at)
        record = self._pod_records.pop(key)
        del self.pods[key]
        if record.node_name is not None:
            self._on_node[record.node_name].pop(key, None)
            self._pods_changed[record.node_name] = self.changes
        self._pending.pop(key, None)
        self._placeholders.pop(key, None)
        owner = self._owner.pop(key, None)
        if owner is not None:
            self._by_owner[owner].pop(key, None)
            self.owners_moved.add(owner)
            if disrupted:
                self.owed[owner].append(actor)
                self.disrupted.append(owner)
        if disrupted and key in self.finish_at:
            lost = (at - self.bound_at[key]).total_seconds()
            self.recorder.lost_job_seconds += lost
            self.recorder.lost_job_seconds_by_actor[actor or "controllers"] += lost
        pdb_keys = self._pod_pdbs.pop(key, ())
        for pdb_key in pdb_keys:
            self._pdb_members[pdb_key].pop(key, None)
        self._regrouped(pdb_keys)
        self._touch(pdb_keys)
        self.bound_at.pop(key, None)
        self.ready_at.pop(key, None)
        self.created_at.pop(key, None)
        self.finish_at.pop(key, None)
        self.startup.pop(key, None)
        self.runtime.pop(key, None)
        self.displaced_by.pop(key, None)
        self._seq.pop(key, None)
        self.pool_hint.pop(key, None)
        self._tried.discard(key)

    # -- PodDisruptionBudgets ---------------------------------------------------------------------

    def add_pdb(self, obj: JsonObject) -> None:
        metadata = obj["metadata"]
        key = f"{metadata.get('namespace', 'default')}/{metadata['name']}"
        record = parsing.parse_pdb(obj)
        self.changes += 1
        self.pdbs[key] = obj
        self._pdb_records[key] = record
        for pods in self._pod_pdbs.values():
            if key in pods:
                pods.remove(key)  # the PDB written again: its members are found again below
        self._pdb_members[key] = {
            pod: None
            for pod, pod_record in self._pod_records.items()
            if pod_record.namespace == record.namespace and selector_matches(record.selector, pod_record.labels)
        }
        self._regrouped((key,))
        for pod in self._pdb_members[key]:
            self._joined(key, pod, self._owner.get(pod))
        self._touch((key,))

    def _joined(self, pdb_key: str, key: str, owner: OwnerKey | None) -> None:
        """Pod `key` (of `owner`) is a member of the PDB: a change to it or to its owner's scale moves the budget."""
        self._pod_pdbs.setdefault(key, []).append(pdb_key)
        self._regrouped((pdb_key,))
        if owner is not None:
            self._owner_pdbs[owner].add(pdb_key)
            self._owner_pdbs[self._workload.get(owner, owner)].add(pdb_key)
        self._touch((pdb_key,))

    def _regrouped(self, pdb_keys: Iterable[str]) -> None:
        """The members of these PDBs, or the workloads of their owners, changed: `_compute_budget` groups them
        again."""
        for pdb_key in pdb_keys:
            self._pdb_membership[pdb_key] = self._pdb_membership.get(pdb_key, 0) + 1

    def _touch(self, pdb_keys: Iterable[str]) -> None:
        for pdb_key in pdb_keys:
            self._pdb_version[pdb_key] = self._pdb_version.get(pdb_key, 0) + 1
            self._touches += 1

    def covering_pdbs(self, key: str) -> list[str]:
        return [pdb_key for pdb_key, members in self._pdb_members.items() if key in members]

    def set_scale(self, owner: OwnerKey, replicas: int) -> None:
        if self.scales.get(owner) != replicas:
            self.changes += 1
            self.scales[owner] = replicas
            self._touch(self._owner_pdbs.get(owner, ()))

    def link_owner(self, owner: OwnerKey, workload: OwnerKey) -> None:
        """`owner` (a ReplicaSet) is part of `workload` (its Deployment), whose scale its PDBs expect."""
        self.changes += 1
        self._workload[owner] = workload
        self._owner_pdbs[workload] |= self._owner_pdbs.get(owner, set())
        self._regrouped(list(self._pdb_members))  # its pods' workload changed
        self._touch(list(self._pdb_version))  # which scale a member's budget expects may have moved
        parts = self._parts.setdefault(workload, [])
        if owner not in parts:
            parts.append(owner)

    def workload_of(self, owner: OwnerKey) -> OwnerKey:
        return self._workload.get(owner, owner)

    def workload_pods(self, workload: OwnerKey) -> list[str]:
        """The pods of a workload: of each ReplicaSet of a Deployment, or of the owner itself."""
        return [key for part in self._parts.get(workload, [workload]) for key in self._by_owner.get(part, ())]

    def _budget(self, pdb_key: str, at: datetime) -> tuple[int, int, int] | None:
        """(currentHealthy, desiredHealthy, expectedPods), or None for a budget with no spec to compute; the
        last figures again while its version holds (`_touch`: its members, their binding and their owners'
        scales) and none of its pods turned Ready since."""
        known = self._budgets.get(pdb_key)
        version = self._pdb_version.get(pdb_key, 0)
        if known is not None and known[0] == version and known[1] <= at and (known[3] is None or at < known[3]):
            return known[2]
        members = self._pdb_members[pdb_key]
        healthy = 0
        next_ready: datetime | None = None
        for key in members:
            ready = self.ready_at.get(key)
            if ready is None:
                continue
            if ready <= at:
                healthy += 1
            elif next_ready is None or ready < next_ready:
                next_ready = ready
        budget = self._compute_budget(pdb_key, members, healthy)
        self._budgets[pdb_key] = (version, at, budget, next_ready)
        return budget

    def _compute_budget(self, pdb_key: str, members: Mapping[str, None], healthy: int) -> tuple[int, int, int] | None:
        membership = self._pdb_membership.get(pdb_key, 0)
        known = self._pdb_owners.get(pdb_key)
        if known is not None and known[0] == membership:
            owners = known[1]
        else:
            owners = defaultdict(int)
            for key in members:
                owner = self._owner.get(key)
                owners[self._workload.get(owner, owner) if owner is not None else None] += 1
            self._pdb_owners[pdb_key] = (membership, owners)
        expected = sum(count if owner is None else self.scales.get(owner, count) for owner, count in owners.items())
        spec = self.pdbs[pdb_key].get("spec") or {}
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        else:
            return None
        return healthy, desired, expected

    def disruptions_allowed(self, pdb_key: str, at: datetime) -> int:
        budget = self._budget(pdb_key, at)
        if budget is None:
            return self._pdb_records[pdb_key].disruptions_allowed
        healthy, desired, _ = budget
        return max(0, healthy - desired)

    def _eviction_allowed(self, pdb_key: str, key: str, at: datetime) -> bool:
        budget = self._budget(pdb_key, at)
        if budget is None:
            return self._pdb_records[pdb_key].disruptions_allowed > 0
        healthy, desired, _ = budget
        if not self.is_ready(key, at):
            return healthy >= desired  # unhealthyPodEvictionPolicy IfHealthyBudget
        return healthy - desired > 0

    def pdb_objects(self, at: datetime) -> list[JsonObject]:
        result = []
        for key, obj in self.pdbs.items():
            budget = self._budget(key, at)
            if budget is None:
                result.append(obj)
                continue
            healthy, desired, expected = budget
            status = {
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "disruptionsAllowed": max(0, healthy - desired),
            }
            result.append({**obj, "status": status})
        return result

    # -- what the planner and the scheduler read ------------------------------------------------

    def records(self) -> tuple[tuple[Pod, ...], tuple[Node, ...], tuple[tuple[OwnerKey, int], ...]]:
        """The pod and node records and the owners' scales as they are: each record is replaced, never
        changed, so the same records (by identity) mean the same cluster (the autoscaler's planner skips a
        loop in which nothing it reads changed)."""
        return tuple(self._pod_records.values()), tuple(self._node_records.values()), tuple(self.scales.items())

    def next_ready(self, at: datetime) -> datetime | None:
        """When the next pod becomes Ready after `at` (a PodDisruptionBudget's allowance may change then)."""
        return self.ready_at.first_after(at)

    def view(self, at: datetime, config: Config) -> ClusterView:
        """`ClusterView(self.snapshot(at), config)`, or the last one made for `config` when nothing changed since
        and no pod turned Ready between (budgets count Ready pods): loops of a quiet cluster ask for the same
        view several times. A view given again has its memos of simulations emptied, as a fresh one has none.
        Not with Deployments in the snapshot (`workload_records`): their status changes apart from the world."""
        known = self._views.get(id(config))
        if known is not None and known.config is config and known.changes == self.changes:
            if at != known.at and self.workload_records is None and known.at < at:
                if known.next_ready is _UNKNOWN:
                    known.next_ready = self.next_ready(known.at)
                reusable = known.next_ready is None or at < known.next_ready
            else:
                reusable = at == known.at and self.workload_records is None
            if reusable:
                view = known.view
                view.start_heaps.clear()
                view.target_labels.clear()
                view.spread_counts.clear()
                return view
        snapshot = self.snapshot(at)
        if known is None or known.config is not config:
            view = ClusterView(snapshot, config)
            view.spread_carry = spread.Carried(view.nodes)
        else:
            # The nodes whose pods did not change since the last view keep their state; the budgets' index is
            # the last one while every budget is the same (`_pdb_snapshot`: the same objects), else made from
            # it (`PdbIndex.updated`).
            earlier = known.view
            grouped = self._grouped(earlier, known.changes, config.pool_label)
            same = _same_objects(snapshot.pdbs, earlier.snapshot.pdbs)
            pdbs = earlier.pdbs if same else earlier.pdbs.updated(snapshot.pdbs, grouped[2].values())
            view = ClusterView(snapshot, config, pdbs, earlier=earlier, same_classes=False, grouped=grouped)
            view.spread_carry = earlier.spread_carry
            if view.spread_carry is not None:
                view.spread_carry.advance(view.nodes)
        self._views[id(config)] = _View(config, self.changes, at, view)
        return view

    def _grouped(self, earlier: ClusterView, since: int, pool_label: str) -> Grouped:
        """What `ClusterView` would find regrouping every pod of `self.snapshot()`, from `earlier`, made when the
        change count was `since`: a node whose pods did not change since keeps its state (its record, if
        replaced, put in), the others are grouped from their own pods in the snapshot's order (the order pods
        were added), and the pending pods from the queue."""
        records, order, changed = self._pod_records, self._seq.__getitem__, self._pods_changed
        before = earlier.nodes
        nodes: dict[str, NodeState] = {}
        for name, node in self._node_records.items():
            prior = before.get(name)
            if prior is not None and changed.get(name, since) <= since:
                nodes[name] = prior if prior.node is node else node_state(node, pool_label, prior.pods, prior)
                continue
            pods = tuple(
                pod
                for key in sorted(self._on_node.get(name, ()), key=order)
                if (pod := records[key]).phase not in TERMINAL_PHASES
            )
            nodes[name] = node_state(node, pool_label, pods, prior)
        return (*pending_groups(records[key] for key in sorted(self._pending, key=order)), nodes)

    @property
    def has_placeholders(self) -> bool:
        """Whether a placeholder pod exists: only then does `snapshot(placeholders_apart=True)` differ."""
        return bool(self._placeholders)

    def snapshot(self, at: datetime, *, placeholders_apart: bool = False) -> Snapshot:
        """The cluster as a Snapshot. With `placeholders_apart`, what a live run reads
        (`compactor.kube.snapshot`): placeholder pods in `placeholders`, not in `pods`; without, every pod
        in `pods`, as the scheduler and the Cluster Autoscaler count them."""
        pdbs = self._pdbs_at(at)
        deployments, replica_sets = self.workload_records(at) if self.workload_records is not None else ((), ())
        pods = tuple(self._pod_records.values())
        placeholders: tuple[Pod, ...] = ()
        if placeholders_apart and self._placeholders:
            placeholders = tuple(self._pod_records[key] for key in self._placeholders)
            pods = tuple(record for record in pods if record.placeholder is None)
        return Snapshot(
            nodes=tuple(self._node_records.values()),
            pods=pods,
            pdbs=pdbs,
            pool_autoscaling=self.pool_autoscaling,
            deployments=deployments,
            replica_sets=replica_sets,
            placeholders=placeholders,
        )

    def _pdbs_at(self, at: datetime) -> tuple[Pdb, ...]:
        """Every budget as a snapshot holds it at `at` (`_pdb_snapshot`): those of the last snapshot while no
        budget was touched since and no member turned Ready between."""
        found = self._pdbs_found
        if found is not None and found[0] == self._touches and found[1] <= at and (found[2] is None or at < found[2]):
            return found[3]
        pdbs = tuple(self._pdb_snapshot(key, record, at) for key, record in self._pdb_records.items())
        budgets = self._budgets
        ready = min(
            (known[3] for key in self._pdb_records if (known := budgets.get(key)) is not None and known[3] is not None),
            default=None,
        )
        self._pdbs_found = (self._touches, at, ready, pdbs)
        return pdbs

    def _pdb_snapshot(self, key: str, record: Pdb, at: datetime) -> Pdb:
        """The PDB as a snapshot holds it, its disruptionsAllowed at `at`: the same object as in the last snapshot
        while neither changed, so a view can tell its budgets are those of the last (`view`)."""
        allowed = self.disruptions_allowed(key, at)
        last = self._pdb_snapshots.get(key)
        if last is not None and last[0] is record and last[1].disruptions_allowed == allowed:
            return last[1]
        made = structs.replace(record, disruptions_allowed=allowed)
        self._pdb_snapshots[key] = (record, made)
        return made

    def event(self, at: datetime, node: str, reason: str, message: str) -> None:
        self.changes += 1
        self.events.append((at, node, reason, message))
        self.recorder.events[reason] += 1


_UNKNOWN: Any = object()


@dataclass(slots=True)
class _View:
    config: Config
    changes: int
    at: datetime
    view: ClusterView
    next_ready: datetime | None = _UNKNOWN


def admitted(pod: JsonObject) -> JsonObject:
    """The Priority admission plugin: a pod naming a known PriorityClass gets its value and preemptionPolicy."""
    spec = pod.setdefault("spec", {})
    found = PRIORITY_CLASSES.get(spec.get("priorityClassName") or "")
    if found is not None:
        value, policy = found
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", policy)
    return pod


def _autoscaling(pool: PoolSpec, pool_label: str, creates_pools: bool) -> PoolAutoscaling:
    """What GKE's node pool API says of a modelled pool: autoscaled between its min and max, in its zones,
    with its machine type, labels, taints and Spot (what a replacement into a pool with no node reads)."""
    node = objects.template_node(pool, pool_label)
    return PoolAutoscaling(
        enabled=True,
        min_node_count=0,
        total_min_node_count=pool.min_nodes,
        total_max_node_count=pool.max_nodes,
        zones=len(pool.zones),
        machine_type=pool.machine_type,
        spot=pool.labels.get(SPOT_LABEL) == "true",
        labels=dict(pool.labels),
        taints=node.taints,
        locations=tuple(pool.zones),
        creates_pools=creates_pools,
    )


def _created(obj: Mapping[str, Any], default: datetime) -> datetime:
    """A pod's metadata.creationTimestamp; `default` when it has none or one that does not parse."""
    stamp = obj["metadata"].get("creationTimestamp")
    if isinstance(stamp, str):
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return default
    return default


def _scaled(value: int | str, expected: int) -> int:
    """An IntOrString of a PDB: a number, or a percentage of the expected pods rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * expected / 100)
    return int(value)


Records = tuple[tuple[Pod, ...], tuple[Node, ...], tuple[tuple[OwnerKey, int], ...]]


def _same_objects(first: Sequence[object], second: Sequence[object]) -> bool:
    """The same objects, one by one."""
    return len(first) == len(second) and all(map(operator.is_, first, second))


def same_records(last: Records, now: Records) -> bool:
    """Pod and node records are replaced, never changed (`World.records`): the same records by identity, and the
    same scales, are the same cluster."""
    (pods, nodes, scales), (last_pods, last_nodes, last_scales) = now, last
    return _same_objects(pods, last_pods) and _same_objects(nodes, last_nodes) and scales == last_scales
