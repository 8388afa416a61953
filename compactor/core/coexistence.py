"""Beside a GKE ComputeClass threshold: the threshold each enabled pool follows, and the pools node-compactor
leaves to the Cluster Autoscaler.

A custom ComputeClass's `spec.autoscalingPolicy.consolidationThreshold` makes the Cluster Autoscaler
remove every node of the class whose cpu and memory requests are both below it. Where node-compactor's
own limit is at or below that threshold, every node it would drain is one the autoscaler removes
anyway, and measured on the simulator the pair did worse than the threshold alone (steady-fragmented:
409.3 node-hours against 385.8, docs/savings.md "Beside a ComputeClass threshold"); above it,
node-compactor adds the nodes between the two. So:

- a pool's threshold is that of the ComputeClass its nodes carry in `cloud.google.com/compute-class`
  (the highest one when they carry several: the side that leaves more to the autoscaler), or, for nodes
  without the label, that of the ComputeClass named `default` when the cluster's default ComputeClass
  is on (`class_of`), else the configuration's `computeClassConsolidationThreshold`;
- a pool whose cpu limit (or memory limit, when set) is at or below its threshold is left to the
  autoscaler: no marks, soft taints, steering or new drains there. A drain already under way in it
  still continues or is rolled back (`inflight`): node-compactor never leaves a node cordoned.

Pure: the snapshot's ComputeClasses and node labels and the configuration in, a verdict per pool and
sentences for the report's `warnings` out. Never reads the cluster, never raises on a bad class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from compactor.core.model import COMPUTE_CLASS_LABEL, ComputeClass, Node, Snapshot
from compactor.settings.config import Config, PoolConfig

# The ComputeClass GKE's autoscaler applies to a node pool without the compute-class label when the cluster's
# default ComputeClass is on (GoogleCloudPlatform/cluster-autoscaler: pkg/cloudprovider/gke/labels/system_labels.go,
# DefaultCCCName; pkg/computeclass/lister/ccc.go, `NodeGroupCrd` falls back to `GetDefaultCrd`).
DEFAULT_CLASS = "default"
# A limit suggested above a threshold: node-compactor+threshold's, measured (0.9 beside 75%).
LIMIT_ABOVE_THRESHOLD = 0.15
# Which kubectl command saves the ComputeClasses with the rest of a snapshot.
KUBECTL_COMMAND = "kubectl get nodes,pods,poddisruptionbudgets,computeclasses -A -o json"

Source = Literal["cluster", "configuration"]


@dataclass(frozen=True, slots=True)
class PoolThreshold:
    """The ComputeClass threshold an enabled pool follows, and whether node-compactor leaves it alone."""

    pool: str
    threshold: float | None  # a fraction (75% -> 0.75); None: no threshold known
    source: Source | None  # read from the cluster's ComputeClass, or declared in the configuration
    compute_class: str | None  # the class read, when `source` is "cluster"
    left_to_autoscaler: str | None  # why node-compactor leaves the pool to the autoscaler, or None


@dataclass(frozen=True, slots=True)
class Coexistence:
    pools: Mapping[str, PoolThreshold] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def left(self, pool: str | None) -> PoolThreshold | None:
        """The pool's verdict when node-compactor leaves it to the autoscaler, else None."""
        found = self.pools.get(pool) if pool is not None else None
        return found if found is not None and found.left_to_autoscaler is not None else None

    @property
    def any_left(self) -> bool:
        return any(found.left_to_autoscaler is not None for found in self.pools.values())


NONE = Coexistence(MappingProxyType({}), ())


