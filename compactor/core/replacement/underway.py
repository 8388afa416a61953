"""The node replacement under way (DESIGN "Node replacement", "Steps"): which step it is at, and what to clear.

A replacement lives on the cluster as its placeholder pods (one per new node, labelled with its id) and the
`replaced-by` annotation of each node it replaces, naming them all; this module reads them back, run after run,
and says whether to wait for the new nodes, drain the replaced nodes, delete the placeholders or give the
replacement up. A placeholder no node points to is a leftover to clear; a named placeholder missing before the
first drain has disappeared and gives the replacement up.

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
from compactor.core.plan import Replacement, ReplacementStep
from compactor.core.prices import pricing
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

    A replacement is the placeholders its nodes' `replaced-by` names (one per new node; one name, as before
    several, reads alike). A placeholder no existing node points to is removed (a run that stopped between the
    writes). Of several replacements with nodes (never made by one node-compactor), the oldest goes on and the
    others' placeholders are removed."""
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
    existing = {pod.name: pod for pod in ours}
    pointing: dict[tuple[str, ...], list[str]] = {}
    for state in view.nodes.values():
        by = state.node.annotations.get(REPLACED_BY)
        if by:
            names = tuple(name for name in (part.strip() for part in by.split(",")) if name)
            pointing.setdefault(names, []).append(state.name)
    # Placeholders are created before any node points at them: a `replaced-by` none of whose placeholders exists
    # names placeholders that disappeared. Once a drain of theirs started, that is preemption by the pods moved
    # there, and the pointer just goes; before, the replacement is given up (DESIGN: never made again as is).
    started: list[str] = []
    gone: list[tuple[tuple[str, ...], list[str]]] = []
    for names, nodes in pointing.items():
        if not any(name in existing for name in names):
            if _any_started(view, nodes):
                started.extend(nodes)
            else:
                gone.append((names, sorted(nodes)))
    gone.sort()
    replaced_by_remove = tuple(sorted(started))
    groups = [(names, nodes) for names, nodes in pointing.items() if any(name in existing for name in names)]
    # The oldest replacement (by its oldest placeholder) goes on.
    groups.sort(key=lambda group: min(_age_order(existing[name]) for name in group[0] if name in existing))
    active = groups[0] if groups else None
    kept = set(active[0]) if active is not None else set()
    remove = tuple(pod.name for pod in ours if pod.name not in kept)
    if active is None and gone:
        names, nodes = gone[0]
        failed = tuple(nodes)
        given_up = Replacement("give-up", names[0], failed, "", _gone(names), failed=failed, placeholders=names)
        return InFlight(given_up, False, frozenset(), remove, replaced_by_remove)
    if active is None:
        return InFlight(None, False, frozenset(), remove, replaced_by_remove)
    names, pointed = active
    pods = [existing[name] for name in names if name in existing]
    first = pods[0]
    assert first.placeholder is not None
    order = [name for name in first.placeholder.replaces if name in pointed]
    order += sorted(name for name in pointed if name not in order)
    return _step(view, names, pods, tuple(order), now, running, remove, replaced_by_remove)


def _age_order(pod: Pod) -> tuple[str, str]:
    return (pod.placeholder.created_at or "" if pod.placeholder is not None else "", pod.name)


