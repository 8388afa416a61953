"""node-compactor's pod-deletion-cost: written on and taken back from the pods the plan names.

The plan (`core.steering`) says which pods get the cost. Each write re-reads the
pod and patches it guarded by its resourceVersion, so a change made meanwhile
wins and the next run looks again. A pod is written only while it has no
pod-deletion-cost or carries node-compactor's own (the cost equals the value
recorded in `STEERED_COST`); taking the cost back removes both annotations, or
only node-compactor's record once someone else has changed the cost.

The cost only steers the ReplicaSet controller's scale-downs: failing to write it
(a pod gone, a conflict, no RBAC permission to patch pods) never fails the run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from compactor.core.model import DELETION_COST, STEERED_COST
from compactor.core.steering import STEER_COST
from compactor.errors import CompactorError
from compactor.kube import ConflictError, NotFoundError
from compactor.tainting import write_each

log = logging.getLogger(__name__)


class PodWriter(Protocol):
    def pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...


def apply(
    cluster: PodWriter, add: Iterable[str], remove: Iterable[str], *, concurrency: int = 1
) -> tuple[list[str], list[str]]:
    """Give the pods of `add` node-compactor's cost and take it back from those of `remove`
    ("namespace/name"), `concurrency` pods at a time; returns the pods written, per direction."""
    return write_each(add, remove, lambda key, wanted: _write(cluster, key, wanted=wanted), concurrency)


def _write(cluster: PodWriter, key: str, *, wanted: bool) -> bool:
    """Whether the pod was patched (False: already as wanted, someone else's cost, gone, changed, refused)."""
    namespace, _, name = key.partition("/")
    try:
        pod = cluster.pod(namespace, name)
        if pod is None:
            return False
        metadata = pod.get("metadata")
        if not isinstance(metadata, dict) or metadata.get("deletionTimestamp") is not None:
            return False  # unreadable, or going away: nothing to steer
        annotations = metadata.get("annotations") or {}
        if not isinstance(annotations, dict):
            return False
        cost = annotations.get(DELETION_COST)
        ours = annotations.get(STEERED_COST)
        if wanted:
            if cost is not None and cost != ours:
                return False  # a cost of its own: never changed
            if cost == STEER_COST and ours == STEER_COST:
                return False
            values: dict[str, str | None] = {DELETION_COST: STEER_COST, STEERED_COST: STEER_COST}
        else:
            if ours is None:
                return False
            # Someone changed the cost since node-compactor wrote it: theirs stays, the record goes.
            values = {DELETION_COST: None, STEERED_COST: None} if cost == ours else {STEERED_COST: None}
        guarded: dict[str, Any] = {"annotations": values}
        version = metadata.get("resourceVersion")
        if isinstance(version, str):
            guarded["resourceVersion"] = version
        cluster.patch_pod(namespace, name, {"metadata": guarded})
    except (ConflictError, NotFoundError):
        return False  # changed or gone since it was read: the next run looks again
    except CompactorError as error:
        log.warning(
            "could not %s node-compactor's pod-deletion-cost on %s: %s", "write" if wanted else "remove", key, error
        )
        return False
    return True
