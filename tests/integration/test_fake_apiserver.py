"""The fake API server behaves like kube-apiserver for what node-compactor uses.

Every test talks to it with the official `kubernetes` client over real HTTP, the way
node-compactor will; docs/fake-apiserver.md lists each behaviour and its source.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.fakeapi import FakeApiServer, Fault, builders

TOKEN = "test-token"

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def api_client(api: FakeApiServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(api.client_configuration()) as api_client:
        yield api_client


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)


@pytest.fixture
def coordination(api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


def eviction(name: str, namespace: str = "default") -> client.V1Eviction:
    return client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))


def raw(response: Any) -> Any:
    """The JSON of a `_preload_content=False` answer."""
    return orjson.loads(response.data)


def body_of(error: ApiException) -> Any:
    return orjson.loads(error.body)


def stored(api: FakeApiServer, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    obj = api.get(kind, name, namespace)
    assert obj is not None, f"{kind} {name} is not stored"
    return obj


# ------------------------------------------------------------------------ discovery


def test_answers_the_version_and_discovery_documents(api_client: client.ApiClient) -> None:
    version = client.VersionApi(api_client).get_code()
    core_versions = client.CoreApi(api_client).get_api_versions()
    groups = client.ApisApi(api_client).get_api_versions()
    resources = client.PolicyV1Api(api_client).get_api_resources()

    assert (version.major, version.minor) == ("1", "33")
    assert core_versions.versions == ["v1"]
    assert {g.name for g in groups.groups} == {
        "apps",
        "autoscaling",
        "cloud.google.com",  # GKE's ComputeClass CRD
        "coordination.k8s.io",
        "events.k8s.io",
        "policy",
    }
    assert [r.name for r in resources.resources] == ["poddisruptionbudgets"]


# ------------------------------------------------------------------------ lists


def _walk(list_page: Callable[..., Any], limit: int, **kwargs: Any) -> tuple[list[str], list[Any]]:
    names: list[str] = []
    metas: list[Any] = []
    token = None
    while True:
        page = raw(list_page(limit=limit, _continue=token, _preload_content=False, **kwargs))
        names += [f"{item['metadata'].get('namespace', '')}/{item['metadata']['name']}" for item in page["items"]]
        metas.append(page["metadata"])
        token = page["metadata"].get("continue")
        if not token:
            return names, metas


@pytest.mark.parametrize(
    ("list_name", "kwargs", "expected"),
    [
        pytest.param("list_node", {}, 23, id="nodes"),
        pytest.param("list_pod_for_all_namespaces", {}, 60, id="pods-in-all-namespaces"),
        pytest.param("list_namespaced_pod", {"namespace": "team-b"}, 20, id="pods-in-one-namespace"),
    ],
)
def test_pagination_walks_every_object_exactly_once(
    api: FakeApiServer, core: client.CoreV1Api, list_name: str, kwargs: dict[str, str], expected: int
) -> None:
    for index in range(23):
        api.add(builders.node(f"node-{index:02d}"))
    for index in range(60):
        namespace = ("team-a", "team-b", "team-a-b")[index % 3]
        api.add(builders.pod(f"web-{index:02d}", namespace=namespace, node=f"node-{index % 23:02d}"))

    names, metas = _walk(getattr(core, list_name), 7, **kwargs)

    assert len(names) == len(set(names)) == expected
    assert names == sorted(names)
    assert len({meta["resourceVersion"] for meta in metas}) == 1
    assert [meta.get("remainingItemCount") for meta in metas[:-1]] == [
        expected - 7 * (i + 1) for i in range(len(metas) - 1)
    ]


def test_a_paginated_list_is_a_snapshot_of_when_it_started(api: FakeApiServer, core: client.CoreV1Api) -> None:
    for index in range(10):
        api.add(builders.pod(f"web-{index}", node="node-a"))
    first = raw(core.list_pod_for_all_namespaces(limit=4, _preload_content=False))
    api.add(builders.pod("web-99", node="node-a"))
    api.delete("Pod", "web-8")

    rest = raw(
        core.list_pod_for_all_namespaces(limit=100, _continue=first["metadata"]["continue"], _preload_content=False)
    )

    assert [p["metadata"]["name"] for p in first["items"] + rest["items"]] == [f"web-{i}" for i in range(10)]
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_an_expired_continue_token_is_410_with_a_token_that_continues_inconsistently(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    for index in range(6):
        api.add(builders.node(f"node-{index}"))
    first = raw(core.list_node(limit=2, _preload_content=False))
    api.add(builders.node("node-9"))
    api.expire_continue_tokens()

    with pytest.raises(ApiException) as expired:
        core.list_node(limit=2, _continue=first["metadata"]["continue"])
    resumed = raw(core.list_node(_continue=body_of(expired.value)["metadata"]["continue"], _preload_content=False))

    assert expired.value.status == 410
    assert body_of(expired.value)["reason"] == "Expired"
    assert [n["metadata"]["name"] for n in resumed["items"]] == ["node-2", "node-3", "node-4", "node-5", "node-9"]


def test_a_continue_token_only_continues_its_own_collection(api: FakeApiServer, core: client.CoreV1Api) -> None:
    for index in range(4):
        api.add(builders.pod(f"web-{index}", namespace="team-a", node="node-a"))
    first = raw(core.list_namespaced_pod("team-a", limit=2, _preload_content=False))

    with pytest.raises(ApiException) as refused:
        core.list_namespaced_pod("team-b", limit=2, _continue=first["metadata"]["continue"])

    assert refused.value.status == 400
    assert body_of(refused.value)["message"].startswith("continue key is not valid")


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("cloud.google.com/gke-nodepool=spot", ["node-b", "node-c"], id="equality"),
        pytest.param("cloud.google.com/gke-nodepool!=spot", ["node-a"], id="inequality"),
        pytest.param("cloud.google.com/gke-nodepool in (spot,gpu)", ["node-b", "node-c"], id="set"),
        pytest.param("cloud.google.com/gke-nodepool=spot,tier", ["node-c"], id="conjunction-with-exists"),
        pytest.param("!tier", ["node-a", "node-b"], id="does-not-exist"),
    ],
)
def test_label_selector_filters_nodes(
    api: FakeApiServer, core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    api.add(builders.node("node-a"))
    api.add(builders.node("node-b", pool="spot"))
    api.add(builders.node("node-c", pool="spot", labels={"tier": "batch"}))

    nodes = core.list_node(label_selector=selector)

    assert [n.metadata.name for n in nodes.items] == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("spec.nodeName=node-a", ["a-1", "a-2", "done-1"], id="on-a-node"),
        pytest.param("spec.nodeName!=node-a", ["b-1", "pending-1"], id="not-on-a-node"),
        pytest.param("spec.nodeName=", ["pending-1"], id="unscheduled"),
        pytest.param("spec.nodeName=node-a,status.phase!=Succeeded", ["a-1", "a-2"], id="conjunction"),
        pytest.param("status.phase=Pending", ["pending-1"], id="phase"),
        pytest.param("metadata.name=b-1", ["b-1"], id="name"),
        pytest.param("metadata.namespace=ops", ["a-2"], id="namespace"),
    ],
)
def test_field_selector_filters_pods(
    api: FakeApiServer, core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    api.add(builders.pod("a-1", node="node-a"))
    api.add(builders.pod("a-2", namespace="ops", node="node-a"))
    api.add(builders.pod("done-1", node="node-a", phase="Succeeded", owner_kind="Job"))
    api.add(builders.pod("b-1", node="node-b"))
    api.add(builders.pod("pending-1", phase="Pending"))

    pods = core.list_pod_for_all_namespaces(field_selector=selector)

    assert sorted(p.metadata.name for p in pods.items) == expected


def test_an_unsupported_field_selector_is_400_field_label_not_supported(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as refused:
        core.list_pod_for_all_namespaces(field_selector="status.hostIP=10.0.0.1")

    assert refused.value.status == 400
    assert body_of(refused.value)["message"] == "field label not supported: status.hostIP"
    assert body_of(refused.value)["reason"] == "BadRequest"


# ------------------------------------------------------------------------ writes


def test_merge_patch_with_null_deletes_an_annotation(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a", annotations={"node-compactor.dev/underutilized-since": "2026-01-01T00:00:00Z"}))

    node = core.patch_node(
        "node-a",
        {"metadata": {"annotations": {"node-compactor.dev/underutilized-since": None, "kept": "yes"}}},
        _content_type="application/merge-patch+json",
    )

    assert "node-compactor.dev/underutilized-since" not in node.metadata.annotations
    assert node.metadata.annotations["kept"] == "yes"
    assert node.metadata.annotations["node.alpha.kubernetes.io/ttl"] == "0"


def test_strategic_merge_patch_cordons_a_node_and_the_cordon_taint_follows(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.node("node-a"))

    cordoned = core.patch_node(
        "node-a",
        {"spec": {"unschedulable": True}, "metadata": {"annotations": {"node-compactor.dev/drain-started-at": "t"}}},
    )
    uncordoned = core.patch_node("node-a", {"spec": {"unschedulable": None}})

    assert api.writes[0].content_type == "application/strategic-merge-patch+json"
    assert cordoned.spec.unschedulable is True
    assert [t.key for t in cordoned.spec.taints] == ["node.kubernetes.io/unschedulable"]
    assert cordoned.metadata.annotations["node-compactor.dev/drain-started-at"] == "t"
    assert uncordoned.spec.unschedulable is None
    assert uncordoned.spec.taints is None


def test_an_uncordon_with_false_and_an_empty_taint_list_are_left_out_as_kube_apiserver_does(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    # NodeSpec's `unschedulable` and `taints` are `omitempty`: false and [] are never served.
    api.add(builders.node("node-a", unschedulable=True, taints=[builders.taint("a", "1")]))

    core.patch_node(
        "node-a", {"spec": {"unschedulable": False, "taints": []}}, _content_type="application/merge-patch+json"
    )

    stored = api.get("Node", "node-a")
    assert stored is not None
    assert "unschedulable" not in stored["spec"] and "taints" not in stored["spec"]


def test_strategic_merge_patch_replaces_the_taint_list_whole(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a", taints=[builders.taint("a", "1"), builders.taint("b", "2")]))

    node = core.patch_node("node-a", {"spec": {"taints": [{"key": "c", "effect": "NoSchedule"}]}})

    assert [t.key for t in node.spec.taints] == ["c"]


def test_json_patch_applies_operations_and_refuses_a_failed_test_with_422(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.node("node-a"))

    node = core.patch_node(
        "node-a",
        [
            {"op": "test", "path": "/spec/providerID", "value": "gce://example-project/europe-west1-b/node-a"},
            {"op": "add", "path": "/metadata/annotations/node-compactor.dev~1disabled", "value": "true"},
        ],
    )
    with pytest.raises(ApiException) as failed:
        core.patch_node("node-a", [{"op": "test", "path": "/spec/unschedulable", "value": True}])

    assert node.metadata.annotations["node-compactor.dev/disabled"] == "true"
    assert failed.value.status == 422
    assert stored(api, "Node", "node-a")["metadata"]["resourceVersion"] == node.metadata.resource_version


def test_json_patch_adding_under_a_missing_map_is_422(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a"))

    with pytest.raises(ApiException) as failed:
        core.patch_node("node-a", [{"op": "add", "path": "/metadata/finalizers/0", "value": "x"}])

    assert failed.value.status == 422
    assert body_of(failed.value)["reason"] == "Invalid"


@pytest.mark.parametrize(
    "content_type",
    [
        pytest.param("application/merge-patch+json", id="merge-patch"),
        pytest.param("application/strategic-merge-patch+json", id="strategic-merge-patch"),
    ],
)
def test_a_patch_carrying_a_stale_resource_version_is_409_conflict(
    api: FakeApiServer, core: client.CoreV1Api, content_type: str
) -> None:
    stale = api.add(builders.node("node-a"))["metadata"]["resourceVersion"]
    core.patch_node("node-a", {"metadata": {"labels": {"touched": "yes"}}})

    with pytest.raises(ApiException) as conflict:
        core.patch_node(
            "node-a",
            {"metadata": {"resourceVersion": stale}, "spec": {"unschedulable": True}},
            _content_type=content_type,
        )

    assert conflict.value.status == 409
    assert body_of(conflict.value)["reason"] == "Conflict"
    assert body_of(conflict.value)["message"] == (
        'Operation cannot be fulfilled on nodes "node-a": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert stored(api, "Node", "node-a")["spec"].get("unschedulable") is None


def test_every_write_takes_the_next_resource_version_and_a_no_op_patch_takes_none(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    first = int(api.add(builders.node("node-a"))["metadata"]["resourceVersion"])
    second = int(api.add(builders.pod("web-1", node="node-a"))["metadata"]["resourceVersion"])
    patched = core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})
    unchanged = core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})
    listed = core.list_node()

    assert second == first + 1
    assert int(patched.metadata.resource_version) == second + 1
    assert unchanged.metadata.resource_version == patched.metadata.resource_version
    assert listed.metadata.resource_version == patched.metadata.resource_version


def test_put_replaces_a_node_but_keeps_its_status_and_refuses_a_stale_version(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.node("node-a"))
    node = core.read_node("node-a")
    node.metadata.labels["replaced"] = "yes"
    node.status.allocatable = {"cpu": "64"}
    stale = node.metadata.resource_version

    replaced = core.replace_node("node-a", node)
    with pytest.raises(ApiException) as conflict:
        core.replace_node("node-a", node)

    assert replaced.metadata.labels["replaced"] == "yes"
    assert replaced.status.allocatable["cpu"] == "4"
    assert replaced.metadata.resource_version != stale
    assert conflict.value.status == 409


# ------------------------------------------------------------------------ eviction


def test_evicting_a_pod_without_a_budget_is_201_and_the_pod_is_gone(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.pod("web-1", node="node-a"))

    answer = raw(core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"), _preload_content=False))

    assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    assert api.get("Pod", "web-1") is None
    assert api.evictions == [("default", "web-1", 201)]
    assert api.pod_deletes == []


def test_eviction_spends_the_budget_then_is_429_with_the_disruption_budget_cause(
    api: FakeApiServer, core: client.CoreV1Api, policy: client.PolicyV1Api
) -> None:
    api.add(builders.pod("web-1", node="node-a"))
    api.add(builders.pod("web-2", node="node-b"))
    api.add(builders.pdb("web", match_labels={"app": "web"}, disruptions_allowed=1, min_available=1))

    core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    budget = policy.read_namespaced_pod_disruption_budget("web", "default")
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("web-2", "default", eviction("web-2"))

    assert budget.status.disruptions_allowed == 0
    assert refused.value.status == 429
    assert body_of(refused.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web needs 1 healthy pods and has 1 currently",
                }
            ]
        },
        "code": 429,
    }
    assert api.get("Pod", "web-2") is not None
    assert api.evictions == [("default", "web-1", 201), ("default", "web-2", 429)]


def test_evicting_a_missing_pod_is_404_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_pod_eviction("ghost", "default", eviction("ghost"))

    assert missing.value.status == 404
    assert body_of(missing.value)["message"] == 'pods "ghost" not found'
    assert body_of(missing.value)["reason"] == "NotFound"


def test_evicting_a_pod_covered_by_two_budgets_is_500_with_a_failure_status(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.pod("web-1", node="node-a", labels={"app": "web", "tier": "front"}))
    api.add(builders.pdb("by-app", match_labels={"app": "web"}))
    api.add(builders.pdb("by-tier", match_labels={"tier": "front"}))

    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"), _preload_content=False)

    # EvictionREST.Create returns a Failure Status as its result; the request finisher makes it an error.
    assert refused.value.status == 500
    answer = body_of(refused.value)
    assert (answer["kind"], answer["status"], answer["code"]) == ("Status", "Failure", 500)
    assert answer["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )
    assert api.get("Pod", "web-1") is not None, "the pod was not evicted"
    assert api.writes_of("Eviction") == []


def test_evicting_under_a_negative_budget_is_403_forbidden(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.pod("web-1", node="node-a"))
    api.add(builders.pdb("web", match_labels={"app": "web"}, disruptions_allowed=-1))

    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))

    assert refused.value.status == 403
    assert body_of(refused.value)["message"] == (
        'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative'
    )


def test_evicting_an_unready_pod_spends_no_budget_while_enough_others_are_healthy(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.pod("web-1", node="node-a", ready=False))
    api.add(builders.pdb("web", match_labels={"app": "web"}, disruptions_allowed=0, min_available=2))

    core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))

    assert api.get("Pod", "web-1") is None
    assert stored(api, "PodDisruptionBudget", "web")["status"]["disruptionsAllowed"] == 0


def test_concurrent_evictions_never_overspend_a_budget(api: FakeApiServer) -> None:
    for index in range(12):
        api.add(builders.pod(f"web-{index:02d}", node="node-a"))
    api.add(builders.pdb("web", match_labels={"app": "web"}, disruptions_allowed=5, min_available=7))
    configuration = api.client_configuration()
    configuration.connection_pool_maxsize = 8

    def evict(name: str) -> int:
        try:
            client.CoreV1Api(api_client).create_namespaced_pod_eviction(name, "default", eviction(name))
        except ApiException as error:
            return int(error.status)
        return 201

    with client.ApiClient(configuration) as api_client, ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(evict, [f"web-{index:02d}" for index in range(12)]))

    assert sorted(outcomes) == [201] * 5 + [429] * 7
    assert len(api.objects("Pod")) == 7
    assert stored(api, "PodDisruptionBudget", "web")["status"]["disruptionsAllowed"] == 0


@pytest.mark.parametrize(
    "phase",
    [
        pytest.param("Pending", id="pending"),
        pytest.param("Succeeded", id="succeeded"),
        pytest.param("Failed", id="failed"),
    ],
)
def test_a_pod_that_is_not_running_is_evicted_without_spending_budget(
    api: FakeApiServer, core: client.CoreV1Api, phase: str
) -> None:
    api.add(builders.pod("web-1", node="node-a", phase=phase))
    api.add(builders.pdb("web", match_labels={"app": "web"}, disruptions_allowed=0))

    core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))

    assert api.get("Pod", "web-1") is None
    assert stored(api, "PodDisruptionBudget", "web")["status"]["disruptionsAllowed"] == 0


def test_with_a_termination_delay_an_evicted_pod_terminates_before_it_is_gone(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.pod("web-1", node="node-a"))
    api.pod_termination_delay(0.2)

    core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    terminating = core.read_namespaced_pod("web-1", "default")
    api.wait_idle()

    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    assert api.get("Pod", "web-1") is None


def test_deleting_a_pod_directly_works_but_is_recorded(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.pod("web-1", node="node-a"))

    core.delete_namespaced_pod("web-1", "default")
    with pytest.raises(ApiException):
        core.delete_namespaced_pod("web-1", "default")

    assert [(d.name, d.status) for d in api.pod_deletes] == [("web-1", 200), ("web-1", 404)]


# ------------------------------------------------------------------------ leases


def _lease_body(holder: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "node-compactor", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 600, "acquireTime": "2026-01-01T00:00:00.000000Z"},
    }


def test_creating_a_lease_that_exists_is_409_already_exists(coordination: client.CoordinationV1Api) -> None:
    coordination.create_namespaced_lease("kube-system", _lease_body("run-1"))

    with pytest.raises(ApiException) as taken:
        coordination.create_namespaced_lease("kube-system", _lease_body("run-2"))

    assert taken.value.status == 409
    assert body_of(taken.value)["reason"] == "AlreadyExists"
    assert body_of(taken.value)["message"] == 'leases.coordination.k8s.io "node-compactor" already exists'


def test_updating_a_lease_from_a_stale_read_is_409_conflict(coordination: client.CoordinationV1Api) -> None:
    coordination.create_namespaced_lease("kube-system", _lease_body("run-1"))
    # Raw JSON both ways: the client's models would write acquireTime back through isoformat(),
    # which drops the six fractional digits a MicroTime needs (and the server refuses that, 400).
    first_read = orjson.loads(
        coordination.read_namespaced_lease("node-compactor", "kube-system", _preload_content=False).data
    )
    second_read = orjson.loads(
        coordination.read_namespaced_lease("node-compactor", "kube-system", _preload_content=False).data
    )
    first_read["spec"]["holderIdentity"] = "run-2"
    coordination.replace_namespaced_lease("node-compactor", "kube-system", first_read)
    second_read["spec"]["holderIdentity"] = "run-3"

    with pytest.raises(ApiException) as conflict:
        coordination.replace_namespaced_lease("node-compactor", "kube-system", second_read)

    assert conflict.value.status == 409
    assert body_of(conflict.value)["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "node-compactor": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    assert coordination.read_namespaced_lease("node-compactor", "kube-system").spec.holder_identity == "run-2"


def test_updating_a_lease_without_a_resource_version_is_422(coordination: client.CoordinationV1Api) -> None:
    coordination.create_namespaced_lease("kube-system", _lease_body("run-1"))

    with pytest.raises(ApiException) as invalid:
        coordination.replace_namespaced_lease("node-compactor", "kube-system", _lease_body("run-2"))

    assert invalid.value.status == 422
    assert "must be specified for an update" in body_of(invalid.value)["message"]


def test_putting_a_missing_lease_creates_it(api: FakeApiServer, coordination: client.CoordinationV1Api) -> None:
    created = coordination.replace_namespaced_lease("node-compactor", "kube-system", _lease_body("run-1"))

    assert created.spec.holder_identity == "run-1"
    assert [(w.method, w.kind, w.status) for w in api.writes] == [("PUT", "Lease", 201)]


def test_reading_a_missing_lease_is_404(coordination: client.CoordinationV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        coordination.read_namespaced_lease("node-compactor", "kube-system")

    assert missing.value.status == 404
    assert body_of(missing.value)["details"] == {
        "name": "node-compactor",
        "group": "coordination.k8s.io",
        "kind": "leases",
    }


# ------------------------------------------------------------------------ events


def test_core_v1_events_are_stored_and_listed(api: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"generateName": "node-a."},
            "involvedObject": {"kind": "Node", "name": "node-a", "apiVersion": "v1"},
            "reason": "DrainStarted",
            "message": "node-compactor cordoned node-a",
            "type": "Normal",
            "source": {"component": "node-compactor"},
        },
    )

    listed = core.list_namespaced_event("default", field_selector="involvedObject.name=node-a")

    assert [e.reason for e in listed.items] == ["DrainStarted"]
    assert listed.items[0].metadata.name.startswith("node-a.")
    assert api.objects("Event")[0]["involvedObject"]["name"] == "node-a"


def test_events_v1_events_are_stored_and_seen_by_both_event_apis(
    api: FakeApiServer, api_client: client.ApiClient
) -> None:
    events_api = client.EventsV1Api(api_client)
    events_api.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "node-a.drain"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "node-compactor.dev/compactor",
            "reportingInstance": "run-1",
            "action": "Drain",
            "reason": "DrainStarted",
            "regarding": {"kind": "Node", "name": "node-a", "apiVersion": "v1"},
            "note": "cordoned",
            "type": "Normal",
        },
    )

    as_events_v1 = events_api.list_namespaced_event("default")
    as_core = raw(client.CoreV1Api(api_client).list_namespaced_event("default", _preload_content=False))

    assert [e.note for e in as_events_v1.items] == ["cordoned"]
    assert as_core["items"][0]["message"] == "cordoned"
    assert as_core["items"][0]["involvedObject"]["name"] == "node-a"
    assert api.objects("Event")[0]["reportingComponent"] == "node-compactor.dev/compactor"


def test_an_events_v1_event_without_its_required_fields_is_422(api_client: client.ApiClient) -> None:
    with pytest.raises(ApiException) as invalid:
        client.EventsV1Api(api_client).create_namespaced_event(
            "default",
            {
                "metadata": {"name": "x"},
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reason": "R",
                "type": "Normal",
                "regarding": {"kind": "Node", "name": "node-a"},
            },
        )

    assert invalid.value.status == 422
    # Both Event APIs store core Events, so the error names the core kind (as kube-apiserver 1.36 does).
    assert body_of(invalid.value)["message"] == (
        'Event "x" is invalid: [reportingController: Required value, reportingController: Invalid value: "": '
        'name part must be non-empty, reportingController: Invalid value: "": name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), reportingInstance: Required value, action: Required value]"
    )


# ------------------------------------------------------------------------ auth


def test_a_written_kubeconfig_reaches_the_server_with_the_token(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(builders.node("node-a"))
    configuration = client.Configuration()
    config.load_kube_config(str(api.write_kubeconfig(tmp_path / "kubeconfig")), client_configuration=configuration)

    with client.ApiClient(configuration) as from_kubeconfig:
        nodes = client.CoreV1Api(from_kubeconfig).list_node()

    assert [n.metadata.name for n in nodes.items] == ["node-a"]


def test_a_request_with_a_wrong_bearer_token_is_401(api: FakeApiServer) -> None:
    configuration = api.client_configuration()
    configuration.api_key = {"BearerToken": "wrong"}

    with client.ApiClient(configuration) as unauthenticated, pytest.raises(ApiException) as refused:
        client.CoreV1Api(unauthenticated).list_node()

    assert refused.value.status == 401
    assert body_of(refused.value)["reason"] == "Unauthorized"


def test_a_request_without_a_token_is_the_anonymous_user_whom_rbac_refuses(api: FakeApiServer) -> None:
    configuration = api.client_configuration()
    configuration.api_key = {}

    with client.ApiClient(configuration) as anonymous, pytest.raises(ApiException) as refused:
        client.CoreV1Api(anonymous).list_node()

    assert refused.value.status == 403
    assert body_of(refused.value)["message"] == (
        'nodes is forbidden: User "system:anonymous" cannot list resource "nodes" in API group "" at the cluster scope'
    )
    with client.ApiClient(configuration) as anonymous:
        assert client.VersionApi(anonymous).get_code().git_version


# ------------------------------------------------------------------------ faults


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param(500, "InternalError", id="500"),
        pytest.param(503, "ServiceUnavailable", id="503"),
        pytest.param(504, "Timeout", id="504"),
        pytest.param(409, "Conflict", id="409"),
    ],
)
def test_an_injected_error_reaches_the_client_as_a_status(
    api: FakeApiServer, core: client.CoreV1Api, status: int, reason: str
) -> None:
    api.add(builders.node("node-a"))
    api.add_fault(Fault(method="PATCH", path_regex=r"/nodes/node-a$", status=status))

    with pytest.raises(ApiException) as failed:
        core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})
    patched_after = core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})

    assert failed.value.status == status
    assert body_of(failed.value)["reason"] == reason
    assert patched_after.metadata.labels["x"] == "1"
    assert [w.status for w in api.writes] == [200]


def test_an_injected_429_is_plain_text_with_retry_after(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a"))
    api.add_fault(Fault(method="PATCH", status=429, retry_after=3))

    with pytest.raises(ApiException) as throttled:
        core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})

    assert throttled.value.status == 429
    assert throttled.value.headers["Retry-After"] == "3"
    assert throttled.value.body == "Too many requests, please try again later.\n"


def test_a_429_on_a_read_is_retried_by_the_client_after_retry_after(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add_fault(Fault(method="GET", path_regex=r"^/api/v1/nodes$", status=429, retry_after=1))

    started = time.monotonic()
    core.list_node()

    assert time.monotonic() - started >= 1
    assert [r.status for r in api.requests] == [429, 200]


def test_a_fault_applies_the_given_number_of_times_then_stops(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add_fault(Fault(method="GET", path_regex=r"/nodes", status=500, times=2))
    outcomes = []
    for _ in range(3):
        try:
            core.list_node()
            outcomes.append(200)
        except ApiException as error:
            outcomes.append(error.status)

    assert outcomes == [500, 500, 200]
    assert [r.status for r in api.requests] == [500, 500, 200]


def test_a_fault_with_times_minus_one_applies_until_cleared(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add_fault(Fault(path_regex=r"/nodes", status=503, times=-1))
    for _ in range(4):
        with pytest.raises(ApiException):
            core.list_node()

    api.clear_faults()

    assert core.list_node().items == []


def test_a_slow_response_arrives_after_the_delay(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add_fault(Fault(path_regex=r"/nodes", delay=0.3))

    started = time.monotonic()
    core.list_node()

    assert time.monotonic() - started >= 0.3


def test_a_slow_response_trips_the_client_timeout(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a"))
    api.add_fault(Fault(method="PATCH", delay=0.5))

    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}}, _request_timeout=0.1)


def test_a_dropped_connection_fails_a_patch(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a"))
    api.add_fault(Fault(method="PATCH", drop_connection=True))

    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})

    assert api.requests[-1].status is None
    assert api.writes == []


def test_a_dropped_connection_on_a_read_is_retried_by_the_client(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a"))
    api.add_fault(Fault(method="GET", path_regex=r"/nodes/node-a$", drop_connection=True))

    node = core.read_node("node-a")

    assert node.metadata.name == "node-a"
    assert [r.status for r in api.requests] == [None, 200]


# ------------------------------------------------------------------------ controllers


def test_an_evicted_pod_is_recreated_on_the_least_allocated_node_that_fits(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.node("draining", unschedulable=True))
    api.add(builders.node("busy"))
    api.add(builders.node("roomy"))
    api.add(builders.node("tainted", taints=[builders.taint("dedicated", "gpu")]))
    api.add(builders.node("not-ready", ready=False))
    api.add(builders.node("other-pool", pool="batch"))
    api.add(builders.node("full", cpu="1"))
    api.add(builders.pod("filler-1", node="busy", cpu="2"))
    api.add(builders.pod("filler-2", node="roomy", cpu="1"))
    api.add(builders.pod("filler-3", node="full", cpu="600m"))
    api.add(
        builders.pod(
            "web-abcde", node="draining", cpu="500m", node_selector={"cloud.google.com/gke-nodepool": "default-pool"}
        )
    )
    api.add(builders.pdb("web", match_labels={"app": "web"}, disruptions_allowed=1))
    api.recreate_evicted(0.0)

    core.create_namespaced_pod_eviction("web-abcde", "default", eviction("web-abcde"))
    api.wait_idle()

    replacements = [p for p in api.objects("Pod") if p["metadata"]["name"].startswith("web-")]
    assert len(replacements) == 1
    replacement = replacements[0]
    assert replacement["metadata"]["name"] != "web-abcde"
    assert replacement["metadata"]["name"].startswith("web-")
    assert replacement["spec"]["nodeName"] == "roomy"
    assert replacement["status"]["phase"] == "Running"
    assert stored(api, "PodDisruptionBudget", "web")["status"]["disruptionsAllowed"] == 1


def test_a_replacement_that_fits_nowhere_stays_pending_unschedulable(
    api: FakeApiServer, core: client.CoreV1Api
) -> None:
    api.add(builders.node("draining", unschedulable=True))
    api.add(builders.node("small", cpu="1"))
    api.add(builders.pod("web-abcde", node="draining", cpu="2"))
    api.recreate_evicted(0.0)

    core.create_namespaced_pod_eviction("web-abcde", "default", eviction("web-abcde"))
    api.wait_idle()
    pending = core.list_namespaced_pod("default", field_selector="status.phase=Pending").items

    assert len(pending) == 1
    assert pending[0].spec.node_name is None
    scheduled = [c for c in pending[0].status.conditions if c.type == "PodScheduled"]
    assert [(c.status, c.reason) for c in scheduled] == [("False", "Unschedulable")]
    assert scheduled[0].message == "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable."


def test_a_pending_replacement_is_bound_once_a_node_makes_room(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("draining", unschedulable=True))
    api.add(builders.pod("web-abcde", node="draining"))
    api.recreate_evicted(0.0)
    core.create_namespaced_pod_eviction("web-abcde", "default", eviction("web-abcde"))
    api.wait_idle()

    api.add(builders.node("new-node"))

    [replacement] = api.objects("Pod")
    assert replacement["spec"]["nodeName"] == "new-node"
    assert replacement["status"]["phase"] == "Running"


@pytest.mark.parametrize(
    ("owner_kind", "recreated"),
    [
        pytest.param("StatefulSet", True, id="statefulset-keeps-the-name"),
        pytest.param(None, False, id="bare-pod-is-not-recreated"),
        pytest.param("DaemonSet", False, id="daemonset-pod-is-not-recreated-elsewhere"),
    ],
)
def test_which_evicted_pods_come_back(
    api: FakeApiServer, core: client.CoreV1Api, owner_kind: str | None, recreated: bool
) -> None:
    api.add(builders.node("node-a", unschedulable=True))
    api.add(builders.node("node-b"))
    api.add(builders.pod("db-0", node="node-a", owner_kind=owner_kind))
    api.recreate_evicted(0.05)
    api.pod_termination_delay(0.05)

    core.create_namespaced_pod_eviction("db-0", "default", eviction("db-0"))
    api.wait_idle()

    pods = api.objects("Pod")
    if recreated:
        assert [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods] == [("db-0", "node-b")]
    else:
        assert pods == []


# ------------------------------------------------------------------------ records and snapshots


def test_writes_record_each_successful_mutation_only(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a"))
    api.add(builders.pod("web-1", node="node-a"))
    core.read_node("node-a")
    core.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException):
        core.patch_node("ghost", {"metadata": {"labels": {"x": "1"}}})
    core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))

    assert [(w.method, w.kind, w.name, w.status) for w in api.writes] == [
        ("PATCH", "Node", "node-a", 200),
        ("POST", "Eviction", "web-1", 201),
    ]
    assert [w.name for w in api.writes_of("Node", "PATCH")] == ["node-a"]
    assert len(api.requests) == 4

    api.reset_counters()

    assert (api.writes, api.requests, api.evictions) == ([], [], [])


def test_snapshot_is_the_list_kubectl_prints_for_nodes_pods_and_budgets(api: FakeApiServer) -> None:
    api.add(builders.node("node-a"))
    api.add(builders.pod("web-1", node="node-a"))
    api.add(builders.pdb("web", match_labels={"app": "web"}))
    api.add(builders.lease(holder="run-1"))

    snapshot = api.snapshot()

    assert (snapshot["kind"], snapshot["apiVersion"]) == ("List", "v1")
    assert [(i["kind"], i["apiVersion"], i["metadata"]["name"]) for i in snapshot["items"]] == [
        ("Node", "v1", "node-a"),
        ("Pod", "v1", "web-1"),
        ("PodDisruptionBudget", "policy/v1", "web"),
    ]
    assert all(i["metadata"]["uid"] and i["metadata"]["resourceVersion"] for i in snapshot["items"])


def test_list_items_carry_no_kind_but_a_single_get_does(api: FakeApiServer, core: client.CoreV1Api) -> None:
    api.add(builders.node("node-a"))

    listed = raw(core.list_node(_preload_content=False))
    single = raw(core.read_node("node-a", _preload_content=False))

    assert (listed["kind"], listed["apiVersion"]) == ("NodeList", "v1")
    assert "kind" not in listed["items"][0]
    assert (single["kind"], single["apiVersion"]) == ("Node", "v1")


@pytest.mark.parametrize(
    "stamp",
    [
        pytest.param("2026-11-21T12:00:00+00:00", id="no-fraction-as-isoformat-writes-it"),
        pytest.param("2026-11-21T12:00:00.123Z", id="three-digits"),
        pytest.param("2026-11-21T12:00:00.123456789Z", id="nine-digits"),
        pytest.param("2026-11-21 12:00:00.000000Z", id="space-instead-of-t"),
        pytest.param("2026-11-21T12:00:00.000000z", id="lower-case-z"),
        pytest.param("2026-02-30T12:00:00.000000Z", id="no-such-day"),
        pytest.param(1700000000, id="a-number"),
    ],
)
def test_a_lease_time_that_is_not_a_micro_time_is_400(api: FakeApiServer, stamp: object) -> None:
    lease = builders.lease("x", namespace="kube-system", holder="me", renew_time="2026-11-21T12:00:00.000000Z")
    lease["spec"]["renewTime"] = stamp
    with pytest.raises(ApiException) as refused:
        client.CoordinationV1Api(client.ApiClient(api.client_configuration())).create_namespaced_lease(
            "kube-system", lease
        )
    assert refused.value.status == 400
    assert "cannot be handled as a Lease" in body_of(refused.value)["message"]
    assert api.get("Lease", "x", "kube-system") is None


@pytest.mark.parametrize(
    "stamp",
    [
        pytest.param("2026-11-21T12:00:00.000000Z", id="utc"),
        pytest.param("2026-11-21T12:00:00.000001+05:30", id="offset"),
        pytest.param(None, id="null"),
    ],
)
def test_a_micro_time_lease_is_stored(api: FakeApiServer, stamp: str | None) -> None:
    lease = builders.lease("x", namespace="kube-system", holder="me", renew_time="2026-11-21T12:00:00.000000Z")
    lease["spec"]["renewTime"] = stamp
    client.CoordinationV1Api(client.ApiClient(api.client_configuration())).create_namespaced_lease("kube-system", lease)
    assert api.get("Lease", "x", "kube-system") is not None
