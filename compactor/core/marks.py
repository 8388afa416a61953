"""Underutilization and the `underutilized-since` mark (DESIGN rules 2 and 3).

Never marks or unmarks a node someone else cordoned (`cordoned_by_someone_else`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from compactor.core.cluster import NodeState
from compactor.core.model import DISABLED, DRAIN_STARTED_AT, UNDERUTILIZED_SINCE
from compactor.core.timing import parse_stamp
from compactor.settings.config import PoolConfig


def is_underutilized(state: NodeState, pool: PoolConfig | None) -> bool:
    if pool is None or pool.cpu_limit is None:
        return False
    cpu = state.cpu_ratio
    if cpu is None or cpu >= pool.cpu_limit:
        return False
    if pool.memory_limit is not None:
        memory = state.memory_ratio
        if memory is None or memory >= pool.memory_limit:
            return False
    return True


def opted_out(state: NodeState) -> bool:
    return state.node.annotations.get(DISABLED, "").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class MarkChange:
    add: bool  # mark (again) with the current time
    remove: bool
    marked_since: datetime | None  # the mark in force after the change


def cordoned_by_someone_else(state: NodeState) -> bool:
    """Cordoned without node-compactor's drain-started-at: a person's (or another tool's) node, which
    node-compactor never writes (no mark, no taint, no uncordon)."""
    node = state.node
    return node.unschedulable and DRAIN_STARTED_AT not in node.annotations


def mark_change(state: NodeState, pool: PoolConfig | None, underutilized: bool, now: datetime) -> MarkChange:
    """Mark a newly underutilized node, unmark one that is not (or may not be marked at all).

    A node someone else cordoned is left exactly as it is, a stale mark included: removing it would
    be a write to a node a person took out of service, and a cordoned node is never a candidate, so
    the mark decides nothing until the cordon is lifted; the first run after that brings it up to
    date (a mark older than the cordon then counts, as a mark always counts from when it was set)."""
    text = state.node.annotations.get(UNDERUTILIZED_SINCE)
    current = parse_stamp(text)
    if cordoned_by_someone_else(state):
        return MarkChange(add=False, remove=False, marked_since=current)
    markable = pool is not None and pool.enabled and not opted_out(state)
    if markable and underutilized:
        if current is None or current > now:
            # Absent, unreadable or in the future: start counting from now.
            return MarkChange(add=True, remove=False, marked_since=now)
        return MarkChange(add=False, remove=False, marked_since=current)
    if text is not None:
        return MarkChange(add=False, remove=True, marked_since=None)
    return MarkChange(add=False, remove=False, marked_since=None)
