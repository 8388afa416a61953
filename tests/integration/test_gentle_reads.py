"""Reading the cluster gently (issue 27): gzip, streaming lists with their fallbacks, and 429 Retry-After.

Every read here goes over real HTTP to the fake API server, which compresses, streams and throttles
as kube-apiserver does (docs/fake-apiserver.md); the snapshot read one way must equal the one read
the plain way, field for field.
"""

from __future__ import annotations

import time

import orjson
import pytest
from kubernetes import client

from compactor import service
from compactor.core.model import Snapshot
from compactor.errors import BadInputError, BudgetExhaustedError, ClusterAccessError
from compactor.kube.client import PAGED_LIST, WATCH_LIST, Cluster, ListMethod
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import CONFIG, FakeTime, connector_for, env_with, light_cluster, run_once

POD_LIST = r"^/api/v1/pods$"


def busy_cluster(api: FakeApiServer, nodes: int = 12, pods_per_node: int = 30) -> None:
    """Enough pods that a page of them is over the 128 KiB from which kube-apiserver compresses."""
    for index in range(nodes):
        api.add(k8s.node(f"n{index:02d}"))
        for number in range(pods_per_node):
            api.add(
                k8s.pod(
                    f"web-{index:02d}-{number:02d}",
                    namespace=f"team-{number % 3}",
                    node=f"n{index:02d}",
                    cpu="100m",
                    labels={"app": f"web-{number % 5}"},
                )
            )
    api.add(k8s.pdb("web", namespace="team-0", match_labels={"app": "web-0"}))
    api.add(k8s.pod("waiting", cpu="1", phase="Pending"))
    api.add(k8s.pod("job-done", node="n00", cpu="1", phase="Succeeded"))


def cluster_of(
    api: FakeApiServer, method: ListMethod = PAGED_LIST, *, gzip: bool = True, page_size: int = 100
) -> Cluster:
    cluster = Cluster(client.ApiClient(api.client_configuration()), page_size=page_size)
    cluster.list_method = method
    cluster.gzip = gzip
    return cluster


def read(api: FakeApiServer, method: ListMethod = PAGED_LIST, *, gzip: bool = True) -> tuple[Snapshot, Cluster]:
    cluster = cluster_of(api, method, gzip=gzip)
    return cluster.read_snapshot(), cluster


def plain_read(api: FakeApiServer) -> Snapshot:
    """The cluster as read before issue 27: paged lists, no compression."""
    snapshot, _ = read(api, PAGED_LIST, gzip=False)
    return snapshot


# -- gzip --------------------------------------------------------------------------------------------


def test_lists_ask_for_gzip_and_compressed_pages_read_the_same_as_plain_ones(api: FakeApiServer) -> None:
    busy_cluster(api)
    expected = plain_read(api)
    plain_bytes = sum(1 for r in api.requests if r.content_encoding == "gzip")
    assert plain_bytes == 0, "without Accept-Encoding nothing may come compressed"
    api.reset_counters()
    snapshot, cluster = read(api)
    assert snapshot == expected
    pod_pages = [r for r in api.requests if r.path == "/api/v1/pods"]
    assert pod_pages and all(r.content_encoding == "gzip" for r in pod_pages)
    stats = cluster.last_read
    assert stats is not None and stats.to_dict()["gzip"] is True
    assert stats.wire_bytes * 4 < stats.decoded_bytes, "pod JSON compresses far better than 4:1"


def test_a_server_that_does_not_compress_is_read_plainly(api: FakeApiServer) -> None:
    busy_cluster(api)
    expected = plain_read(api)
    api.compress_answers(False)
    api.reset_counters()
    snapshot, cluster = read(api)
    assert snapshot == expected
    assert all(r.content_encoding is None for r in api.requests)
    stats = cluster.last_read
    assert stats is not None
    assert stats.to_dict()["gzip"] is False and stats.to_dict()["gzipAsked"] is True
    assert stats.wire_bytes == stats.decoded_bytes


# -- streaming lists ---------------------------------------------------------------------------------


