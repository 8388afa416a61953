"""Reading Kubernetes JSON into planner records: the request formula, odd objects, and errors."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.core.cluster import PdbIndex
from compactor.errors import SnapshotError
from compactor.kube import snapshot


def container(cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": "c", "image": "i", "resources": {"requests": requests}, **extra}


def pod_json(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", **meta},
        "spec": {"nodeName": "n1", **spec},
        "status": {"phase": "Running"},
    }


def node_json(**status: Any) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "3920m", "memory": "13166196Ki", "pods": "110", "nvidia.com/gpu": "1"},
            "conditions": [{"type": "Ready", "status": "True"}],
            **status,
        },
    }


@pytest.mark.parametrize(
    ("spec", "cpu", "memory"),
    [
        pytest.param(
            {"containers": [container("250m", "64Mi"), container("0.5", "1Gi")]},
            750,
            64 * 2**20 + 2**30,
            id="containers-add-up",
        ),
        pytest.param(
            {"containers": [container("100m")], "initContainers": [container("2")]},
            2000,
            0,
            id="a-larger-init-container-wins",
        ),
        pytest.param(
            {"containers": [container("1")], "initContainers": [container("500m")]},
            1000,
            0,
            id="a-smaller-init-container-does-not-count",
        ),
        pytest.param(
            {"containers": [container("1")], "initContainers": [container("200m", restartPolicy="Always")]},
            1200,
            0,
            id="a-sidecar-adds-to-the-app",
        ),
        pytest.param(
            {
                "containers": [container("100m")],
                "initContainers": [container("300m", restartPolicy="Always"), container("1")],
            },
            1300,
            0,
            id="an-init-step-runs-beside-earlier-sidecars",
        ),
        pytest.param(
            {"containers": [container("1", "1Gi")], "overhead": {"cpu": "250m", "memory": "120Mi"}},
            1250,
            2**30 + 120 * 2**20,
            id="overhead-is-added",
        ),
        pytest.param({"containers": [{"name": "c"}]}, 0, 0, id="no-requests-is-zero"),
    ],
)
def test_pod_requests_follow_the_scheduler_formula(spec: dict[str, Any], cpu: int, memory: int) -> None:
    pod = snapshot.parse_pod(pod_json(spec))
    assert (pod.requests.cpu_millis, pod.requests.memory_bytes) == (cpu, memory)


def test_reads_the_fields_the_rules_need_from_a_pod() -> None:
    raw = pod_json(
        {
            "containers": [container("1", extra_field=1, ports=[{"containerPort": 80, "hostPort": 8080}])],
            "volumes": [
                {"name": "cache", "emptyDir": {}},
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
                {"name": "logs", "hostPath": {"path": "/var/log"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
            ],
            "priority": 1000,
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"disk": "ssd"},
        },
        ownerReferences=[{"kind": "StatefulSet", "name": "db", "controller": True}],
        annotations={
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
            "controller.kubernetes.io/pod-deletion-cost": "-5",
        },
        labels={"app": "db"},
    )
    pod = snapshot.parse_pod(raw)
    assert pod.controller_kind == "StatefulSet"
    assert pod.local_storage == ("cache", "logs")
    assert pod.pvc_names == ("data-0",)
    assert pod.safe_to_evict is True
    assert pod.deletion_cost == -5
    assert pod.priority == 1000
    assert [p.port for p in pod.host_ports] == [8080]
    assert pod.node_selector == (("disk", "ssd"),)
    assert pod.tolerations[0].operator == "Exists"


def test_a_pod_waiting_for_room_is_seen_as_unschedulable() -> None:
    raw = pod_json({"containers": []})
    del raw["spec"]["nodeName"]
    raw["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    assert snapshot.parse_pod(raw).unschedulable


def test_reads_a_nodes_capacity_readiness_and_taints() -> None:
    node = snapshot.parse_node(node_json())
    assert node.allocatable.cpu_millis == 3920
    assert node.allocatable.memory_bytes == 13166196 * 1024
    assert node.allocatable.extended == (("nvidia.com/gpu", 1000),)
    assert node.allocatable_pods == 110
    assert node.ready


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            pod_json({"containers": [container("lots")]}),
            "Pod ns/p: spec.containers[0].resources.requests.cpu: 'lots' is not a Kubernetes quantity",
            id="bad-quantity",
        ),
        pytest.param(pod_json({"containers": "nope"}), "Pod ns/p: spec.containers: expected a list", id="wrong-type"),
        pytest.param(pod_json({"priority": "high"}), "Pod ns/p: spec.priority: expected an integer", id="bad-priority"),
        pytest.param(
            pod_json({}, labels={"app": 3}), "Pod ns/p: metadata.labels.app: expected a string", id="label-not-a-string"
        ),
        pytest.param(node_json(allocatable={"cpu": "x"}), "Node n1: status.allocatable.cpu", id="bad-node-cpu"),
        pytest.param(
            {"kind": "Node", "metadata": {"name": "n1", "creationTimestamp": "noon"}},
            "Node n1: metadata.creationTimestamp: 'noon' is not an RFC 3339 time",
            id="bad-time",
        ),
        pytest.param(
            {"kind": "Node", "metadata": {"name": "n1"}, "spec": {"unschedulable": "yes"}},
            "Node n1: spec.unschedulable: expected true or false",
            id="bad-cordon-flag",
        ),
    ],
)
def test_a_malformed_object_is_named_with_its_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(orjson.dumps({"kind": "List", "items": [raw]})))
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


def test_reports_every_malformed_object_not_just_the_first() -> None:
    items = [pod_json({"priority": "x"}, name=f"p{i}") for i in range(3)]
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(orjson.dumps({"kind": "List", "items": items})))
    assert len(caught.value.problems) == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"{not json", "not valid JSON", id="not-json"),
        pytest.param(b'{"kind": "Pod", "metadata": {"name": "x"}}', "expected a List", id="single-object"),
        pytest.param(b"[]", "expected a List", id="bare-array"),
        pytest.param(b'{"kind": "List", "items": [1]}', "items[0]: expected an object", id="item-not-an-object"),
        pytest.param(b'{"kind": "List", "items": [{"metadata": {}}]}', "items[0]: no kind", id="item-without-kind"),
    ],
)
def test_a_file_that_is_not_a_kubectl_list_is_refused(content: bytes, message: str) -> None:
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(content))
    assert message in " ".join(caught.value.problems)


def test_an_empty_list_is_an_empty_cluster() -> None:
    result = snapshot.read_stream(io.BytesIO(b'{"apiVersion": "v1", "kind": "List", "items": []}'))
    assert result.nodes == () and result.pods == ()


def test_kinds_other_than_nodes_pods_and_pdbs_are_ignored() -> None:
    items = [{"kind": "Service", "metadata": {"name": "s"}}, node_json()]
    result = snapshot.read_stream(io.BytesIO(orjson.dumps({"kind": "List", "items": items})))
    assert [n.name for n in result.nodes] == ["n1"]


def test_a_pdb_without_status_allows_no_disruption_and_a_null_selector_selects_nothing() -> None:
    pdb = snapshot.parse_pdb({"kind": "PodDisruptionBudget", "metadata": {"name": "x", "namespace": "ns"}, "spec": {}})
    assert pdb.disruptions_allowed == 0
    assert pdb.selector is None


def test_the_example_snapshot_reads_without_problems() -> None:
    result = snapshot.read_file("examples/offpeak-snapshot.json")
    assert len(result.nodes) == 14
    assert any(pod.is_mirror for pod in result.pods)
    assert len(result.pdbs) == 5


# -- the fast path for pretty-printed files agrees with the streaming parser ------------------

LAYOUTS = [
    pytest.param(lambda doc: json.dumps(doc).encode(), id="compact"),
    pytest.param(lambda doc: json.dumps(doc, indent=4).encode(), id="kubectl-4-spaces"),
    pytest.param(lambda doc: json.dumps(doc, indent=2).encode(), id="2-spaces"),
    pytest.param(lambda doc: json.dumps(doc, indent=4).replace("\n", "\r\n").encode(), id="crlf"),
    pytest.param(lambda doc: json.dumps(doc, indent="\t").encode(), id="tabs"),
    pytest.param(lambda doc: json.dumps(doc, indent=4, ensure_ascii=False).encode(), id="utf8"),
]


def example_document() -> dict[str, Any]:
    with open("examples/offpeak-snapshot.json", "rb") as stream:
        document: dict[str, Any] = orjson.loads(stream.read())
    # Strings that look like structure must not fool the fast path.
    document["items"][0]["metadata"]["annotations"]["tricky"] = '\n        },\n        {"x": "]'
    return document


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_reads_the_same_cluster(layout: Any) -> None:
    document = example_document()
    expected = snapshot.SnapshotBuilder()
    expected.add_mixed(document["items"])
    result = snapshot.read_stream(io.BytesIO(layout(document)))
    assert result == expected.build()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(lambda text: text.replace('"kind": "Node"', '"kind": Node', 1), "not valid JSON", id="bad-item"),
        pytest.param(lambda text: text.rstrip()[:-1], "not valid JSON", id="truncated-end"),
        pytest.param(lambda text: text[: len(text) // 2], "not valid JSON", id="cut-in-the-middle"),
        pytest.param(
            lambda text: text.replace('"kind": "List"', '"kind": List'), "not valid JSON", id="bad-outside-the-items"
        ),
    ],
)
def test_a_damaged_pretty_printed_file_is_refused_like_any_other(damage: Any, message: str) -> None:
    text = damage(json.dumps(example_document(), indent=4))
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(text.encode()))
    assert message in " ".join(caught.value.problems)


def test_large_files_are_read_across_buffer_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "_CHUNK", 64)  # every item spans several reads
    document = example_document()
    expected = snapshot.SnapshotBuilder()
    expected.add_mixed(document["items"])
    assert snapshot.read_stream(io.BytesIO(json.dumps(document, indent=4).encode())) == expected.build()


@pytest.mark.parametrize(("indent", "fast"), [(4, True), (2, True), (None, False)], ids=["4", "2", "compact"])
def test_pretty_printed_files_are_read_item_by_item(
    monkeypatch: pytest.MonkeyPatch, indent: int | None, fast: bool
) -> None:
    def unavailable(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was read as one document")

    monkeypatch.setattr(snapshot, "_read_document", unavailable)
    content = json.dumps(example_document(), indent=indent).encode()
    if fast:
        assert len(snapshot.read_stream(io.BytesIO(content)).nodes) == 14
    else:
        with pytest.raises(AssertionError, match="one document"):
            snapshot.read_stream(io.BytesIO(content))


# -- input bounds: values the API server never stores, files that are not kubectl output --------


@pytest.mark.parametrize("indent", [pytest.param(None, id="compact"), pytest.param(4, id="kubectl-layout")])
def test_a_quantity_beyond_the_api_servers_range_names_the_node_and_field(indent: int | None) -> None:
    node = node_json(allocatable={"cpu": "1e400", "memory": "1Gi", "pods": "110"})
    content = json.dumps({"kind": "List", "items": [node]}, indent=indent).encode()
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(content))
    expected = "Node n1: status.allocatable.cpu: '1e400' is larger than the API server stores"
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


def deep_list(depth: int) -> bytes:
    return b'{"kind": "List", "items": [' + b'{"a": ' * depth + b"1" + b"}" * depth + b"]}"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(deep_list(100_000), id="deep-compact"),
        pytest.param(
            b'{\n    "items": [\n        {"kind": "Pod", "x": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"\n        }\n    ]\n}",
            id="deep-item-in-kubectl-layout",
        ),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep-array"),
    ],
)
def test_deeply_nested_json_is_refused_at_once(content: bytes) -> None:
    started = time.monotonic()
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(content))
    # A generous bound: the reader used to spend minutes on this input, it now stops at the depth limit.
    assert time.monotonic() - started < 5
    assert any(word in " ".join(caught.value.problems) for word in ("nested too deeply", "expected a List"))


def test_nesting_a_little_deeper_than_kubernetes_objects_still_reads() -> None:
    pod = pod_json({"containers": [container("1")]})
    pod["metadata"]["annotations"] = {"deep": "x"}
    pod["spec"]["extra"] = json.loads('{"a": ' * 200 + "1" + "}" * 200)  # an unknown field, skipped
    result = snapshot.read_stream(io.BytesIO(json.dumps({"kind": "List", "items": [pod]}, indent=2).encode()))
    assert [p.name for p in result.pods] == ["p"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"", "the file is empty", id="empty"),
        pytest.param(b"   \n\t", "the file is empty", id="blank"),
        pytest.param(bytes(range(256)) * 4, "not valid JSON: it starts with", id="binary"),
        pytest.param(b"apiVersion: v1\nkind: List\nitems: []\n", "it starts with 'apiVersion: v1", id="yaml"),
        pytest.param(b"[" * 10 + b"]" * 10, "found a bare array", id="bare-array"),
        pytest.param(b'{"kind": "List", "items": {"a": 1}}', "expected a List", id="items-not-an-array"),
    ],
)
def test_a_file_that_is_not_kubectl_output_at_all_is_refused_clearly(content: bytes, message: str) -> None:
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(content), name="cluster.json")
    text = " ".join(caught.value.problems) or caught.value.message
    assert message in text
    assert "kubectl get nodes,pods,poddisruptionbudgets -A -o json" in text or "kubectl get ... -o json" in text


def test_a_large_file_not_laid_out_as_kubectl_prints_it_is_refused_with_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(snapshot, "MAX_DOCUMENT_BYTES", 1 << 10)
    content = json.dumps(example_document()).encode()  # compact: cannot be read item by item
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(content), name="cluster.json")
    assert "not laid out as kubectl prints it" in caught.value.message
    assert len(snapshot.read_stream(io.BytesIO(json.dumps(example_document(), indent=4).encode())).nodes) == 14


# -- the typed fast path and the long way read every object alike -------------------------------


def odd_but_valid_items() -> list[Any]:
    """Objects the typed Structs refuse or take apart differently; the long way decides for them."""
    pod = pod_json({"containers": [container("250m", "1Gi")]})
    variants: list[Any] = []
    for path, value in [
        (("spec", "volumes"), [{"name": "h", "hostPath": None}, {"name": "e", "emptyDir": None}]),
        (("spec", "volumes"), [{"name": "m", "emptyDir": {"medium": "Memory"}}, {"name": "c", "ephemeral": {}}]),
        (("spec", "volumes"), [{"name": "p", "persistentVolumeClaim": None}]),
        (("spec", "tolerations"), None),
        (("spec", "tolerations"), [{"operator": "Exists"}]),
        (("spec", "affinity"), {}),
        (("spec", "affinity"), None),
        (("spec", "topologySpreadConstraints"), None),
        (("spec", "overhead"), {"cpu": "10m"}),
        (("spec", "overhead"), None),
        (("spec", "initContainers"), [container("1", restartPolicy="Always"), container("2")]),
        (("spec", "priority"), True),
        (("spec", "nodeName"), None),
        (("metadata", "namespace"), ""),
        (("metadata", "annotations"), None),
        (("metadata", "labels"), {}),
        (("metadata", "ownerReferences"), [{"kind": "ReplicaSet", "name": "r", "controller": "yes"}, 5]),
        (("status", "conditions"), [{"type": "PodScheduled", "status": "False", "reason": None}, "x"]),
        (("status", "conditions"), "not a list"),
        (("status", "conditions"), {"type": "PodScheduled"}),
        (("status", "conditions"), [1, {"type": 2}]),
        (("status",), None),
        (("spec",), None),
    ]:
        variant = json.loads(json.dumps(pod))
        target = variant
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        variants.append(variant)
    variants.append({**pod, "spec": {**pod["spec"], "containers": [{"name": "c", "resources": {"requests": None}}]}})
    variants.append({**pod, "spec": {**pod["spec"], "containers": [{"name": "c", "resources": {"requests": []}}]}})
    variants.append({**pod, "spec": {**pod["spec"], "containers": [{"name": "c", "ports": [{"hostPort": "80"}]}]}})
    variants.append(node_json(conditions=[{"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]))
    variants.append({**node_json(), "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True}})
    variants.append({**node_json(), "status": {**node_json()["status"], "conditions": "not a list"}})
    unbound = {**pod, "spec": {**pod["spec"], "nodeName": None}}
    waiting = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    variants.append({**unbound, "status": {"phase": "Pending", "conditions": [waiting]}})
    variants.append({**unbound, "status": {"phase": "Pending", "conditions": "not a list"}})
    return variants


@pytest.mark.parametrize(
    "item",
    [pytest.param(item, id=f"example-{index}") for index, item in enumerate(example_document()["items"])]
    + [pytest.param(item, id=f"odd-{index}") for index, item in enumerate(odd_but_valid_items())],
)
def test_the_typed_path_reads_every_object_as_the_long_way_does(item: dict[str, Any]) -> None:
    typed = snapshot.SnapshotBuilder()
    typed.add_encoded_item(orjson.dumps(item), 0)
    long_way = snapshot.SnapshotBuilder()
    long_way.add_mixed([item])
    assert (typed.nodes, typed.pods, typed.pdbs, typed.problems) == (
        long_way.nodes,
        long_way.pods,
        long_way.pdbs,
        long_way.problems,
    )


def test_pods_with_the_same_labels_share_one_map_and_pdbs_still_match_by_namespace() -> None:
    """The reader gives every pod whose labels are the same text one map (the pods of a ReplicaSet:
    one map, not thousands), and the PDB index, which matches each shared map once, still keeps a
    namespace's PodDisruptionBudget to that namespace's pods."""
    web = {"app": "web", "pod-template-hash": "5d8f"}
    pods = [
        pod_json({}, name="web-1", namespace="shop", labels=web),
        pod_json({}, name="web-2", namespace="shop", labels=web),
        pod_json({}, name="web-1", namespace="blog", labels=web),
        pod_json({}, name="db-0", namespace="shop", labels={"app": "db", "pod-index": "0"}),
    ]
    budget = {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1},
    }
    other = {
        **budget,
        "metadata": {"name": "api", "namespace": "blog"},
        "spec": {"selector": {"matchLabels": {"app": "api"}}},
    }
    text = json.dumps({"kind": "List", "items": [node_json(), *pods, budget, other]}, indent=4).encode()
    read = snapshot.read_stream(io.BytesIO(text))
    shop_1, shop_2, blog_1, db = read.pods
    assert shop_1.labels == web and shop_1.labels is shop_2.labels is blog_1.labels
    assert db.labels == {"app": "db", "pod-index": "0"}
    index = PdbIndex(read.pdbs)
    assert [pdb.name for pdb in index.covering(shop_1)] == ["web"]
    assert [pdb.name for pdb in index.covering(shop_2)] == ["web"]
    assert index.covering(blog_1) == ()  # the same map, another namespace
    assert index.covering(db) == ()


SPOT_PREFERENCE = {
    "weight": 80,
    "preference": {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "In", "values": ["true"]}]},
}


def test_preferred_node_affinity_is_read_with_its_weights_both_ways() -> None:
    """GKE's Spot guidance: prefer Spot nodes, fall back to on-demand ones. The terms' weights and expressions
    reach the record, the long way and the typed one, beside a required term that stays required."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                SPOT_PREFERENCE,
                {
                    "weight": 20,
                    "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                },
            ],
        }
    }
    item = pod_json({"affinity": affinity})
    typed = snapshot.SnapshotBuilder()
    typed.add_encoded_item(orjson.dumps(item), 0)
    long_way = snapshot.SnapshotBuilder()
    long_way.add_mixed([item])
    for pod in (typed.pods[0], long_way.pods[0]):
        assert [term.weight for term in pod.preferred_node_affinity] == [80, 20]
        spot, named = (term.term for term in pod.preferred_node_affinity)
        assert [(r.key, r.operator, r.values) for r in spot.match_expressions] == [
            ("cloud.google.com/gke-spot", "In", ("true",))
        ]
        assert [(r.key, r.values) for r in named.match_fields] == [("metadata.name", ("n1",))]
        assert pod.node_affinity is not None and len(pod.node_affinity) == 1
    assert snapshot.parse_pod(pod_json({})).preferred_node_affinity == ()


