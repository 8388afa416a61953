"""The preview: on a cluster new to node-compactor, which node would be drained first, and from when.

A first run only marks nodes; every drain then waits `neededMarkedTimeSeconds`
(and a young node `minimumNodeAgeSeconds`, a pool that grew its
`scaleUpCooldownSeconds`, ...). A dry run would say "underutilized for 0s,
needs 5m" on every node and never show the choice. The consolidation path
(`core.path`) already plans the cluster once every wait is over; when the plan
made now drains nothing, its first step is the node the planner picks then.
This module says when that node's waits end and why it was picked, so the
preview costs no plan of its own.

It is the node the planner picks once every wait is over: when several nodes
wait for different times, another one may be free earlier, and the plan made
at that time decides. Pure: snapshot, configuration, plans and time in, data
out.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from compactor.core import planner, windows
from compactor.core.model import DRAIN_FAILED_AT, DRAIN_STARTED_AT, Node, Snapshot
from compactor.core.plan import ConsolidationPath, Plan, Preview
from compactor.core.timing import format_stamp, human, parse_stamp
from compactor.settings.config import Config, PoolConfig


def from_path(
    snapshot: Snapshot, config: Config, first: Plan, path: ConsolidationPath, *, now: datetime
) -> Preview | None:
    """The preview when `first` (the plan made now) drains nothing and `path` (planned from it) does."""
    if first.decision.action != "none" or not path.steps:
        return None
    step = path.steps[0]
    pool = config.enabled_pool(step.pool)
    node = next((node for node in snapshot.nodes if node.name == step.node), None)
    if pool is None or node is None:
        return None
    report = next((found for found in first.nodes if found.name == step.node), None)
    marked = report.marked_since if report is not None and report.marked_since is not None else now
    members = [member for member in snapshot.nodes if member.labels.get(config.pool_label) == step.pool]
    waits = [(at, why) for at, why in _waits(node, members, pool, marked) if at > now]
    earliest = max((at for at, _ in waits), default=now)
    if pool.disruption_windows is not None:
        window = windows.state(pool.disruption_windows, config.time_zone, earliest)
        if not window.open and window.next_open is not None:
            earliest = window.next_open
            waits.append((earliest, f"pool {step.pool}'s next disruption window opens (disruptionWindows)"))
    moved = f"its {step.pods_moved} pod(s) fit on the other nodes" if step.pods_moved else "it has no pods to move"
    picked = f"{step.node} is the node the planner would drain first in pool {step.pool} ({moved})"
    if waits:
        waiting = "; ".join(why if at == earliest else f"{why} at {format_stamp(at)}" for at, why in sorted(waits))
        reason = f"{picked}; it waits until {format_stamp(earliest)}: {waiting}"
    elif first.held_by is not None:
        held = planner.BLOCKER_SUMMARY.get(first.held_by, first.held_by)
        reason = f"{picked} once what holds the run now is gone ({first.held_by}: {held})"
    else:
        reason = picked
    return Preview(step.node, step.pool, earliest, reason)


def _waits(node: Node, members: list[Node], pool: PoolConfig, marked: datetime) -> list[tuple[datetime, str]]:
    """When each of the node's and its pool's waits ends, with what it is (past ones included)."""
    found = [
        (
            marked + timedelta(seconds=pool.needed_marked_seconds),
            f"its underutilized mark (set {format_stamp(marked)}) is {human(pool.needed_marked_seconds)} old "
            "(neededMarkedTimeSeconds)",
        )
    ]
    if node.created is not None:
        found.append(
            (
                node.created + timedelta(seconds=pool.minimum_node_age_seconds),
                f"the node is {human(pool.minimum_node_age_seconds)} old (minimumNodeAgeSeconds)",
            )
        )
    failed = parse_stamp(node.annotations.get(DRAIN_FAILED_AT))
    if failed is not None:
        found.append(
            (
                failed + timedelta(seconds=pool.retry_backoff_seconds),
                f"its rolled-back drain is {human(pool.retry_backoff_seconds)} past (retryBackoffSeconds)",
            )
        )
    youngest = max((member.created for member in members if member.created is not None), default=None)
    if youngest is not None:
        found.append(
            (
                youngest + timedelta(seconds=pool.scale_up_cooldown_seconds),
                f"the pool's newest node is {human(pool.scale_up_cooldown_seconds)} old (scaleUpCooldownSeconds)",
            )
        )
    if pool.drain_interval_seconds:
        starts = [parse_stamp(member.annotations.get(DRAIN_STARTED_AT)) for member in members]
        last = max((start for start in starts if start is not None), default=None)
        if last is not None:
            found.append(
                (
                    last + timedelta(seconds=pool.drain_interval_seconds),
                    f"the pool's last drain start is {human(pool.drain_interval_seconds)} past (drainIntervalSeconds)",
                )
            )
    return found
