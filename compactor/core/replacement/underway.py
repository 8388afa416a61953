"""The node replacement under way (DESIGN "Node replacement", "Steps"): which step it is at, and what to clear.

A replacement lives on the cluster as its placeholder pod and the `replaced-by` annotation of each node it
replaces; this module reads them back, run after run, and says whether to wait for the new node, drain the
replaced nodes, delete the placeholder or give the replacement up. A placeholder no node points to, and a
`replaced-by` that names no placeholder, are leftovers to clear.

Pure: never reads a clock; the caller passes `now`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from compactor.core import inflight
from compactor.core.cluster import ClusterView
from compactor.core.model import (
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    PLACEHOLDER_PREFIX,
    REPLACED_BY,
    Pod,
)
from compactor.core.plan import Replacement
from compactor.core.timing import human, parse_stamp, seconds_between


@dataclass(frozen=True, slots=True)
class InFlight:
    """The replacement under way (or None), what its step is, and the leftovers to clear."""

    replacement: Replacement | None
    # While it waits for its node, or drains: no other drain or replacement starts; while it drains,
    # only these nodes may be drained.
    holds: bool
    drain_only: frozenset[str]
    placeholders_remove: tuple[str, ...]
    replaced_by_remove: tuple[str, ...]


NOTHING = InFlight(None, False, frozenset(), (), ())


def in_flight(view: ClusterView, placeholders: Sequence[Pod], now: datetime, running: inflight.InFlight) -> InFlight:
    """The replacement under way and its step (`running`: the drains under way, rule 0).

    A placeholder no existing node points to (`replaced-by`) is removed, and so is a `replaced-by` that
    names no placeholder (a run that stopped between the two writes). Of several placeholders with
    nodes (never made by one node-compactor), the oldest goes on and the others are removed."""
    config = view.config
    namespace = config.placeholder_namespace
    # Only what node-compactor could have made: its namespace, its label and annotation, its name prefix.
    ours = sorted(
        (
            pod
            for pod in placeholders
            if pod.namespace == namespace and pod.placeholder is not None and pod.name.startswith(PLACEHOLDER_PREFIX)
        ),
        key=_age_order,
    )
    pointing: dict[str, list[str]] = {}
    for state in view.nodes.values():
        by = state.node.annotations.get(REPLACED_BY)
        if by:
            pointing.setdefault(by, []).append(state.name)
    names = {pod.name for pod in ours}
    replaced_by_remove = tuple(sorted(node for by, nodes in pointing.items() if by not in names for node in nodes))
    remove: list[str] = []
    active: tuple[Pod, list[str]] | None = None
    for pod in ours:
        nodes = pointing.get(pod.name)
        if not nodes or active is not None:
            remove.append(pod.name)
        else:
            active = (pod, nodes)
    if active is None:
        return InFlight(None, False, frozenset(), tuple(remove), replaced_by_remove)
    pod, pointed = active
    assert pod.placeholder is not None
    order = [name for name in pod.placeholder.replaces if name in pointed]
    order += sorted(name for name in pointed if name not in order)
    return _step(view, pod, tuple(order), now, running, tuple(remove), replaced_by_remove)


def _age_order(pod: Pod) -> tuple[str, str]:
    return (pod.placeholder.created_at or "" if pod.placeholder is not None else "", pod.name)


def _step(
    view: ClusterView,
    pod: Pod,
    nodes: tuple[str, ...],
    now: datetime,
    running: inflight.InFlight,
    remove: tuple[str, ...],
    replaced_by_remove: tuple[str, ...],
) -> InFlight:
    assert pod.placeholder is not None
    first = view.nodes.get(nodes[0]) if nodes else None
    pool = view.config.pool(first.pool) if first is not None else None
    timeout = pool.replacement.timeout_seconds if pool is not None and pool.replacement is not None else 900
    created = parse_stamp(pod.placeholder.created_at) if pod.placeholder.created_at else None
    age = seconds_between(created, now) if created is not None else float(timeout)
    target_pool = dict(pod.node_selector).get(view.config.pool_label, "")
    selector = tuple(pod.node_selector)  # what the placeholder selects: the report says Spot from it
    started = [name for name in nodes if DRAIN_STARTED_AT in view.nodes[name].node.annotations]
    left = [name for name in nodes if name not in started]
    failed_back = [
        name for name in left if _failed_since(view.nodes[name].node.annotations, pod.placeholder.created_at)
    ]

    def done(step: Literal["delete", "give-up"], reason: str, failed: tuple[str, ...] = ()) -> InFlight:
        return InFlight(
            Replacement(step, pod.name, nodes, target_pool, reason, failed=failed, node_selector=selector),
            False,
            frozenset(),
            remove,
            replaced_by_remove,
        )

    if not left and running.draining not in started:
        return done("delete", f"every node {pod.name} replaces is drained ({', '.join(nodes)})")
    if failed_back:
        return done(
            "give-up",
            f"the drain of {', '.join(failed_back)} was given back; the replacement stops there",
            tuple(left),
        )
    bound = pod.node_name is not None and pod.phase == "Running"
    host = view.nodes.get(pod.node_name or "")
    ready = bound and host is not None and host.node.ready
    if not ready:
        if age >= timeout and not started:
            return done(
                "give-up",
                f"{pod.name} did not run on a Ready node within {human(timeout)} (timeoutSeconds): the Cluster "
                "Autoscaler could not add the node (a stockout, a quota, or the pool at its maximum)",
                tuple(left),
            )
        where = f"pending for {human(age)}" if not bound else f"on {pod.node_name}, which is not Ready"
        return InFlight(
            Replacement(
                "wait",
                pod.name,
                nodes,
                target_pool,
                f"waiting for the new node: {pod.name} is {where} (gives up at {human(timeout)})",
                node_selector=selector,
            ),
            True,
            frozenset(),
            remove,
            replaced_by_remove,
        )
    # The new node is up, but a replaced node that cannot be drained must not hold every other drain for
    # good: once the placeholder has waited its timeout and a drain's, with no replaced node draining, the
    # rest is given up (the new node goes back to the autoscaler with the placeholder).
    patience = timeout + (pool.drain_timeout_seconds if pool is not None else 900)
    if left and age >= patience and running.draining not in nodes:
        return done(
            "give-up",
            f"{', '.join(left)} could not be drained within {human(patience)} of asking for the new node "
            "(timeoutSeconds and drainTimeoutSeconds)",
            tuple(left),
        )
    return InFlight(
        Replacement(
            "drain",
            pod.name,
            nodes,
            target_pool,
            f"{pod.name} runs on the new node {pod.node_name}; draining {', '.join(left) or 'nothing more'}",
            node_selector=selector,
        ),
        True,
        frozenset(left),
        remove,
        replaced_by_remove,
    )


def _failed_since(annotations: Mapping[str, str], created_at: str | None) -> bool:
    """Whether the node's drain was rolled back since the placeholder was created."""
    failed = annotations.get(DRAIN_FAILED_AT)
    if failed is None:
        return False
    failed_at = parse_stamp(failed)
    created = parse_stamp(created_at) if created_at else None
    return failed_at is not None and (created is None or failed_at >= created)
