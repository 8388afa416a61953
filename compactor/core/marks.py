"""Underutilization and the `underutilized-since` mark (DESIGN rules 2 and 3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from compactor.config import PoolConfig
from compactor.core.cluster import NodeState
from compactor.core.model import DISABLED, UNDERUTILIZED_SINCE
from compactor.core.timing import parse_stamp


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


def mark_change(state: NodeState, pool: PoolConfig | None, underutilized: bool, now: datetime) -> MarkChange:
    """Mark a newly underutilized node, unmark one that is not (or may not be marked at all)."""
    text = state.node.annotations.get(UNDERUTILIZED_SINCE)
    current = parse_stamp(text)
    markable = pool is not None and pool.enabled and not opted_out(state)
    if markable and underutilized:
        if current is None or current > now:
            # Absent, unreadable or in the future: start counting from now.
            return MarkChange(add=True, remove=False, marked_since=now)
        return MarkChange(add=False, remove=False, marked_since=current)
    if text is not None:
        return MarkChange(add=False, remove=True, marked_since=None)
    return MarkChange(add=False, remove=False, marked_since=None)
