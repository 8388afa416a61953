"""The events of a streaming list read into the same records as a list page of the same objects.

Bytes come off a watch in pieces of any size; whatever the cut, the reader must decode whole lines,
stop at the initial-events-end bookmark without asking for more (after it a server sends nothing
until something changes, so asking would wait), and say why when the stream ends first.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from compactor.core.model import Snapshot
from compactor.errors import SnapshotError
from compactor.kube import watchlist
from compactor.kube.snapshot import SnapshotBuilder
from tests.fakeapi import builders as k8s


def pods(count: int = 6) -> list[dict[str, object]]:
    return [
        k8s.pod(f"web-{index}", namespace=f"team-{index % 2}", node=f"n{index % 3}", cpu=f"{100 + index}m")
        for index in range(count)
    ]


def event(kind: str, obj: dict[str, object]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def bookmark(*, end: bool = True) -> bytes:
    """A bookmark as kube-apiserver sends it: an empty Pod but for its metadata (creationTimestamp null)."""
    metadata: dict[str, object] = {"resourceVersion": "42", "creationTimestamp": None}
    if end:
        metadata["annotations"] = {watchlist.INITIAL_EVENTS_END: "true"}
    obj: dict[str, object] = {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": {"containers": None}}
    obj["status"] = {}
    return event("BOOKMARK", obj)


def stream(objects: list[dict[str, object]]) -> bytes:
    return b"".join(event("ADDED", {"kind": "Pod", "apiVersion": "v1", **obj}) for obj in objects) + bookmark()


def from_page(objects: list[dict[str, object]]) -> Snapshot:
    builder = SnapshotBuilder()
    builder.add_page("Pod", orjson.dumps({"kind": "PodList", "items": objects}), what="list pods")
    return builder.build()


def from_stream(chunks: list[bytes]) -> tuple[Snapshot, int]:
    builder = SnapshotBuilder()
    count = watchlist.read_initial_events(iter(chunks), builder, "Pod", what="list pods")
    return builder.build(), count


def cut(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 64, 1000, 10**6])
def test_events_cut_anywhere_read_as_the_list_page_of_the_same_pods(size: int) -> None:
    objects = pods()
    read, count = from_stream(cut(stream(objects), size))
    assert read == from_page(objects)
    assert count == len(objects) + 1


def test_a_stream_larger_than_a_batch_is_decoded_batch_by_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchlist, "BATCH_BYTES", 4096)
    objects = pods(40)
    assert from_stream(cut(stream(objects), 1500))[0] == from_page(objects)


def test_the_reader_stops_at_the_bookmark_without_asking_for_more() -> None:
    data = stream(pods(3))
    split = data.rindex(b"BOOKMARK") + 4  # the word itself cut in two
    head, tail = data[:split], data[split:]

    def chunks() -> Iterator[bytes]:
        yield head
        yield tail
        raise AssertionError("asked for bytes after the initial-events-end bookmark: a real stream would wait here")

    builder = SnapshotBuilder()
    assert watchlist.read_initial_events(chunks(), builder, "Pod", what="list pods") == 4
    assert len(builder.build().pods) == 3


def test_a_bookmark_without_the_annotation_does_not_end_the_initial_events() -> None:
    objects = pods(4)
    data = stream(objects[:2]).replace(bookmark(), bookmark(end=False)) + stream(objects[2:])
    read, _ = from_stream([data])
    assert read == from_page(objects)


def test_a_stream_that_ends_before_the_bookmark_says_how_far_it_got() -> None:
    data = stream(pods(3))[: -len(bookmark())]
    with pytest.raises(watchlist.StreamEndedError, match="the stream ended after 3 events, before the initial"):
        from_stream(cut(data, 100))


def test_an_error_event_ends_the_stream_with_its_code_and_message() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "message": "too old"}
    with pytest.raises(watchlist.StreamEndedError) as ended:
        from_stream([stream(pods(2))[: -len(bookmark())] + event("ERROR", status)])
    assert ended.value.code == 410
    assert ended.value.reason == "the API server ended the stream with an error (code 410): too old"


def test_an_answer_that_is_not_a_watch_stream_is_said_to_be_one() -> None:
    with pytest.raises(watchlist.StreamEndedError, match="not a watch stream"):
        from_stream([orjson.dumps({"kind": "PodList", "items": []}) + b"\n"])


def test_an_object_of_another_kind_is_refused() -> None:
    node = {"kind": "Node", "apiVersion": "v1", **k8s.node("n1")}
    with pytest.raises(SnapshotError, match="the watch sent a 'Node', not a Pod"):
        from_stream([event("ADDED", node) + bookmark()])


def test_a_malformed_pod_is_named_with_its_field_as_in_a_list_page() -> None:
    objects = pods(3)
    objects[1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"  # type: ignore[index]
    builder = SnapshotBuilder()
    watchlist.read_initial_events(iter([stream(objects)]), builder, "Pod", what="list pods")
    with pytest.raises(SnapshotError) as refused:
        builder.build()
    assert any(
        "web-1" in problem and "spec.containers[0].resources.requests.cpu" in problem
        for problem in refused.value.problems
    )


def test_changes_before_the_bookmark_leave_each_object_once_as_it_last_was_in_its_first_place() -> None:
    objects = pods(4)
    moved = k8s.pod("web-1", namespace="team-1", node="n2", cpu="900m")
    data = stream(objects)[: -len(bookmark())]
    data += event("MODIFIED", {"kind": "Pod", "apiVersion": "v1", **moved})
    data += event("DELETED", {"kind": "Pod", "apiVersion": "v1", **objects[2]})
    data += event("DELETED", {"kind": "Pod", "apiVersion": "v1", **objects[3]})
    data += event("ADDED", {"kind": "Pod", "apiVersion": "v1", **objects[3]})  # deleted, then made again
    read, _ = from_stream([data + bookmark()])
    assert [pod.key for pod in read.pods] == ["team-0/web-0", "team-1/web-1", "team-1/web-3"]
    assert read.pods[1] == from_page([moved]).pods[0]
