"""Reading a real kube-apiserver (v1.36) each way node-compactor can: the same snapshot every time.

The streaming list (WatchList: a watch with sendInitialEvents until the initial-events-end
bookmark) must read exactly what the paged list reads, gzip or not, also as node-compactor's own
identity (deploy/rbac.yaml grants watch, for a drain's proofs on watches); a server that refuses
the watch is read with paged lists (tests/integration/test_gentle_reads.py). What each way costs
the server is measured by `bench/api_cost.py` (docs/benchmarks.md), not here. The optional FlowSchema of
deploy/flowcontrol.yaml is accepted and classifies node-compactor's requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from compactor import service
from compactor.core.model import Snapshot
from compactor.kube.client import PAGED_LIST, WATCH_LIST, Cluster, ListMethod, ReadStats
from tests.e2e.cluster import REPOSITORY, KubeCluster, Scenario, wait_for
from tests.e2e.controlplane import COMPACTOR_USER, RBAC_PLACEHOLDER

pytestmark = pytest.mark.e2e

# Enough pods that the pod list is over the 128 KiB from which kube-apiserver compresses an answer.
REPLICAS = 60
ATTEMPTS = 3  # kwok and the controllers may still touch an object between two reads


def read(kubeconfig: Path, method: ListMethod, *, gzip: bool = True) -> tuple[Snapshot, ReadStats]:
    cluster = Cluster(service.kubernetes_client(str(kubeconfig), {}))
    cluster.list_method = method
    cluster.gzip = gzip
    snapshot = cluster.read_snapshot()
    assert cluster.last_read is not None
    return snapshot, cluster.last_read


def settled_reads(kubeconfig: Path, ways: list[tuple[ListMethod, bool]]) -> list[tuple[Snapshot, ReadStats]]:
    """One read each way, between two paged reads that agree: the cluster did not move meanwhile."""
    for _ in range(ATTEMPTS):
        before, _ = read(kubeconfig, PAGED_LIST)
        found = [read(kubeconfig, method, gzip=gzip) for method, gzip in ways]
        after, _ = read(kubeconfig, PAGED_LIST)
        if before == after:
            return found
    pytest.fail(f"the cluster kept changing between two reads, {ATTEMPTS} times")


@pytest.fixture
def workload(scenario: Scenario) -> Scenario:
    scenario.add_pool("cost", 3)
    scenario.deployment("web", replicas=REPLICAS, cpu="20m", memory="32Mi", pool="cost")
    scenario.pdb("web", "web", max_unavailable=1)
    return scenario


def test_a_streaming_list_reads_the_same_snapshot_as_paged_lists(workload: Scenario, kube_cluster: KubeCluster) -> None:
    kubeconfig = kube_cluster.kubeconfig  # the admin may watch
    (paged, paged_stats), (plain, plain_stats), (streamed, streamed_stats) = settled_reads(
        kubeconfig, [(PAGED_LIST, True), (PAGED_LIST, False), (WATCH_LIST, True)]
    )
    assert streamed == paged == plain
    mine = [pod for pod in streamed.pods if pod.namespace == workload.namespace]
    assert len(mine) == REPLICAS and {pod.node_name for pod in mine} <= set(workload.nodes)
    assert [pdb.key for pdb in streamed.pdbs if pdb.namespace == workload.namespace] == [f"{workload.namespace}/web"]
    assert streamed_stats.method == "watch-list" and streamed_stats.fallback is None
    assert streamed_stats.requests == 4, "one watch for each of nodes, pods and PDBs, one list of ComputeClasses"
    assert paged_stats.gzip_answers >= 1, "kube-apiserver compresses the pod list when asked"
    assert paged_stats.wire_bytes < plain_stats.wire_bytes / 4
    assert plain_stats.gzip_answers == 0 and plain_stats.wire_bytes == plain_stats.decoded_bytes


def test_node_compactors_own_identity_may_stream_its_lists(workload: Scenario, kube_cluster: KubeCluster) -> None:
    kubeconfig = kube_cluster.compactor_kubeconfig  # deploy/rbac.yaml: list and watch
    (paged, _), (streamed, stats) = settled_reads(kubeconfig, [(PAGED_LIST, True), (WATCH_LIST, True)])
    assert streamed == paged
    assert stats.method == "watch-list" and stats.fallback is None, stats.fallback


def test_the_optional_flow_schema_puts_node_compactors_requests_in_its_own_priority_level(
    kube_cluster: KubeCluster,
) -> None:
    """deploy/flowcontrol.yaml as Terraform fills it in: kube-apiserver accepts it and classifies node-compactor's
    requests with it (APF names the schema and level of each answer in X-Kubernetes-PF-* headers)."""
    text = (REPOSITORY / "deploy" / "flowcontrol.yaml").read_text()
    found = {doc["kind"]: doc for doc in yaml.safe_load_all(text.replace(RBAC_PLACEHOLDER, COMPACTOR_USER)) if doc}
    base = "/apis/flowcontrol.apiserver.k8s.io/v1"
    level = kube_cluster.create(f"{base}/prioritylevelconfigurations", found["PriorityLevelConfiguration"])
    schema = kube_cluster.create(f"{base}/flowschemas", found["FlowSchema"])
    try:
        api = client.CoreV1Api(service.kubernetes_client(str(kube_cluster.compactor_kubeconfig), {}))

        def classified() -> tuple[str, str] | None:
            answer = api.list_node(limit=1, _preload_content=False)
            answer.read()
            headers = answer.headers
            found_schema = headers.get("X-Kubernetes-PF-FlowSchema-UID")
            found_level = headers.get("X-Kubernetes-PF-PriorityLevel-UID")
            # The apiserver's APF configuration controller takes a moment to pick up new objects.
            return (found_schema, found_level) if found_schema == schema["metadata"]["uid"] else None

        assert wait_for("node-compactor's requests are classified by its FlowSchema", classified) == (
            schema["metadata"]["uid"],
            level["metadata"]["uid"],
        )
        admin = client.CoreV1Api(service.kubernetes_client(str(kube_cluster.kubeconfig), {}))
        answer = admin.list_node(limit=1, _preload_content=False)
        answer.read()
        assert answer.headers.get("X-Kubernetes-PF-FlowSchema-UID") != schema["metadata"]["uid"], "only its identity"
    finally:
        kube_cluster.delete(f"{base}/flowschemas/node-compactor")
        kube_cluster.delete(f"{base}/prioritylevelconfigurations/node-compactor")
