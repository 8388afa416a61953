"""The fake API server's plain watches hold to what kube-apiserver's watch cache does (docs/fake-apiserver.md
"Watches"): order, selectors, 410 after compaction, bookmarks, and the faults that break a watch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import urllib3

from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.integration.conftest import TOKEN

UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        server.serve_watches("on")
        yield server


def watch(api: FakeApiServer, path: str, timeout: float = 1.0, **query: str) -> list[dict[str, Any]]:
    """Every event of a watch that the server ends after `timeout` seconds (timeoutSeconds)."""
    http = urllib3.PoolManager()
    fields = {"watch": "true", "timeoutSeconds": str(int(timeout)), **query}
    answer = http.request(
        "GET", f"{api.url}{path}", fields=fields, headers={"Authorization": f"Bearer {TOKEN}"}, preload_content=False
    )
    assert answer.status == 200
    body = answer.read()
    return [orjson.loads(line) for line in body.splitlines() if line.strip()]


def version(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_a_watch_sends_every_change_after_its_resource_version_in_order(api: FakeApiServer) -> None:
    first = api.add(k8s.pod("web-1", node="n1"))
    start = version(first)
    api.add(k8s.pod("web-2", node="n1"))
    api.add(k8s.pod("web-1", node="n1", cpu="200m"))
    api.delete("Pod", "web-2")
    events = watch(api, "/api/v1/pods", resourceVersion=str(start))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "web-2"),
        ("MODIFIED", "web-1"),
        ("DELETED", "web-2"),
    ]
    versions = [version(e["object"]) for e in events]
    assert versions == sorted(versions) and versions[0] > start
    assert {(e["object"]["kind"], e["object"]["apiVersion"]) for e in events} == {("Pod", "v1")}


def test_a_pod_that_finishes_leaves_a_watch_of_unfinished_pods_as_deleted(api: FakeApiServer) -> None:
    start = version(api.add(k8s.pod("job-1", node="n1")))
    api.add(k8s.pod("job-1", node="n1", phase="Succeeded"))
    events = watch(api, "/api/v1/pods", resourceVersion=str(start), fieldSelector=UNFINISHED)
    assert [(e["type"], e["object"]["status"]["phase"]) for e in events] == [("DELETED", "Running")]
    assert version(events[0]["object"]) == api.resource_version  # the change's resourceVersion


def test_a_watch_from_before_a_compaction_gets_one_410_error_event(api: FakeApiServer) -> None:
    start = version(api.add(k8s.node("n1")))
    api.add(k8s.node("n2"))
    api.compact_watch_history()
    events = watch(api, "/api/v1/nodes", resourceVersion=str(start))
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == f"too old resource version: {start} ({api.resource_version})"


def test_bookmarks_come_at_their_interval_and_carry_the_resource_version_reached(api: FakeApiServer) -> None:
    start = version(api.add(k8s.node("n1")))
    api.add(k8s.pod("web-1", node="n1"))  # another kind moves the resourceVersion on
    api.watch_bookmarks(0.3)
    events = watch(api, "/api/v1/nodes", timeout=1.0, resourceVersion=str(start), allowWatchBookmarks="true")
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert 2 <= len(bookmarks) <= 4, events
    assert {version(b["object"]) for b in bookmarks} == {api.resource_version}
    assert not watch(api, "/api/v1/nodes", timeout=1.0, resourceVersion=str(start))  # not asked for: none


def test_a_lost_event_never_reaches_a_watch_but_a_bookmark_passes_it(api: FakeApiServer) -> None:
    start = version(api.add(k8s.pod("web-1", node="n1")))
    api.lose_watch_events("Pod", 1)
    api.delete("Pod", "web-1")
    api.watch_bookmarks(0.3)
    events = watch(api, "/api/v1/pods", resourceVersion=str(start), allowWatchBookmarks="true")
    assert {e["type"] for e in events} == {"BOOKMARK"}
    assert version(events[0]["object"]) == api.resource_version


def test_a_refused_watch_is_rbacs_403(api: FakeApiServer) -> None:
    api.serve_watches("forbidden")
    http = urllib3.PoolManager()
    answer = http.request(
        "GET", f"{api.url}/api/v1/pods", fields={"watch": "true"}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status == 403
    assert 'cannot watch resource "pods"' in orjson.loads(answer.data)["message"]
