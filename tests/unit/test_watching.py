"""The pure parts of `compactor.kube.watching`: resourceVersions compared as apimachinery compares them, and
watch lines read into what the watched state applies (or refuses)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from compactor.kube import watching
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
