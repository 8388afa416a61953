"""The controllers that keep pods running: ReplicaSets, StatefulSets, Jobs started by CronJobs, DaemonSets.

Each reconcile brings every workload to the replicas its daily curve asks
for at that moment and recreates the pods that were evicted or deleted, the
way kube-controller-manager does within milliseconds. A ReplicaSet scaling
down removes pods in the controller's own order (unscheduled, not ready,
lower pod-deletion-cost, doubled up on a node, then log2 buckets of the time
since Ready and a random UID); a StatefulSet keeps
its ordinals and PersistentVolumeClaims and scales down from the highest.
A Job pod that is disrupted starts its work over. A Deployment's
ReplicaSets take their replicas from the Deployment controller (`rollouts`),
which follows the curve until a restart rolls a new ReplicaSet out.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from compactor.core.model import ZERO, Resources
from compactor.kube import snapshot as parsing
from compactor.simulation import objects, rollouts
from compactor.simulation.draws import Draws
from compactor.simulation.model import CronJobSpec, DaemonSetSpec, Setup, WorkloadSpec
from compactor.simulation.world import OwnerKey, World

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Pod UIDs the controllers keep at most (`_uid`): made again after the store is emptied, the same.
UIDS_KEPT = 200_000
NEVER = datetime.max.replace(tzinfo=UTC)


@dataclass
class _Job:
    cron: CronJobSpec
    name: str
    succeeded: int = 0

    @property
    def key(self) -> OwnerKey:
        return (self.cron.namespace, "Job", self.name)


class Controllers:
    def __init__(self, world: World, setup: Setup) -> None:
        self.world = world
        self.workloads = setup.workloads
        self.cronjobs = setup.cronjobs
        self.daemonsets = setup.daemonsets
        self._seed = setup.seed
        self._uids: dict[str, bytes] = {}  # `_uid`'s, by pod key
        self._names = Draws(f"{setup.seed}:names")
        self._durations = Draws(f"{setup.seed}:jobs")
        self.jobs: dict[OwnerKey, _Job] = {}
        self._by_key = {spec.key: spec for spec in self.workloads}
        self._daemon_requests: dict[str | None, Resources] = {}
        self._last_slot: dict[str, int] = {}
        self.rollouts = rollouts.Rollouts(world, setup.workloads)  # the Deployment controller
        # The workloads whose replicas follow a curve that moves (the others keep one count all day), and the
        # world's change count and the Deployment controller's state when the last reconcile ended: while both
        # are the same, the workloads of one count are as that reconcile left them, at their replicas.
        self._varying = tuple(spec for spec in setup.workloads if len(set(spec.replicas.extremes())) > 1)
        self._settled: tuple[int, tuple[object, ...]] | None = None
        # The places in `workloads` of those reconciled whenever the world changed: moving curves and
        # StatefulSets; and of each workload by the owner of its pods (a Deployment's, by its ReplicaSets), for
        # the Deployment controller's state it was made in (`_to_reconcile`).
        moving = {id(spec) for spec in self._varying}
        self._always = frozenset(
            place for place, spec in enumerate(self.workloads) if spec.ordinal or id(spec) in moving
        )
        self._positions: tuple[tuple[object, ...], dict[OwnerKey, int]] | None = None
        # The moment the last reconcile's replicas were asked for, and the moving curves' replicas per moment
        # asked about since (`asks_as_before`).
        self._asked_at: datetime | None = None
        self._unchanged_until: datetime | None = None
        self._replicas_at: dict[datetime, tuple[int, ...]] = {}

    def reconcile(self, desired_at: datetime, at: datetime) -> None:
        """Replica counts as the curves give them at `desired_at`; new pods are created at `at`."""
        if self._as_left(desired_at, at):
            return
        self._asked_at = desired_at
        for job_key in self.world.finish_jobs(at):
            job = self.jobs.get(job_key)
            if job is not None:
                job.succeeded += 1
        for cron in self.cronjobs:
            self._start_jobs(cron, desired_at, at)
        self.rollouts.reconcile(desired_at, at)
        # Each controller reacts to its own pods' deletion: replacements come in the order pods went.
        disrupted, self.world.disrupted = self.world.disrupted, []
        if disrupted:
            self.world.changes += 1
        for owner in disrupted:
            spec = self._by_key.get(owner) or self.rollouts.spec_of(owner)
            if spec is not None and not spec.ordinal:
                self._replica_set(spec, desired_at, at, at_most=1)
        for spec in self._to_reconcile():
            if spec.ordinal:
                self._stateful_set(spec, desired_at, at)
            else:
                for revision in self.rollouts.revisions(spec):  # a Deployment's ReplicaSets, oldest first
                    self._replica_set(revision, desired_at, at)
        for job_key, job in list(self.jobs.items()):
            self._run_job(job, at)
            if job.succeeded >= job.cron.parallelism:
                del self.jobs[job_key]
        for owner in list(self.world.owed):
            if self.world.owed[owner]:
                self.world.owed[owner].clear()  # nothing left to replace (the owner scaled down meanwhile)
                self.world.changes += 1
        deployments = self.rollouts.state()
        self._settled = (self.world.changes, deployments)
        self.world.owners_moved.clear()
        # Until when the next reconcile for the same replicas on an unchanged world changes nothing: the first
        # Job pod's end; not while a Deployment rolls out (its ReplicaSets move as pods turn Ready).
        _, rolling_out = deployments
        self._unchanged_until = None if rolling_out else min(self.world.finish_at.values(), default=NEVER)

    def _to_reconcile(self) -> Sequence[WorkloadSpec]:
        """The workloads a reconcile may find away from their replicas, in their order: with the world unchanged
        since the last reconcile, those whose replicas follow a moving curve; with the Deployment controller's
        state unchanged, those too, every StatefulSet (its pods start one after the other as they turn Ready)
        and the workloads a pod of which came or went since (`World.owners_moved`); else all of them. The last
        reconcile left every other one at its replicas, which have not moved."""
        deployments = self.rollouts.state()
        if self._settled == (self.world.changes, deployments):
            return self._varying
        if self._settled is None or self._settled[1] != deployments:
            return self.workloads
        known = self._positions
        if known is None or known[0] != deployments:
            positions = {
                revision.key: place
                for place, spec in enumerate(self.workloads)
                for revision in self.rollouts.revisions(spec)
            }
            known = self._positions = (deployments, positions)
        found = {known[1][owner] for owner in self.world.owners_moved if owner in known[1]}
        return [self.workloads[place] for place in sorted(found.union(self._always))]

    def _as_left(self, desired_at: datetime, at: datetime) -> bool:
        """Whether the cluster is as the last reconcile left it, asked for the same replicas before any Job pod's
        work is done: then this one would change nothing."""
        return (
            desired_at == self._asked_at
            and self._unchanged_until is not None
            and at < self._unchanged_until
            and not self.world.disrupted
            and self._settled == (self.world.changes, self.rollouts.state())
        )

    def state(self) -> tuple[object, ...]:
        """What a reconcile may change besides the world's objects (`World.changes`): the Jobs and their
        successes, the draws of names and run times, and the replicas of Deployments in a rollout."""
        return (
            tuple((key, job.succeeded) for key, job in self.jobs.items()),
            self._names.draws,
            self._durations.draws,
            self.rollouts.state(),
        )

    def asks_as_before(self, desired_at: datetime) -> bool:
        """Whether a reconcile for `desired_at` would ask what the last one asked for: every moving curve at
        the same replicas, and no CronJob with a new schedule slot to start (`_start_jobs`)."""
        if self._asked_at is None:
            return False
        if any(self._slot_to_start(cron, desired_at) is not None for cron in self.cronjobs):
            return False
        return self._replicas(self._asked_at) == self._replicas(desired_at)

    def _replicas(self, moment: datetime) -> tuple[int, ...]:
        found = self._replicas_at.get(moment)
        if found is None:
            if len(self._replicas_at) > 2:
                self._replicas_at.clear()
            found = self._replicas_at[moment] = tuple(spec.replicas.at(moment) for spec in self._varying)
        return found

    def next_timer(self, after: datetime) -> datetime | None:
        """The first moment after `after` at which a reconcile with the same desired replicas could act
        differently on an unchanged world: a Job pod's work done (`World.finish_jobs`)."""
        return min((end for end in self.world.finish_at.values() if end > after), default=None)

    # -- ReplicaSets ------------------------------------------------------------------------------

    def _replica_set(self, spec: WorkloadSpec, desired_at: datetime, at: datetime, at_most: int | None = None) -> None:
        desired = self.rollouts.replicas(spec.key)
        if desired is None:
            desired = spec.replicas.at(desired_at)
        self.world.set_scale(spec.key, desired)
        count = self.world.owned_count(spec.key)
        if count < desired:
            for _ in range(min(desired - count, at_most if at_most is not None else desired)):
                name = self._fresh_name(spec.namespace, spec.owner_name)
                self._create(spec, name, at)
        elif count > desired and at_most is None:
            for key in self._scale_down_order(self.world.owned(spec.key), at)[: count - desired]:
                self.world.scale_down(key, at)

    def _scale_down_order(self, keys: list[str], at: datetime) -> list[str]:
        """The ReplicaSet controller's order of deletion (`ActivePodsWithRanks.Less` in
        pkg/controller/controller_utils.go, with LogarithmicScaleDown, GA since 1.31): unassigned
        first; Pending before Running; not Ready before Ready; lower pod-deletion-cost first; more
        active pods of the same workload on the pod's node first; then, among Ready pods, the log2
        bucket of the time since each became Ready (more recent first) and among pods not Ready the
        bucket of the time since creation, and within a bucket the pod UID, which is random: here a
        hash of the scenario's seed and the pod's name, so a run stays reproducible."""
        world = self.world
        per_node: Counter[str | None] = Counter(world.pod_record(key).node_name for key in keys)

        def rank(key: str) -> tuple[bool, bool, int, int, int, bytes]:
            record = world.pod_record(key)
            bound = record.node_name is not None
            ready = world.is_ready(key, at)
            colocated = -per_node[record.node_name] if bound else 0
            since = world.ready_at[key] if ready else world.created_at.get(key, at)
            return (bound, ready, record.scale_down_cost, colocated, log_bucket(at - since), self._uid(key))

        return sorted(keys, key=rank)

    def _uid(self, key: str) -> bytes:
        """A stand-in for the pod's UID, the last tie-break: random to the controller, fixed by the seed here.
        Kept once made (every scale-down ranks all of a ReplicaSet's pods), up to `UIDS_KEPT` of them."""
        uid = self._uids.get(key)
        if uid is None:
            if len(self._uids) >= UIDS_KEPT:
                self._uids.clear()
            uid = self._uids[key] = hashlib.blake2b(f"{self._seed}/{key}".encode(), digest_size=8).digest()
        return uid

    # -- StatefulSets -------------------------------------------------------------------------------

    def _stateful_set(self, spec: WorkloadSpec, desired_at: datetime, at: datetime) -> None:
        desired = spec.replicas.at(desired_at)
        self.world.set_scale(spec.key, desired)
        by_ordinal = {int(key.rsplit("-", 1)[1]): key for key in self.world.owned(spec.key)}
        for ordinal in range(desired):
            if ordinal not in by_ordinal:
                self._create(spec, f"{spec.owner_name}-{ordinal}", at)
        for ordinal in sorted(by_ordinal, reverse=True):
            if ordinal >= desired:
                self.world.scale_down(by_ordinal[ordinal], at)

    def _create(self, spec: WorkloadSpec, name: str, at: datetime) -> None:
        extra = {"statefulset.kubernetes.io/pod-name": name} if spec.ordinal else None
        pod = objects.stamp_pod(
            spec.template,
            name=name,
            owner_kind=spec.owner_kind,
            owner_name=spec.owner_name,
            created=at,
            extra_labels=extra,
        )
        if spec.claims:
            volumes = [v for v in pod["spec"].get("volumes") or [] if v.get("name") not in spec.claims]
            for claim in spec.claims:
                volumes.append({"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-{name}"}})
            pod["spec"]["volumes"] = volumes
        self.world.add_pod(pod, startup_seconds=spec.startup_seconds, pool_hint=spec.pool)

    # -- CronJobs and Jobs ----------------------------------------------------------------------------

    def _slot_to_start(self, cron: CronJobSpec, desired_at: datetime) -> int | None:
        """The CronJob's schedule slot at `desired_at` when its Job is still to start; None when it started or
        the CronJob is not active then."""
        slot = int(desired_at.timestamp() // 60) // cron.every_minutes
        if self._last_slot.get(cron.name) == slot or not cron.active_at(desired_at):
            return None
        return slot

    def _start_jobs(self, cron: CronJobSpec, desired_at: datetime, at: datetime) -> None:
        slot = self._slot_to_start(cron, desired_at)
        if slot is None:
            return
        self._last_slot[cron.name] = slot
        name = f"{cron.name}-{slot * cron.every_minutes}"
        job = _Job(cron, name)
        if job.key not in self.jobs:
            self.jobs[job.key] = job

    def _run_job(self, job: _Job, at: datetime) -> None:
        cron = job.cron
        active = self.world.owned_count(job.key)
        wanted = cron.parallelism - job.succeeded - active
        for _ in range(max(0, wanted)):
            name = self._fresh_name(cron.namespace, job.name)
            pod = objects.stamp_pod(
                cron.template,
                name=name,
                owner_kind="Job",
                owner_name=job.name,
                created=at,
                extra_labels={"job-name": job.name},
            )
            low, high = cron.duration_minutes
            runtime = self._durations.randint(low, high) * 60
            self.world.add_pod(pod, startup_seconds=0, runtime_seconds=runtime, pool_hint=cron.pool)

    # -- DaemonSets and static pods -------------------------------------------------------------------

    def add_daemon_pods(self, node_name: str, at: datetime) -> None:
        """What every node runs from the moment it joins: DaemonSet and static (mirror) pods."""
        pool = self.world.node_pool(node_name)
        for daemon in self.daemonsets:
            if not _runs_in(daemon, pool):
                continue
            if daemon.mirror:
                pod = objects.stamp_pod(
                    daemon.template,
                    name=f"{daemon.name}-{node_name}",
                    owner_kind="Node",
                    owner_name=node_name,
                    created=at,
                    node_name=node_name,
                )
            else:
                pod = objects.stamp_pod(
                    daemon.template,
                    name=self._daemon_pod_name(daemon, node_name),
                    owner_kind="DaemonSet",
                    owner_name=daemon.name,
                    created=at,
                    node_name=node_name,
                )
            self.world.add_pod(pod, startup_seconds=0)

    def _daemon_pod_name(self, daemon: DaemonSetSpec, node_name: str) -> str:
        """The DaemonSet's name and five characters from the node's name; others when a pod has that name
        already (on thousands of nodes five characters collide, as generateName's do, and the API server's
        answer is another name)."""
        namespace = (daemon.template.get("metadata") or {}).get("namespace") or "default"
        name = f"{daemon.name}-{objects.short_hash(daemon.name, node_name, length=5)}"
        attempt = 0
        while f"{namespace}/{name}" in self.world.pods:
            attempt += 1
            name = f"{daemon.name}-{objects.short_hash(daemon.name, node_name, str(attempt), length=5)}"
        return name

    def daemon_templates(self, pool: str | None) -> list[DaemonSetSpec]:
        return [daemon for daemon in self.daemonsets if _runs_in(daemon, pool)]

    def daemon_requests(self, pool: str | None) -> Resources:
        """What the DaemonSet and static pods of every node of the pool request together."""
        cached = self._daemon_requests.get(pool)
        if cached is not None:
            return cached
        total = ZERO
        for daemon in self.daemon_templates(pool):
            pod = objects.stamp_pod(
                daemon.template, name=daemon.name, owner_kind=None, owner_name=None, created=self.world.now
            )
            total = total + parsing.parse_pod(pod).requests
        self._daemon_requests[pool] = total
        return total

    # -- names ------------------------------------------------------------------------------------------

    def _fresh_name(self, namespace: str, prefix: str) -> str:
        while True:
            suffix = "".join(self._names.choice(NAME_ALPHABET) for _ in range(5))
            name = f"{prefix}-{suffix}"
            if f"{namespace}/{name}" not in self.world.pods:
                return name


def log_bucket(elapsed: timedelta) -> int:
    """`logarithmicRankDiff`'s rank of a duration: floor(log2) of its nanoseconds; -1 when not positive.
    Pods whose times since Ready (or creation) fall in one bucket (say 73 to 146 minutes) are equals."""
    nanoseconds = (elapsed.days * 86_400 + elapsed.seconds) * 1_000_000_000 + elapsed.microseconds * 1_000
    return int(math.log2(nanoseconds)) if nanoseconds > 0 else -1


def _runs_in(daemon: DaemonSetSpec, pool: str | None) -> bool:
    return daemon.pools is None or (pool is not None and pool in daemon.pools)
