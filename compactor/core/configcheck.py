"""The configuration checked against the cluster it is used on: what would otherwise pass in silence.

A pool named in the configuration that no node carries (a typo, `defualt-pool`,
or the wrong `poolLabel`) would leave every node "in a pool that is not
enabled" and the run would quietly do nothing; a node without the pool label
gets no pool settings at all. Both are warnings, sentences a person reads on
stderr and in the report's `warnings`, naming the pools that do exist. They
never stop a run: a pool may be configured ahead of its creation.

Pure: configuration and node labels in, sentences out; nothing here reads a
file or the cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from compactor.core.model import Snapshot
from compactor.settings.config import Config

# Names listed in one sentence; a cluster of hundreds of pools or unlabeled nodes gets a count for the rest.
MAX_NAMES = 10


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
    return pool_warnings(config, pools, unlabeled)


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


def names(items: Sequence[str]) -> str:
    """`a, b, c` with at most MAX_NAMES of them, then how many more."""
    shown = ", ".join(items[:MAX_NAMES])
    if len(items) > MAX_NAMES:
        shown += f" and {len(items) - MAX_NAMES} more"
    return shown or "none"
