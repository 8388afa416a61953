"""Deployments in the simulated cluster: their objects, and the rolling update a restart starts.

Each Deployment of a scenario owns the ReplicaSet its pods come from (a
`WorkloadSpec` with `deployment` set). While it has one ReplicaSet, that
ReplicaSet wants the replicas of the daily curve, exactly as without this
module. A change of the pod template's annotations (the
`kubectl.kubernetes.io/restartedAt` a rolling restart writes) starts a new
ReplicaSet, and the Deployment controller's rolling update then sets each
ReplicaSet's replicas as kube-controller-manager does
(pkg/controller/deployment/rolling.go): the new ReplicaSet grows while all
pods stay within replicas + maxSurge, the old ones shrink only while the Ready
pods stay at or above replicas - maxUnavailable (pods not Ready first), and
`Recreate` removes every old pod before the new ReplicaSet gets any. Pods are
Ready `startup_seconds` after they are bound (`world.bind`), so a surging
restart keeps the old pod until the new one is Ready and never leaves the
workload without a Ready pod; that is measured (`availability`), not assumed.

`SimulatedDeployments` is the executor's `surging.DeploymentPort` over this
model: the Deployment as JSON (status from the pods at the run's start), a
merge patch guarded by its resourceVersion that bumps `metadata.generation`
when the spec changes; the controller observes the new generation at the next
reconcile, as kube-controller-manager does a moment later.

Must never: remove a pod itself (the ReplicaSet controller does, from the
replicas set here), or change what a Deployment with one ReplicaSet wants.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from compactor.core import surge
from compactor.core.model import Deployment, ReplicaSet
from compactor.kube import workloads
from compactor.kube.answers import ConflictError, NotFoundError
from compactor.settings.config import Config
from compactor.simulation import objects
from compactor.simulation.model import JsonObject, WorkloadSpec
from compactor.simulation.port import SimulatedCluster
from compactor.simulation.world import OwnerKey, World, merge_patch

TEMPLATE_HASH = "pod-template-hash"


@dataclass
class _Deployment:
    key: OwnerKey  # (namespace, "Deployment", name)
    curve_spec: WorkloadSpec  # the first ReplicaSet: the replicas curve every revision follows
    obj: JsonObject  # metadata and spec as the API stores them, without spec.replicas and status
    revisions: list[WorkloadSpec]  # ReplicaSets with pods or replicas, oldest first; the last is current
    replicas: dict[OwnerKey, int] = field(default_factory=dict)  # each ReplicaSet's spec.replicas
    desired: int = 0  # the Deployment's spec.replicas, from the curve
    observed_generation: int = 1

    @property
    def current(self) -> WorkloadSpec:
        return self.revisions[-1]


class Rollouts:
    """The Deployment controller over the world's ReplicaSets."""

    def __init__(self, world: World, specs: Iterable[WorkloadSpec]) -> None:
        self.world = world
        self._deployments: dict[str, _Deployment] = {}
        self._of_replica_set: dict[OwnerKey, _Deployment] = {}
        self._specs: dict[OwnerKey, WorkloadSpec] = {}
        self._resource_version = 0
        # Each Deployment's last record (`records`), with what it was read from: its object, replicas and pods, the
        # world's changes and next Ready time then, and how many of its pods were Ready.
        self._records: dict[OwnerKey, tuple[tuple[object, ...], tuple[object, ...], int, Deployment]] = {}
        for spec in specs:
            if spec.deployment is None or spec.ordinal:
                continue
            key: OwnerKey = (spec.namespace, "Deployment", spec.deployment)
            metadata = spec.template.get("metadata") or {}
            obj: JsonObject = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": spec.deployment,
                    "namespace": spec.namespace,
                    "uid": objects.uid("deployment", spec.namespace, spec.deployment),
                    "generation": 1,
                    "resourceVersion": self._bump(),
                },
                "spec": {
                    "strategy": copy.deepcopy(spec.strategy) if spec.strategy is not None else _default_strategy(),
                    "template": {"metadata": {"annotations": dict(metadata.get("annotations") or {})}},
                },
            }
            found = _Deployment(key, spec, obj, [spec])
            self._deployments[f"{spec.namespace}/{spec.deployment}"] = found
            self._of_replica_set[spec.key] = found
            self._specs[spec.key] = spec
            world.link_owner(spec.key, key)

    def _bump(self) -> str:
        self._resource_version += 1
        return f"d{self._resource_version}"

    # -- what the ReplicaSet controller asks ------------------------------------------------------

    def revisions(self, spec: WorkloadSpec) -> Sequence[WorkloadSpec]:
        """The ReplicaSets to reconcile in place of `spec`: itself, or its Deployment's, oldest first."""
        found = self._of_replica_set.get(spec.key)
        if found is None or found.curve_spec is not spec:
            return (spec,)
        return tuple(found.revisions)

    def replicas(self, owner: OwnerKey) -> int | None:
        """A Deployment's ReplicaSet's spec.replicas; None for any other owner (its curve decides)."""
        found = self._of_replica_set.get(owner)
        return None if found is None else found.replicas.get(owner, 0)

    def spec_of(self, owner: OwnerKey) -> WorkloadSpec | None:
        return self._specs.get(owner)

    def state(self) -> tuple[object, ...]:
        """What a reconcile may change besides the world: the generation it saw, and the replicas of each
        ReplicaSet of a Deployment in a rollout (one ReplicaSet follows the curve)."""
        return (
            self._resource_version,
            tuple(
                (found.observed_generation, len(found.revisions), tuple(found.replicas.values()))
                for found in self._deployments.values()
                if len(found.revisions) > 1
            ),
        )

    # -- the Deployment controller --------------------------------------------------------------------

    def reconcile(self, desired_at: datetime, at: datetime) -> None:
        for found in self._deployments.values():
            found.desired = found.curve_spec.replicas.at(desired_at)
            self.world.set_scale(found.key, found.desired)
            self._observe(found)
            if len(found.revisions) == 1:
                found.replicas[found.current.key] = found.desired
                continue
            if found.obj["spec"]["strategy"].get("type") == "Recreate":
                self._recreate(found)
            else:
                self._rolling(found, at)
            self._retire(found)

    def _observe(self, found: _Deployment) -> None:
        """A new pod template (its annotations) starts a new ReplicaSet, or takes an old one back."""
        generation = found.obj["metadata"]["generation"]
        if found.observed_generation == generation:
            return
        found.observed_generation = generation
        annotations = dict(found.obj["spec"]["template"]["metadata"].get("annotations") or {})
        if annotations == _annotations(found.current):
            return
        namespace, _, name = found.key
        template_hash = objects.short_hash(
            namespace, name, orjson.dumps(annotations, option=orjson.OPT_SORT_KEYS).decode()
        )
        owner_name = f"{name}-{template_hash}"
        known = next((spec for spec in found.revisions if spec.owner_name == owner_name), None)
        if known is not None:
            found.revisions.remove(known)
            found.revisions.append(known)
            return
        template = copy.deepcopy(found.current.template)
        metadata = template.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), TEMPLATE_HASH: template_hash}
        metadata["annotations"] = annotations
        spec = dataclasses.replace(found.current, owner_name=owner_name, template=template)
        found.revisions.append(spec)
        found.replicas[spec.key] = 0
        self._of_replica_set[spec.key] = found
        self._specs[spec.key] = spec
        self.world.link_owner(spec.key, found.key)

    def _rolling(self, found: _Deployment, at: datetime) -> None:
        """`reconcileNewReplicaSet` then `reconcileOldReplicaSets` of the Deployment controller."""
        rolling = found.obj["spec"]["strategy"].get("rollingUpdate") or {}
        desired = found.desired
        max_surge = surge.scaled(_text(rolling.get("maxSurge")), desired, round_up=True) or 0
        max_unavailable = surge.scaled(_text(rolling.get("maxUnavailable")), desired, round_up=False) or 0
        if max_surge == 0 and max_unavailable == 0:
            max_unavailable = 1  # ResolveFenceposts
        new = found.current.key
        replicas = found.replicas
        if replicas[new] > desired:
            replicas[new] = desired
        elif replicas[new] < desired:
            room = desired + max_surge - sum(replicas.values())
            if room > 0:
                replicas[new] += min(room, desired - replicas[new])
        olds = [spec.key for spec in found.revisions[:-1]]
        ready = {owner: self._ready(owner, at) for owner in replicas}
        min_available = desired - max_unavailable
        new_unavailable = replicas[new] - ready[new]
        budget = sum(replicas.values()) - min_available - new_unavailable
        if budget <= 0:
            return
        for owner in olds:  # cleanupUnhealthyReplicas: old pods that are not Ready go first
            unhealthy = min(max(0, replicas[owner] - ready[owner]), budget)
            replicas[owner] -= unhealthy
            budget -= unhealthy
        removable = sum(ready.values()) - min_available
        for owner in olds:  # scaleDownOldReplicaSetsForRollingUpdate
            if removable <= 0:
                break
            step = min(replicas[owner], removable)
            replicas[owner] -= step
            removable -= step

    def _recreate(self, found: _Deployment) -> None:
        """Every old pod goes first; the new ReplicaSet gets its replicas once none is left."""
        olds = [spec.key for spec in found.revisions[:-1]]
        for owner in olds:
            found.replicas[owner] = 0
        if not any(self.world.owned_count(owner) for owner in olds):
            found.replicas[found.current.key] = found.desired

    def _retire(self, found: _Deployment) -> None:
        """Old ReplicaSets at 0 replicas with no pod left drop out (the API keeps them; nothing reads them)."""
        for spec in found.revisions[:-1]:
            if found.replicas.get(spec.key, 0) == 0 and not self.world.owned_count(spec.key):
                found.revisions.remove(spec)
                del found.replicas[spec.key]

    def _ready(self, owner: OwnerKey, at: datetime) -> int:
        return sum(1 for key in self.world.owned(owner) if self.world.is_ready(key, at))

    # -- what the API returns -------------------------------------------------------------------------

    def get(self, namespace: str, name: str, at: datetime) -> JsonObject | None:
        found = self._deployments.get(f"{namespace}/{name}")
        if found is None:
            return None
        obj = copy.deepcopy(found.obj)
        obj["spec"]["replicas"] = found.desired
        pods = {spec.key: self.world.owned(spec.key) for spec in found.revisions}
        obj["status"] = {
            "observedGeneration": found.observed_generation,
            "replicas": sum(len(keys) for keys in pods.values()),
            "updatedReplicas": len(pods[found.current.key]),
            "readyReplicas": sum(self._ready(owner, at) for owner in pods),
            "availableReplicas": sum(self._ready(owner, at) for owner in pods),
        }
        return obj

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> JsonObject:
        """A JSON merge patch of metadata and spec; metadata.resourceVersion in it is a precondition."""
        key = f"{namespace}/{name}"
        found = self._deployments.get(key)
        if found is None:
            raise NotFoundError(f"deployments.apps {name!r} not found")
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != found.obj["metadata"]["resourceVersion"]:
            raise ConflictError(f"Deployment {key} changed since it was read")
        allowed = {part: patch[part] for part in ("metadata", "spec") if part in patch}
        updated: JsonObject = merge_patch(found.obj, allowed)
        updated["spec"].pop("replicas", None)  # the curve decides, as an HPA would
        if updated["spec"] != found.obj["spec"]:
            updated["metadata"]["generation"] = found.obj["metadata"]["generation"] + 1
        updated["metadata"]["resourceVersion"] = self._bump()
        found.obj = updated
        answer = self.get(namespace, name, self.world.now)
        assert answer is not None
        return answer

    def records(self, at: datetime) -> tuple[tuple[Deployment, ...], tuple[ReplicaSet, ...]]:
        """The Deployments and ReplicaSets as `compactor.kube.workloads` reads them from the API. A Deployment is
        read again only when what `get` returns of it changed: its object (resourceVersion), its replicas, the
        generation observed, its ReplicaSets' pods or how many of them are Ready. Those are counted again only
        when the world changed or a pod turned Ready since the last call."""
        deployments: list[Deployment] = []
        replica_sets: list[ReplicaSet] = []
        stamp = (self.world.changes, self.world.ready_at.first_after(at))
        for found in self._deployments.values():
            namespace, _, name = found.key
            base = (
                found.obj["metadata"]["resourceVersion"],
                found.desired,
                found.observed_generation,
                tuple(spec.key for spec in found.revisions),
                tuple(self.world.owned_count(spec.key) for spec in found.revisions),
            )
            known = self._records.get(found.key)
            if known is not None and known[0] == base and known[1] == stamp:
                record = known[3]
            else:
                ready = sum(self._ready(spec.key, at) for spec in found.revisions)
                if known is not None and known[0] == base and known[2] == ready:
                    record = known[3]
                else:
                    obj = self.get(namespace, name, at)
                    assert obj is not None
                    parsed = workloads.parse("Deployment", obj)
                    assert isinstance(parsed, Deployment)
                    record = parsed
                self._records[found.key] = (base, stamp, ready, record)
            deployments.append(record)
            for spec in found.revisions:
                replica_sets.append(
                    ReplicaSet(
                        namespace=namespace,
                        name=spec.owner_name,
                        deployment=name,
                        replicas=found.replicas.get(spec.key, 0),
                        status_replicas=self.world.owned_count(spec.key),
                    )
                )
        return tuple(deployments), tuple(replica_sets)


