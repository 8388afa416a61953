"""The configuration checked against the cluster it is used on: what would otherwise pass in silence.

A pool named in the configuration that no node carries (a typo, `defualt-pool`,
or the wrong `poolLabel`) would leave every node "in a pool that is not
enabled" and the run would quietly do nothing; a node without the pool label
gets no pool settings at all. Both are warnings, sentences a person reads on
stderr and in the report's `warnings`, naming the pools that do exist. They
never stop a run: a pool may be configured ahead of its creation.

A target pool of node replacement (`replacement.targetPools`) that is not in
the cluster, not autoscaled or at its maximum is a warning on every run, in
the words `core.replacement.templates` uses when it looks for a replacement
(it asks this module), and is not used.

Pure: configuration and node labels in, sentences out; nothing here reads a
file or the cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from compactor.core.model import PoolAutoscaling, Snapshot
from compactor.core.wording import names
from compactor.settings.config import Config, Replacement


def for_snapshot(snapshot: Snapshot, config: Config) -> tuple[str, ...]:
    """The warnings for `config` used on the nodes of `snapshot`."""
    label = config.pool_label
    pools: Counter[str] = Counter()
    unlabeled: list[str] = []
    for node in snapshot.nodes:
        pool = node.labels.get(label)
        if pool is None:
            unlabeled.append(node.name)
        else:
            pools[pool] += 1
    return (*pool_warnings(config, pools, unlabeled), *target_pool_warnings(config, pools, snapshot.pool_autoscaling))


def target_pool_warnings(
    config: Config, pools: Mapping[str, int], known: Mapping[str, PoolAutoscaling]
) -> tuple[str, ...]:
    """One sentence per target pool of an enabled pool's replacement that can take no new node (`pools`: each
    pool label value and its node count; `known`: what GKE says of the pools, empty when it was not read)."""
    warnings: list[str] = []
    for target in targets(config):
        problem = target_pool_problem(target, pools.get(target, 0), pools, known)
        if problem is not None and problem not in warnings:
            warnings.append(problem)
    return tuple(warnings)


def target_pool_problem(
    pool_name: str, nodes: int, pools_with_nodes: Iterable[str], known: Mapping[str, PoolAutoscaling]
) -> str | None:
    """Why a target pool of `nodes` nodes can take no new node, as the warning that names it (DESIGN: a target
    pool not in the cluster, not autoscaled or at its maximum is not used), or None when it may. `known`: what
    GKE says of the cluster's pools (empty when GKE's API was not read); `pools_with_nodes`: the pool label
    values the nodes carry. This module says it on every run, `core.replacement.templates` in the same words
    when it looks for a replacement: the report lists it once."""
    autoscaling = known.get(pool_name)
    if autoscaling is not None and not autoscaling.can_grow(nodes):
        if not autoscaling.enabled:
            return f"target pool {pool_name} is not autoscaled, so it is not used"
        return f"target pool {pool_name} is at its maximum size ({nodes} node(s)), so it is not used"
    if nodes > 0 or autoscaling is not None:
        return None
    there = names(sorted({*pools_with_nodes, *known}))
    if not known:
        # A pool scaled to zero has no node to show it exists: only GKE's API can tell it from a typo.
        return (
            f"target pool {pool_name} has no node in the cluster and GKE's node pool config was not read, so it "
            f"is not used: the pools there are {there} (check its spelling; a pool with no node yet is used "
            "when GKE's API is read, with --gke or COMPACTOR_CLUSTER)"
        )
    return (
        f"target pool {pool_name} is not in the cluster (no node carries it and GKE names no such pool), so it "
        f"is not used: the pools there are {there} (check its spelling)"
    )


def unknown_target_pools(config: Config, pools: Sequence[str], where: str) -> list[str]:
    """Where every pool is known (a simulated cluster, `where` says which): one problem per target pool of an
    enabled pool's replacement that is none of `pools`, naming it and them."""
    problems = []
    for name, replacement in _replacing(config):
        for target in replacement.target_pools:
            if target not in pools:
                problems.append(
                    f"nodePools.{name}.replacement.targetPools: {target!r} is not a pool of {where}; its pools are "
                    f"{names(sorted(pools))}"
                )
    return problems


def unknown_machine_types(config: Config, created: Sequence[str], where: str) -> list[str]:
    """Where the shapes GKE creates pools for are known (a simulated cluster: `created`, empty when it creates
    none): one problem per `machineTypes` entry of an enabled pool's replacement that is none of them."""
    problems = []
    for name, replacement in _replacing(config):
        for machine_type in replacement.machine_types:
            if machine_type in created:
                continue
            there = (
                f"it creates pools of {names(sorted(created))}"
                if created
                else "it creates no pools (a scenario's autoCreation says which it does)"
            )
            problems.append(
                f"nodePools.{name}.replacement.machineTypes: {machine_type!r} is not a shape {where} creates a pool "
                f"for; {there}"
            )
    return problems


def targets(config: Config) -> list[str]:
    """The target pools of every enabled pool's replacement, each once, in the configuration's order."""
    found: dict[str, None] = {}
    for _, replacement in _replacing(config):
        found.update(dict.fromkeys(replacement.target_pools))
    return list(found)


def _replacing(config: Config) -> list[tuple[str, Replacement]]:
    """Each pool that replaces nodes, by name, with its replacement settings."""
    return [(name, pool.replacing) for name, pool in sorted(config.node_pools.items()) if pool.replacing is not None]


def pool_warnings(config: Config, pools: Iterable[str], unlabeled: Sequence[str] = ()) -> tuple[str, ...]:
    """One sentence per configured pool that names no pool of the cluster (`pools`: the pool label
    values its nodes carry), and one for the nodes without the pool label (`unlabeled`)."""
    present = sorted(set(pools))
    label = config.pool_label
    warnings: list[str] = []
    for name in sorted(config.node_pools):
        if name in present:
            continue
        state = "enabled" if config.node_pools[name].enabled else "not enabled"
        where = f"the pools there are {names(present)}" if present else f"no node carries the label {label}"
        warnings.append(
            f"pool {name!r} of the configuration ({state}) has no node in the cluster: {where} "
            f"(by the node label {label}, the configuration's poolLabel); check its spelling"
        )
    if unlabeled:
        some = names(sorted(unlabeled))
        warnings.append(
            f"{len(unlabeled)} node(s) have no {label} label, so no pool settings apply to them and they are "
            f"never marked or drained: {some}"
        )
    return tuple(warnings)
