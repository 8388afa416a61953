"""The pure parts of `compactor.kube.watching`: resourceVersions compared as apimachinery compares them, and
watch lines read into what the watched state applies (or refuses)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from compactor.core.model import Snapshot
from compactor.kube import watching
from tests.builders import make_node, make_pod, make_snapshot
from tests.fakeapi import builders as k8s


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1", 1, id="one"),
        pytest.param("123456789012345678901234567890", 123456789012345678901234567890, id="beyond-64-bits"),
        pytest.param("0", None, id="zero-is-never-a-live-version"),
        pytest.param("007", None, id="leading-zeros"),
        pytest.param("", None, id="empty"),
        pytest.param("12a", None, id="not-digits"),
        pytest.param("١٢", None, id="non-ascii-digits"),
        pytest.param(12, None, id="not-a-string"),
    ],
)
def test_a_resource_version_reads_as_compare_resource_version_reads_it(text: object, expected: int | None) -> None:
    assert watching.version_of(text) == expected


def line(event_type: str, obj: Mapping[str, Any]) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj})


def test_a_modified_pod_is_read_into_its_record_under_its_key() -> None:
    pod = k8s.pod("web-1", namespace="shop", node="n1", cpu="250m")
    pod["metadata"]["resourceVersion"] = "42"
    event_type, version, key, record = watching._decode("Pod", line("MODIFIED", pod))
    assert (event_type, version, key) == ("MODIFIED", 42, "shop/web-1")
    assert (record.node_name, record.requests.cpu_millis) == ("n1", 250)


def test_a_bookmark_carries_only_its_resource_version() -> None:
    bookmark = {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "77", "creationTimestamp": None}}
    assert watching._decode("Node", line("BOOKMARK", bookmark)) == ("BOOKMARK", 77, "", None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(
            line("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}),
            "expired (410 Gone: too old resource version)",
            id="410-expired",
        ),
        pytest.param(
            line("ERROR", {"kind": "Status", "code": 500, "message": "etcd is away"}),
            "ended the watch of pods with an error (code 500): etcd is away",
            id="another-error",
        ),
        pytest.param(b"not json", "not a watch event", id="not-json"),
        pytest.param(line("SYNC", {"metadata": {"resourceVersion": "3"}}), "event of type 'SYNC'", id="unknown-type"),
        pytest.param(
            line("MODIFIED", {"metadata": {"name": "web-1", "resourceVersion": "03"}}),
            "cannot be compared",
            id="version-not-comparable",
        ),
        pytest.param(
            line("MODIFIED", {"metadata": {"name": "web-1", "resourceVersion": "5"}, "spec": {"containers": 3}}),
            "cannot be read",
            id="object-that-does-not-read",
        ),
    ],
)
def test_what_cannot_stand_in_the_state_makes_it_unusable(raw: bytes, reason: str) -> None:
    with pytest.raises(watching.UnusableError, match="") as raised:
        watching._decode("Pod", raw)
    assert reason in raised.value.reason


class ScriptedStream:
    """A watch's body as the test feeds it: `read1` returns what `feed` put, b"" once the stream is ended."""

    def __init__(self) -> None:
        self.chunks: queue.Queue[bytes] = queue.Queue()

    def feed(self, *lines: bytes) -> None:
        self.chunks.put(b"".join(line + b"\n" for line in lines))

    def read1(self, _size: int) -> bytes:
        return self.chunks.get(timeout=10)

    def close(self) -> None:
        self.chunks.put(b"")

    def release_conn(self) -> None:
        pass


class ScriptedSource:
    """A WatchSource whose pods' resourceVersion read answers `horizon`, and whose watches the test feeds."""

    def __init__(self, horizon: str) -> None:
        self.horizon = horizon
        self.streams = {kind: ScriptedStream() for kind in watching.WATCHED_KINDS}

    def open_watch(self, kind: str, resource_version: str, *, timeout_seconds: int, idle_seconds: float) -> Any:
        return self.streams[kind]

    def current_resource_version(self, kind: str) -> tuple[str, int]:
        return self.horizon, 100


def pod_line(name: str, version: int, *, terminating: bool = False) -> bytes:
    pod = k8s.pod(name, node="n1")
    pod["metadata"]["resourceVersion"] = str(version)
    if terminating:
        pod["metadata"]["deletionTimestamp"] = "2026-11-21T12:00:00Z"
    return line("MODIFIED", pod)


def test_an_eviction_answered_after_the_horizon_is_waited_for_not_taken_for_a_lost_event() -> None:
    source = ScriptedSource(horizon="10")
    base = make_snapshot(nodes=[make_node("n1")], pods=[make_pod("web-a"), make_pod("web-b"), make_pod("other")])
    versions = dict.fromkeys(watching.WATCHED_KINDS, "5")
    state = watching.Watched(source, base, versions, watching.WatchStats())
    state.start()
    try:
        state.evicted("default/web-a")
        result: list[object] = []
        proof = threading.Thread(target=lambda: result.append(_current(state)))
        proof.start()
        time.sleep(0.3)  # the proof reads the horizon (10) and waits for web-a
        state.evicted("default/web-b")  # answered after the horizon was read: its write may come after 10
        pods = source.streams["Pod"]
        pods.feed(pod_line("web-a", 8, terminating=True), pod_line("other", 12))  # past the horizon
        time.sleep(0.3)
        assert result == [], "the proof took web-b, evicted after the horizon, for a lost event"
        pods.feed(pod_line("web-b", 13, terminating=True))
        proof.join(timeout=5)
        [snapshot] = result
        assert isinstance(snapshot, Snapshot)
        assert {pod.name for pod in snapshot.pods if pod.terminating} == {"web-a", "web-b"}
    finally:
        state.close()


def _current(state: watching.Watched) -> object:
    try:
        return state.current(3.0, {})
    except watching.UnusableError as unusable:
        return unusable