class SimulatedDeployments:
    """`surging.DeploymentPort` over the model: what the executor restarts Deployments through."""

    def __init__(self, cluster: SimulatedCluster, rollouts: Rollouts) -> None:
        self.cluster = cluster
        self.rollouts = rollouts

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.rollouts.get(namespace, name, self.cluster.run_start)

    def patch_deployment(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self.rollouts.patch(namespace, name, patch)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.cluster.pod(namespace, name)

    def event(
        self,
        node: Any,
        *,
        reason: str,
        message: str,
        warning: bool,
        now: datetime,
        kind: str = "Node",
        api_version: str = "v1",
    ) -> None:
        self.cluster.event(node, reason=reason, message=message, warning=warning, now=now)


def surging(config: Config) -> Config:
    """`config` with surgeSingleReplicas on in every enabled pool that may wait for a restart
    (drainTimeoutSeconds above 0, which the option requires)."""
    pools = {
        name: pool.model_copy(update={"surge_single_replicas": True})
        if pool.enabled and pool.drain_timeout_seconds > 0
        else pool
        for name, pool in config.node_pools.items()
    }
    return config.model_copy(update={"node_pools": pools})


def strategy_object(kind: str, max_surge: int | str | None, max_unavailable: int | str | None) -> JsonObject:
    """A Deployment's spec.strategy as the API server stores it (absent rollingUpdate fields are 25%)."""
    if kind == "Recreate":
        return {"type": "Recreate"}
    rolling = {
        "maxSurge": surge.DEFAULT_ROLLING if max_surge is None else max_surge,
        "maxUnavailable": surge.DEFAULT_ROLLING if max_unavailable is None else max_unavailable,
    }
    return {"type": "RollingUpdate", "rollingUpdate": rolling}


def _default_strategy() -> JsonObject:
    return strategy_object("RollingUpdate", None, None)


def _annotations(spec: WorkloadSpec) -> dict[str, str]:
    return dict((spec.template.get("metadata") or {}).get("annotations") or {})


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
