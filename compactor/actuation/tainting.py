"""node-compactor's PreferNoSchedule taints: written and taken off as the plan says.

Cluster Autoscaler puts `DeletionCandidateOfClusterAutoscaler:PreferNoSchedule`
on the nodes it finds unneeded, so new pods go elsewhere while it decides
(utils/taints in kubernetes/autoscaler). node-compactor does the same with
`node-compactor.dev/underutilized` on the nodes it marked: the pods a drain
moves then fill the busier nodes first instead of the next candidates, so
the next drain is not undone by the last one. And with
`node-compactor.dev/reserved` on the nodes whose room a drain keeps for its
last pods (`reserve`, before the first eviction; taken off once no drain is
evicting). The scheduler only prefers other nodes; a pod that fits nowhere
else still lands on a tainted node.

Taints are a list the API replaces as a whole in a merge patch, so each
write re-reads the node and sends its taints back unchanged but for ours,
guarded by the node's resourceVersion: a concurrent change (409) is read
again and the write made again, up to CONFLICT_RETRIES times, then skipped
with its reason (`skipped`) for the next run; so is a write the API server
kept answering with a 5xx or a broken connection (`kube.TransientError`,
after the adapter's own retries). A cordoned node is never written
(a person's cordon, or a drain under way, keeps whatever it carries).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from compactor.core.model import PREFER_NO_SCHEDULE, RESERVED_TAINT, SOFT_TAINT
from compactor.errors import CompactorError, TransientError
from compactor.kube.answers import ConflictError, NotFoundError

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

# Times a taint write that met a 409 Conflict is read and made again before it waits for the next run.
CONFLICT_RETRIES = 3

OURS = {"key": SOFT_TAINT, "value": "true", "effect": PREFER_NO_SCHEDULE}
RESERVED = {"key": RESERVED_TAINT, "value": "true", "effect": PREFER_NO_SCHEDULE}


class NodeWriter(Protocol):
    def node(self, name: str) -> dict[str, Any] | None: ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...


def is_ours(taint: object, ours: dict[str, str] = OURS) -> bool:
    return isinstance(taint, dict) and taint.get("key") == ours["key"] and taint.get("effect") == ours["effect"]


def apply(
    cluster: NodeWriter,
    add: Iterable[str],
    remove: Iterable[str],
    *,
    concurrency: int = 1,
    taint: dict[str, str] = OURS,
    skipped: list[str] | None = None,
) -> tuple[list[str], list[str]]:
    """Put `taint` on `add` and take it off `remove`, `concurrency` nodes at a time (a first run
    marks many nodes at once); returns the nodes written, per direction. Writes given up after
    conflicts are added to `skipped`, each with its reason."""
    return write_each(
        add,
        remove,
        lambda name, wanted: _write(cluster, name, taint, wanted=wanted, skipped=skipped) == "written",
        concurrency,
    )


def write_each(
    add: Iterable[str], remove: Iterable[str], write: Callable[[str, bool], bool], concurrency: int
) -> tuple[list[str], list[str]]:
    """`write(name, True)` for each of `add` and `write(name, False)` for each of `remove`,
    `concurrency` at a time; returns the names whose write happened, per direction."""
    changes = [(name, True) for name in add] + [(name, False) for name in remove]
    if not changes:
        return [], []
    written = each(lambda change: write(*change), changes, concurrency)
    added = [name for (name, wanted), done in zip(changes, written, strict=True) if done and wanted]
    removed = [name for (name, wanted), done in zip(changes, written, strict=True) if done and not wanted]
    return added, removed


def each(call: Callable[[T], R], items: Sequence[T], concurrency: int) -> list[R]:
    """`call` on every item, `concurrency` at a time in a pool of threads (in this thread when one at a time);
    the answers in the items' order."""
    workers = min(concurrency, len(items))
    if workers <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(call, items))


def reserve(cluster: NodeWriter, names: Iterable[str], skipped: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Put the reserved taint on `names`, one by one; returns the nodes written and those that could
    not be made to carry it (the drain that needs it must not start)."""
    written: list[str] = []
    failed: list[str] = []
    for name in names:
        result = _write(cluster, name, RESERVED, wanted=True, skipped=skipped)
        if result == "written":
            written.append(name)
        elif result == "failed":
            failed.append(name)
    return written, failed


def _write(
    cluster: NodeWriter, name: str, ours: dict[str, str], *, wanted: bool, skipped: list[str] | None = None
) -> str:
    """ "written", "unchanged" (already as wanted) or "failed" (gone, cordoned, changed under us, refused)."""
    what = f"{'put' if wanted else 'take off'} the {ours['key']} taint on {name}"
    for _ in range(CONFLICT_RETRIES):
        try:
            return _write_once(cluster, name, ours, wanted=wanted)
        except ConflictError:
            continue  # changed since it was read (or our write landed though its answer was lost): read it again
        except TransientError as error:
            reason = f"{what}: {error.message}; the next run tries again"
            break
    else:
        reason = f"{what}: the node kept changing ({CONFLICT_RETRIES} conflicts); the next run tries again"
    log.warning("skipped: %s", reason)
    if skipped is not None:
        skipped.append(reason)
    return "failed"


def _write_once(cluster: NodeWriter, name: str, ours: dict[str, str], *, wanted: bool) -> str:
    """One read and guarded write; ConflictError when the node changed between the two."""
    try:
        node = cluster.node(name)
        if node is None:
            return "failed"
        spec = node.get("spec") or {}
        if not isinstance(spec, dict):
            return "failed"  # an unreadable spec: the node is left as it is
        if spec.get("unschedulable"):
            return "failed"
        current = spec.get("taints") or []
        if not isinstance(current, list):
            return "failed"
        kept = [taint for taint in current if not is_ours(taint, ours)]
        if (len(kept) < len(current)) == wanted:
            return "unchanged"
        taints = [*kept, ours] if wanted else kept
        patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": taints}}
        cluster.patch_node(name, patch)
    except NotFoundError:
        return "failed"  # gone since it was read
    except TransientError:
        raise  # skipped with its reason by `_write`
    except CompactorError as error:
        # The taint only steers the scheduler; failing to write it never fails the run.
        log.warning("could not %s the %s taint on %s: %s", "put" if wanted else "take off", ours["key"], name, error)
        return "failed"
    return "written"
