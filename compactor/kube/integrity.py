"""Checks a whole snapshot must pass before anything is planned from it.

A Kubernetes name is unique per kind (and namespace): the API server never
lists one object twice in a consistent list. A snapshot that does (two
`kubectl get` outputs pasted together, an object listed on two pages of a
list that was not one snapshot) is not a cluster that existed: the last copy
of a node would silently win and a duplicated pod would count twice in every
utilization. It is refused, naming the objects.

A snapshot file must also hold what planning reads: without Node objects
there is nothing to plan (refused), and without PodDisruptionBudgets every
pod a PDB protects looks free to move (a warning: a cluster may have none).
Both name the kubectl command that saves all three kinds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from operator import attrgetter

from compactor.core.model import Pod, Snapshot
from compactor.errors import SnapshotError

_NAME = attrgetter("name")
_NAMESPACED = attrgetter("namespace", "name")  # (namespace, name): tuples made in C, no text per object
# Enough names to find the problem; a file with thousands of duplicates says the rest itself.
MAX_NAMED = 20


# What a snapshot file is: the one command that lists every kind planning reads.
KUBECTL_COMMAND = "kubectl get nodes,pods,poddisruptionbudgets -A -o json"


def check_kinds(snapshot: Snapshot, name: str) -> list[str]:
    """SnapshotError when the snapshot file `name` holds no Node; else the warnings about what it lacks."""
    if not snapshot.nodes:
        raise SnapshotError(no_nodes_problem(name, len(snapshot.pods), "plan"))
    return [] if snapshot.pdbs else [no_pdbs_warning(name)]


def no_nodes_problem(name: str, pods: int, purpose: str) -> str:
    return (
        f"{name}: the snapshot holds no Node objects ({pods} pod(s)), so there is nothing to {purpose}; "
        f"save one with `{KUBECTL_COMMAND} > {name}`"
    )


def no_pdbs_warning(name: str) -> str:
    return (
        f"{name} holds no PodDisruptionBudget: if the cluster has some, save the snapshot with "
        f"`{KUBECTL_COMMAND}`; without them every pod a PodDisruptionBudget protects looks free to move"
    )


def check_unique(snapshot: Snapshot) -> Snapshot:
    """The snapshot itself, or SnapshotError naming every object it lists more than once."""
    problems = [
        *_repeated("Node", map(_NAME, snapshot.nodes)),
        *([] if _in_list_order(snapshot.pods) else _repeated("Pod", map(_NAMESPACED, snapshot.pods))),
        *_repeated("PodDisruptionBudget", map(_NAMESPACED, snapshot.pdbs)),
    ]
    if problems:
        shown = problems[:MAX_NAMED]
        if len(problems) > MAX_NAMED:
            shown.append(f"... and {len(problems) - MAX_NAMED} more objects listed more than once")
        raise SnapshotError(f"the cluster snapshot lists {len(problems)} object(s) more than once", shown)
    return snapshot


def _repeated(kind: str, keys: Iterable[str | tuple[str, str]]) -> list[str]:
    listed = list(keys)
    if len(set(listed)) == len(listed):  # the common case, found without counting
        return []
    return [
        f"{kind} {key if isinstance(key, str) else '/'.join(key)} is listed {count} times"
        for key, count in Counter(listed).items()
        if count > 1
    ]


def _in_list_order(pods: Iterable[Pod]) -> bool:
    """Whether the pods come as a list answer lists them: each namespace's together and, within it, by
    name, each name after the one before. Then no pod repeats, found in one pass without a set of
    every pod. The API server lists objects in the order of their storage keys (namespace, then name:
    `/registry/pods/NAMESPACE/NAME` in etcd), and kubectl prints them so; any other order is checked
    by `_repeated`."""
    namespaces: set[str] = set()
    namespace = None
    last = ""
    for pod in pods:
        name = pod.name
        if pod.namespace == namespace:
            if name <= last:
                return False
        else:
            namespace = pod.namespace
            if namespace in namespaces:
                return False
            namespaces.add(namespace)
        last = name
    return True