def test_a_streaming_list_reads_the_same_snapshot_as_paged_lists(api: FakeApiServer) -> None:
    busy_cluster(api)
    expected = plain_read(api)
    api.reset_counters()
    snapshot, cluster = read(api, WATCH_LIST)
    assert snapshot == expected
    assert [r.path for r in api.requests] == [
        "/api/v1/nodes",
        "/api/v1/pods",
        "/apis/policy/v1/poddisruptionbudgets",
        "/apis/cloud.google.com/v1/computeclasses",  # a handful of objects: always one paged list
    ], "one request per kind, no pages"
    pods = api.requests[1].query
    assert pods["watch"] == "True" and pods["sendInitialEvents"] == "True"
    assert pods["resourceVersionMatch"] == "NotOlderThan" and pods["allowWatchBookmarks"] == "True"
    assert pods["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"
    assert int(pods["timeoutSeconds"]) > 0, "the server ends the watch by itself if we never close it"
    stats = cluster.last_read
    assert stats is not None
    assert stats.to_dict() | {"bytesOnWire": 0, "bytesDecoded": 0} == {
        "method": "watch-list",
        "gzip": False,  # kube-apiserver never compresses a watch
        "gzipAsked": True,
        "requests": 4,  # three streaming lists and the ComputeClasses' page
        "bytesOnWire": 0,
        "bytesDecoded": 0,
        "throttled": 0,
        "throttledSeconds": 0.0,
        "fallback": None,
    }


def test_the_example_cluster_reads_the_same_both_ways(api: FakeApiServer) -> None:
    with open("examples/offpeak-snapshot.json", "rb") as stream:
        api.add_all(orjson.loads(stream.read())["items"])
    assert read(api, WATCH_LIST)[0] == plain_read(api)


def test_changes_sent_before_the_bookmark_are_the_cluster_at_the_bookmark(api: FakeApiServer) -> None:
    busy_cluster(api, nodes=2, pods_per_node=3)
    resized = k8s.pod("web-00-01", namespace="team-1", node="n00", cpu="700m", labels={"app": "web-1"})
    added = k8s.pod("web-late", namespace="team-0", node="n01", cpu="200m")
    api.change_before_bookmark("MODIFIED", resized)
    api.change_before_bookmark("DELETED", k8s.pod("web-01-02", namespace="team-2", node="n01"))
    api.change_before_bookmark("ADDED", added)
    api.change_before_bookmark("MODIFIED", k8s.node("n01", cpu="8"))
    # The same changes made to the store, for the paged read to compare with.
    api.add(resized)
    api.delete("Pod", "web-01-02", "team-2")
    api.add(added)
    api.add(k8s.node("n01", cpu="8"))
    streamed, _ = read(api, WATCH_LIST)
    pods = {pod.key: pod for pod in streamed.pods}
    assert pods["team-1/web-00-01"].requests.cpu_millis == 700
    assert "team-2/web-01-02" not in pods
    assert "team-0/web-late" in pods
    assert [node.allocatable.cpu_millis for node in streamed.nodes] == [4000, 8000]
    assert sorted(pod.key for pod in streamed.pods) == sorted(pod.key for pod in plain_read(api).pods)
    assert len(pods) == len(streamed.pods), "each pod once, its last copy"


def test_a_server_with_the_watch_list_gate_off_is_read_with_paged_lists(api: FakeApiServer) -> None:
    busy_cluster(api)
    expected = plain_read(api)
    api.serve_watch_list("refused")
    api.reset_counters()
    cluster = cluster_of(api, WATCH_LIST)
    assert cluster.read_snapshot() == expected
    assert api.requests[0].status == 422
    stats = cluster.last_read
    assert stats is not None and stats.method == "paged-list"
    assert stats.fallback is not None and "WatchList feature gate" in stats.fallback
    assert cluster.list_method == PAGED_LIST, "the rest of the run reads paged lists without asking again"


def test_a_server_that_ignores_send_initial_events_is_read_with_paged_lists(api: FakeApiServer) -> None:
    busy_cluster(api, nodes=3, pods_per_node=2)
    expected = plain_read(api)
    api.serve_watch_list("ignored")
    cluster = cluster_of(api, WATCH_LIST)
    cluster.watch_idle_seconds = 0.5
    started = time.monotonic()
    assert cluster.read_snapshot() == expected
    assert time.monotonic() - started < 10, "the silent stream is given up after its idle limit"
    stats = cluster.last_read
    assert stats is not None and stats.fallback is not None
    assert "sent nothing for 0.5 s before its initial events ended" in stats.fallback


def test_a_server_without_watch_permission_is_read_with_paged_lists(api: FakeApiServer) -> None:
    busy_cluster(api, nodes=2, pods_per_node=2)
    expected = plain_read(api)
    api.add_fault(Fault("GET", r"^/api/v1/nodes$", status=403, times=1))
    cluster = cluster_of(api, WATCH_LIST)
    assert cluster.read_snapshot() == expected
    assert cluster.last_read is not None and "HTTP 403" in (cluster.last_read.fallback or "")


def test_an_error_event_in_the_stream_falls_back_to_paged_lists(api: FakeApiServer) -> None:
    busy_cluster(api, nodes=2, pods_per_node=2)
    expected = plain_read(api)
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "message": "etcd is slow"}
    api.change_before_bookmark("ERROR", status, kind="Pod")
    cluster = cluster_of(api, WATCH_LIST)
    assert cluster.read_snapshot() == expected
    fallback = cluster.last_read.fallback if cluster.last_read else None
    assert (
        fallback
        == "the streaming list for pods failed: the API server ended the stream with an error (code 500): etcd is slow"
    )