def test_affinity_records_are_shared_across_namespaces_only_without_pod_affinity_terms() -> None:
    """Pod (anti)affinity terms without `namespaces` mean the pod's own namespace; node affinity does
    not depend on it, so DaemonSet pods of many namespaces share one record, and the others do not."""
    node_only = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
            }
        }
    }
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    items = [node_json()]
    for namespace in ("logging", "monitoring"):
        items.append(pod_json({"affinity": node_only}, name=f"agent-{namespace}", namespace=namespace))
        items.append(pod_json({"affinity": anti}, name=f"db-{namespace}", namespace=namespace))
    text = json.dumps({"kind": "List", "items": items}, indent=4)
    # The same anti-affinity with its key escaped (valid JSON, the same object) in a third and fourth pod.
    escaped = text.replace('"db-logging"', '"db-escaped"').replace('"db-monitoring"', '"db-escaped-2"')
    escaped = escaped.replace('"podAntiAffinity"', '"\\u0070odAntiAffinity"')
    read = snapshot.read_stream(io.BytesIO(text.encode()))
    agent_logging, db_logging, agent_monitoring, db_monitoring = read.pods
    assert agent_logging.node_affinity is agent_monitoring.node_affinity
    assert db_logging.pod_anti_affinity[0].namespaces == ("logging",)
    assert db_monitoring.pod_anti_affinity[0].namespaces == ("monitoring",)
    read = snapshot.read_stream(io.BytesIO(escaped.encode()))
    assert [pod.pod_anti_affinity[0].namespaces for pod in read.pods if pod.pod_anti_affinity] == [
        ("logging",),
        ("monitoring",),
    ]


