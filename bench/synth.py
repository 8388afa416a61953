"""Synthetic GKE clusters for benchmarks, as `kubectl get nodes,pods,poddisruptionbudgets -A -o json` prints them.

A cluster of any size with what a real one carries: three node pools (a large
general-purpose pool, a highmem pool, a tainted spot GPU pool) over three
zones; DaemonSets and a mirror kube-proxy pod on every node; Deployments whose
pods have an app container and a sidecar with requests, limits, env, probes,
volume mounts and status; StatefulSets with PersistentVolumeClaims and
required pod anti-affinity; nodeSelectors, required node affinity, topology
spread constraints; PodDisruptionBudgets (some allowing no disruption);
kube-system Deployments with and without PDBs, bare pods, emptyDir volumes
and finished Job pods. Nodes are 45-92% requested on cpu, and most
underutilized nodes carry an old `node-compactor.dev/underutilized-since`
mark, so the planner really ranks and simulates candidates.

The output is deterministic for a seed (one `random.Random`), streamed to disk
one object at a time (a 150,000-pod List is never built in memory) and
pretty-printed like kubectl. It belongs under `bench/out/` (git-ignored);
nothing here is used by the compactor or its tests.

    python -m bench.synth --nodes 500 --pods 15000
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import random
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson

GENERATOR_VERSION = 2
DEFAULT_SEED = 20261121
NOW = datetime(2026, 11, 21, 3, 0, tzinfo=UTC)
NOW_TEXT = "2026-11-21T03:00:00Z"
OUT_DIR = Path(__file__).resolve().parent / "out"

PROJECT = "shop-prod"
CLUSTER = "shop-prod"
REGION = "europe-west1"
ZONES = ("europe-west1-b", "europe-west1-c", "europe-west1-d")
POOL_LABEL = "cloud.google.com/gke-nodepool"
MARK = "node-compactor.dev/underutilized-since"
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses for generated names
NODE_SUFFIX_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

# The three CPU ratio limits of the configuration written next to the snapshot.
CPU_LIMITS = {"general-pool": 0.75, "highmem-pool": 0.75, "spot-gpu-pool": 0.6}
MEMORY_LIMITS = {"general-pool": 0.75, "highmem-pool": 0.8}


# -- the cluster's shape ------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolSpec:
    name: str
    share: float  # of the cluster's nodes
    machine: str
    capacity_cpu: int  # cores
    capacity_memory_ki: int
    allocatable_cpu_m: int
    allocatable_memory_ki: int
    gpus: int
    slot_weight: float  # workload pods per node, relative to the general pool
    memory_per_cpu_mi: int  # what its workloads request per core, on average
    spot: bool


POOLS = (
    PoolSpec("general-pool", 0.80, "e2-standard-8", 8, 32863084, 7910, 29713260, 0, 1.0, 2560, False),
    PoolSpec("highmem-pool", 0.12, "n2-highmem-8", 8, 65861768, 7910, 59826696, 0, 0.75, 6144, False),
    PoolSpec("spot-gpu-pool", 0.08, "n1-standard-16", 16, 61830352, 15890, 55364304, 2, 0.35, 3072, True),
)
GENERAL, HIGHMEM, GPU = POOLS
GPU_TAINTS = (
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"},
)
GPU_TOLERATIONS = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
)
DEFAULT_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)
DAEMONSET_TOLERATIONS = (
    {"effect": "NoExecute", "operator": "Exists"},
    {"effect": "NoSchedule", "operator": "Exists"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)

# (container, image, cpu millicores, memory MiB)
Container = tuple[str, str, int, int]


@dataclass(frozen=True)
class DaemonSetSpec:
    name: str
    containers: tuple[Container, ...]
    host_paths: tuple[tuple[str, str], ...]
    gpu_only: bool = False


DAEMONSETS = (
    DaemonSetSpec(
        "fluentbit-gke",
        (
            ("fluentbit", "gke.gcr.io/fluent-bit:v1.8.12-gke.40", 100, 200),
            ("fluentbit-gke", "gke.gcr.io/fluent-bit-gke-exporter:v0.28.1-gke.0", 5, 30),
        ),
        (
            ("varrun", "/var/run/google-fluentbit/pos-files"),
            ("varlog", "/var/log"),
            ("varlibkubeletpods", "/var/lib/kubelet/pods"),
        ),
    ),
    DaemonSetSpec(
        "gke-metrics-agent",
        (
            ("gke-metrics-agent", "gke.gcr.io/gke-metrics-agent:1.15.3-gke.0", 8, 110),
            ("core-metrics-exporter", "gke.gcr.io/gke-metrics-collector:20241004_2300_RC0", 5, 20),
        ),
        (("ssl-certs", "/etc/ssl/certs"),),
    ),
    DaemonSetSpec(
        "pdcsi-node",
        (
            ("csi-driver-registrar", "gke.gcr.io/csi-node-driver-registrar:v2.12.0-gke.3", 5, 10),
            ("gce-pd-driver", "gke.gcr.io/gcp-compute-persistent-disk-csi-driver:v1.15.3-gke.0", 5, 10),
        ),
        (
            ("kubelet-dir", "/var/lib/kubelet"),
            ("device-dir", "/dev"),
            ("registration-dir", "/var/lib/kubelet/plugins_registry"),
        ),
    ),
    DaemonSetSpec(
        "netd",
        (("netd", "gke.gcr.io/netd:v0.5.3-gke.2", 2, 30),),
        (("cni-net-dir", "/etc/cni/net.d"), ("cni-bin-dir", "/home/kubernetes/bin")),
    ),
    DaemonSetSpec(
        "nvidia-gpu-device-plugin-small-cos",
        (("nvidia-gpu-device-plugin", "gke.gcr.io/nvidia-gpu-device-plugin:v1.0.25-gke.56", 50, 100),),
        (("device-plugin", "/var/lib/kubelet/device-plugins"), ("dev", "/dev")),
        gpu_only=True,
    ),
)
KUBE_PROXY: Container = ("kube-proxy", "gke.gcr.io/kube-proxy-amd64:v1.33.5-gke.1201000", 100, 0)

SIDECARS: dict[str, Container] = {
    "istio-proxy": ("istio-proxy", "docker.io/istio/proxyv2:1.24.2", 100, 128),
    "cloud-sql-proxy": ("cloud-sql-proxy", "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.1", 50, 64),
    "log-shipper": ("log-shipper", "europe-docker.pkg.dev/shop-prod/platform/log-shipper:3.2.0", 20, 48),
}
TEAMS = (
    "shop",
    "payments",
    "catalog",
    "search",
    "identity",
    "ads",
    "analytics",
    "checkout",
    "media",
    "notifications",
    "pricing",
    "reviews",
    "shipping",
    "inventory",
    "growth",
    "platform",
    "risk",
    "support",
    "ml",
    "data",
)
NOUNS = (
    "cart",
    "order",
    "user",
    "session",
    "profile",
    "invoice",
    "ledger",
    "image",
    "thumbnail",
    "feed",
    "ranker",
    "indexer",
    "gateway",
    "quote",
    "stock",
    "coupon",
    "loyalty",
    "fraud",
    "email",
    "sms",
    "push",
    "report",
    "export",
    "audit",
    "geo",
    "tax",
    "price",
    "review",
    "rating",
    "wishlist",
    "banner",
    "fulfilment",
)
ROLES = ("api", "worker", "consumer", "grpc", "web", "sync", "cache", "proxy", "scheduler", "reader", "writer")
STATEFUL_APPS = ("postgres", "redis", "kafka", "zookeeper", "elasticsearch", "rabbitmq", "etcd", "clickhouse")
SERVING_ROLES = frozenset({"api", "grpc", "web", "cache", "proxy", "reader"})  # with ports and a readiness probe
NICE_CPU = (10, 20, 25, 50, 75, 100, 125, 150, 200, 250, 300, 400, 500, 600, 750, 1000, 1250, 1500, 2000)
NODE_IMAGES = (
    ("gke.gcr.io/gke-metrics-agent:1.15.3-gke.0", 140_000_000),
    ("gke.gcr.io/fluent-bit:v1.8.12-gke.40", 98_000_000),
    ("gke.gcr.io/gcp-compute-persistent-disk-csi-driver:v1.15.3-gke.0", 71_000_000),
    ("gke.gcr.io/kube-proxy-amd64:v1.33.5-gke.1201000", 64_000_000),
    ("docker.io/istio/proxyv2:1.24.2", 93_000_000),
    ("gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.1", 22_000_000),
    ("gke.gcr.io/netd:v0.5.3-gke.2", 51_000_000),
    ("gke.gcr.io/csi-node-driver-registrar:v2.12.0-gke.3", 10_000_000),
    ("gke.gcr.io/fluent-bit-gke-exporter:v0.28.1-gke.0", 43_000_000),
    ("europe-docker.pkg.dev/shop-prod/platform/log-shipper:3.2.0", 35_000_000),
    ("registry.k8s.io/pause:3.10", 320_000),
    ("gke.gcr.io/gke-metrics-collector:20241004_2300_RC0", 25_000_000),
)


@dataclass(slots=True)
class Workload:
    """What its pods share: a controller (or none), a template, constraints and a PDB."""

    kind: str  # Deployment, StatefulSet, DaemonSet, Mirror, Job, Pod (bare)
    namespace: str
    name: str
    pool: PoolSpec | None
    containers: tuple[Container, ...]
    label_key: str = "app"
    template_hash: str = ""
    owner_uid: str = ""
    image_digest: str = ""
    zones: tuple[str, ...] | None = None  # required node affinity on the zone
    node_selector: dict[str, str] | None = None
    machine_affinity: bool = False
    spread: str | None = None  # "anyway", "zone", "hostname"
    preferred_anti: bool = False
    required_anti: bool = False
    pvc: bool = False
    empty_dir: str | None = None  # "disk" or "memory"
    safe_to_evict: str | None = None
    gpu: int = 0
    tolerations: tuple[dict[str, Any], ...] = DEFAULT_TOLERATIONS
    priority: tuple[str, int] | None = None
    deletion_cost: int | None = None
    pdb: str | None = None  # "max-one", "min-half", "min-all"
    host_paths: tuple[tuple[str, str], ...] = ()
    replicas: int = 0
    suffixes: set[str] = field(default_factory=set)

    @property
    def cpu(self) -> int:
        return sum(container[2] for container in self.containers)

    @property
    def memory(self) -> int:
        return sum(container[3] for container in self.containers)


@dataclass(slots=True)
class NodePlan:
    name: str
    pool: PoolSpec
    zone: str
    index: int
    instance_id: str
    created: datetime
    target_cpu: int = 0
    slots: int = 0
    cordoned: bool = False
    ready: bool = True
    annotations: dict[str, str] = field(default_factory=dict)
    pods: list[tuple[int, int]] = field(default_factory=list)  # (workload index, ordinal)
    cpu: int = 0  # requested millicores of its non-terminal pods
    memory_mi: int = 0
    pinned: bool = False  # lightly used, and runs a pod pinned to it by hostname: ranks first, fits nowhere


@dataclass(frozen=True)
class Scale:
    nodes: int
    pods: int
    seed: int = DEFAULT_SEED


@dataclass(frozen=True)
class Files:
    snapshot: Path
    config: Path
    meta: Path


def files_for(nodes: int, out_dir: Path = OUT_DIR) -> Files:
    return Files(
        out_dir / f"snapshot-{nodes}.json", out_dir / f"config-{nodes}.json", out_dir / f"snapshot-{nodes}.meta.json"
    )


def config() -> dict[str, Any]:
    """The configuration to plan the synthetic clusters with (DESIGN.md schema)."""
    return {
        "nodePools": {
            "general-pool": {
                "enabled": True,
                "scaleDownCPURequestRatioLimit": CPU_LIMITS["general-pool"],
                "scaleDownMemoryRequestRatioLimit": MEMORY_LIMITS["general-pool"],
                "scaleDownRequiredUnderutilizedNodeCount": 3,
                "neededMarkedTimeSeconds": 600,
                "minimumNodeAgeSeconds": 1200,
                "minNodes": 3,
                "scaleUpCooldownSeconds": 600,
            },
            "highmem-pool": {
                "enabled": True,
                "scaleDownCPURequestRatioLimit": CPU_LIMITS["highmem-pool"],
                "scaleDownMemoryRequestRatioLimit": MEMORY_LIMITS["highmem-pool"],
                "scaleDownRequiredUnderutilizedNodeCount": 2,
                "neededMarkedTimeSeconds": 600,
                "minNodes": 3,
            },
            # Left to the Cluster Autoscaler: its nodes are targets only (tainted, so few pods fit).
            "spot-gpu-pool": {
                "enabled": False,
                "scaleDownCPURequestRatioLimit": CPU_LIMITS["spot-gpu-pool"],
                "scaleDownRequiredUnderutilizedNodeCount": 1,
                "minNodes": 1,
            },
        },
        "poolLabel": POOL_LABEL,
        "skipNodesWithLocalStorage": True,
        "skipNodesWithSystemPods": True,
        "dryRun": False,
    }


# -- small deterministic helpers ----------------------------------------------------------------


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _suffix(rng: random.Random, length: int = 5, alphabet: str = SUFFIX_ALPHABET) -> str:
    return "".join(rng.choices(alphabet, k=length))


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cpu_text(millis: int) -> str:
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis}m"


def _nice_cpu(rng: random.Random, low: int, high: int) -> int:
    """Log-uniform between low and high millicores, snapped to a value people write."""
    wanted = math.exp(rng.uniform(math.log(low), math.log(high)))
    return min(NICE_CPU, key=lambda nice: abs(math.log(nice / wanted)))


def _memory_for(rng: random.Random, cpu: int, per_cpu_mi: int) -> int:
    return max(32, int(cpu / 1000 * per_cpu_mi * rng.uniform(0.5, 1.5)) // 16 * 16)


# -- the generator -------------------------------------------------------------------------------


class _Cluster:
    """Decides the whole cluster in compact form, then renders it object by object."""

    def __init__(self, scale: Scale) -> None:
        self.scale = scale
        self.rng = random.Random(scale.seed)
        self.workloads: list[Workload] = []
        self.nodes: list[NodePlan] = []
        self.namespaces: list[str] = []
        self._names_by_namespace: dict[str, set[str]] = {}
        self.daemonsets: list[int] = []
        self.mirror = -1
        self._make_nodes()
        self._place()
        self._mark_nodes()

    # nodes ----------------------------------------------------------------------------------------

    def _make_nodes(self) -> None:
        rng = self.rng
        total = self.scale.nodes
        counts = [max(3, round(total * pool.share)) for pool in POOLS[1:]]
        counts.insert(0, total - sum(counts))
        if counts[0] < 3:
            raise ValueError(f"{total} nodes are too few for three pools; use at least 20")
        taken: set[str] = set()
        nodes: list[NodePlan] = []
        for pool, count in zip(POOLS, counts, strict=True):
            groups = [_hex(rng, 8) for _ in ZONES]  # one managed instance group per zone
            for index in range(count):
                zone_index = index % len(ZONES)
                while True:
                    name = f"gke-{CLUSTER}-{pool.name}-{groups[zone_index]}-{_suffix(rng, 4, NODE_SUFFIX_ALPHABET)}"
                    if name not in taken:
                        taken.add(name)
                        break
                created = NOW - timedelta(seconds=rng.randint(2 * 3600, 20 * 86400))
                nodes.append(NodePlan(name, pool, ZONES[zone_index], 0, str(rng.getrandbits(63)), created))
        nodes.sort(key=lambda node: node.name)
        for index, node in enumerate(nodes):
            node.index = index
            # Most nodes are comfortably underutilized against the 0.75 limit; a fifth are busy.
            ratio = rng.uniform(0.45, 0.72) if rng.random() < 0.8 else rng.uniform(0.78, 0.92)
            if node.pool is GPU:
                ratio = rng.uniform(0.3, 0.8)
            node.target_cpu = int(node.pool.allocatable_cpu_m * ratio)
        general = [node for node in nodes if node.pool is GENERAL]
        for node in rng.sample(general, max(2, len(general) // 250)):
            node.pinned = True
            node.target_cpu = int(GENERAL.allocatable_cpu_m * rng.uniform(0.2, 0.3))
        self.nodes = nodes

    # workloads ------------------------------------------------------------------------------------

    def _add(self, workload: Workload) -> int:
        self.workloads.append(workload)
        return len(self.workloads) - 1

    def _namespace(self) -> str:
        return self.rng.choice(self.namespaces)

    def _unique_name(self, namespace: str, base: str) -> str:
        taken = self._names_by_namespace.setdefault(namespace, set())
        name, index = base, 2
        while name in taken:
            name, index = f"{base}-{index}", index + 1
        taken.add(name)
        return name

    def _controller(
        self, kind: str, namespace: str, base: str, pool: PoolSpec, containers: tuple[Container, ...], **features: Any
    ) -> Workload:
        rng = self.rng
        name = self._unique_name(namespace, base)
        return Workload(
            kind,
            namespace,
            name,
            pool,
            containers,
            template_hash=_suffix(rng, rng.choice((9, 10))),
            owner_uid=_uid(rng),
            image_digest=_hex(rng, 64),
            **features,
        )

    def _app_containers(
        self, namespace: str, name: str, pool: PoolSpec, cpu_low: int, cpu_high: int, sidecar: str | None = None
    ) -> tuple[Container, ...]:
        rng = self.rng
        cpu = _nice_cpu(rng, cpu_low, cpu_high)
        app: Container = (
            name.split("-")[0] if namespace != "kube-system" else name,
            f"europe-docker.pkg.dev/{PROJECT}/{namespace}/{name}:2026.11.{rng.randint(1, 30)}",
            cpu,
            _memory_for(rng, cpu, pool.memory_per_cpu_mi),
        )
        side = SIDECARS[sidecar or rng.choices(tuple(SIDECARS), weights=(6, 2, 2))[0]]
        return (app, side)

    def _deployment(self, pool: PoolSpec) -> Workload:
        rng = self.rng
        namespace = self._namespace()
        base = f"{rng.choice(NOUNS)}-{rng.choice(ROLES)}"
        containers = self._app_containers(namespace, base, pool, 10, 2000)
        features: dict[str, Any] = {}
        roll = rng.random()
        if pool is HIGHMEM:
            if roll < 0.25:
                features["node_selector"] = {POOL_LABEL: HIGHMEM.name}
        elif roll < 0.01:
            features["zones"] = (rng.choice(ZONES),)
        elif roll < 0.02:
            features["machine_affinity"] = True
        spread_roll = rng.random()
        if spread_roll < 0.15:
            features["spread"] = "anyway"
        elif spread_roll < 0.18:
            features["spread"] = "zone"
        elif spread_roll < 0.19:
            features["spread"] = "hostname"
        features["preferred_anti"] = rng.random() < 0.25
        storage_roll = rng.random()
        if storage_roll < 0.01:
            features["empty_dir"] = "disk"
        elif storage_roll < 0.02:
            features["empty_dir"] = "disk"
            features["safe_to_evict"] = "true"
        elif storage_roll < 0.05:
            features["empty_dir"] = "memory"
        elif storage_roll < 0.053:
            features["safe_to_evict"] = "false"
        if rng.random() < 0.04:
            features["tolerations"] = (*DEFAULT_TOLERATIONS, GPU_TOLERATIONS[1])
        if rng.random() < 0.1:
            features["priority"] = ("business-critical", 1_000_000)
        if rng.random() < 0.02:
            features["deletion_cost"] = rng.choice((-100, 100, 1000))
        features["pdb"] = self._pdb_kind()
        return self._controller("Deployment", namespace, base, pool, containers, **features)

    def _pdb_kind(self) -> str | None:
        roll = self.rng.random()
        if roll >= 0.30:
            return None
        if roll < 0.18:
            return "max-one"
        if roll < 0.28:
            return "min-half"
        return "min-all"  # minAvailable equal to the replicas: a PDB that never allows a disruption

    def _gpu_workloads(self) -> tuple[list[int], list[int]]:
        """Inference Deployments (one GPU per pod) and CPU workers that tolerate the pool's taints."""
        rng = self.rng
        gpu: list[int] = []
        workers: list[int] = []
        count = max(2, len(self.nodes) // 60)
        for _ in range(count):
            base = f"{rng.choice(('inference', 'embedder', 'transcoder', 'reranker'))}-{rng.choice(ROLES)}"
            cpu = rng.choice((2000, 3000, 4000))
            containers: tuple[Container, ...] = (
                (
                    base.split("-")[0],
                    f"europe-docker.pkg.dev/{PROJECT}/ml/{base}:2026.11.{rng.randint(1, 30)}",
                    cpu,
                    cpu * 4,
                ),
                SIDECARS["log-shipper"],
            )
            gpu.append(
                self._add(
                    self._controller(
                        "Deployment",
                        "ml",
                        base,
                        GPU,
                        containers,
                        gpu=1,
                        tolerations=(*DEFAULT_TOLERATIONS, *GPU_TOLERATIONS),
                        node_selector={"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
                        pdb=self._pdb_kind(),
                    )
                )
            )
            worker_base = f"{base.split('-')[0]}-feeder"
            containers = self._app_containers("ml", worker_base, GPU, 100, 1000, "log-shipper")
            workers.append(
                self._add(
                    self._controller(
                        "Deployment",
                        "ml",
                        worker_base,
                        GPU,
                        containers,
                        tolerations=(*DEFAULT_TOLERATIONS, *GPU_TOLERATIONS),
                        node_selector={"cloud.google.com/gke-spot": "true"},
                        pdb=self._pdb_kind(),
                    )
                )
            )
        return gpu, workers

    def _statefulset(self, pool: PoolSpec) -> Workload:
        rng = self.rng
        namespace = self._namespace()
        base = rng.choice(STATEFUL_APPS)
        containers = self._app_containers(namespace, base, pool, 250, 2000, rng.choice(("log-shipper", "istio-proxy")))
        return self._controller(
            "StatefulSet",
            namespace,
            base,
            pool,
            containers,
            required_anti=True,
            pvc=True,
            pdb="max-one" if rng.random() < 0.8 else None,
            priority=("business-critical", 1_000_000),
        )

    # placement -------------------------------------------------------------------------------------

    def _place(self) -> None:
        rng = self.rng
        scale = self.scale
        nodes = self.nodes
        general = [node for node in nodes if node.pool is GENERAL]
        stateful_pools = [node for node in nodes if node.pool is not GPU]

        for spec in DAEMONSETS:
            workload = Workload(
                "DaemonSet",
                "kube-system",
                spec.name,
                None,
                spec.containers,
                label_key="k8s-app",
                template_hash=_suffix(rng, 10),
                owner_uid=_uid(rng),
                host_paths=spec.host_paths,
                tolerations=DAEMONSET_TOLERATIONS,
                priority=("system-node-critical", 2_000_001_000),
            )
            index = self._add(workload)
            self.daemonsets.append(index)
            for node in nodes:
                if node.pool is GPU or not spec.gpu_only:
                    self._put(node, index)
        self.mirror = self._add(
            Workload(
                "Mirror",
                "kube-system",
                "kube-proxy",
                None,
                (KUBE_PROXY,),
                host_paths=(("varlog", "/var/log"), ("kubeconfig", "/var/lib/kube-proxy")),
                priority=("system-node-critical", 2_000_001_000),
            )
        )
        for node in nodes:
            self._put(node, self.mirror)

        # kube-system Deployments: kube-dns and konnectivity-agent grow with the cluster and have PDBs.
        system = (
            ("kube-dns", max(2, math.ceil(len(nodes) / 16)), (("kubedns", 100, 70), ("dnsmasq", 150, 20)), "max-one"),
            ("konnectivity-agent", max(3, math.ceil(len(nodes) / 50)), (("konnectivity-agent", 10, 30),), "max-one"),
            ("kube-dns-autoscaler", 1, (("autoscaler", 20, 10),), None),
            ("metrics-server-v1.31.0", 1, (("metrics-server", 48, 105), ("metrics-server-nanny", 5, 50)), None),
            ("event-exporter-gke", 1, (("event-exporter", 10, 32), ("prometheus-to-sd-exporter", 2, 20)), None),
            ("l7-default-backend", 1, (("default-http-backend", 10, 20),), None),
            ("konnectivity-agent-autoscaler", 1, (("autoscaler", 10, 10),), None),
        )
        for name, replicas, parts, pdb in system:
            containers = tuple((part, f"gke.gcr.io/{part}:v1.33.5-gke.0", cpu, memory) for part, cpu, memory in parts)
            workload = Workload(
                "Deployment",
                "kube-system",
                name,
                GENERAL,
                containers,
                label_key="k8s-app",
                template_hash=_suffix(rng, 10),
                owner_uid=_uid(rng),
                image_digest=_hex(rng, 64),
                priority=("system-cluster-critical", 2_000_000_000),
                pdb=pdb,
            )
            index = self._add(workload)
            for _ in range(replicas):
                self._put(rng.choice(general), index)

        team_count = max(6, scale.pods // 450)
        self.namespaces = [
            TEAMS[i % len(TEAMS)] + (f"-{i // len(TEAMS)}" if i >= len(TEAMS) else "") for i in range(team_count)
        ]

        # A few bare debugging pods and finished Job pods.
        for index in range(max(2, len(nodes) // 250)):
            workload = Workload(
                "Pod",
                "default",
                f"debug-shell-{index}",
                GENERAL,
                (("shell", "gcr.io/google-containers/busybox:1.36", 100, 128),),
                label_key="run",
            )
            self._put(rng.choice(general), self._add(workload))
        for index in range(max(3, scale.pods // 300)):
            job = Workload(
                "Job",
                "batch",
                f"nightly-export-29384{index:03d}",
                GENERAL,
                self._app_containers("batch", "nightly-export", GENERAL, 500, 1000, "log-shipper"),
                label_key="job-name",
                owner_uid=_uid(rng),
                image_digest=_hex(rng, 64),
            )
            self._put(rng.choice(general), self._add(job))

        # A Deployment pinned to one node with a hostname nodeSelector (a licence dongle, a node-local
        # cache): the node looks cheap to remove, but the simulation finds no other node for the pod.
        for node in nodes:
            if node.pinned:
                containers = self._app_containers("platform", "licence-server", GENERAL, 100, 250, "log-shipper")
                workload = self._controller(
                    "Deployment",
                    "platform",
                    f"licence-server-{node.name[-4:]}",
                    GENERAL,
                    containers,
                    node_selector={"kubernetes.io/hostname": node.name},
                )
                self._put(node, self._add(workload))

        gpu_workloads, gpu_workers = self._gpu_workloads()

        fixed = sum(len(node.pods) for node in nodes)
        movable = scale.pods - fixed
        stateful_pods = int(movable * 0.05) // 3 * 3
        for _ in range(stateful_pods // 3):
            pool = HIGHMEM if rng.random() < 0.3 else GENERAL
            members = [node for node in stateful_pools if node.pool is pool]
            index = self._add(self._statefulset(pool))
            for zone in ZONES:  # one replica per zone, each with its own zonal disk
                self._put(rng.choice([node for node in members if node.zone == zone]), index)

        deployment_pods = scale.pods - sum(len(node.pods) for node in nodes)
        if deployment_pods < len(nodes):
            raise ValueError(f"{scale.pods} pods are too few for {len(nodes)} nodes; use at least 15 per node")
        self._apportion(deployment_pods)

        catalogue: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for pool in (GENERAL, HIGHMEM):
            slots = sum(node.slots for node in nodes if node.pool is pool)
            for _ in range(max(10, slots // 14)):
                workload = self._deployment(pool)
                index = self._add(workload)
                for zone in workload.zones or ZONES:
                    catalogue.setdefault((pool.name, zone), []).append((workload.cpu, index))
        for key in catalogue:
            catalogue[key].sort()
        workers = sorted((self.workloads[index].cpu, index) for index in gpu_workers)

        for node in nodes:
            if node.pool is GPU:
                gpus = min(node.slots, rng.choice((1, 2, 2)))
                for _ in range(gpus):
                    self._put(node, rng.choice(gpu_workloads))
                self._fill(node, workers, node.slots - gpus)
            else:
                self._fill(node, catalogue[(node.pool.name, node.zone)], node.slots)

    def _apportion(self, pods: int) -> None:
        """Spread `pods` Deployment pods over the nodes, heavier where the pool is, summing exactly."""
        rng = self.rng
        weights = [node.pool.slot_weight * rng.uniform(0.7, 1.3) * (0.3 if node.pinned else 1.0) for node in self.nodes]
        total = sum(weights)
        shares = [pods * weight / total for weight in weights]
        for node, share in zip(self.nodes, shares, strict=True):
            node.slots = int(share)
        left = pods - sum(node.slots for node in self.nodes)
        by_fraction = sorted(range(len(self.nodes)), key=lambda i: shares[i] - int(shares[i]), reverse=True)
        for index in by_fraction[:left]:
            self.nodes[index].slots += 1

    def _fill(self, node: NodePlan, choices: list[tuple[int, int]], slots: int) -> None:
        """Pick `slots` pods whose requests bring the node near its target cpu."""
        rng = self.rng
        cpus = [cpu for cpu, _ in choices]
        for slot in range(slots):
            left = slots - slot
            budget = node.target_cpu - node.cpu
            per_pod = max(0, budget) / left
            if rng.random() < 0.3 and budget > 0:
                # Some variety: any pod that still leaves room for the rest at the smallest size.
                room = budget - (left - 1) * cpus[0]
                top = max(1, bisect.bisect_right(cpus, room))
                pick = rng.randrange(top)
            else:
                at = bisect.bisect_left(cpus, per_pod)
                window = max(2, len(cpus) // 20)
                pick = min(len(cpus) - 1, max(0, at + rng.randint(-window, window // 2)))
            self._put(node, choices[pick][1])

    def _put(self, node: NodePlan, index: int) -> None:
        workload = self.workloads[index]
        node.pods.append((index, workload.replicas))
        workload.replicas += 1
        if workload.kind != "Job":
            node.cpu += workload.cpu
            node.memory_mi += workload.memory

    # marks and node states ------------------------------------------------------------------------

    def _mark_nodes(self) -> None:
        rng = self.rng
        for node in self.nodes:
            pool = node.pool
            cpu_ratio = node.cpu / pool.allocatable_cpu_m
            memory_ratio = node.memory_mi * 1024 / pool.allocatable_memory_ki
            memory_limit = MEMORY_LIMITS.get(pool.name)
            underutilized = cpu_ratio < CPU_LIMITS[pool.name] and (memory_limit is None or memory_ratio < memory_limit)
            underutilized = underutilized and pool is not GPU  # a pool that is not enabled is never marked
            roll = rng.random()
            if underutilized:
                if roll < 0.85:
                    node.annotations[MARK] = _stamp(NOW - timedelta(seconds=rng.randint(1800, 6 * 3600)))
                elif roll < 0.95:
                    node.annotations[MARK] = _stamp(NOW - timedelta(seconds=rng.randint(30, 500)))
            elif roll < 0.03:
                node.annotations[MARK] = _stamp(NOW - timedelta(seconds=rng.randint(1800, 6 * 3600)))
            state = rng.random()
            if state < 0.003:
                node.cordoned = True
            elif state < 0.013:
                # Joined 15 minutes ago: too young to drain, past the pool's scale-up cooldown.
                node.created = NOW - timedelta(seconds=900)
            elif state < 0.015:
                node.annotations["node-compactor.dev/disabled"] = "true"
            elif state < 0.017:
                node.annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"] = "true"
            elif state < 0.019:
                node.annotations["node-compactor.dev/drain-failed-at"] = _stamp(NOW - timedelta(seconds=600))
            elif state < 0.020:
                node.ready = False

    # rendering -------------------------------------------------------------------------------------

    def items(self) -> Iterator[dict[str, Any]]:
        for node in self.nodes:
            yield self._node(node)
        for _namespace, name, index, ordinal, node_index in self._pod_order():
            yield self._pod(self.workloads[index], name, ordinal, self.nodes[node_index])
        for workload in sorted(self.workloads, key=lambda w: (w.namespace, w.name)):
            if workload.pdb is not None and workload.replicas > 0:
                yield self._pdb(workload)

    def _pod_order(self) -> list[tuple[str, str, int, int, int]]:
        """Pods as kubectl lists them: by namespace, then name."""
        rng = self.rng
        rows = []
        for node in self.nodes:
            for index, ordinal in node.pods:
                workload = self.workloads[index]
                kind = workload.kind
                if kind == "StatefulSet":
                    name = f"{workload.name}-{ordinal}"
                elif kind == "Mirror":
                    name = f"kube-proxy-{node.name}"
                elif kind == "Pod":
                    name = workload.name
                else:
                    while True:
                        suffix = _suffix(rng)
                        if suffix not in workload.suffixes:
                            workload.suffixes.add(suffix)
                            break
                    prefix = f"{workload.name}-{workload.template_hash}" if kind == "Deployment" else workload.name
                    name = f"{prefix}-{suffix}"
                rows.append((workload.namespace, name, index, ordinal, node.index))
        rows.sort()
        return rows

    def _node(self, node: NodePlan) -> dict[str, Any]:
        rng = self.rng
        pool = node.pool
        family = pool.machine.split("-")[0]
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": pool.machine,
            "beta.kubernetes.io/os": "linux",
            "cloud.google.com/gke-boot-disk": "pd-balanced",
            "cloud.google.com/gke-container-runtime": "containerd",
            "cloud.google.com/gke-cpu-scaling-level": str(pool.capacity_cpu),
            "cloud.google.com/gke-logging-variant": "DEFAULT",
            "cloud.google.com/gke-max-pods-per-node": "110",
            "cloud.google.com/gke-nodepool": pool.name,
            "cloud.google.com/gke-os-distribution": "cos",
            "cloud.google.com/gke-provisioning": "spot" if pool.spot else "standard",
            "cloud.google.com/gke-stack-type": "IPV4",
            "cloud.google.com/machine-family": family,
            "cloud.google.com/private-node": "true",
            "failure-domain.beta.kubernetes.io/region": REGION,
            "failure-domain.beta.kubernetes.io/zone": node.zone,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": pool.machine,
            "topology.gke.io/zone": node.zone,
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": node.zone,
        }
        if pool.spot:
            labels["cloud.google.com/gke-spot"] = "true"
        if pool.gpus:
            labels["cloud.google.com/gke-accelerator"] = "nvidia-tesla-t4"
            labels["cloud.google.com/gke-accelerator-count"] = str(pool.gpus)
            labels["cloud.google.com/gke-gpu"] = "true"
        annotations = {
            "container.googleapis.com/instance_id": node.instance_id,
            "csi.volume.kubernetes.io/nodeid": orjson.dumps(
                {"pd.csi.storage.gke.io": f"projects/{PROJECT}/zones/{node.zone}/instances/{node.name}"}
            ).decode(),
            "node.alpha.kubernetes.io/ttl": "0",
            "node.gke.io/last-applied-node-labels": ",".join(
                f"{key}={value}" for key, value in labels.items() if key.startswith("cloud.google.com/")
            ),
            "node.gke.io/last-applied-node-taints": ",".join(
                f"{t['key']}={t['value']}:{t['effect']}" for t in (GPU_TAINTS if pool is GPU else ())
            ),
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            **node.annotations,
        }
        cidr = f"10.{64 + node.index // 256}.{node.index % 256}.0/24"
        spec: dict[str, Any] = {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "providerID": f"gce://{PROJECT}/{node.zone}/{node.name}",
        }
        taints = [dict(taint) for taint in GPU_TAINTS] if pool is GPU else []
        if node.cordoned:
            spec["unschedulable"] = True
            taints.append(
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "effect": "NoSchedule",
                    "timeAdded": _stamp(NOW - timedelta(hours=3)),
                }
            )
        if taints:
            spec["taints"] = taints
        capacity = {
            "cpu": str(pool.capacity_cpu),
            "ephemeral-storage": "98831908Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": f"{pool.capacity_memory_ki}Ki",
            "pods": "110",
        }
        allocatable = {
            "cpu": f"{pool.allocatable_cpu_m}m",
            "ephemeral-storage": "47060071478",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": f"{pool.allocatable_memory_ki}Ki",
            "pods": "110",
        }
        if pool.gpus:
            capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(pool.gpus)
        heartbeat = _stamp(NOW - timedelta(seconds=rng.randint(5, 40)))
        since = _stamp(node.created + timedelta(seconds=40))
        problem_conditions = (
            ("FrequentContainerdRestart", "NoFrequentContainerdRestart", "containerd is functioning properly"),
            ("KernelDeadlock", "KernelHasNoDeadlock", "kernel has no deadlock"),
            ("ReadonlyFilesystem", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
            ("FrequentUnregisterNetDevice", "NoFrequentUnregisterNetDevice", "node is functioning properly"),
            ("FrequentKubeletRestart", "NoFrequentKubeletRestart", "kubelet is functioning properly"),
            ("CorruptDockerOverlay2", "NoCorruptDockerOverlay2", "docker overlay2 is functioning properly"),
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
        conditions = [
            {
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": since,
                "message": message,
                "reason": reason,
                "status": "False",
                "type": kind,
            }
            for kind, reason, message in problem_conditions
        ]
        conditions.insert(
            6,
            {
                "lastHeartbeatTime": since,
                "lastTransitionTime": since,
                "message": "NodeController create implicit route",
                "reason": "RouteCreated",
                "status": "False",
                "type": "NetworkUnavailable",
            },
        )
        conditions.append(
            {
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": since,
                "message": "kubelet is posting ready status" if node.ready else "Kubelet stopped posting node status.",
                "reason": "KubeletReady" if node.ready else "NodeStatusUnknown",
                "status": "True" if node.ready else "Unknown",
                "type": "Ready",
            }
        )
        host_ip = f"10.132.{node.index // 250}.{node.index % 250 + 2}"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "annotations": annotations,
                "creationTimestamp": _stamp(node.created),
                "labels": labels,
                "name": node.name,
                "resourceVersion": str(rng.randint(10_000_000, 99_999_999)),
                "uid": _uid(rng),
            },
            "spec": spec,
            "status": {
                "addresses": [
                    {"address": host_ip, "type": "InternalIP"},
                    {"address": "", "type": "ExternalIP"},
                    {"address": node.name, "type": "InternalDNS"},
                    {"address": node.name, "type": "Hostname"},
                ],
                "allocatable": allocatable,
                "capacity": capacity,
                "conditions": conditions,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": [
                    {"names": [f"{image.rsplit(':', 1)[0]}@sha256:{_hex(rng, 64)}", image], "sizeBytes": size}
                    for image, size in NODE_IMAGES
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": _uid(rng),
                    "containerRuntimeVersion": "containerd://2.0.6",
                    "kernelVersion": "6.6.97+",
                    "kubeProxyVersion": "v1.33.5-gke.1201000",
                    "kubeletVersion": "v1.33.5-gke.1201000",
                    "machineID": _hex(rng, 32),
                    "operatingSystem": "linux",
                    "osImage": "Container-Optimized OS from Google",
                    "systemUUID": _uid(rng),
                },
            },
        }

    def _pod(self, workload: Workload, name: str, ordinal: int, node: NodePlan) -> dict[str, Any]:
        rng = self.rng
        kind = workload.kind
        namespace = workload.namespace
        created = (
            node.created + timedelta(seconds=rng.randint(30, 3600))
            if kind in ("DaemonSet", "Mirror")
            else (NOW - timedelta(seconds=rng.randint(600, 7 * 86400)))
        )
        started = created + timedelta(seconds=rng.randint(1, 5))
        running_since = started + timedelta(seconds=rng.randint(2, 40))
        labels, annotations = self._pod_metadata(workload, name, ordinal, node)
        metadata: dict[str, Any] = {"annotations": annotations} if annotations else {}
        metadata["creationTimestamp"] = _stamp(created)
        if kind in ("Deployment", "DaemonSet", "Job"):
            owner_name = f"{workload.name}-{workload.template_hash}" if kind == "Deployment" else workload.name
            metadata["generateName"] = f"{owner_name}-"
        elif kind == "StatefulSet":
            metadata["generateName"] = f"{workload.name}-"
        metadata["labels"] = labels
        metadata["name"] = name
        metadata["namespace"] = namespace
        owner = self._owner(workload, node)
        if owner is not None:
            metadata["ownerReferences"] = [owner]
        metadata["resourceVersion"] = str(rng.randint(10_000_000, 99_999_999))
        metadata["uid"] = _uid(rng)

        account = "default" if kind in ("Pod", "Job") else workload.name.split("-v1")[0]
        token_volume = f"kube-api-access-{_suffix(rng)}"
        volumes: list[dict[str, Any]] = [
            {"hostPath": {"path": path, "type": ""}, "name": volume} for volume, path in workload.host_paths
        ]
        mounts: list[dict[str, Any]] = [{"mountPath": path, "name": volume} for volume, path in workload.host_paths]
        if workload.pvc:
            volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}})
            mounts.append({"mountPath": "/var/lib/data", "name": "data"})
        if workload.empty_dir == "disk":
            volumes.append({"emptyDir": {"sizeLimit": "2Gi"}, "name": "cache"})
            mounts.append({"mountPath": "/cache", "name": "cache"})
        elif workload.empty_dir == "memory":
            volumes.append({"emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}, "name": "scratch"})
            mounts.append({"mountPath": "/scratch", "name": "scratch"})
        if kind != "Mirror":
            volumes.append(
                {
                    "name": token_volume,
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                        ],
                    },
                }
            )
            mounts.append(
                {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": token_volume, "readOnly": True}
            )

        containers = [
            self._container(workload, container, position, mounts)
            for position, container in enumerate(workload.containers)
        ]
        spec: dict[str, Any] = {}
        affinity = self._affinity(workload, node)
        if affinity:
            spec["affinity"] = affinity
        spec["containers"] = containers
        spec["dnsPolicy"] = "ClusterFirst"
        spec["enableServiceLinks"] = kind != "DaemonSet"
        if kind == "StatefulSet":
            spec["hostname"] = name
        if kind in ("Mirror", "DaemonSet") and workload.name in ("kube-proxy", "netd", "pdcsi-node"):
            spec["hostNetwork"] = True
        spec["nodeName"] = node.name
        if workload.node_selector:
            spec["nodeSelector"] = dict(workload.node_selector)
        spec["preemptionPolicy"] = "PreemptLowerPriority"
        priority_class, priority = workload.priority or ("", 0)
        spec["priority"] = priority
        if priority_class:
            spec["priorityClassName"] = priority_class
        spec["restartPolicy"] = "Never" if kind in ("Job", "Pod") else "Always"
        spec["schedulerName"] = "default-scheduler"
        spec["securityContext"] = {} if kind in ("DaemonSet", "Mirror") else {"runAsNonRoot": True}
        if kind != "Mirror":
            spec["serviceAccount"] = account
            spec["serviceAccountName"] = account
        if kind == "StatefulSet":
            spec["subdomain"] = f"{workload.name}-headless"
        spec["terminationGracePeriodSeconds"] = 30
        spec["tolerations"] = (
            [dict(t) for t in workload.tolerations]
            if kind != "Mirror"
            else [{"effect": "NoExecute", "operator": "Exists"}]
        )
        if workload.spread is not None:
            spec["topologySpreadConstraints"] = [self._spread(workload)]
        spec["volumes"] = volumes
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": self._status(workload, node, started, running_since),
        }

    def _pod_metadata(
        self, workload: Workload, name: str, ordinal: int, node: NodePlan
    ) -> tuple[dict[str, str], dict[str, str]]:
        rng = self.rng
        kind = workload.kind
        labels: dict[str, str] = {}
        annotations: dict[str, str] = {}
        if kind == "Deployment":
            labels = {
                workload.label_key: workload.name,
                "app.kubernetes.io/name": workload.name,
                "pod-template-hash": workload.template_hash,
            }
            if workload.namespace != "kube-system":
                labels["version"] = "v2026.11"
                annotations["kubectl.kubernetes.io/restartedAt"] = "2026-11-02T08:14:51Z"
                annotations["prometheus.io/port"] = "9090"
                annotations["prometheus.io/scrape"] = "true"
            else:
                annotations["components.gke.io/component-name"] = workload.name
                annotations["components.gke.io/component-version"] = "1.33.5-gke.0"
            if any(container[0] == "istio-proxy" for container in workload.containers):
                labels["security.istio.io/tlsMode"] = "istio"
                labels["service.istio.io/canonical-name"] = workload.name
                labels["service.istio.io/canonical-revision"] = "v2026.11"
                annotations["istio.io/rev"] = "default"
        elif kind == "StatefulSet":
            labels = {
                workload.label_key: workload.name,
                "apps.kubernetes.io/pod-index": str(ordinal),
                "controller-revision-hash": f"{workload.name}-{workload.template_hash}",
                "statefulset.kubernetes.io/pod-name": name,
            }
            annotations["prometheus.io/scrape"] = "true"
        elif kind == "DaemonSet":
            labels = {
                "controller-revision-hash": workload.template_hash,
                workload.label_key: workload.name,
                "pod-template-generation": "3",
            }
            annotations["components.gke.io/component-name"] = workload.name
        elif kind == "Mirror":
            labels = {"component": "kube-proxy", "tier": "node"}
            digest = _hex(rng, 32)
            annotations = {
                "kubernetes.io/config.hash": digest,
                "kubernetes.io/config.mirror": digest,
                "kubernetes.io/config.seen": _stamp(node.created + timedelta(seconds=30))[:-1] + ".512883420Z",
                "kubernetes.io/config.source": "file",
            }
        elif kind == "Job":
            labels = {
                "batch.kubernetes.io/controller-uid": workload.owner_uid,
                "batch.kubernetes.io/job-name": workload.name,
                "controller-uid": workload.owner_uid,
                "job-name": workload.name,
            }
            annotations["batch.kubernetes.io/job-tracking"] = ""
        else:
            labels = {workload.label_key: workload.name}
        if workload.safe_to_evict is not None:
            annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] = workload.safe_to_evict
        if workload.deletion_cost is not None:
            annotations["controller.kubernetes.io/pod-deletion-cost"] = str(workload.deletion_cost)
        return labels, annotations

    def _owner(self, workload: Workload, node: NodePlan) -> dict[str, Any] | None:
        kind = workload.kind
        if kind == "Pod":
            return None
        if kind == "Mirror":
            return {"apiVersion": "v1", "controller": True, "kind": "Node", "name": node.name, "uid": _uid(self.rng)}
        api, owner_kind, name = {
            "Deployment": ("apps/v1", "ReplicaSet", f"{workload.name}-{workload.template_hash}"),
            "StatefulSet": ("apps/v1", "StatefulSet", workload.name),
            "DaemonSet": ("apps/v1", "DaemonSet", workload.name),
            "Job": ("batch/v1", "Job", workload.name),
        }[kind]
        return {
            "apiVersion": api,
            "blockOwnerDeletion": True,
            "controller": True,
            "kind": owner_kind,
            "name": name,
            "uid": workload.owner_uid,
        }

    def _container(
        self, workload: Workload, container: Container, position: int, mounts: list[dict[str, Any]]
    ) -> dict[str, Any]:
        name, image, cpu, memory = container
        requests = {"cpu": _cpu_text(cpu)}
        limits: dict[str, str] = {}
        if memory:
            requests["memory"] = f"{memory}Mi"
            limits["memory"] = f"{memory * 2 if position else memory}Mi"
        if workload.gpu and position == 0:
            requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(workload.gpu)
        resources: dict[str, Any] = {"limits": limits, "requests": requests} if limits else {"requests": requests}
        result: dict[str, Any] = {}
        app = (
            position == 0
            and workload.kind in ("Deployment", "StatefulSet", "Job")
            and workload.namespace != "kube-system"
        )
        if app:
            result["env"] = [
                {"name": "APP_ENV", "value": "production"},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
            ]
        result["image"] = image
        result["imagePullPolicy"] = "IfNotPresent"
        serves = app and workload.name.split("-")[-1] in SERVING_ROLES
        if serves:
            result["readinessProbe"] = {
                "httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
                "periodSeconds": 10,
                "timeoutSeconds": 1,
            }
        result["name"] = name
        if serves:
            result["ports"] = [{"containerPort": 8080, "name": "http", "protocol": "TCP"}]
        result["resources"] = resources
        result["volumeMounts"] = mounts if position == 0 else mounts[-1:]
        return result

    def _affinity(self, workload: Workload, node: NodePlan) -> dict[str, Any]:
        affinity: dict[str, Any] = {}
        expressions = []
        if workload.zones:
            expressions.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(workload.zones)})
        if workload.machine_affinity:
            expressions.append({"key": "cloud.google.com/machine-family", "operator": "In", "values": ["e2", "n2"]})
        if expressions:
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        if workload.kind == "DaemonSet":
            # What the DaemonSet controller pins each of its pods with.
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}
                    ]
                }
            }
        selector = {"matchLabels": {workload.label_key: workload.name}}
        if workload.required_anti:
            affinity["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        elif workload.preferred_anti:
            affinity["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "podAffinityTerm": {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"},
                        "weight": 100,
                    }
                ]
            }
        return affinity

    def _spread(self, workload: Workload) -> dict[str, Any]:
        hostname = workload.spread == "hostname"
        return {
            "labelSelector": {"matchLabels": {workload.label_key: workload.name}},
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname" if hostname else "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway" if workload.spread == "anyway" else "DoNotSchedule",
        }

    def _status(self, workload: Workload, node: NodePlan, started: datetime, running: datetime) -> dict[str, Any]:
        rng = self.rng
        done = workload.kind == "Job"
        host_ip = f"10.132.{node.index // 250}.{node.index % 250 + 2}"
        slot = rng.randint(2, 250)
        pod_ip = (
            host_ip
            if workload.kind == "Mirror" or workload.name in ("netd", "pdcsi-node")
            else (f"10.{64 + node.index // 256}.{node.index % 256}.{slot}")
        )
        ready = "False" if done else "True"
        started_text, running_text = _stamp(started), _stamp(running)
        conditions = [
            {"lastTransitionTime": started_text, "status": "True", "type": "Initialized"},
            {
                "lastTransitionTime": running_text,
                "status": ready,
                "type": "Ready",
                **({"reason": "PodCompleted"} if done else {}),
            },
            {
                "lastTransitionTime": running_text,
                "status": ready,
                "type": "ContainersReady",
                **({"reason": "PodCompleted"} if done else {}),
            },
            {"lastTransitionTime": started_text, "status": "True", "type": "PodScheduled"},
        ]
        statuses = []
        for name, image, _, _ in workload.containers:
            if done:
                state: dict[str, Any] = {
                    "terminated": {
                        "containerID": f"containerd://{_hex(rng, 64)}",
                        "exitCode": 0,
                        "finishedAt": running_text,
                        "reason": "Completed",
                        "startedAt": started_text,
                    }
                }
            else:
                state = {"running": {"startedAt": running_text}}
            statuses.append(
                {
                    "containerID": f"containerd://{_hex(rng, 64)}",
                    "image": image,
                    "imageID": f"{image.rsplit(':', 1)[0]}@sha256:{workload.image_digest or _hex(rng, 64)}",
                    "name": name,
                    "ready": not done,
                    "restartCount": 0 if rng.random() < 0.9 else rng.randint(1, 4),
                    "state": state,
                }
            )
        return {
            "conditions": conditions,
            "containerStatuses": statuses,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "phase": "Succeeded" if done else "Running",
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "qosClass": "Burstable",
            "startTime": started_text,
        }

    def _pdb(self, workload: Workload) -> dict[str, Any]:
        rng = self.rng
        replicas = workload.replicas
        spec: dict[str, Any]
        if workload.pdb == "max-one":
            spec, allowed, desired = {"maxUnavailable": 1}, 1, replicas - 1
        elif workload.pdb == "min-half":
            desired = math.ceil(replicas / 2)
            spec, allowed = {"minAvailable": "50%"}, replicas - desired
        else:
            spec, allowed, desired = {"minAvailable": replicas}, 0, replicas
        spec["selector"] = {"matchLabels": {workload.label_key: workload.name}}
        generation = rng.randint(1, 4)
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "creationTimestamp": "2026-03-12T10:41:07Z",
                "generation": generation,
                "labels": {workload.label_key: workload.name},
                "name": workload.name,
                "namespace": workload.namespace,
                "resourceVersion": str(rng.randint(10_000_000, 99_999_999)),
                "uid": _uid(rng),
            },
            "spec": spec,
            "status": {
                "conditions": [
                    {
                        "lastTransitionTime": "2026-11-20T21:13:40Z",
                        "message": "",
                        "observedGeneration": generation,
                        "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                        "status": "True" if allowed > 0 else "False",
                        "type": "DisruptionAllowed",
                    }
                ],
                "currentHealthy": replicas,
                "desiredHealthy": desired,
                "disruptionsAllowed": allowed,
                "expectedPods": replicas,
                "observedGeneration": generation,
            },
        }

    def counts(self) -> dict[str, int]:
        kinds: dict[str, int] = {}
        for node in self.nodes:
            for index, _ in node.pods:
                kind = self.workloads[index].kind
                kinds[kind] = kinds.get(kind, 0) + 1
        return {
            "nodes": len(self.nodes),
            "pods": sum(kinds.values()),
            **{f"pods.{kind}": count for kind, count in sorted(kinds.items())},
            "pdbs": sum(1 for w in self.workloads if w.pdb is not None and w.replicas > 0),
            "namespaces": len({w.namespace for w in self.workloads}),
            "underutilizedByTarget": sum(
                1 for node in self.nodes if node.cpu / node.pool.allocatable_cpu_m < CPU_LIMITS[node.pool.name]
            ),
        }