def _step(
    view: ClusterView,
    names: tuple[str, ...],
    pods: list[Pod],
    nodes: tuple[str, ...],
    now: datetime,
    running: inflight.InFlight,
    remove: tuple[str, ...],
    replaced_by_remove: tuple[str, ...],
) -> InFlight:
    first_pod = pods[0]
    assert first_pod.placeholder is not None
    first = view.nodes.get(nodes[0]) if nodes else None
    pool = view.config.pool(first.pool) if first is not None else None
    timeout = pool.replacement.timeout_seconds if pool is not None and pool.replacement is not None else 900
    created_at = min((pod.placeholder.created_at or "" for pod in pods if pod.placeholder is not None), default="")
    created = parse_stamp(created_at) if created_at else None
    age = seconds_between(created, now) if created is not None else float(timeout)
    selector = tuple(first_pod.node_selector)  # what the placeholders select: the report says Spot from it
    pool_target = dict(selector).get(view.config.pool_label)
    target = pool_target or dict(selector).get(pricing.INSTANCE_TYPE_LABEL, "")
    started = [name for name in nodes if DRAIN_STARTED_AT in view.nodes[name].node.annotations]
    left = [name for name in nodes if name not in started]
    failed_back = [name for name in left if _failed_since(view.nodes[name].node.annotations, created_at or None)]
    present = tuple(pod.name for pod in pods)
    missing = [name for name in names if name not in present]

    def replacement(step: ReplacementStep, reason: str, failed: tuple[str, ...] = ()) -> Replacement:
        return Replacement(
            step,
            names[0],
            nodes,
            target,
            reason,
            failed=failed,
            node_selector=selector,
            placeholders=names,
            machine_type_target=pool_target is None and bool(target),
        )

    def done(step: Literal["delete", "give-up"], reason: str, failed: tuple[str, ...] = ()) -> InFlight:
        return InFlight(replacement(step, reason, failed), False, frozenset(), remove, replaced_by_remove)

    if not left and running.draining not in started:
        return done("delete", f"every node {_words(names)} replace(s) is drained ({', '.join(nodes)})")
    if failed_back:
        return done(
            "give-up",
            f"the drain of {', '.join(failed_back)} was given back; the replacement stops there",
            tuple(left),
        )
    if missing and not started:
        # Deleted by a person or preempted before its node was used (placeholders are all created before a
        # node points at them): the replacement cannot count on its new nodes, and is never made again as is.
        return done("give-up", _gone(missing), tuple(left))
    waiting = [pod for pod in pods if not _runs_on_ready(view, pod)]
    if waiting and not started:
        if age >= timeout:
            return done(
                "give-up",
                f"{_words(tuple(pod.name for pod in waiting))} did not run on a Ready node within {human(timeout)} "
                "(timeoutSeconds): the Cluster Autoscaler could not add the node(s) (a stockout, a quota, or the "
                "pool at its maximum)",
                tuple(left),
            )
        wheres = "; ".join(
            f"{pod.name} is "
            + (f"pending for {human(age)}" if pod.node_name is None else f"on {pod.node_name}, which is not Ready")
            for pod in waiting
        )
        return InFlight(
            replacement("wait", f"waiting for the new node(s): {wheres} (gives up at {human(timeout)})"),
            True,
            frozenset(),
            remove,
            replaced_by_remove,
        )
    # The new nodes are up, but a replaced node that cannot be drained must not hold every other drain for
    # good: once the placeholders have waited their timeout and a drain's, with no replaced node draining, the
    # rest is given up (the new nodes go back to the autoscaler with the placeholders).
    patience = timeout + (pool.drain_timeout_seconds if pool is not None else 900)
    if left and age >= patience and running.draining not in nodes:
        return done(
            "give-up",
            f"{', '.join(left)} could not be drained within {human(patience)} of asking for the new node(s) "
            "(timeoutSeconds and drainTimeoutSeconds)",
            tuple(left),
        )
    hosts = ", ".join(sorted({pod.node_name for pod in pods if pod.node_name}))
    return InFlight(
        replacement(
            "drain",
            f"{_words(present)} run(s) on the new node(s) {hosts or '(preempted: their room is in use)'}; "
            f"draining {', '.join(left) or 'nothing more'}",
        ),
        True,
        frozenset(left),
        remove,
        replaced_by_remove,
    )


def _gone(names: Sequence[str]) -> str:
    return (
        f"{', '.join(names)} is gone before any replaced node was drained (deleted or preempted): the replacement "
        "needs every one of its new nodes"
    )


def _any_started(view: ClusterView, nodes: list[str]) -> bool:
    return any(DRAIN_STARTED_AT in view.nodes[name].node.annotations for name in nodes if name in view.nodes)


def _runs_on_ready(view: ClusterView, pod: Pod) -> bool:
    host = view.nodes.get(pod.node_name or "")
    return pod.node_name is not None and pod.phase == "Running" and host is not None and host.node.ready


def _words(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _failed_since(annotations: Mapping[str, str], created_at: str | None) -> bool:
    """Whether the node's drain was rolled back since the placeholder was created."""
    failed = annotations.get(DRAIN_FAILED_AT)
    if failed is None:
        return False
    failed_at = parse_stamp(failed)
    created = parse_stamp(created_at) if created_at else None
    return failed_at is not None and (created is None or failed_at >= created)
