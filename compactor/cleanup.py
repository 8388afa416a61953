"""`cleanup`: remove every trace node-compactor can leave in a cluster, and nothing a person set.

What node-compactor writes (DESIGN.md), and what cleanup does with it:

- Node annotations `underutilized-since`, `drain-started-at`, `drain-failed-at`,
  and node replacement's `replaced-by` and `replacement-failed-at`: removed.
  `node-compactor.dev/disabled` is an operator's opt-out, set by a person:
  left, and reported as left.
- The PreferNoSchedule taints `node-compactor.dev/underutilized` and
  `node-compactor.dev/reserved`: removed.
- A cordon: undone only on a node that carries node-compactor's own
  `drain-started-at`; any other cordon is a person's and is left (reported).
- `controller.kubernetes.io/pod-deletion-cost` on a pod: removed only where
  the pod's `node-compactor.dev/deletion-cost` record shows the value is still
  node-compactor's; the record is removed in any case, a cost changed since
  stays (reported).
- Node replacement's placeholder pods: deleted, each one that is in the
  placeholder namespace (`--placeholder-namespace`, default `node-compactor`,
  the configuration's `placeholderNamespace`), carries the label
  `node-compactor.dev/placeholder: "true"` AND is named
  `node-compactor-placeholder-*`. A pod that has only some of the three is not
  node-compactor's: left (one with label and name in another namespace is
  reported, it is likely a placeholder namespace cleanup was not told of).
- The HPA floor's `hpa-base-min-replicas` and `hpa-min-replicas-reason`:
  removed, and `minReplicas` set back to the recorded base, but only while it
  still holds the value node-compactor last wrote (the head of the reason
  annotation); a minimum someone changed since is theirs and stays (reported).
- The Leases `node-compactor` and `node-compactor-hpa`: deleted last. A Lease
  someone holds means a run is in progress: cleanup refuses (exit 1) and
  changes nothing. While it works, cleanup holds both Leases itself, so a
  scheduled run that starts meanwhile does nothing.

The planning is pure (`plan_node`, `plan_pod`, `plan_hpa`: raw JSON in, a
`Change` out). The shell reads through `kube.Cluster`, sends each change as a
merge patch guarded by the resourceVersion it was planned from, and on a
409 reads the object again and plans it again. A dry run reads, plans and
reports, and writes nothing. Cleanup is run by a person with their own
credentials (`permissions.CLEANUP_RBAC_RULES`); the function's role has none
of its rights. It never deletes a node, an HPA or a pod other than a
placeholder, and never writes a field it did not name above.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from compactor import permissions
from compactor.core.model import (
    DELETION_COST,
    DISABLED,
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    PLACEHOLDER_LABEL,
    PLACEHOLDER_PREFIX,
    PREFER_NO_SCHEDULE,
    REPLACEABLE_SINCE,
    REPLACED_BY,
    REPLACEMENT_FAILED_AT,
    REPLACES,
    RESERVED_TAINT,
    SOFT_TAINT,
    STEERED_COST,
    UNDERUTILIZED_SINCE,
)
from compactor.core.timing import format_stamp
from compactor.errors import EXIT_OK, BadInputError, CompactorError, LeaseHeldError, RunFailedError, SnapshotError
from compactor.hpa import planner as hpa_planner
from compactor.hpa import reading as hpa_reading
from compactor.hpa.model import BASE_MIN_REPLICAS, ENABLED, MIN_REPLICAS_REASON
from compactor.settings import arguments, names

log = logging.getLogger(__name__)

Kind = Literal["Node", "Pod", "HorizontalPodAutoscaler", "Lease"]
NODE_ANNOTATIONS = (
    UNDERUTILIZED_SINCE,
    DRAIN_STARTED_AT,
    DRAIN_FAILED_AT,
    REPLACED_BY,
    REPLACEMENT_FAILED_AT,
    REPLACEABLE_SINCE,
)
OUR_TAINTS = (SOFT_TAINT, RESERVED_TAINT)
LEASES = (permissions.COMPACTOR_LEASE, permissions.HPA_FLOOR_LEASE)
# A 409 means the object changed between the read and the write: read it again and plan it again.
ATTEMPTS = 3
# Held by cleanup while it works; long enough for a cluster of thousands of nodes read and written one by one.
LEASE_SECONDS = 900


@dataclass(frozen=True)
class Change:
    """What cleanup does to one object: `patch` (a merge patch carrying the resourceVersion it was planned
    from; None when nothing is written) or `delete` (a placeholder pod), what goes and what stays, in words."""

    kind: Kind
    namespace: str | None
    name: str
    patch: dict[str, Any] | None
    removed: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    delete: bool = False

    @property
    def writes(self) -> bool:
        return self.delete or self.patch is not None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _object(value: object) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a field of the wrong shape holds nothing of ours)."""
    return value if isinstance(value, dict) else {}


