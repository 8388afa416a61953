"""Fixtures of the e2e tests: one real control plane per session, one namespace and set of nodes per test.

`kube_cluster` (session): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
started from the binaries `tests/e2e/toolchain/build.sh` caches (see tests/e2e/cluster.py for what
it offers). Without those binaries every e2e test fails, naming the build script: an e2e run
that tests nothing must not look like a pass.

`scenario` (per test): a fresh namespace; the nodes the test adds through it and the namespace are
deleted when the test ends, so no drain or mark of one test reaches the next.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import yaml

from tests.e2e import controlplane
from tests.e2e.cluster import REPOSITORY, KubeCluster, Scenario

# deploy/replacement.yaml: node replacement's namespace, PriorityClass and Role, as users apply them.
RBAC_FILES = ("deploy/rbac.yaml", "deploy/rbac-hpa-floor.yaml", "deploy/replacement.yaml")
RBAC_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
}


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    missing = controlplane.missing_binaries()
    if missing:
        pytest.fail(controlplane.missing_message(missing), pytrace=False)
    with controlplane.running(tmp_path_factory.mktemp("control-plane")) as plane:
        cluster = KubeCluster(plane)
        grant_compactor_rbac(cluster)
        yield cluster


def grant_compactor_rbac(cluster: KubeCluster) -> None:
    """Apply the repository's RBAC manifests (and node replacement's namespace and PriorityClass) for
    node-compactor's user, filled in as Terraform does, in file order: a namespace before its Role."""
    for name in RBAC_FILES:
        text = (REPOSITORY / name).read_text().replace(controlplane.RBAC_PLACEHOLDER, controlplane.COMPACTOR_USER)
        for document in yaml.safe_load_all(text):
            if not document:
                continue
            namespace = document["metadata"].get("namespace", "default")
            cluster.create(RBAC_PATHS[document["kind"]].format(namespace=namespace), document)


@pytest.fixture
def scenario(kube_cluster: KubeCluster, request: pytest.FixtureRequest) -> Iterator[Scenario]:
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_"))[:40].strip("-")
    test = Scenario(kube_cluster, kube_cluster.new_namespace(base))
    yield test
    test.close()
