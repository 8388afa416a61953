"""Small builders of realistic Kubernetes JSON (as a GKE cluster returns it) for tests.

Each returns a fresh dict with `kind` and `apiVersion`, ready for `FakeApiServer.add`
or for a snapshot file. Quantities are kept as the strings Kubernetes uses. The
builders decide nothing about node-compactor's rules; they only spell objects.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from typing import Any

JsonObject = dict[str, Any]

# Tolerations the DefaultTolerationSeconds admission plugin adds to every pod.
_DEFAULT_TOLERATIONS: list[JsonObject] = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]

# Tolerations the DaemonSet controller adds to its pods.
_DAEMONSET_TOLERATIONS: list[JsonObject] = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]

_OWNER_API_VERSIONS = {
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "ReplicationController": "v1",
    "Node": "v1",
}


@functools.lru_cache(maxsize=4096)
def _stable_uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def _stable_ip(prefix: str, name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    return f"{prefix}.{digest[0]}.{max(digest[1], 1)}"


def _condition(kind: str, status: bool, when: str, **extra: str) -> JsonObject:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": when,
        **extra,
    }


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> JsonObject:
    spelled: JsonObject = {"key": key, "effect": effect}
    if value is not None:
        spelled["value"] = value
    return spelled


def toleration(
    key: str | None = None, value: str | None = None, *, effect: str | None = None, operator: str | None = None
) -> JsonObject:
    spelled: JsonObject = {}
    if key is not None:
        spelled["key"] = key
    spelled["operator"] = operator or ("Equal" if value is not None else "Exists")
    if value is not None:
        spelled["value"] = value
    if effect is not None:
        spelled["effect"] = effect
    return spelled


def empty_dir(name: str, *, medium: str | None = None) -> JsonObject:
    source: JsonObject = {"medium": medium} if medium else {}
    return {"name": name, "emptyDir": source}


def host_path(name: str, path: str) -> JsonObject:
    return {"name": name, "hostPath": {"path": path, "type": ""}}


def persistent_volume_claim(name: str, claim_name: str) -> JsonObject:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim_name}}


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    pool: str = "default-pool",
    zone: str = "europe-west1-b",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[JsonObject] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    created: str = "2026-01-01T00:00:00Z",
    machine_type: str = "e2-standard-4",
) -> JsonObject:
    """A GKE node; `cpu`, `memory` and `pods` are its allocatable (capacity is set equal)."""
    region = zone.rsplit("-", 1)[0]
    all_labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": machine_type,
        "beta.kubernetes.io/os": "linux",
        "cloud.google.com/gke-boot-disk": "pd-balanced",
        "cloud.google.com/gke-container-runtime": "containerd",
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/machine-family": machine_type.split("-", 1)[0],
        "failure-domain.beta.kubernetes.io/region": region,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": machine_type,
        "topology.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone,
        **(labels or {}),
    }
    all_annotations = {
        "container.googleapis.com/instance_id": str(int(hashlib.sha256(name.encode()).hexdigest()[:15], 16)),
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        **(annotations or {}),
    }
    spec: JsonObject = {
        "podCIDR": _stable_ip("10.4", name) + "/24",
        "providerID": f"gce://example-project/{zone}/{name}",
    }
    all_taints = list(taints or [])
    if unschedulable:
        spec["unschedulable"] = True
        # The node lifecycle controller taints every cordoned node.
        all_taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": created})
    if all_taints:
        spec["taints"] = all_taints
    resources = {"cpu": cpu, "ephemeral-storage": "47060071478", "hugepages-2Mi": "0", "memory": memory, "pods": pods}
    ready_reason = (
        {"reason": "KubeletReady", "message": "kubelet is posting ready status"}
        if ready
        else {
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
        }
    )
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": all_annotations,
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                _condition("MemoryPressure", False, created, reason="KubeletHasSufficientMemory"),
                _condition("DiskPressure", False, created, reason="KubeletHasNoDiskPressure"),
                _condition("PIDPressure", False, created, reason="KubeletHasSufficientPID"),
                {
                    "type": "Ready",
                    "status": "True" if ready else "Unknown",
                    "lastHeartbeatTime": created,
                    "lastTransitionTime": created,
                    **ready_reason,
                },
            ],
            "addresses": [
                {"type": "InternalIP", "address": _stable_ip("10.132", name)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": _stable_uid("boot", name),
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.6.97+",
                "kubeProxyVersion": "v1.33.5-gke.1080000",
                "kubeletVersion": "v1.33.5-gke.1080000",
                "machineID": hashlib.md5(name.encode(), usedforsecurity=False).hexdigest(),
                "operatingSystem": "linux",
                "osImage": "Container-Optimized OS from Google",
                "systemUUID": _stable_uid("system", name),
            },
        },
    }


def _base_name(name: str) -> str:
    return name.rsplit("-", 1)[0] if "-" in name else name


def pod(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    owner_kind: str | None = "ReplicaSet",
    owner_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
    volumes: list[JsonObject] | None = None,
    tolerations: list[JsonObject] | None = None,
    node_selector: dict[str, str] | None = None,
    priority: int | None = None,
    affinity: JsonObject | None = None,
    containers: list[JsonObject] | None = None,
    init_containers: list[JsonObject] | None = None,
    overhead: dict[str, str] | None = None,
    host_ports: list[int] | None = None,
    ready: bool | None = None,
    unschedulable_message: str | None = None,
    created: str = "2026-01-01T00:10:00Z",
) -> JsonObject:
    """A pod as a controller creates it.

    Defaults: labels `{"app": <name without its last -suffix>}`, owned by that-named
    ReplicaSet (`owner_kind=None` for a bare pod, "Node" for a static/mirror pod),
    Ready when Running. `containers` replaces the single container built from cpu/memory.
    A pod with no `node` and phase Pending carries PodScheduled=False/Unschedulable
    when `unschedulable_message` is given.
    """
    base = _base_name(name)
    owner = owner_name or (node if owner_kind == "Node" and node else base)
    metadata: JsonObject = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels) if labels is not None else {"app": base},
    }
    all_annotations = dict(annotations or {})
    if owner_kind is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": _OWNER_API_VERSIONS.get(owner_kind, "apps/v1"),
                "kind": owner_kind,
                "name": owner,
                "uid": _stable_uid(owner_kind, namespace, owner),
                "controller": True,
                "blockOwnerDeletion": owner_kind != "Node",
            }
        ]
        if owner_kind in ("ReplicaSet", "DaemonSet", "Job", "ReplicationController"):
            metadata["generateName"] = f"{owner}-"
    if owner_kind == "Node":
        all_annotations.setdefault(
            "kubernetes.io/config.mirror", hashlib.md5(name.encode(), usedforsecurity=False).hexdigest()
        )
        all_annotations.setdefault("kubernetes.io/config.source", "file")
    if all_annotations:
        metadata["annotations"] = all_annotations
    metadata["creationTimestamp"] = created

    if containers is None:
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        container: JsonObject = {
            "name": "app",
            "image": f"europe-docker.pkg.dev/example-project/apps/{base}:1.0.0",
            "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": requests} if requests else {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
        if host_ports:
            container["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"} for port in host_ports]
        containers = [container]
    service_account_volume = {
        "name": "kube-api-access-" + hashlib.sha256(name.encode()).hexdigest()[:5],
        "projected": {
            "defaultMode": 420,
            "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
        },
    }
    base_tolerations = _DAEMONSET_TOLERATIONS if owner_kind == "DaemonSet" else _DEFAULT_TOLERATIONS
    spec: JsonObject = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": priority if priority is not None else 0,
        "restartPolicy": "Never" if owner_kind == "Job" else "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [*(tolerations or []), *(dict(t) for t in base_tolerations)],
        "volumes": [*(volumes or []), service_account_volume],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if overhead:
        spec["overhead"] = overhead
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if node is not None:
        spec["nodeName"] = node

    has_requests = any((c.get("resources") or {}).get("requests") for c in containers)
    status: JsonObject = {"phase": phase, "qosClass": "Burstable" if has_requests else "BestEffort"}
    is_ready = ready if ready is not None else phase == "Running"
    if node is not None:
        status["hostIP"] = _stable_ip("10.132", node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        status["startTime"] = created
        if phase in ("Running", "Succeeded", "Failed"):
            status["podIP"] = _stable_ip("10.8", f"{namespace}/{name}")
            status["podIPs"] = [{"ip": status["podIP"]}]
        status["conditions"] = [
            _condition("PodReadyToStartContainers", phase == "Running", created),
            _condition("Initialized", True, created),
            _condition("Ready", is_ready, created),
            _condition("ContainersReady", is_ready, created),
            _condition("PodScheduled", True, created),
        ]
        status["containerStatuses"] = [_container_status(c, phase, is_ready, created) for c in containers]
    elif unschedulable_message is not None:
        status["conditions"] = [
            _condition("PodScheduled", False, created, reason="Unschedulable", message=unschedulable_message)
        ]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec, "status": status}


def _container_status(container: JsonObject, phase: str, ready: bool, when: str) -> JsonObject:
    if phase == "Running":
        state: JsonObject = {"running": {"startedAt": when}}
    elif phase in ("Succeeded", "Failed"):
        exit_code = 0 if phase == "Succeeded" else 1
        state = {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": when,
                "finishedAt": when,
            }
        }
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    return {
        "name": container.get("name", "app"),
        "image": container.get("image", ""),
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "started": phase == "Running",
        "state": state,
    }


def pdb(
    name: str,
    *,
    namespace: str = "default",
    match_labels: dict[str, str],
    disruptions_allowed: int = 1,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    desired_healthy: int | None = None,
    created: str = "2026-01-01T00:05:00Z",
) -> JsonObject:
    """A PodDisruptionBudget whose controller has already computed its status.

    With neither bound given the spec says `minAvailable: 1`. The status is
    consistent: desiredHealthy from an integer bound (or `desired_healthy`),
    currentHealthy = expectedPods = desiredHealthy + disruptions_allowed.
    """
    spec: JsonObject = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is None and max_unavailable is None:
        min_available = 1
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if desired_healthy is None:
        desired_healthy = min_available if isinstance(min_available, int) else 1
    current = desired_healthy + max(disruptions_allowed, 0)
    allowed = disruptions_allowed > 0
    return {
        "kind": "PodDisruptionBudget",
        "apiVersion": "policy/v1",
        "metadata": {"name": name, "namespace": namespace, "generation": 1, "creationTimestamp": created},
        "spec": spec,
        "status": {
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": "True" if allowed else "False",
                    "reason": "SufficientPods" if allowed else "InsufficientPods",
                    "message": "",
                    "observedGeneration": 1,
                    "lastTransitionTime": created,
                }
            ],
            "currentHealthy": current,
            "desiredHealthy": desired_healthy,
            "disruptionsAllowed": disruptions_allowed,
            "expectedPods": current,
            "observedGeneration": 1,
        },
    }


def lease(
    name: str = "node-compactor",
    *,
    namespace: str = "kube-system",
    holder: str | None = None,
    duration_seconds: int = 600,
    acquire_time: str | None = None,
    renew_time: str | None = None,
    transitions: int = 0,
) -> JsonObject:
    """A coordination.k8s.io/v1 Lease; times are MicroTime strings (`2026-01-01T00:00:00.000000Z`)."""
    spec: JsonObject = {"leaseDurationSeconds": duration_seconds, "leaseTransitions": transitions}
    if holder is not None:
        spec["holderIdentity"] = holder
    if acquire_time is not None:
        spec["acquireTime"] = acquire_time
    if renew_time is not None:
        spec["renewTime"] = renew_time
    return {
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def hpa(
    name: str,
    *,
    namespace: str = "default",
    min_replicas: int | None = 2,
    max_replicas: int = 20,
    current_replicas: int | None = 10,
    desired_replicas: int | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    target_kind: str = "Deployment",
    target_name: str | None = None,
) -> JsonObject:
    """An autoscaling/v2 HorizontalPodAutoscaler on CPU, with the status the HPA controller writes.

    `min_replicas=None` leaves `spec.minReplicas` out (the API server defaults it to 1).
    """
    spec: JsonObject = {
        "scaleTargetRef": {
            "apiVersion": "apps/v1" if target_kind in ("Deployment", "StatefulSet", "ReplicaSet") else "v1",
            "kind": target_kind,
            "name": target_name or name,
        },
        "maxReplicas": max_replicas,
        "metrics": [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
            }
        ],
    }
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    status: JsonObject = {
        "desiredReplicas": desired_replicas if desired_replicas is not None else current_replicas or 0
    }
    if current_replicas is not None:
        status["currentReplicas"] = current_replicas
    metadata: JsonObject = {"name": name, "namespace": namespace, "uid": _stable_uid("hpa", namespace, name)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "kind": "HorizontalPodAutoscaler",
        "apiVersion": "autoscaling/v2",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def replica_set(
    name: str,
    *,
    deployment: str | None,
    replicas: int,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
) -> JsonObject:
    """An apps/v1 ReplicaSet that `deployment` controls, with `status.replicas` as its controller reports it."""
    metadata: JsonObject = {"name": name, "namespace": namespace, "uid": _stable_uid("replicaset", namespace, name)}
    if deployment is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": deployment,
                "uid": _stable_uid("deployment", namespace, deployment),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if labels:
        metadata["labels"] = dict(labels)
    selector = {"matchLabels": {"pod-template-hash": name.rsplit("-", 1)[-1]}}
    return {
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": {"metadata": {"labels": selector["matchLabels"]}},
        },
        "status": {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas},
    }


def deployment(
    name: str,
    *,
    nodes: list[str],
    namespace: str = "default",
    cpu: str = "100m",
    memory: str = "128Mi",
    strategy: JsonObject | None = None,
    volumes: list[JsonObject] | None = None,
) -> list[JsonObject]:
    """A settled apps/v1 Deployment with one replica per name in `nodes`: the Deployment, its ReplicaSet
    (named by the fake controller's template hash, so no rollout starts) and its Running, Ready pods."""
    from tests.fakeapi import deployments  # the fake controller's template hash names the ReplicaSet

    example = pod(f"{name}-x-x", namespace=namespace, node=nodes[0] if nodes else None, cpu=cpu, memory=memory)
    spec = {key: value for key, value in example["spec"].items() if key != "nodeName"}
    spec.pop("volumes", None)
    if volumes:
        spec["volumes"] = list(volumes)
    template: JsonObject = {"metadata": {"labels": {"app": name}}, "spec": spec}
    suffix = deployments.template_hash(template)
    set_name = f"{name}-{suffix}"
    labels = {"app": name, deployments.TEMPLATE_HASH: suffix}
    replicas = len(nodes)
    found: list[JsonObject] = [
        {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "strategy": strategy
                if strategy is not None
                else {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": template,
            },
            "status": {
                "observedGeneration": 1,
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
            },
        }
    ]
    replica_set_object = replica_set(set_name, deployment=name, replicas=replicas, namespace=namespace, labels=labels)
    replica_set_object["spec"]["selector"] = {"matchLabels": dict(labels)}
    replica_set_object["spec"]["template"] = {"metadata": {"labels": dict(labels)}, "spec": spec}
    found.append(replica_set_object)
    for index, node_name in enumerate(nodes):
        member = pod(
            f"{set_name}-{index:05d}",
            namespace=namespace,
            node=node_name,
            cpu=cpu,
            memory=memory,
            owner_name=set_name,
            labels=labels,
        )
        if volumes:
            member["spec"]["volumes"] = [*member["spec"].get("volumes", []), *volumes]
        found.append(member)
    return found


def claim(name: str, *, namespace: str = "default", modes: tuple[str, ...] = ("ReadWriteOnce",)) -> JsonObject:
    """A bound PersistentVolumeClaim."""
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}}, "volumeName": f"pv-{name}"},
        "status": {"phase": "Bound", "accessModes": list(modes), "capacity": {"storage": "1Gi"}},
    }