def _metadata(obj: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    meta = _object(obj.get("metadata"))
    return meta, _object(meta.get("annotations"))


def _guarded(meta: Mapping[str, Any], annotations: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    guarded: dict[str, Any] = {"resourceVersion": str(meta.get("resourceVersion") or "")}
    if annotations:
        guarded["annotations"] = dict(annotations)
    return guarded


def plan_node(node: Mapping[str, Any]) -> Change | None:
    """node-compactor's annotations, taints and cordon on one Node; None when it carries none and no
    person's cordon or opt-out worth reporting."""
    meta, annotations = _metadata(node)
    spec = _object(node.get("spec"))
    removed: list[str] = []
    left: list[str] = []
    drop = {key: None for key in NODE_ANNOTATIONS if key in annotations}
    removed += [f"annotation {key}" for key in drop]
    if DISABLED in annotations:
        left.append(f"annotation {DISABLED}={annotations[DISABLED]!r} (an operator's opt-out, set by a person)")
    spec_patch: dict[str, Any] = {}
    taints = spec.get("taints") if isinstance(spec.get("taints"), list) else []
    assert isinstance(taints, list)
    # node-compactor only ever writes its keys with PreferNoSchedule: another effect is someone else's.
    kept = [t for t in taints if not (_object(t).get("key") in OUR_TAINTS and t.get("effect") == PREFER_NO_SCHEDULE)]
    removed += [f"taint {t['key']}:{PREFER_NO_SCHEDULE}" for t in taints if t not in kept]
    left += [
        f"taint {t['key']}:{t.get('effect')} (an effect node-compactor never sets)"
        for t in kept
        if _object(t).get("key") in OUR_TAINTS
    ]
    if len(kept) < len(taints):
        spec_patch["taints"] = kept
    if spec.get("unschedulable"):
        if DRAIN_STARTED_AT in annotations:
            spec_patch["unschedulable"] = False
            removed.append("cordon (node-compactor's drain: uncordoned)")
        else:
            left.append("cordon (no drain-started-at: someone else cordoned it)")
    if not removed and not left:
        return None
    patch: dict[str, Any] | None = None
    if removed:
        patch = {"metadata": _guarded(meta, drop)}
        if spec_patch:
            patch["spec"] = spec_patch
    return Change("Node", None, str(meta.get("name") or ""), patch, tuple(removed), tuple(left))


def plan_pod(pod: Mapping[str, Any]) -> Change | None:
    """node-compactor's pod-deletion-cost and its record on one Pod; None when there is no record."""
    meta, annotations = _metadata(pod)
    ours = annotations.get(STEERED_COST)
    if ours is None or meta.get("deletionTimestamp") is not None:
        return None  # never node-compactor's, or going away with its annotations
    cost = annotations.get(DELETION_COST)
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
    if cost == ours:
        drop: dict[str, str | None] = {DELETION_COST: None, STEERED_COST: None}
        removed = (f"pod-deletion-cost {cost} and its record {STEERED_COST}",)
        return Change("Pod", namespace, name, {"metadata": _guarded(meta, drop)}, removed)
    left = () if cost is None else (f"pod-deletion-cost {cost} (changed since node-compactor wrote {ours}: not ours)",)
    patch = {"metadata": _guarded(meta, {STEERED_COST: None})}
    return Change("Pod", namespace, name, patch, (f"annotation {STEERED_COST}",), left)


def plan_placeholder(pod: Mapping[str, Any], namespace: str) -> Change | None:
    """Node replacement's placeholder pod: deleted when it is in `namespace` (the placeholder namespace),
    labelled as one and named as one; None for any other pod, but for a labelled and named one elsewhere,
    which is reported and left."""
    meta = _object(pod.get("metadata"))
    labels = _object(meta.get("labels"))
    name = str(meta.get("name") or "")
    if labels.get(PLACEHOLDER_LABEL) != "true" or not name.startswith(PLACEHOLDER_PREFIX):
        return None  # not node-compactor's: it writes both, always together
    pod_namespace = str(meta.get("namespace") or "default")
    if pod_namespace != namespace:
        why = (
            f"left: outside the placeholder namespace {namespace} (if node-compactor's placeholderNamespace "
            f"was {pod_namespace}, run cleanup again with --placeholder-namespace {pod_namespace})"
        )
        return Change("Pod", pod_namespace, name, None, (), (why,))
    if meta.get("deletionTimestamp") is not None:
        return None  # going away already
    replaces = str(_object(meta.get("annotations")).get(REPLACES) or "")
    what = "placeholder pod deleted" + (f" (it asked for a node to replace {replaces})" if replaces else "")
    return Change("Pod", pod_namespace, name, None, (what,), delete=True)


def plan_hpa(obj: Mapping[str, Any]) -> Change | None:
    """The HPA floor's changes to one HorizontalPodAutoscaler; None when it carries none of its annotations."""
    meta, annotations = _metadata(obj)
    if BASE_MIN_REPLICAS not in annotations and MIN_REPLICAS_REASON not in annotations:
        return None
    hpa = hpa_reading.hpa_from(obj)
    drop: dict[str, str | None] = {key: None for key in (BASE_MIN_REPLICAS, MIN_REPLICAS_REASON) if key in annotations}
    removed = [f"annotation {key}" for key in drop]
    left: list[str] = []
    patch: dict[str, Any] = {"metadata": _guarded(meta, drop)}
    problems: list[str] = []
    base = hpa_planner.parse_base(hpa, problems)
    written = hpa_planner.last_set(hpa)
    current = hpa.min_replicas
    if written is None:
        left.append(f"minReplicas {current} (no record of the value node-compactor set, so it may be the owner's)")
    elif written != current:
        left.append(f"minReplicas {current} (changed since node-compactor set {written}: the owner's)")
    elif base is None:
        why = "; ".join(problems) or "no base recorded"
        left.append(f"minReplicas {current} (the owner's base is unknown: {why})")
    elif base != current:
        restored = min(base, hpa.max_replicas)
        patch["spec"] = {"minReplicas": restored}
        removed.append(f"minReplicas {current} -> {restored} (the owner's base)")
    if annotations.get(ENABLED) is not None:
        left.append(f"annotation {ENABLED}={annotations[ENABLED]!r} (the owner's: the HPA floor job reads it)")
    return Change("HorizontalPodAutoscaler", hpa.namespace, hpa.name, patch, tuple(removed), tuple(left))


def plan(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    hpas: Iterable[Mapping[str, Any]],
    *,
    placeholder_namespace: str = permissions.DEFAULT_PLACEHOLDER_NAMESPACE,
) -> list[Change]:
    """Every change cleanup makes to what was read, nodes first (their taints and cordons matter most),
    then the placeholders (each keeps a node the Cluster Autoscaler would otherwise remove)."""
    pods = list(pods)
    planned = [plan_node(node) for node in nodes]
    planned += [plan_placeholder(pod, placeholder_namespace) for pod in pods]
    planned += [plan_pod(pod) for pod in pods]
    planned += [_unreadable_hpa_kept(hpa) for hpa in hpas]
    return [change for change in planned if change is not None]


def _unreadable_hpa_kept(obj: Mapping[str, Any]) -> Change | None:
    """`plan_hpa`, or, for an HPA whose fields do not read, a Change that leaves it and says why."""
    try:
        return plan_hpa(obj)
    except SnapshotError as error:
        meta, _ = _metadata(obj)
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "?")
        return Change("HorizontalPodAutoscaler", namespace, name, None, (), (f"left as it is: {error.message}",))


# -- the shell ---------------------------------------------------------------------------------


@dataclass
class Result:
    dry_run: bool
    done: list[Change] = field(default_factory=list)  # written (or, in a dry run, to be written)
    failed: list[tuple[Change, str]] = field(default_factory=list)
    refused: str | None = None  # why nothing was written (a Lease is held)

    def to_dict(self) -> dict[str, Any]:
        def entry(change: Change, what: tuple[str, ...]) -> dict[str, Any]:
            return {"kind": change.kind, "namespace": change.namespace, "name": change.name, "what": list(what)}

        return {
            "dryRun": self.dry_run,
            "refused": self.refused,
            "removed": [entry(change, change.removed) for change in self.done if change.removed],
            "left": [entry(change, change.left) for change in self.done if change.left],
            "failed": [{**entry(change, change.removed), "why": why} for change, why in self.failed],
        }


def run(
    cluster: Any,
    *,
    lease_namespace: str,
    dry_run: bool,
    placeholder_namespace: str = permissions.DEFAULT_PLACEHOLDER_NAMESPACE,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Result:
    """Hold both Leases (a dry run only checks them), read, write each change, delete the Leases."""
    from compactor.kube import client as kube

    result = Result(dry_run)
    holder = f"node-compactor-cleanup-{kube.new_run_id().rsplit('-', 1)[-1]}"
    found = {name: cluster.lease(lease_namespace, name) for name in LEASES}
    held = {name: kube.lease_held(lease, clock()) for name, lease in found.items()}
    busy = [(name, holding) for name, holding in held.items() if holding is not None]
    if busy:
        result.refused = "; ".join(
            f"Lease {lease_namespace}/{name} is held by {who} until {format_stamp(until)}"
            for name, (who, until) in busy
        ) + (
            ': a node-compactor run is in progress. Stop its scheduler first (docs/deploy.md, "Turn it off") '
            "and run cleanup again once the Lease has expired; nothing was changed"
        )
        return result
    taken: list[str] = []
    try:
        if not dry_run:
            for name in LEASES:
                cluster.acquire_lease(lease_namespace, holder, duration_seconds=LEASE_SECONDS, now=clock(), name=name)
                taken.append(name)
        changes = plan(
            _list_nodes(cluster), _list_pods(cluster), _list_hpas(cluster), placeholder_namespace=placeholder_namespace
        )
        for change in changes:
            if dry_run or not change.writes:
                result.done.append(change)
            else:
                _write(cluster, change, result)
        # The Leases go last: until then they keep scheduled runs from writing behind cleanup's back.
        for name in LEASES:
            existed = found[name] is not None
            if dry_run:
                if existed:
                    result.done.append(Change("Lease", lease_namespace, name, None, ("deleted",)))
            else:
                _delete_lease(cluster, lease_namespace, name, holder, existed=existed, result=result)
        taken = []
    finally:
        for name in taken:  # an error part-way: give the Leases back so the next attempt need not wait
            cluster.release_lease(lease_namespace, holder, name=name)
    return result


def _list_nodes(cluster: Any) -> list[dict[str, Any]]:
    return list(cluster.pages("list nodes", cluster.core.list_node))


def _list_pods(cluster: Any) -> list[dict[str, Any]]:
    return list(cluster.pages("list pods", cluster.core.list_pod_for_all_namespaces))


def _list_hpas(cluster: Any) -> list[dict[str, Any]]:
    from kubernetes import client

    autoscaling = client.AutoscalingV2Api(cluster.api_client)
    return list(
        cluster.pages("list HorizontalPodAutoscalers", autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces)
    )


_READERS: dict[Kind, Callable[[Any, Change], dict[str, Any] | None]] = {
    "Node": lambda cluster, change: cluster.node(change.name),
    "Pod": lambda cluster, change: cluster.pod(change.namespace, change.name),
    "HorizontalPodAutoscaler": lambda cluster, change: cluster.hpa(change.namespace, change.name),
}
_PLANNERS: dict[Kind, Callable[[Mapping[str, Any]], Change | None]] = {
    "Node": plan_node,
    "Pod": plan_pod,
    "HorizontalPodAutoscaler": plan_hpa,
}


def _send(cluster: Any, change: Change) -> None:
    if change.delete:
        # A placeholder, as plan_placeholder checked: in the placeholder namespace, labelled and named as one.
        cluster.delete_pod(change.namespace, change.name)
        return
    assert change.patch is not None
    if change.kind == "Node":
        cluster.patch_node(change.name, change.patch)
    elif change.kind == "Pod":
        cluster.patch_pod(change.namespace, change.name, change.patch)
    else:
        cluster.patch_hpa(change.namespace, change.name, change.patch)


def _write(cluster: Any, change: Change, result: Result) -> None:
    """Send the change; on a 409 read the object again and send what is still to do, ATTEMPTS times at most."""
    from compactor.kube.answers import ConflictError, NotFoundError

    current: Change | None = change
    for _ in range(ATTEMPTS):
        if current is None:
            return  # nothing of ours is left on it
        if not current.writes:
            result.done.append(current)
            return
        try:
            _send(cluster, current)
        except NotFoundError:
            return  # gone, and its traces with it
        except ConflictError:
            try:
                fresh = _READERS[change.kind](cluster, change)
                current = None if fresh is None else _PLANNERS[change.kind](fresh)
            except CompactorError as error:
                result.failed.append((change, f"cannot read it again after a conflict: {error}"))
                return
            continue
        except CompactorError as error:
            result.failed.append((current, error.message))
            return
        result.done.append(current)
        return
    if current is not None:
        result.failed.append((current, f"it changed under every one of {ATTEMPTS} attempts; run cleanup again"))


def _delete_lease(cluster: Any, namespace: str, name: str, holder: str, *, existed: bool, result: Result) -> None:
    from compactor.kube.answers import ConflictError, NotFoundError

    lease = cluster.lease(namespace, name)
    if lease is None:
        return
    spec = lease.get("spec") or {}
    version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
    change = Change("Lease", namespace, name, None, ("deleted",))
    if spec.get("holderIdentity") != holder:
        result.failed.append((change, f"another run took it over ({spec.get('holderIdentity')}); left in place"))
        return
    try:
        cluster.delete_lease(namespace, name, resource_version=version)
    except NotFoundError:
        return
    except ConflictError:
        result.failed.append((change, "it changed while cleanup held it; left in place"))
        return
    except CompactorError as error:
        result.failed.append((change, error.message))
        return
    if existed:
        result.done.append(change)


# -- the command -------------------------------------------------------------------------------


def add_parser(commands: Any) -> None:
    cleanup = commands.add_parser(
        "cleanup",
        help="remove every trace node-compactor left in a cluster (annotations, taints, its cordons, "
        "pod-deletion-costs, placeholder pods, HPA minReplicas, Leases); never what a person set",
    )
    arguments.cluster_arguments(cleanup)
    cleanup.add_argument(
        "--lease-namespace",
        metavar="NS",
        help="namespace of node-compactor's Leases (default: COMPACTOR_LEASE_NAMESPACE, else kube-system)",
    )
    cleanup.add_argument(
        "--placeholder-namespace",
        metavar="NS",
        default=permissions.DEFAULT_PLACEHOLDER_NAMESPACE,
        help="namespace of node replacement's placeholder pods, the configuration's placeholderNamespace "
        f"(default: {permissions.DEFAULT_PLACEHOLDER_NAMESPACE}); placeholders are deleted there only",
    )
    cleanup.add_argument("--dry-run", action="store_true", help="say what would be removed, write nothing")
    cleanup.add_argument("--json", action="store_true", help="print the JSON report instead of text")


def command(args: argparse.Namespace) -> int:
    from compactor import logs, service
    from compactor.kube.client import Cluster

    logs.configure(sys.stderr)  # stdout carries the report
    namespace = service.lease_namespace(os.environ, args.lease_namespace)
    if (problem := names.namespace_problem(args.placeholder_namespace)) is not None:
        raise BadInputError(f"--placeholder-namespace: {problem}")
    # Never the function's own configuration or cluster variables: a person names the cluster.
    connector = service.connector_from({}, kubeconfig=args.kubeconfig, gke_cluster=args.gke)
    connection = connector()
    try:
        cluster = Cluster(connection.api_client)
        # A 429 (API Priority and Fairness) is waited out, but never past the time cleanup holds the Leases.
        deadline = time.monotonic() + LEASE_SECONDS
        cluster.read_budget = lambda: deadline - time.monotonic()
        result = run(
            cluster,
            lease_namespace=namespace,
            dry_run=args.dry_run,
            placeholder_namespace=args.placeholder_namespace,
        )
    finally:
        connection.close()
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(to_text(result))
    if result.refused is not None:
        raise LeaseHeldError(result.refused)
    if result.failed:
        raise RunFailedError(
            f"cleanup left {len(result.failed)} object(s) as they were",
            [f"{change.kind} {change.key}: {why}" for change, why in result.failed],
        )
    return EXIT_OK


def to_text(result: Result) -> str:
    if result.refused is not None:
        return f"Nothing was changed: {result.refused}.\n"
    lines: list[str] = []
    removed = [change for change in result.done if change.removed]
    left = [change for change in result.done if change.left]
    heading = "Would remove (dry run: nothing was written):" if result.dry_run else "Removed:"
    if removed:
        lines.append(heading)
        lines += [f"  {change.kind} {change.key}: {'; '.join(change.removed)}" for change in removed]
    else:
        lines.append("No trace of node-compactor found." if not result.failed else "Nothing was removed.")
    if left:
        lines.append("Left as they are (not node-compactor's):")
        lines += [f"  {change.kind} {change.key}: {'; '.join(change.left)}" for change in left]
    if result.failed:
        lines.append("Could not remove:")
        lines += [f"  {change.kind} {change.key}: {why}" for change, why in result.failed]
    return "\n".join(lines) + "\n"
