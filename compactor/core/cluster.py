"""The snapshot indexed once for every stage: pods by node, pools, PDBs by namespace."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from compactor.config import Config
from compactor.core.model import Node, Pdb, Pod, Resources, Snapshot


@dataclass(frozen=True, slots=True)
class NodeState:
    node: Node
    pool: str | None
    pods: tuple[Pod, ...]  # non-terminal pods bound to the node
    requested: Resources  # their summed requests

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def movable_pods(self) -> tuple[Pod, ...]:
        """The pods a drain must evict: all but DaemonSet and mirror pods."""
        return tuple(pod for pod in self.pods if not pod.stays_on_node)

    @property
    def cpu_ratio(self) -> float | None:
        allocatable = self.node.allocatable.cpu_millis
        return self.requested.cpu_millis / allocatable if allocatable > 0 else None

    @property
    def memory_ratio(self) -> float | None:
        allocatable = self.node.allocatable.memory_bytes
        return self.requested.memory_bytes / allocatable if allocatable > 0 else None

    @property
    def schedulable(self) -> bool:
        """A node new pods may land on: Ready and not cordoned."""
        return self.node.ready and not self.node.unschedulable


class ClusterView:
    def __init__(self, snapshot: Snapshot, config: Config) -> None:
        self.snapshot = snapshot
        self.config = config
        pods_by_node: dict[str, list[Pod]] = defaultdict(list)
        self.pods_by_namespace: dict[str, list[Pod]] = defaultdict(list)
        self.unschedulable_pods: list[Pod] = []
        for pod in snapshot.pods:
            if pod.is_terminal:
                continue
            if pod.node_name is not None:
                pods_by_node[pod.node_name].append(pod)
                self.pods_by_namespace[pod.namespace].append(pod)
            elif pod.unschedulable:
                self.unschedulable_pods.append(pod)

        self.nodes: dict[str, NodeState] = {}
        for node in snapshot.nodes:
            pods = tuple(pods_by_node.get(node.name, ()))
            self.nodes[node.name] = NodeState(
                node=node,
                pool=node.labels.get(config.pool_label),
                pods=pods,
                requested=_sum_requests(pods),
            )

        self.pdbs_by_namespace: dict[str, list[Pdb]] = defaultdict(list)
        for pdb in snapshot.pdbs:
            self.pdbs_by_namespace[pdb.namespace].append(pdb)

        self.nodes_by_pool: dict[str | None, list[NodeState]] = defaultdict(list)
        for state in self.nodes.values():
            self.nodes_by_pool[state.pool].append(state)


def _sum_requests(pods: tuple[Pod, ...]) -> Resources:
    cpu = memory = 0
    extended: dict[str, int] = {}
    for pod in pods:
        requests = pod.requests
        cpu += requests.cpu_millis
        memory += requests.memory_bytes
        for name, amount in requests.extended:
            extended[name] = extended.get(name, 0) + amount
    return Resources(cpu, memory, tuple(sorted(extended.items())))