def test_a_run_reads_with_streaming_lists_when_configured_and_says_so(api: FakeApiServer) -> None:
    light_cluster(api)
    result = run_once(api, env=env_with(COMPACTOR_LIST_METHOD="watch-list"), dry_run=True)
    assert result.report["read"]["method"] == "watch-list"
    assert result.report["read"]["fallback"] is None
    default = run_once(api, dry_run=True)
    assert default.report["read"]["method"] == "paged-list" and default.report["read"]["gzipAsked"] is True
    assert default.report["decision"] == result.report["decision"]


def test_an_unknown_list_method_is_bad_input_before_any_request(api: FakeApiServer) -> None:
    with pytest.raises(BadInputError, match="COMPACTOR_LIST_METHOD: 'stream' is not one of paged-list, watch-list"):
        run_once(api, env=env_with(COMPACTOR_LIST_METHOD="stream"))
    assert api.requests == []


# -- flow control ------------------------------------------------------------------------------------


def test_a_429_with_retry_after_2_on_the_first_pod_page_is_waited_out_and_the_run_completes(
    api: FakeApiServer,
) -> None:
    light_cluster(api)
    api.add_fault(Fault("GET", POD_LIST, status=429, retry_after=2, times=1))
    started = time.monotonic()
    result = service.run(env_with(), connector=connector_for(api), force_dry_run=True)  # the real clock
    waited = time.monotonic() - started
    assert result.report["decision"]["action"] == "drain"
    assert result.report["read"]["throttled"] == 1 and result.report["read"]["throttledSeconds"] == 2.0
    assert waited >= 2.0
    pod_lists = [r.status for r in api.requests if r.path == "/api/v1/pods"]
    assert pod_lists[:2] == [429, 200]


@pytest.mark.parametrize("method", [pytest.param(PAGED_LIST, id="paged"), pytest.param(WATCH_LIST, id="streaming")])
def test_a_429_on_a_later_page_or_a_stream_is_retried_at_the_same_place(api: FakeApiServer, method: ListMethod) -> None:
    busy_cluster(api, nodes=4, pods_per_node=30)
    expected = plain_read(api)
    api.reset_counters()
    if method == PAGED_LIST:
        api.on_request("GET", POD_LIST, lambda: api.add_fault(Fault("GET", POD_LIST, status=429, retry_after=3)))
    else:
        api.add_fault(Fault("GET", POD_LIST, status=429, retry_after=3))
    cluster = cluster_of(api, method)
    slept: list[float] = []
    cluster.sleep = slept.append
    assert cluster.read_snapshot() == expected
    assert slept == [3.0]
    if method == PAGED_LIST:
        pods = [r for r in api.requests if r.path == "/api/v1/pods"]
        assert pods[1].status == 429 and pods[2].query.get("continue") == pods[1].query.get("continue")


def test_a_429_outlasting_the_budget_ends_the_run_with_a_clear_reason_and_no_write(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add_fault(Fault("GET", POD_LIST, status=429, retry_after=600, times=-1))
    with pytest.raises(BudgetExhaustedError) as stopped:
        run_once(api, time=FakeTime())
    assert str(stopped.value).startswith(
        "cannot list pods: the API server is throttling this client (HTTP 429, retry after 600 s) "
        "and the run's time budget has "
    )
    assert {write.kind for write in api.writes} <= {"Lease"}, "nothing but the run's own Lease was written"
    assert api.evictions == []


def test_429s_are_waited_out_only_while_the_budget_lasts(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add_fault(Fault("GET", POD_LIST, status=429, retry_after=20, times=-1))
    fake_time = FakeTime()
    with pytest.raises(BudgetExhaustedError):
        run_once(api, time=fake_time, dry_run=True)
    throttled = [r for r in api.requests if r.status == 429]
    assert 1 < len(throttled) <= 3, "60 s of budget holds two 20 s waits, not a third"
    assert fake_time.now - 1000.0 <= 60


def test_a_429_on_a_single_read_outside_the_cluster_read_still_fails_as_before(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add_fault(Fault("GET", r"^/api/v1/nodes/n1$", status=429, retry_after=5, times=-1))
    cluster = cluster_of(api)
    cluster.read_budget = lambda: 3.0
    with pytest.raises(ClusterAccessError, match="cannot read node n1: HTTP 429"):
        cluster.node("n1")


def test_the_run_summary_log_carries_how_the_cluster_was_read(
    api: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    light_cluster(api)
    with caplog.at_level("INFO", logger="compactor.service"):
        run_once(api, dry_run=True)
    summary = next(r for r in caplog.records if getattr(r, "fields", {}).get("event") == "run-summary")
    assert summary.fields["read"]["method"] == "paged-list"  # type: ignore[attr-defined]
    assert CONFIG  # the run above used the shared pool configuration
