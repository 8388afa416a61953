"""Kubernetes JSON into HPA floor records: what is read, and malformed objects named with their field."""

from __future__ import annotations

from typing import Any

import pytest

from compactor.errors import SnapshotError
from compactor.hpa import reading
from tests.fakeapi import builders as k8s


def test_an_hpa_is_read_with_its_replicas_target_and_annotations() -> None:
    obj = k8s.hpa("web", namespace="shop", min_replicas=2, max_replicas=9, current_replicas=4, annotations={"a": "b"})
    obj["metadata"]["resourceVersion"] = "12"
    record = reading.hpa_from(obj)
    assert (record.key, record.min_replicas, record.max_replicas, record.current_replicas) == ("shop/web", 2, 9, 4)
    assert (record.target_kind, record.target_name, record.resource_version) == ("Deployment", "web", "12")
    assert record.annotations == {"a": "b"}


def test_a_missing_min_replicas_is_the_api_servers_default_of_one() -> None:
    assert reading.hpa_from(k8s.hpa("web", min_replicas=None)).min_replicas == 1


@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param(lambda o: o["spec"].pop("maxReplicas"), "spec.maxReplicas", id="no-max"),
        pytest.param(lambda o: o["spec"].update(minReplicas="2"), "spec.minReplicas", id="min-a-string"),
        pytest.param(lambda o: o["status"].update(currentReplicas=-1), "status.currentReplicas", id="negative"),
        pytest.param(lambda o: o["metadata"].update(annotations={"a": 1}), "metadata.annotations", id="annotation"),
    ],
)
def test_a_malformed_hpa_is_named_with_its_field(change: Any, named: str) -> None:
    obj = k8s.hpa("web", namespace="shop")
    change(obj)
    with pytest.raises(SnapshotError) as raised:
        reading.hpa_from(obj)
    assert "HorizontalPodAutoscaler shop/web" in raised.value.message
    assert named in raised.value.message


def test_only_replicasets_a_deployment_controls_and_that_have_replicas_count() -> None:
    bare = k8s.replica_set("bare-1", deployment=None, replicas=3)
    counts = reading.active_replica_sets(
        [
            k8s.replica_set("web-a", deployment="web", replicas=3),
            k8s.replica_set("web-b", deployment="web", replicas=1),
            k8s.replica_set("web-c", deployment="web", replicas=0),
            k8s.replica_set("web-d", deployment="web", replicas=2, namespace="other"),
            bare,
        ]
    )
    assert counts == {("default", "web"): 2, ("other", "web"): 1}


def test_a_snapshot_file_keeps_hpas_and_replicasets_and_ignores_other_kinds(tmp_path: Any) -> None:
    import json

    path = tmp_path / "list.json"
    items = [k8s.hpa("b"), k8s.hpa("a"), k8s.replica_set("a-1", deployment="a", replicas=1), k8s.node("n1")]
    path.write_text(json.dumps({"kind": "List", "items": items}))
    cluster = reading.read_file(str(path))
    assert [hpa.name for hpa in cluster.hpas] == ["a", "b"]
    assert cluster.active_replica_sets == {("default", "a"): 1}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "is not JSON", id="not-json"),
        pytest.param("[1, 2]", "is not a Kubernetes List", id="not-an-object"),
        pytest.param('{"items": 3}', "items is not a list", id="items-not-a-list"),
    ],
)
def test_a_bad_snapshot_file_is_refused_with_what_is_wrong(tmp_path: Any, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SnapshotError, match=message):
        reading.read_file(str(path))