# What pods one after another in a List may share or not: the reader reuses the record of the last
# pod's text when the next pod repeats it (`snapshot._Recent`), so any mix of them must read as each
# pod alone reads the long way.
_NEIGHBOUR_NAMESPACES = ("shop", "blog")
_NEIGHBOUR_LABELS: tuple[dict[str, str] | None, ...] = (None, {}, {"app": "web"}, {"app": "db"})
_NEIGHBOUR_CONTAINERS = (
    [container("100m", "64Mi")],
    [container("100m", "64Mi"), container("50m")],
    [container("200m", "64Mi")],
    [{"name": "c", "image": "i"}],
    [container("100m", "64Mi", ports=[{"containerPort": 80, "hostPort": 8080}])],
)
_NEIGHBOUR_TOLERATIONS: tuple[list[dict[str, Any]] | None, ...] = (
    None,
    [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
)
_NEIGHBOUR_AFFINITIES: tuple[dict[str, Any] | None, ...] = (
    None,
    {  # a term without namespaces: the pod's own namespace
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    },
    {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
            }
        }
    },
    {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [SPOT_PREFERENCE]}},
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_NEIGHBOUR_NAMESPACES),
            st.sampled_from(_NEIGHBOUR_LABELS),
            st.sampled_from(_NEIGHBOUR_CONTAINERS),
            st.sampled_from(_NEIGHBOUR_TOLERATIONS),
            st.sampled_from(_NEIGHBOUR_AFFINITIES),
        ),
        min_size=2,
        max_size=10,
    )
)
def test_pods_one_after_another_read_as_each_reads_alone(
    pods: list[tuple[str, Any, Any, Any, Any]],
) -> None:
    items: list[dict[str, Any]] = [node_json()]
    for index, (namespace, labels, containers, tolerations, affinity) in enumerate(pods):
        spec: dict[str, Any] = {"containers": containers}
        if tolerations is not None:
            spec["tolerations"] = tolerations
        if affinity is not None:
            spec["affinity"] = affinity
        meta: dict[str, Any] = {"name": f"p{index}", "namespace": namespace}
        if labels is not None:
            meta["labels"] = labels
        items.append(pod_json(spec, **meta))
    read = snapshot.read_stream(io.BytesIO(json.dumps({"kind": "List", "items": items}, indent=4).encode()))
    one_by_one = []
    for item in items[1:]:
        alone = snapshot.SnapshotBuilder()
        alone.add_mixed([item])
        one_by_one.extend(alone.pods)
    assert list(read.pods) == one_by_one


def test_only_a_pod_waiting_for_a_node_has_its_conditions_read() -> None:
    """The planner reads a pod's conditions only to see it wait for room (PodScheduled=False,
    Unschedulable); a bound pod's are not read, so they cannot make its snapshot unreadable, while a
    waiting pod's are read, and named when they are not a list."""
    bound = pod_json({}, name="bound")
    bound["status"]["conditions"] = "not a list"
    read = snapshot.read_stream(io.BytesIO(json.dumps({"kind": "List", "items": [bound]}, indent=4).encode()))
    assert [pod.name for pod in read.pods] == ["bound"]
    waiting = pod_json({"nodeName": None}, name="waiting")
    waiting["status"] = {"phase": "Pending", "conditions": "not a list"}
    with pytest.raises(SnapshotError) as caught:
        snapshot.read_stream(io.BytesIO(json.dumps({"kind": "List", "items": [waiting]}, indent=4).encode()))
    assert caught.value.problems == ["Pod ns/waiting: status.conditions: expected a list, got str 'not a list'"]