# -- writing --------------------------------------------------------------------------------------


def write_list(stream: BinaryIO, items: Iterable[dict[str, Any]]) -> None:
    """A kubectl `List`, pretty-printed, written one item at a time."""
    stream.write(b'{\n  "apiVersion": "v1",\n  "items": [')
    first = True
    for item in items:
        stream.write(b"\n    " if first else b",\n    ")
        stream.write(orjson.dumps(item, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    "))
        first = False
    stream.write(b'\n  ],\n  "kind": "List",\n  "metadata": {\n    "resourceVersion": ""\n  }\n}\n')


def meta_for(scale: Scale) -> dict[str, Any]:
    return {"generator": GENERATOR_VERSION, "nodes": scale.nodes, "pods": scale.pods, "seed": scale.seed}


def is_current(scale: Scale, out_dir: Path = OUT_DIR) -> bool:
    """Whether the files for `scale` exist and were written by this generator version."""
    files = files_for(scale.nodes, out_dir)
    if not (files.snapshot.exists() and files.config.exists() and files.meta.exists()):
        return False
    try:
        meta = orjson.loads(files.meta.read_bytes())
    except orjson.JSONDecodeError:
        return False
    return isinstance(meta, dict) and all(meta.get(key) == value for key, value in meta_for(scale).items())


def generate(scale: Scale, out_dir: Path = OUT_DIR) -> dict[str, Any]:
    """Write the snapshot, its config and a small meta file; returns the meta (with counts)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = files_for(scale.nodes, out_dir)
    cluster = _Cluster(scale)
    partial = files.snapshot.with_suffix(".json.partial")
    with open(partial, "wb", buffering=4 * 2**20) as stream:
        write_list(stream, cluster.items())
    os.replace(partial, files.snapshot)
    files.config.write_bytes(orjson.dumps(config(), option=orjson.OPT_INDENT_2) + b"\n")
    meta = {**meta_for(scale), "now": NOW_TEXT, "bytes": files.snapshot.stat().st_size, "counts": cluster.counts()}
    files.meta.write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2) + b"\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.synth", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, help="total pods, DaemonSet and mirror pods included (default 30/node)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    scale = Scale(args.nodes, args.pods if args.pods is not None else args.nodes * 30, args.seed)
    meta = generate(scale, args.out)
    sys.stdout.write(orjson.dumps(meta, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
