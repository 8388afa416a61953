"""The executor's step for pods a drain moves by a surging rolling restart (`core.surge` decides which).

For each Deployment in the decision's `restarts`: re-read it, check again on
that fresh copy that a restart surges and that nothing else is rolling it
out, and patch its pod template's `kubectl.kubernetes.io/restartedAt`
annotation (what `kubectl rollout restart` writes), guarded by its
resourceVersion. The Deployment controller then starts the new pod first;
the drained node being cordoned, the scheduler puts it elsewhere, and the
old pod goes only once the new one is Ready. The step then waits, within
the run's budget and the drain's timeout, until each Deployment has every
replica updated and available and the old pod is gone, and counts the pod
as moved. What is not done by then is reported as waiting; the next run
finds the rollout under way (its restartedAt is after the drain started)
and waits again instead of restarting twice.

Must never: patch anything but that one annotation; restart a Deployment
whose fresh copy no longer surges, is paused, or is mid-rollout for another
reason; delete or evict a pod; undo a restart (a rollback leaves the
Deployment as it is, and its rollout finishes on its own); write in a dry
run (the executor does not call it then).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from compactor.core import surge
from compactor.core.model import DRAIN_STARTED_AT, RESTARTED_AT, Deployment
from compactor.core.plan import SurgeVerdict
from compactor.core.timing import format_stamp
from compactor.errors import CompactorError, TransientError
from compactor.kube import workloads
from compactor.kube.answers import ConflictError, NotFoundError

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0
PATCH_ATTEMPTS = 3
EVENT_REASON = "NodeCompactorRollingRestart"


class DeploymentPort(Protocol):
    """What the step needs of a cluster: `compactor.kube.client.Cluster` live. Objects are Kubernetes JSON;
    `patch_deployment` applies a JSON merge patch whose metadata.resourceVersion is a precondition
    (ConflictError), and raises NotFoundError for a missing Deployment."""

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def patch_deployment(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

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
    ) -> None: ...


@dataclass(frozen=True)
class _Pending:
    pod: str
    deployment: str
    # The Deployment's metadata.generation the controller must reach (after our patch, or the one seen).
    generation: int


@dataclass
class Restarts:
    """What the step did, by pod ("namespace/name")."""

    # Deployments restarted by this run ("namespace/name" -> the restartedAt written).
    written: dict[str, str] = field(default_factory=dict)
    # Pods moved: their Deployment has its new pod Ready elsewhere and the pod is gone.
    moved: list[str] = field(default_factory=list)
    # Pods still on the node, and why (a rollout under way, a restart refused on fresh data).
    waiting: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # Restarts not written because the API server kept answering 5xx (or not at all), each with its reason.
    skipped: list[str] = field(default_factory=list)
    # The pods whose rollout `wait` still has to see finish.
    pending: list[_Pending] = field(default_factory=list)


def start(
    cluster: DeploymentPort,
    node: dict[str, Any],
    restarts: Sequence[tuple[str, str]],
    *,
    clock: Callable[[], datetime],
    may_act: Callable[[str], bool],
    verdicts: Sequence[SurgeVerdict] = (),
) -> Restarts:
    """Restart the Deployments of `restarts` (pod, deployment) for the drain of `node` (its fresh JSON).

    `may_act(what)` is asked before each patch (the run's Lease and deadline). `verdicts` are the node's
    single-replica pods as planned: the Node's Event names the pods moved by a restart and says why each
    other one is not. Returns at once; `wait` sees the rollouts through.
    """
    done = Restarts()
    meta = node.get("metadata") or {}
    node_name = str(meta.get("name", ""))
    drain_started = (meta.get("annotations") or {}).get(DRAIN_STARTED_AT)
    by_deployment: dict[str, list[str]] = {}
    for pod_key, deployment_key in restarts:
        by_deployment.setdefault(deployment_key, []).append(pod_key)
    for deployment_key, pods in sorted(by_deployment.items()):
        generation = _start(cluster, done, node_name, deployment_key, pods, drain_started, clock, may_act)
        if generation is not None:
            done.pending.extend(_Pending(pod, deployment_key, generation) for pod in pods)
    if done.written:
        _node_event(cluster, node, by_deployment, done, verdicts, clock())
    return done


def wait(
    cluster: DeploymentPort,
    done: Restarts,
    *,
    time_left: Callable[[], float],
    sleep: Callable[[float], None],
    poll_seconds: float = POLL_SECONDS,
) -> None:
    """Poll until each pending pod is moved, while `time_left()` (the run's budget, the drain's timeout)
    allows another poll; what is left is reported as waiting, and the next run goes on."""
    _wait(cluster, done, done.pending, time_left, sleep, poll_seconds)
    done.pending = []


def _start(
    cluster: DeploymentPort,
    done: Restarts,
    node_name: str,
    deployment_key: str,
    pods: list[str],
    drain_started: str | None,
    clock: Callable[[], datetime],
    may_act: Callable[[str], bool],
) -> int | None:
    """Write the restart (or find this drain's under way); the generation to wait for, or None when not."""
    namespace, _, name = deployment_key.partition("/")
    for _ in range(PATCH_ATTEMPTS):
        try:
            raw = cluster.deployment(namespace, name)
        except CompactorError as error:
            _not_moved(done, pods, f"could not re-read Deployment {deployment_key}: {error.message}")
            return None
        if raw is None:
            _not_moved(done, pods, f"Deployment {deployment_key} no longer exists")
            return None
        fresh = _parsed(raw)
        if fresh is None:
            _not_moved(done, pods, f"Deployment {deployment_key} cannot be read")
            return None
        if surge.restarted_for_drain(fresh, drain_started):
            return fresh.generation  # this drain's restart, written by an earlier run: wait for it
        problems = surge.strategy_problems(fresh) + _fresh_rollout_problems(fresh)
        if problems:
            _not_moved(done, pods, f"Deployment {deployment_key} was not restarted: {'; '.join(problems)}")
            return None
        if not may_act(f"restart Deployment {deployment_key}"):
            _not_moved(done, pods, f"Deployment {deployment_key} was not restarted: this run may not act any more")
            return None
        stamp = format_stamp(clock())
        patch = {
            "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
            "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}},
        }
        try:
            answer = cluster.patch_deployment(namespace, name, patch)
        except ConflictError:
            continue  # changed since it was read: read it again and judge it again
        except NotFoundError:
            _not_moved(done, pods, f"Deployment {deployment_key} no longer exists")
            return None
        except TransientError as error:
            # Landed or not, the pod is not evicted (it is the restart's to move): the next run reads the
            # Deployment and finds this drain's restart under way, and waits, or restarts it then.
            done.skipped.append(f"restart Deployment {deployment_key}: {error.message}; the next run looks again")
            _not_moved(done, pods, f"restarting Deployment {deployment_key} failed: {error.message}")
            return None
        except CompactorError as error:
            done.errors.append(f"restart Deployment {deployment_key}: {error.message}")
            _not_moved(done, pods, f"restarting Deployment {deployment_key} failed: {error.message}")
            return None
        done.written[deployment_key] = stamp
        generation = (answer.get("metadata") or {}).get("generation")
        message = (
            f"node-compactor restarted the Deployment (restartedAt {stamp}) to move {', '.join(sorted(pods))} off "
            f"node {node_name}, which it is draining: the new pod starts elsewhere, the old one goes once it is Ready"
        )
        log.info(message, extra={"fields": {"event": "rolling-restart", "deployment": deployment_key}})
        cluster.event(
            {"metadata": {**(answer.get("metadata") or {}), "namespace": namespace, "name": name}},
            reason=EVENT_REASON,
            message=message,
            warning=False,
            now=clock(),
            kind="Deployment",
            api_version="apps/v1",
        )
        return generation if isinstance(generation, int) else fresh.generation + 1
    _not_moved(done, pods, f"Deployment {deployment_key} kept changing; the next run tries again")
    return None


def _wait(
    cluster: DeploymentPort,
    done: Restarts,
    pending: list[_Pending],
    time_left: Callable[[], float],
    sleep: Callable[[float], None],
    poll_seconds: float,
) -> None:
    """Poll until each pod is moved, or time is up (the rest is waiting; the next run goes on)."""
    left = list(pending)
    while left:
        still: list[_Pending] = []
        for item in left:
            why = _not_yet(cluster, item)
            if why is None:
                done.moved.append(item.pod)
            else:
                still.append(item)
                done.waiting[item.pod] = why
        for item in left:
            if item not in still:
                done.waiting.pop(item.pod, None)
        left = still
        if not left or time_left() < poll_seconds:
            return
        sleep(poll_seconds)


def _not_yet(cluster: DeploymentPort, item: _Pending) -> str | None:
    """Why the pod is not moved yet, or None once its Deployment is rolled out and the pod is gone."""
    namespace, _, name = item.deployment.partition("/")
    pod_namespace, _, pod_name = item.pod.partition("/")
    try:
        raw = cluster.deployment(namespace, name)
        pod = cluster.pod(pod_namespace, pod_name)
    except CompactorError as error:
        return f"rolling restart of Deployment {item.deployment}: could not read it ({error.message})"
    fresh = _parsed(raw) if raw is not None else None
    if fresh is None:
        return f"Deployment {item.deployment} is gone or unreadable; the pod follows the normal rules next run"
    waiting = f"rolling restart of Deployment {item.deployment} under way"
    if fresh.observed_generation < item.generation:
        return f"{waiting} (the controller has not observed it yet)"
    if fresh.updated_replicas < fresh.replicas or fresh.available_replicas < fresh.replicas:
        return (
            f"{waiting} ({fresh.updated_replicas} of {fresh.replicas} replica(s) updated, "
            f"{fresh.available_replicas} available)"
        )
    if pod is not None and not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return f"{waiting} (the new pod is Ready; the old one is still there)"
    return None


def _fresh_rollout_problems(deployment: Deployment) -> list[str]:
    """`surge.rollout_problems` on a fresh Deployment alone: its status counts every ReplicaSet's pods."""
    problems = surge.rollout_problems(deployment, ())
    if not problems and deployment.status_replicas != deployment.replicas:
        problems.append(f"it is mid-rollout ({deployment.status_replicas} pods for {deployment.replicas} replica(s))")
    return problems


def _parsed(raw: dict[str, Any]) -> Deployment | None:
    try:
        record = workloads.parse("Deployment", raw)
    except CompactorError:
        return None
    return record if isinstance(record, Deployment) else None


def _not_moved(done: Restarts, pods: list[str], why: str) -> None:
    log.info(why)
    for pod in pods:
        done.waiting[pod] = why


def _node_event(
    cluster: DeploymentPort,
    node: dict[str, Any],
    by_deployment: dict[str, list[str]],
    done: Restarts,
    verdicts: Sequence[SurgeVerdict],
    now: datetime,
) -> None:
    """One Event on the Node: the pods moved by a rolling restart, and why each other single-replica pod was not."""
    restarted = [
        (pod, deployment)
        for deployment, pods in sorted(by_deployment.items())
        if deployment in done.written
        for pod in pods
    ]
    cluster.event(node, reason=EVENT_REASON, message=node_message(restarted, verdicts), warning=False, now=now)


def node_message(restarted: Sequence[tuple[str, str]], verdicts: Sequence[SurgeVerdict]) -> str:
    """The Node Event's words: the pods (pod, Deployment) a rolling restart moves, and the reason each other
    single-replica pod of the node follows the normal rules."""
    moved = ", ".join(f"{pod} (Deployment {deployment})" for pod, deployment in restarted) or "no pod"
    message = f"node-compactor moves {moved} by a rolling restart instead of an eviction"
    others = [f"{verdict.pod} ({verdict.reason})" for verdict in verdicts if verdict.action == "evict"]
    if others:
        message += f"; left to the normal rules: {'; '.join(others)}"
    return message
