"""Fixtures for runs against the fake API server, and the invariants every such test must keep."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from compactor import service
from compactor.core.model import DRAIN_STARTED_AT, PLACEHOLDER_PREFIX
from compactor.settings.config import DEFAULT_PLACEHOLDER_NAMESPACE
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s

TOKEN = "test-token"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MARKED = "2026-11-21T11:00:00Z"
POOL_CONFIG = {
    "enabled": True,
    "scaleDownCPURequestRatioLimit": 0.75,
    "neededMarkedTimeSeconds": 300,
    "minimumNodeAgeSeconds": 1200,
    "minNodes": 1,
    "scaleUpCooldownSeconds": 600,
    "drainTimeoutSeconds": 900,
    "removalTimeoutSeconds": 1800,
}
CONFIG = {"nodePools": {"default-pool": POOL_CONFIG}}


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        yield server
        assert_invariants(server)


def assert_invariants(server: FakeApiServer) -> None:
    # Emptied nodes awaiting removal keep drain-started-at (pipelined removal); only one node may
    # still have pods to move.
    draining = [
        n["metadata"]["name"]
        for n in server.objects("Node")
        if DRAIN_STARTED_AT in (n["metadata"].get("annotations") or {})
        and any(has_pods_to_move(pod, n["metadata"]["name"]) for pod in server.objects("Pod"))
    ]
    assert len(draining) <= 1, f"more than one node is being drained: {draining}"
    # The only pods node-compactor deletes are its own placeholders (node replacement), in their namespace.
    deleted = [write for write in server.pod_deletes if not _a_placeholder(write.namespace, write.name)]
    assert deleted == [], "a pod was deleted directly instead of evicted"


def _a_placeholder(namespace: str | None, name: str) -> bool:
    return namespace == DEFAULT_PLACEHOLDER_NAMESPACE and name.startswith(PLACEHOLDER_PREFIX)


def light_cluster(api: FakeApiServer) -> None:
    """n1 is light and marked an hour ago; n2 and n3 are 75% busy with room for n1's pods."""
    api.add(k8s.node("n1", annotations={"node-compactor.dev/underutilized-since": MARKED}))
    api.add(k8s.node("n2"))
    api.add(k8s.node("n3"))
    api.add(k8s.pod("web-a1", node="n1", cpu="300m"))
    api.add(k8s.pod("web-a2", node="n1", cpu="300m"))
    api.add(k8s.pod("fluentbit-n1", namespace="kube-system", node="n1", owner_kind="DaemonSet", cpu="50m"))
    api.add(k8s.pod("busy-b2", node="n2", cpu="3"))
    api.add(k8s.pod("busy-b3", node="n3", cpu="3"))


def has_pods_to_move(pod: dict[str, Any], node: str) -> bool:
    """A pod on `node` that a drain must evict: not a DaemonSet's, not a mirror pod, not finished."""
    if (pod.get("spec") or {}).get("nodeName") != node:
        return False
    metadata = pod.get("metadata") or {}
    owners = metadata.get("ownerReferences") or []
    if any(owner.get("kind") == "DaemonSet" for owner in owners):
        return False
    if "kubernetes.io/config.mirror" in (metadata.get("annotations") or {}):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


@dataclass
class FakeTime:
    """Monotonic time that moves only when the run sleeps, so backoffs cost no wall time."""

    now: float = 1000.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def monotonic(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def env_with(config: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
    env = {"COMPACTOR_CONFIG": json.dumps(config or CONFIG), "COMPACTOR_RUN_BUDGET_SECONDS": "60"}
    env.update(extra)
    return env


def connector_for(api: FakeApiServer) -> service.Connector:
    def connect() -> service.ClusterConnection:
        api_client = client.ApiClient(api.client_configuration())
        return service.ClusterConnection(api_client, None, api_client.close)

    return connect


def run_once(
    api: FakeApiServer,
    *,
    at: datetime = NOW,
    env: dict[str, str] | None = None,
    dry_run: bool = False,
    time: FakeTime | None = None,
) -> service.RunResult:
    fake_time = time or FakeTime()
    return service.run(
        env or env_with(),
        connector=connector_for(api),
        force_dry_run=dry_run,
        clock=lambda: at,
        monotonic=fake_time.monotonic,
        sleep=fake_time.sleep,
        first_backoff=0.5,
    )


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def node_annotations(api: FakeApiServer, node: str) -> dict[str, str]:
    found = api.get("Node", node)
    assert found is not None
    result: dict[str, str] = found["metadata"].get("annotations") or {}
    return result


def cordoned(api: FakeApiServer, node: str) -> bool:
    found = api.get("Node", node)
    assert found is not None
    return bool((found.get("spec") or {}).get("unschedulable"))


def node_taints(api: FakeApiServer, node: str) -> list[Any]:
    found = api.get("Node", node)
    assert found is not None
    result: list[Any] = (found.get("spec") or {}).get("taints") or []
    return result


def event_reasons(api: FakeApiServer, node: str) -> list[str]:
    return [e["reason"] for e in api.objects("Event") if e["involvedObject"]["name"] == node]
