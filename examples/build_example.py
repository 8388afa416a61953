"""Writes examples/offpeak-snapshot.json: a GKE cluster at 03:00 UTC, after the nightly scale-in.

Two autoscaled pools (general-purpose `default-pool`, a tainted T4 `gpu-pool`)
across three zones, with what a real cluster carries: Deployments,
a StatefulSet with PersistentVolumeClaims, DaemonSets and mirror pods,
kube-system pods with and without PodDisruptionBudgets, a PDB that allows no
disruption, a bare debugging pod, a pod with an emptyDir cache, a node a
person cordoned, a node that just joined, and finished Job pods.

Run `python examples/build_example.py` to regenerate; the output is
deterministic. `examples/config.json` is the configuration to plan it with.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

NOW = "2026-11-21T03:00:00Z"
ZONES = ("europe-west1-b", "europe-west1-c", "europe-west1-d")
OUT = Path(__file__).with_name("offpeak-snapshot.json")


def uid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def node(
    name: str,
    pool: str,
    zone: str,
    *,
    created: str = "2026-11-14T09:12:00Z",
    gpu: bool = False,
    annotations: dict[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    machine = "n1-standard-8" if gpu else "e2-standard-4"
    allocatable = {"cpu": "7910m", "memory": "26758196Ki"} if gpu else {"cpu": "3920m", "memory": "13166196Ki"}
    allocatable |= {"ephemeral-storage": "47060071478", "pods": "110", "hugepages-2Mi": "0"}
    if gpu:
        allocatable["nvidia.com/gpu"] = "1"
    labels = {
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/machine-family": machine.split("-")[0],
        "node.kubernetes.io/instance-type": machine,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": "europe-west1",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    if gpu:
        labels["cloud.google.com/gke-accelerator"] = "nvidia-tesla-t4"
    spec: dict[str, Any] = {"podCIDR": "10.8.0.0/24", "providerID": f"gce://shop-prod/{zone}/{name}"}
    if gpu:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    if unschedulable:
        spec["unschedulable"] = True
        spec.setdefault("taints", []).append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-11-21T01:40:00Z"}
        )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("node", name),
            "creationTimestamp": created,
            "labels": labels,
            "annotations": {
                "container.googleapis.com/instance_id": str(int(uid("id", name)[:8], 16)),
                "node.alpha.kubernetes.io/ttl": "0",
                **(annotations or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.5-gke.1201000", "containerRuntimeVersion": "containerd://2.0.6"},
        },
    }


def pod(
    name: str,
    namespace: str,
    node_name: str,
    *,
    owner: tuple[str, str] | None,
    cpu: str,
    memory: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    gpu: int = 0,
    phase: str = "Running",
    priority: int = 0,
    sidecar: tuple[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {"memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpu)
    containers = [
        {
            "name": name.split("-")[0],
            "image": f"europe-docker.pkg.dev/shop-prod/apps/{name.split('-')[0]}:2026.11.3",
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": requests, "limits": limits},
            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        }
    ]
    if sidecar:
        containers.append(
            {
                "name": "istio-proxy",
                "image": "gcr.io/istio-release/proxyv2:1.24.2",
                "resources": {"requests": {"cpu": sidecar[0], "memory": sidecar[1]}},
            }
        )
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid("pod", namespace, name),
        "creationTimestamp": "2026-11-20T22:05:00Z",
        "labels": labels or {},
    }
    if annotations:
        metadata["annotations"] = annotations
    if owner:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1" if owner[0] != "Job" else "batch/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": uid("owner", namespace, owner[1]),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "containers": containers,
        "volumes": [
            {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            *(volumes or []),
        ],
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            *(tolerations or []),
        ],
        "priority": priority,
        "schedulerName": "default-scheduler",
    }
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True" if phase == "Running" else "False"},
            ],
            "qosClass": "Burstable",
        },
    }


def pdb(name: str, namespace: str, match: dict[str, str], allowed: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": uid("pdb", namespace, name)},
        "spec": {"selector": {"matchLabels": match}, **spec},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2},
    }


def build() -> dict[str, Any]:
    default = [
        f"gke-shop-prod-default-pool-{suffix}"
        for suffix in (
            "8c1f-0k2b",
            "8c1f-3pzx",
            "8c1f-7wq9",
            "4d2e-1m8c",
            "4d2e-5tn2",
            "4d2e-9hxv",
            "a7b3-2kcd",
            "a7b3-6rfj",
            "a7b3-8svl",
            "a7b3-xq4n",
            "4d2e-new1",
        )
    ]
    gpu = [f"gke-shop-prod-gpu-pool-{suffix}" for suffix in ("51c0-t4aa", "51c0-t4bb", "93e1-t4cc")]
    marked_long = {"node-compactor.dev/underutilized-since": "2026-11-21T02:10:00Z"}
    marked_recently = {"node-compactor.dev/underutilized-since": "2026-11-21T02:58:00Z"}
    nodes = [
        node(default[0], "default-pool", ZONES[0]),
        node(default[1], "default-pool", ZONES[0], annotations=marked_long),
        node(default[2], "default-pool", ZONES[0], annotations=marked_long),
        node(default[3], "default-pool", ZONES[1], annotations=marked_long),
        node(default[4], "default-pool", ZONES[1], annotations=marked_recently),
        node(default[5], "default-pool", ZONES[1], unschedulable=True, annotations=marked_long),
        node(default[6], "default-pool", ZONES[2], annotations=marked_long),
        node(default[7], "default-pool", ZONES[2], annotations=marked_long),
        node(default[8], "default-pool", ZONES[2]),
        node(
            default[9],
            "default-pool",
            ZONES[2],
            annotations={**marked_long, "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        ),
        node(default[10], "default-pool", ZONES[0], created="2026-11-21T02:45:00Z"),
        node(gpu[0], "gpu-pool", ZONES[0], gpu=True, annotations=marked_long),
        node(gpu[1], "gpu-pool", ZONES[1], gpu=True),
        node(gpu[2], "gpu-pool", ZONES[2], gpu=True, annotations=marked_long),
    ]

    pods: list[dict[str, Any]] = []
    for n in nodes:
        name = n["metadata"]["name"]
        short = name.rsplit("-", 1)[-1]
        gpu_node = "gpu-pool" in name
        system_tolerations = [{"operator": "Exists"}]
        pods.append(
            pod(
                f"fluentbit-gke-{short}",
                "kube-system",
                name,
                owner=("DaemonSet", "fluentbit-gke"),
                cpu="100m",
                memory="200Mi",
                tolerations=system_tolerations,
                volumes=[{"name": "varlog", "hostPath": {"path": "/var/log"}}],
                priority=2000001000,
            )
        )
        pods.append(
            pod(
                f"gke-metrics-agent-{short}",
                "kube-system",
                name,
                owner=("DaemonSet", "gke-metrics-agent"),
                cpu="8m",
                memory="110Mi",
                tolerations=system_tolerations,
                priority=2000001000,
            )
        )
        pods.append(
            pod(
                f"pdcsi-node-{short}",
                "kube-system",
                name,
                owner=("DaemonSet", "pdcsi-node"),
                cpu="10m",
                memory="80Mi",
                tolerations=system_tolerations,
                priority=2000001000,
            )
        )
        mirror = pod(
            f"kube-proxy-{name}",
            "kube-system",
            name,
            owner=("Node", name),
            cpu="100m",
            memory="64Mi",
            annotations={"kubernetes.io/config.mirror": uid("mirror", name), "kubernetes.io/config.source": "file"},
            priority=2000001000,
        )
        pods.append(mirror)
        if gpu_node:
            pods.append(
                pod(
                    f"nvidia-gpu-device-plugin-{short}",
                    "kube-system",
                    name,
                    owner=("DaemonSet", "nvidia-gpu-device-plugin-small-cos"),
                    cpu="50m",
                    memory="100Mi",
                    tolerations=system_tolerations,
                    priority=2000001000,
                )
            )

    def deploy(
        app: str, namespace: str, placements: list[int], cpu: str, memory: str, *, rs: str, **extra: Any
    ) -> None:
        for index, where in enumerate(placements):
            pods.append(
                pod(
                    f"{app}-{rs}-{uid(app, str(index))[:5]}",
                    namespace,
                    default[where],
                    owner=("ReplicaSet", f"{app}-{rs}"),
                    cpu=cpu,
                    memory=memory,
                    labels={"app": app, "pod-template-hash": rs},
                    **extra,
                )
            )

    mesh = ("100m", "128Mi")
    deploy("frontend", "shop", [0, 1, 3, 6, 8, 9], "500m", "512Mi", rs="7d9f8c6b5", sidecar=mesh)
    deploy("cart", "shop", [0, 2, 4, 7], "400m", "768Mi", rs="5b7c9d8f4", sidecar=mesh)
    deploy("catalog", "shop", [1, 3, 6, 8], "700m", "1536Mi", rs="6c8d7e9f2", sidecar=mesh)
    deploy("checkout", "shop", [2, 4, 9], "300m", "512Mi", rs="84f6d5c7b", sidecar=mesh)
    deploy("recommendations", "shop", [0, 7, 8], "600m", "2Gi", rs="9a8b7c6d5", sidecar=mesh)
    deploy("payments-api", "payments", [4, 8], "500m", "1Gi", rs="77c5f9d8e", sidecar=mesh)
    deploy(
        "report-builder",
        "batch",
        [3],
        "900m",
        "2Gi",
        rs="66d4c8b9a",
        annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    )
    deploy(
        "search-cache",
        "shop",
        [6],
        "400m",
        "2Gi",
        rs="3f5e7d9c1",
        volumes=[{"name": "index", "emptyDir": {"sizeLimit": "4Gi"}}],
    )
    deploy("kube-dns", "kube-system", [0, 8], "260m", "110Mi", rs="5c8f7b6d9", priority=2000000000)
    deploy("konnectivity-agent", "kube-system", [1, 6], "50m", "30Mi", rs="6b9d7c5f8", priority=2000000000)
    deploy("metrics-server", "kube-system", [9], "48m", "105Mi", rs="7f6c9d8b4", priority=2000000000)
    deploy("event-exporter-gke", "kube-system", [7], "10m", "32Mi", rs="85b7c6d9f", priority=2000000000)

    for index, where in enumerate((2, 4, 7)):
        pods.append(
            pod(
                f"postgres-{index}",
                "data",
                default[where],
                owner=("StatefulSet", "postgres"),
                cpu="1",
                memory="4Gi",
                labels={"app": "postgres", "statefulset.kubernetes.io/pod-name": f"postgres-{index}"},
                volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": f"data-postgres-{index}"}}],
                affinity={
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"app": "postgres"}},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                },
            )
        )
    pods.append(
        pod("debug-shell", "default", default[5], owner=None, cpu="100m", memory="128Mi", labels={"run": "debug-shell"})
    )
    for index in range(3):
        pods.append(
            pod(
                f"nightly-export-29384{index}-x{index}k",
                "batch",
                default[2 + index],
                owner=("Job", f"nightly-export-29384{index}"),
                cpu="1",
                memory="2Gi",
                phase="Succeeded",
                labels={"job-name": f"nightly-export-29384{index}"},
            )
        )

    gpu_toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for index, where in enumerate((0, 1, 2)):
        pods.append(
            pod(
                f"inference-6f7d8c9b5-{uid('inf', str(index))[:5]}",
                "ml",
                gpu[where],
                owner=("ReplicaSet", "inference-6f7d8c9b5"),
                cpu="2",
                memory="12Gi",
                gpu=1,
                tolerations=gpu_toleration,
                labels={"app": "inference", "pod-template-hash": "6f7d8c9b5"},
            )
        )
    pods.append(
        pod(
            f"embedder-5d6c7b8a9-{uid('emb', '0')[:5]}",
            "ml",
            gpu[2],
            owner=("ReplicaSet", "embedder-5d6c7b8a9"),
            cpu="1500m",
            memory="4Gi",
            tolerations=gpu_toleration,
            labels={"app": "embedder", "pod-template-hash": "5d6c7b8a9"},
        )
    )

    pdbs = [
        pdb("checkout", "shop", {"app": "checkout"}, 1, minAvailable=2),
        pdb("payments-api", "payments", {"app": "payments-api"}, 0, maxUnavailable=0),
        pdb("postgres", "data", {"app": "postgres"}, 1, maxUnavailable=1),
        pdb("kube-dns", "kube-system", {"app": "kube-dns"}, 1, maxUnavailable=1),
        pdb("konnectivity-agent", "kube-system", {"app": "konnectivity-agent"}, 1, minAvailable=1),
    ]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [*nodes, *pods, *pdbs]}


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=4) + "\n")
    print(f"wrote {OUT}")