def judge(snapshot: Snapshot, config: Config, nodes_by_pool: Mapping[str | None, Iterable[Node]]) -> Coexistence:
    """Each enabled pool's threshold and verdict, and the warnings about the classes and the configuration.

    `nodes_by_pool`: the snapshot's nodes grouped by the configuration's pool label."""
    enabled = {name: pool for name, pool in config.node_pools.items() if pool.enabled}
    if not enabled or (not snapshot.compute_classes and not _any_declared(enabled) and not _labeled(nodes_by_pool)):
        return NONE if snapshot.compute_classes_unread is None else Coexistence({}, (snapshot.compute_classes_unread,))
    classes = {found.name: found for found in snapshot.compute_classes}
    warnings: list[str] = []
    if snapshot.compute_classes_unread is not None:
        warnings.append(snapshot.compute_classes_unread)
    warnings.extend(
        f"ComputeClass {found.name or '(no name)'}: {found.problem}; the class is ignored"
        for found in snapshot.compute_classes
        if found.problem is not None
    )
    verdicts: dict[str, PoolThreshold] = {}
    for name, pool in sorted(enabled.items()):
        members = nodes_by_pool.get(name, ())
        assumed = _default_assumed(name, members, snapshot)
        if assumed is not None:
            warnings.append(assumed)
        read, read_class = _read_threshold(name, members, classes, snapshot, warnings, pool)
        declared = pool.compute_class_threshold
        if read is not None:
            threshold: float | None = read / 100
            source: Source | None = "cluster"
            if declared is not None and declared != threshold:
                warnings.append(
                    f"pool {name}: computeClassConsolidationThreshold is {declared:g} but its ComputeClass "
                    f"{read_class} has consolidationThreshold {read}% ({threshold:g}), which is what the Cluster "
                    f"Autoscaler follows; node-compactor uses {threshold:g} (set the configuration to it, or remove it)"
                )
        else:
            threshold, source = declared, "configuration" if declared is not None else None
        left = _left_because(name, pool, threshold, source, read_class)
        if left is not None:
            warnings.append(left)
        verdicts[name] = PoolThreshold(name, threshold, source, read_class if read is not None else None, left)
    return Coexistence(verdicts, tuple(warnings))


def class_thresholds(snapshot: Snapshot, pool_label: str) -> dict[str, float]:
    """Per pool (by `pool_label`), the highest consolidationThreshold among the ComputeClasses of the
    snapshot its nodes carry, as a fraction; pools without a readable class are left out."""
    readable = {
        found.name: found.consolidation_threshold
        for found in snapshot.compute_classes
        if found.consolidation_threshold is not None
    }
    thresholds: dict[str, float] = {}
    for node in snapshot.nodes:
        pool = node.labels.get(pool_label)
        threshold = readable.get(class_of(node, pool, snapshot) or "")
        if pool is not None and threshold is not None:
            thresholds[pool] = max(thresholds.get(pool, 0.0), threshold / 100)
    return thresholds


def class_delays(snapshot: Snapshot, pool_label: str) -> dict[str, int]:
    """Per pool (by `pool_label`), the `consolidationDelayMinutes` in seconds of the class whose threshold
    `class_thresholds` takes (among classes of the same threshold, the shortest delay); pools whose class
    sets no delay are left out: the autoscaling profile's unneeded time applies to them."""
    readable = {found.name: found for found in snapshot.compute_classes if found.consolidation_threshold is not None}
    chosen: dict[str, tuple[int, int | None]] = {}  # pool -> (threshold, delay in minutes) of the class taken
    for node in snapshot.nodes:
        pool = node.labels.get(pool_label)
        found = readable.get(class_of(node, pool, snapshot) or "")
        if pool is None or found is None or found.consolidation_threshold is None:
            continue
        candidate = (found.consolidation_threshold, found.consolidation_delay_minutes)
        taken = chosen.get(pool)
        if taken is None or candidate[0] > taken[0] or (candidate[0] == taken[0] and _shorter(candidate[1], taken[1])):
            chosen[pool] = candidate
    return {pool: minutes * 60 for pool, (_, minutes) in chosen.items() if minutes is not None}


def class_of(node: Node, pool: str | None, snapshot: Snapshot) -> str | None:
    """The ComputeClass GKE's autoscaler applies to the node's pool: the one its `cloud.google.com/compute-class`
    label names, else the ComputeClass named `default` when there is one and the cluster's default ComputeClass
    is on (GoogleCloudPlatform/cluster-autoscaler, pkg/computeclass/lister/ccc.go: `NodeGroupCrd` reads the
    node pool's label and, without it, `GetDefaultCrd` returns the class `default` only while
    `IsDefaultCCCEnabled`, the cluster's autoscaling.defaultComputeClassConfig.enabled). Without the GKE API
    (a kubeconfig run, a snapshot file) the setting is unknown and assumed on: a class of that name exists
    for that purpose, and `judge` warns."""
    named = node.labels.get(COMPUTE_CLASS_LABEL)
    if named is not None:
        return named
    return DEFAULT_CLASS if _default_applies(pool, snapshot) else None


def _default_applies(pool: str | None, snapshot: Snapshot) -> bool:
    if not any(found.name == DEFAULT_CLASS for found in snapshot.compute_classes):
        return False
    known = snapshot.pool_autoscaling.get(pool) if pool is not None else None
    return known is None or known.default_compute_class


