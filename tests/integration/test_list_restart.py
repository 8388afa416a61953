"""Reading the cluster over real HTTP: expired `continue` tokens, finished pods, pages decoded like the file."""

from __future__ import annotations

import io

import orjson
import pytest
from kubernetes import client

from compactor.errors import ClusterAccessError, SnapshotError
from compactor.kube import snapshot
from compactor.kube.client import LIST_RESTARTS, Cluster
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s

PAGE_SIZE = 2  # small pages, so every list takes several continue requests


def small_cluster(api: FakeApiServer) -> None:
    for index in range(5):
        api.add(k8s.node(f"n{index}"))
        for number in range(3):
            api.add(k8s.pod(f"web-{index}-{number}", namespace=f"team-{number}", node=f"n{index}", cpu="100m"))
    api.add(k8s.pdb("web", namespace="team-0", match_labels={"app": "web"}))


def cluster_of(api: FakeApiServer) -> Cluster:
    return Cluster(client.ApiClient(api.client_configuration()), page_size=PAGE_SIZE)


def expired_answers(api: FakeApiServer) -> int:
    return sum(1 for request in api.requests if request.status == 410)


@pytest.mark.parametrize(
    "expirations",
    [pytest.param(1, id="expired-once"), pytest.param(LIST_RESTARTS, id="expired-as-often-as-allowed")],
)
def test_a_list_that_expires_while_paging_is_read_again_from_the_start(api: FakeApiServer, expirations: int) -> None:
    small_cluster(api)
    api.expire_continue_tokens_while_listing(expirations)
    result = cluster_of(api).read_snapshot()
    names = [pod.key for pod in result.pods]
    assert expired_answers(api) == expirations
    assert len(names) == len(set(names)) == 15  # no page counted twice
    assert [node.name for node in result.nodes] == [f"n{index}" for index in range(5)]
    assert len(result.pdbs) == 1


def test_a_list_that_keeps_expiring_fails_the_run_with_a_clear_error(api: FakeApiServer) -> None:
    small_cluster(api)
    api.expire_continue_tokens_while_listing(LIST_RESTARTS + 1)
    with pytest.raises(ClusterAccessError) as failed:
        cluster_of(api).read_snapshot()
    message = str(failed.value)
    assert "cannot list nodes: HTTP 410" in message
    assert f"read {LIST_RESTARTS + 1} times and the list expired every time" in message
    assert expired_answers(api) == LIST_RESTARTS + 1
    assert api.writes == []


def test_finished_pods_are_left_out_by_the_api_server(api: FakeApiServer) -> None:
    small_cluster(api)
    api.add(k8s.pod("job-done", node="n0", cpu="1", phase="Succeeded"))
    api.add(k8s.pod("job-crashed", node="n0", cpu="1", phase="Failed"))
    api.add(k8s.pod("waiting", cpu="1", phase="Pending"))
    result = cluster_of(api).read_snapshot()
    names = {pod.name for pod in result.pods}
    assert "waiting" in names
    assert not names & {"job-done", "job-crashed"}
    pod_lists = [request for request in api.requests if request.path == "/api/v1/pods"]
    assert pod_lists and all(
        request.query.get("fieldSelector") == "status.phase!=Succeeded,status.phase!=Failed" for request in pod_lists
    )


def test_list_pages_read_into_the_same_records_as_the_snapshot_file(api: FakeApiServer) -> None:
    with open("examples/offpeak-snapshot.json", "rb") as stream:
        document = orjson.loads(stream.read())
    api.add_all(document["items"])
    from_file = snapshot.read_stream(io.BytesIO(orjson.dumps(api.snapshot())))
    live = cluster_of(api).read_snapshot()
    assert live.nodes == from_file.nodes
    assert live.pods == tuple(pod for pod in from_file.pods if not pod.is_terminal)
    assert live.pdbs == from_file.pdbs


def test_a_malformed_pod_in_a_page_is_named_with_its_field(api: FakeApiServer) -> None:
    small_cluster(api)
    broken = k8s.pod("broken", node="n1", cpu="100m")
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1e400"
    api.add(broken)
    with pytest.raises(SnapshotError) as refused:
        cluster_of(api).read_snapshot()
    assert any("Pod default/broken: spec.containers[0].resources.requests.cpu" in p for p in refused.value.problems)
