"""node-compactor's pod-deletion-cost: written on and taken back from the pods the plan names.

The plan (`core.steering`) says which pods get the cost. Each write re-reads the
pod and patches it guarded by its resourceVersion, so a change made meanwhile
wins and the next run looks again. A pod is written only while it has no
pod-deletion-cost or carries node-compactor's own (the cost equals the value
recorded in `STEERED_COST`); taking the cost back removes both annotations, or
only node-compactor's record once someone else has changed the cost.

The cost only steers the ReplicaSet controller's scale-downs: failing to write it
(a pod gone, no RBAC permission to patch pods) never fails the run. A conflict
(409: the pod changed since it was read) is read again and the write made
again, up to CONFLICT_RETRIES times, then skipped with its reason; so is a
write the API server kept answering with a 5xx or a broken connection.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from compactor.actuation.tainting import write_each
from compactor.core.model import DELETION_COST, STEERED_COST
from compactor.core.steering import STEER_COST
from compactor.errors import CompactorError, TransientError
from compactor.kube.answers import ConflictError, NotFoundError

log = logging.getLogger(__name__)

# Times a write that met a 409 Conflict is read and made again before it waits for the next run.
CONFLICT_RETRIES = 3


class PodWriter(Protocol):
    def pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...


def apply(
    cluster: PodWriter,
    add: Iterable[str],
    remove: Iterable[str],
    *,
    concurrency: int = 1,
    skipped: list[str] | None = None,
) -> tuple[list[str], list[str]]:
    """Give the pods of `add` node-compactor's cost and take it back from those of `remove`
    ("namespace/name"), `concurrency` pods at a time; returns the pods written, per direction.
    Writes given up after conflicts are added to `skipped`, each with its reason."""
    return write_each(
        add, remove, lambda key, wanted: _write(cluster, key, wanted=wanted, skipped=skipped), concurrency
    )


def _write(cluster: PodWriter, key: str, *, wanted: bool, skipped: list[str] | None = None) -> bool:
    """Whether the pod was patched (False: already as wanted, someone else's cost, gone, refused, or
    changed under us CONFLICT_RETRIES times)."""
    what = f"{'write' if wanted else 'take back'} node-compactor's pod-deletion-cost on {key}"
    for _ in range(CONFLICT_RETRIES):
        try:
            return _write_once(cluster, key, wanted=wanted)
        except ConflictError:
            continue  # the pod changed since it was read (or our write landed unseen): read it again
        except TransientError as error:
            reason = f"{what}: {error.message}; the next run tries again"
            break
    else:
        reason = f"{what}: the pod kept changing ({CONFLICT_RETRIES} conflicts); the next run tries again"
    log.warning("skipped: %s", reason)
    if skipped is not None:
        skipped.append(reason)
    return False


def _write_once(cluster: PodWriter, key: str, *, wanted: bool) -> bool:
    """One read and guarded write; ConflictError when the pod changed between the two."""
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
    except NotFoundError:
        return False  # gone since it was read
    except TransientError:
        raise  # skipped with its reason by `_write`
    except CompactorError as error:
        log.warning(
            "could not %s node-compactor's pod-deletion-cost on %s: %s", "write" if wanted else "remove", key, error
        )
        return False
    return True