def _default_assumed(name: str, members: Iterable[Node], snapshot: Snapshot) -> str | None:
    """The warning when a pool follows the class `default` although the GKE API did not say the cluster's
    default ComputeClass is on."""
    if snapshot.pool_autoscaling.get(name) is not None or not _default_applies(name, snapshot):
        return None
    if all(COMPUTE_CLASS_LABEL in node.labels for node in members):
        return None
    return (
        f"pool {name}'s nodes carry no {COMPUTE_CLASS_LABEL} label and the cluster has a ComputeClass named "
        f"{DEFAULT_CLASS}: node-compactor assumes the cluster's default ComputeClass is on, so the Cluster "
        "Autoscaler follows that class on this pool (the GKE API, which says whether it is on, was not read)"
    )


def _shorter(delay: int | None, than: int | None) -> bool:
    return delay is not None and (than is None or delay < than)


def _any_declared(pools: Mapping[str, PoolConfig]) -> bool:
    return any(pool.compute_class_threshold is not None for pool in pools.values())


def _labeled(nodes_by_pool: Mapping[str | None, Iterable[Node]]) -> bool:
    return any(COMPUTE_CLASS_LABEL in node.labels for members in nodes_by_pool.values() for node in members)


def _read_threshold(
    name: str,
    members: Iterable[Node],
    classes: Mapping[str, ComputeClass],
    snapshot: Snapshot,
    warnings: list[str],
    pool: PoolConfig,
) -> tuple[int | None, str | None]:
    """The highest threshold among the ComputeClasses the pool's nodes follow (`class_of`), and that class's
    name."""
    counts: Counter[str | None] = Counter(class_of(node, name, snapshot) for node in members)
    named = sorted(value for value in counts if value is not None)
    if not named:
        return None, None
    if len(counts) > 1:
        shown = ", ".join(
            f"{value or 'no class'}: {counts[value]} node(s)" for value in [*named, None] if counts[value]
        )
        warnings.append(
            f"pool {name}'s nodes follow different ComputeClasses ({shown}, by the label {COMPUTE_CLASS_LABEL}); "
            "node-compactor takes the highest consolidationThreshold among them for the whole pool, leaving more "
            "to the Cluster Autoscaler"
        )
    best: tuple[int, str] | None = None
    for class_name in named:
        found = classes.get(class_name)
        if found is None:
            if snapshot.compute_classes_unread is None:
                warnings.append(
                    f"pool {name}'s nodes carry {COMPUTE_CLASS_LABEL}={class_name} but there is no ComputeClass "
                    f"{class_name} in the cluster read (a snapshot file needs `{KUBECTL_COMMAND}`); " + _fallback(pool)
                )
            continue
        if found.consolidation_threshold is None:
            if found.problem is None:
                warnings.append(
                    f"pool {name}'s ComputeClass {class_name} sets no autoscalingPolicy.consolidationThreshold, "
                    "so the Cluster Autoscaler's own threshold applies to its nodes; " + _fallback(pool)
                )
            continue
        if best is None or found.consolidation_threshold > best[0]:
            best = (found.consolidation_threshold, class_name)
    return (best[0], best[1]) if best is not None else (None, None)


def _fallback(pool: PoolConfig) -> str:
    declared = pool.compute_class_threshold
    if declared is None:
        return "node-compactor assumes no ComputeClass threshold for the pool"
    return f"node-compactor uses the configuration's computeClassConsolidationThreshold {declared:g}"


def _left_because(
    name: str, pool: PoolConfig, threshold: float | None, source: Source | None, compute_class: str | None
) -> str | None:
    """Why node-compactor leaves the pool to the Cluster Autoscaler, with the numbers and what to change."""
    if threshold is None:
        return None
    limits = [
        ("scaleDownCPURequestRatioLimit", pool.cpu_limit),
        ("scaleDownMemoryRequestRatioLimit", pool.memory_limit),
    ]
    low = [(key, limit) for key, limit in limits if limit is not None and limit <= threshold]
    if not low:
        return None
    where = (
        f"its ComputeClass {compute_class} has consolidationThreshold {threshold * 100:g}%"
        if source == "cluster"
        else f"its computeClassConsolidationThreshold is {threshold:g}"
    )
    at = " and ".join(f"{key} {limit:g}" for key, limit in low)
    raised = round(threshold + LIMIT_ABOVE_THRESHOLD, 4)
    change = (
        f"raise {' and '.join(key for key, _ in low)} above {threshold:g} ({min(1.0, raised):g}, for example) "
        "to drain the nodes between the two"
        if threshold < 1
        else "no limit can be above it, so node-compactor has nothing to add there (disable the pool)"
    )
    return (
        f"pool {name} is left to the Cluster Autoscaler: {where} and {at} is at or below it, so the autoscaler "
        f"removes every node node-compactor would drain; no marks, soft taints, scale-down steering or new drains "
        f"in this pool (a drain under way finishes or is rolled back); {change}"
    )
