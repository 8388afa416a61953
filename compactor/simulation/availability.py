"""Workload-seconds without a Ready pod: what a disruption costs a service, measured on the model.

A workload (a Deployment across its ReplicaSets, a StatefulSet, a plain
ReplicaSet) that still wants pods is without a Ready pod from the moment its
last Ready pod is removed (evicted, deleted, its node removed, or scaled
away by a rollout) until one of its pods is Ready again: the replacement's
scheduling and start-up (`startup_seconds` after it is bound). For a
single-replica service these are the replica-seconds without a Ready pod
that an eviction costs and a surging rolling restart avoids. Each span is
booked to the actor whose removal opened it (`controllers` for a removal no
actor caused, such as a Recreate rollout's).

Must never: change the cluster; guess an end: a span still open when the
measured period ends counts up to that end.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from compactor.simulation.metrics import Recorder

CONTROLLERS = "controllers"

Workload = tuple[str, str, str]  # namespace, kind, name


class World(Protocol):
    """What the bookkeeping reads of the modelled cluster (`world.World`), so that the world can call it."""

    @property
    def recorder(self) -> Recorder: ...

    @property
    def ready_at(self) -> dict[str, datetime]: ...

    @property
    def scales(self) -> dict[Workload, int]: ...

    def pod_owner(self, key: str) -> Workload | None: ...

    def is_ready(self, key: str, at: datetime) -> bool: ...

    def workload_of(self, owner: Workload) -> Workload: ...

    def workload_pods(self, workload: Workload) -> list[str]: ...


def removed(world: World, key: str, *, actor: str, disrupted: bool, at: datetime) -> None:
    """Called before pod `key` is removed at `at`: opens a span when it leaves its workload no Ready pod.
    A controller removing a pod that is not Ready (no disruption) takes nothing Ready away."""
    owner = world.pod_owner(key)
    if owner is None or (not disrupted and not world.is_ready(key, at)):
        return
    workload = world.workload_of(owner)
    recorder = world.recorder
    if workload in recorder.no_ready_since or world.scales.get(workload, 0) <= 0:
        return  # already without one, or not a workload that wants pods (a Job, a DaemonSet, scaled to 0)
    if any(world.is_ready(other, at) for other in world.workload_pods(workload) if other != key):
        return
    recorder.no_ready_since[workload] = (at, (actor if disrupted else "") or CONTROLLERS)


def close(world: World, at: datetime) -> None:
    """Ends the spans of workloads that have a Ready pod by `at` (at the moment it became Ready), and of
    those that no longer want pods."""
    recorder = world.recorder
    for workload, (since, actor) in list(recorder.no_ready_since.items()):
        ready = [world.ready_at[key] for key in world.workload_pods(workload) if world.is_ready(key, at)]
        if ready:
            _book(world, workload, since, max(since, min(ready)), actor)
        elif world.scales.get(workload, 0) <= 0:
            _book(world, workload, since, max(since, at), actor)


def finish(world: World, at: datetime) -> None:
    """The end of the measured period: what is still open counts up to `at`."""
    close(world, at)
    for workload, (since, actor) in list(world.recorder.no_ready_since.items()):
        _book(world, workload, since, max(since, at), actor)


def _book(world: World, workload: Workload, since: datetime, end: datetime, actor: str) -> None:
    recorder = world.recorder
    del recorder.no_ready_since[workload]
    recorder.no_ready_seconds[actor] += (end - since).total_seconds()
    recorder.no_ready_spans[actor] += 1
