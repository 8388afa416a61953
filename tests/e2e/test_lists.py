"""A paged list whose continue token expires mid-read (etcd compaction), on a real kube-apiserver.

etcd is compacted between two pages exactly as kube-apiserver's own compactor does it (see
`ControlPlane.compact_etcd`), through a proxy that acts just before the next page is asked for.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from compactor import service
from compactor.kube import client as kube
from tests.e2e.cluster import Scenario, wait_for
from tests.e2e.controlplane import COMPACTOR_USER
from tests.e2e.proxy import Seen, api_proxy
from tests.fakeapi import statuses

pytestmark = pytest.mark.e2e

PAGE_SIZE = 4
PODS_PATH = "/api/v1/pods"


def test_a_list_whose_continue_token_expires_midway_is_read_again_from_the_start(scenario: Scenario) -> None:
    cluster = scenario.cluster
    pool = "list-pool"
    scenario.add_pool(pool, 2)
    scenario.deployment("web", replicas=10, cpu="10m", pool=pool)
    expired: list[dict[str, Any]] = []

    def compact_before_the_second_page(request: Seen) -> None:
        token = request.param("continue")
        if request.method != "GET" or request.path != PODS_PATH or not token or expired:
            return
        cluster.plane.compact_etcd()
        query = f"limit={PAGE_SIZE}&continue={token}&fieldSelector={kube.UNFINISHED_PODS}"

        def token_expired() -> dict[str, Any] | None:
            status, body = cluster.request("GET", f"{PODS_PATH}?{query}")
            return body if status == 410 else None

        # The watch cache serves continued lists from its snapshots and learns of a compaction from
        # etcd within its 15 s poll (k8s.io/apiserver/pkg/storage/cacher/compactor.go); the client's
        # read timeout is 60 s.
        expired.append(wait_for("the continue token has expired", token_expired, timeout=40, interval=0.5))

    with api_proxy(cluster.plane, compact_before_the_second_page) as proxy:
        kubeconfig = proxy.kubeconfig(
            cluster.workdir / "compacting.kubeconfig", token=cluster.plane.compactor_token, user=COMPACTOR_USER
        )
        api_client = service.kubernetes_client(str(kubeconfig), {})
        try:
            reader = kube.Cluster(api_client, page_size=PAGE_SIZE)
            reader.list_method = kube.PAGED_LIST
            snapshot = reader.read_snapshot()
        finally:
            api_client.close()

    [body] = expired
    # What node-compactor got, and what tests/fakeapi answers in its place (statuses.expired_continue).
    assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", "Expired", 410)
    assert body["message"] == statuses.EXPIRED_CONTINUE_MESSAGE
    assert body["metadata"].get("continue"), "kube-apiserver offers an inconsistent continuation"
    pod_pages = [(s.param("continue") is not None, s.status) for s in proxy.seen if s.path == PODS_PATH]
    assert (True, 410) in pod_pages, pod_pages
    restart = pod_pages.index((True, 410)) + 1
    assert pod_pages[restart] == (False, 200), f"the read did not start again from the first page: {pod_pages}"
    assert all(status == 200 for _, status in pod_pages[restart:]), pod_pages

    read = Counter((pod.namespace, pod.name) for pod in snapshot.pods)
    assert [key for key, count in read.items() if count > 1] == [], "a pod was counted twice"
    listed = cluster.items(f"{PODS_PATH}?fieldSelector={kube.UNFINISHED_PODS}")
    assert set(read) == {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in listed}
    assert len([p for p in snapshot.pods if p.namespace == scenario.namespace]) == 10
