"""Each behaviour docs/fake-apiserver.md says the fake copies from kube-apiserver, asked of both.

Every probe sends the same requests, byte for byte, to the real kube-apiserver (the e2e control
plane) and to tests/fakeapi's FakeApiServer holding the same objects (read back from the real
server, so even the status the controllers wrote is the same), and reduces each answer to what
the claim is about: status code, reason, message, the fields that matter. The two observations
must be equal. A difference is a bug in the fake (or in its documentation); each one found is
listed in docs/fake-apiserver.md, "Checked against kube-apiserver".
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.cluster import KubeCluster, wait_for
from tests.fakeapi import FakeApiServer, builders

pytestmark = pytest.mark.e2e

NS = "claims"
NODE = "claims-node"
TOKEN = "claims-token"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
PODS = f"/api/v1/namespaces/{NS}/pods"
PDBS = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
EVENTS = f"/api/v1/namespaces/{NS}/events"
NEW_EVENTS = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
HPAS = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"
REPLICA_SETS = f"/apis/apps/v1/namespaces/{NS}/replicasets"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


class Target:
    """One API server spoken to over plain HTTP(S), with no client library in between."""

    def __init__(self, name: str, url: str, token: str, context: Any = None) -> None:
        self.name = name
        self.url = url
        self.token = token
        self.context = context

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str | None = None,
        token: str | None = "default",
    ) -> Answer:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {self.token if token == 'default' else token}"
        if data is not None:
            headers["Content-Type"] = content_type or "application/json"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as answer:
                raw, status, found = answer.read(), answer.status, dict(answer.headers)
        except urllib.error.HTTPError as error:
            raw, status, found = error.read(), error.code, dict(error.headers)
        try:
            decoded: Any = json.loads(raw)
        except ValueError:
            decoded = raw.decode(errors="replace")
        return Answer(status, decoded, found)


@dataclass
class Pair:
    cluster: KubeCluster
    fake: FakeApiServer
    real_target: Target
    fake_target: Target

    @property
    def targets(self) -> tuple[Target, Target]:
        return self.real_target, self.fake_target

    def mirror(self, path: str) -> dict[str, Any]:
        """Copy one object from the real server into the fake, as it is there (status included)."""
        found: dict[str, Any] = self.cluster.get(path)
        self.fake.add(json.loads(json.dumps(found)))
        return found

    def create_both(self, path: str, body: dict[str, Any]) -> None:
        for target in self.targets:
            answer = target.call("POST", path, body)
            assert answer.status in (200, 201), f"{target.name}: {answer.status} {answer.body}"


Probe = Callable[[Target, Pair], Any]


def status_of(answer: Answer) -> dict[str, Any]:
    """A Status answer reduced to what a client can act on (no metadata)."""
    body = answer.body if isinstance(answer.body, dict) else {"text": answer.body}
    kept = {k: body.get(k) for k in ("kind", "apiVersion", "status", "message", "reason", "details", "code")}
    details = kept.get("details")
    if isinstance(details, dict):
        kept["details"] = {k: v for k, v in details.items() if k != "uid"}
    # Each server has its own uids and resourceVersions: only that they are named is compared.
    text = json.dumps(kept)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uid>", text)
    text = re.sub(r"ResourceVersion in record \(\d+\)", "ResourceVersion in record (<rv>)", text)
    found: dict[str, Any] = {"http": answer.status, **json.loads(text)}
    return found


def pod(name: str, *, labels: dict[str, str] | None = None, node: str | None = NODE, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {"app": "probe"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}
            ],
            **spec,
        },
    }
    if node is not None:
        body["spec"]["nodeName"] = node
    return body


def lease(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"holderIdentity": "probe", "leaseDurationSeconds": 30, **spec},
    }


def pdb(name: str, app: str, min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }


def hpa_for(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1,
            "maxReplicas": 5,
        },
    }


def eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}


# -- the shared world -------------------------------------------------------------------------


def running_pod(pair: Pair, name: str, app: str) -> None:
    """A pod kwok runs on the real side, copied to the fake once it is Running and Ready."""
    pair.cluster.create(PODS, pod(name, labels={"app": app}))
    wait_for(
        f"pod {name} runs",
        lambda: (pair.cluster.get(f"{PODS}/{name}").get("status") or {}).get("phase") == "Running",
    )
    pair.mirror(f"{PODS}/{name}")


def settled_pdb(pair: Pair, body: dict[str, Any]) -> None:
    """A PDB whose status the disruption controller has written, copied to the fake."""
    name = body["metadata"]["name"]
    pair.cluster.create(PDBS, body)
    wait_for(
        f"PDB {name} has a status",
        lambda: (pair.cluster.get(f"{PDBS}/{name}").get("status") or {}).get("observedGeneration") == 1,
    )
    pair.mirror(f"{PDBS}/{name}")


@pytest.fixture(scope="module")
def pair(kube_cluster: KubeCluster) -> Iterator[Pair]:
    import ssl

    cluster = kube_cluster
    cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    wait_for("the default ServiceAccount", lambda: cluster.find(f"/api/v1/namespaces/{NS}/serviceaccounts/default"))
    with FakeApiServer(token=TOKEN) as fake:
        real = Target(
            "kube-apiserver",
            cluster.url,
            cluster.plane.admin_token,
            ssl.create_default_context(cafile=str(cluster.plane.ca_path)),
        )
        found = Pair(cluster, fake, real, Target("fake", fake.url, TOKEN))
        cluster.add_node(NODE, pool="claims-pool")
        found.mirror(f"/api/v1/nodes/{NODE}")
        for name, app in (
            ("web-1", "web"),
            ("web-2", "web"),
            ("solo-1", "solo"),
            ("double-1", "double"),
            ("grace-1", "grace"),
            ("grace-2", "grace"),
        ):
            running_pod(found, name, app)
        settled_pdb(found, pdb("web", "web", 1))  # one of two may go
        settled_pdb(found, pdb("solo", "solo", 1))  # at zero
        settled_pdb(found, pdb("double-a", "double", 0))
        settled_pdb(found, pdb("double-b", "double", 0))
        cluster.create(HPAS, hpa_for("web"))
        found.mirror(f"{HPAS}/web")
        yield found
        cluster.delete(f"/api/v1/namespaces/{NS}")
        cluster.delete_node(NODE)


# -- the probes ---------------------------------------------------------------------------------


def probe_not_found(target: Target, pair: Pair) -> Any:
    return [
        status_of(target.call("GET", f"{PODS}/missing")),
        status_of(target.call("GET", f"{LEASES}/missing")),
        status_of(target.call("GET", "/api/v1/nodes/missing")),
    ]


def probe_unauthorized(target: Target, pair: Pair) -> Any:
    anonymous = [
        ("GET", "/api/v1/nodes"),
        ("GET", f"{PODS}?watch=1"),
        ("GET", f"{LEASES}/some-lease"),
        ("POST", f"{PODS}/web-1/eviction"),
        ("PATCH", f"/api/v1/nodes/{NODE}"),
        ("DELETE", PODS),
        ("GET", "/apis"),
        ("GET", "/api/v1"),
    ]
    found: list[Any] = []
    for method, path in anonymous:
        body: dict[str, Any] | None = {} if method in ("POST", "PATCH") else None
        content_type = MERGE if method == "PATCH" else None
        found.append(status_of(target.call(method, path, body, content_type=content_type, token=None)))
    version = target.call("GET", "/version", token=None)
    found.append((version.status, "gitVersion" in version.body))
    found.append(status_of(target.call("GET", "/api/v1/nodes", token="wrong")))
    found.append(status_of(target.call("GET", "/version", token="wrong")))
    return found


def probe_create_conflicts_and_names(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    first = target.call("POST", LEASES, lease(f"dup-{tag}"))
    again = target.call("POST", LEASES, lease(f"dup-{tag}"))
    nameless = dict(lease("x"), metadata={"namespace": NS})
    generated = target.call("POST", LEASES, dict(lease("x"), metadata={"generateName": "gen-", "namespace": NS}))
    elsewhere = target.call("POST", LEASES, dict(lease("y"), metadata={"name": "y", "namespace": "other"}))
    name = (generated.body.get("metadata") or {}).get("name", "") if isinstance(generated.body, dict) else ""
    return [
        first.status,
        _unnamed(status_of(again), tag),
        status_of(target.call("POST", LEASES, nameless)),
        (generated.status, bool(re.fullmatch(r"gen-[a-z0-9]{5}", name))),
        status_of(elsewhere),
    ]


def _unnamed(observation: Any, tag: str) -> Any:
    """The same observation with this target's own object names made equal."""
    return json.loads(json.dumps(observation).replace(f"-{tag}", "-<target>"))


def probe_resource_version(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    path = f"{LEASES}/rv-{tag}"
    target.call("POST", LEASES, lease(f"rv-{tag}"))
    before = target.call("GET", path).body["metadata"]["resourceVersion"]
    same = target.call("PATCH", path, {"spec": {"holderIdentity": "probe"}}, content_type=MERGE)
    changed = target.call("PATCH", path, {"spec": {"holderIdentity": "other"}}, content_type=MERGE)
    listed = target.call("GET", f"{LEASES}")
    return {
        "no-op patch keeps it": same.body["metadata"]["resourceVersion"] == before,
        "a change bumps it": changed.body["metadata"]["resourceVersion"] != before,
        "the list has one": bool(listed.body["metadata"].get("resourceVersion")),
    }


def probe_put(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    target.call("POST", LEASES, lease(f"put-{tag}"))
    current = target.call("GET", f"{LEASES}/put-{tag}").body
    stale = json.loads(json.dumps(current))
    stale["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) - 1)
    unconditional = json.loads(json.dumps(current))
    del unconditional["metadata"]["resourceVersion"]
    node = target.call("GET", f"/api/v1/nodes/{NODE}").body
    del node["metadata"]["resourceVersion"]
    other_uid = json.loads(json.dumps(node))
    other_uid["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    missing_node = json.loads(json.dumps(node))
    missing_node["metadata"]["name"] = "missing"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"put-{tag}", "namespace": NS},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": NS},
        "reason": "Probe",
        "message": "probe",
        "type": "Normal",
    }
    return [
        _unnamed(status_of(target.call("PUT", f"{LEASES}/put-{tag}", stale)), tag),
        _unnamed(status_of(target.call("PUT", f"{LEASES}/put-{tag}", unconditional)), tag),
        target.call("PUT", f"/api/v1/nodes/{NODE}", node).status,
        status_of(target.call("PUT", f"/api/v1/nodes/{NODE}", other_uid)),
        status_of(target.call("PUT", "/api/v1/nodes/missing", missing_node)),
        target.call("PUT", f"{LEASES}/created-{tag}", lease(f"created-{tag}")).status,
        target.call("PUT", f"{EVENTS}/put-{tag}", event).status,
    ]


def probe_patches(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    path = f"{LEASES}/patch-{tag}"
    annotated = lease(f"patch-{tag}")
    annotated["metadata"]["annotations"] = {"a": "1", "b": "2"}
    target.call("POST", LEASES, annotated)
    removed = target.call("PATCH", path, {"metadata": {"annotations": {"a": None}}}, content_type=MERGE)
    label = {"metadata": {"labels": {"probe": tag}}}
    strategic = target.call("PATCH", f"/api/v1/nodes/{NODE}", label, content_type=STRATEGIC)
    rv = target.call("GET", path).body["metadata"]["resourceVersion"]
    old = {"metadata": {"resourceVersion": str(int(rv) - 1), "annotations": {"c": "3"}}}
    stale = target.call("PATCH", path, old, content_type=MERGE)
    test = [{"op": "test", "path": "/spec/holderIdentity", "value": "nobody"}]
    failed_test = target.call("PATCH", path, test, content_type=JSON_PATCH)
    missing = [{"op": "remove", "path": "/metadata/labels/none"}]
    missing_path = target.call("PATCH", path, missing, content_type=JSON_PATCH)
    replace = [{"op": "replace", "path": "/spec/holderIdentity", "value": "json"}]
    replaced = target.call("PATCH", path, replace, content_type=JSON_PATCH)
    plain = target.call("PATCH", path, b"holderIdentity=x", content_type="text/plain")
    return [
        (removed.status, removed.body["metadata"].get("annotations")),
        (strategic.status, strategic.body["metadata"]["labels"].get("probe") == tag),
        _unnamed(status_of(stale), tag),
        "c" in (target.call("GET", path).body["metadata"].get("annotations") or {}),
        status_of(failed_test),
        status_of(missing_path),
        (replaced.status, replaced.body["spec"].get("holderIdentity")),
        status_of(plain),
    ]


def probe_status_is_kept_on_main_resource_writes(target: Target, pair: Pair) -> Any:
    node_status = {"status": {"allocatable": {"cpu": "999"}}}
    node = target.call("PATCH", f"/api/v1/nodes/{NODE}", node_status, content_type=MERGE)
    running = target.call("PATCH", f"{PODS}/web-2", {"status": {"phase": "Failed"}}, content_type=MERGE)
    budget = target.call("PATCH", f"{PDBS}/web", {"status": {"disruptionsAllowed": 7}}, content_type=MERGE)
    zero = "00000000-0000-0000-0000-000000000000"
    uid = target.call("PATCH", f"{PDBS}/web", {"metadata": {"uid": zero}}, content_type=MERGE)
    replace_uid = [{"op": "replace", "path": "/metadata/uid", "value": zero}]
    json_uid = target.call("PATCH", f"{PDBS}/web", replace_uid, content_type=JSON_PATCH)
    old = {"metadata": {"creationTimestamp": "2001-01-01T00:00:00Z"}}
    created = target.call("PATCH", f"{PODS}/web-2", old, content_type=MERGE)
    return [
        (node.status, node.body["status"]["allocatable"]["cpu"]),
        (running.status, running.body["status"]["phase"]),
        (budget.status, budget.body["status"]["disruptionsAllowed"]),
        status_of(uid),
        status_of(json_uid),
        (created.status, created.body["metadata"]["creationTimestamp"] == "2001-01-01T00:00:00Z"),
    ]


def probe_deletes(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    target.call("POST", LEASES, lease(f"del-{tag}"))
    target.call("POST", LEASES, lease(f"pre-{tag}"))
    options = {"kind": "DeleteOptions", "apiVersion": "v1"}
    wrong_uid = {**options, "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}
    old_version = {**options, "preconditions": {"resourceVersion": "1"}}
    deleted_lease = target.call("DELETE", f"{LEASES}/del-{tag}")
    refused = target.call("DELETE", f"{LEASES}/pre-{tag}", wrong_uid)
    stale = target.call("DELETE", f"{LEASES}/pre-{tag}", old_version)
    target.call("POST", PODS, pod(f"gone-{tag}", node=None, nodeSelector={"no-such": "node"}))
    deleted_pod = target.call("DELETE", f"{PODS}/gone-{tag}")
    body = deleted_lease.body
    return [
        (deleted_lease.status, body.get("kind"), body.get("status"), sorted((body.get("details") or {}).keys())),
        _unnamed(status_of(refused), tag),
        _unnamed(status_of(stale), tag),
        (deleted_pod.status, deleted_pod.body.get("kind")),
        target.call("GET", f"{PODS}/gone-{tag}").status,
    ]


def probe_pagination(target: Target, pair: Pair) -> Any:
    first = target.call("GET", f"{PODS}?limit=2")
    selected = target.call("GET", f"{PODS}?limit=2&labelSelector=app%3Dweb")
    filtered = target.call("GET", f"{PODS}?limit=1&fieldSelector=metadata.name%21%3Dnone")
    single = target.call("GET", f"{PODS}/web-1")
    token = first.body["metadata"]["continue"]
    second = target.call("GET", f"{PODS}?limit=2&continue={token}")
    return {
        "kind": first.body["kind"],
        "page": [i["metadata"]["name"] for i in first.body["items"]],
        "remaining": first.body["metadata"].get("remainingItemCount"),
        "items carry kind": any("kind" in i or "apiVersion" in i for i in first.body["items"]),
        "remaining with a label selector": "remainingItemCount" in selected.body["metadata"],
        "remaining with a field selector": "remainingItemCount" in filtered.body["metadata"],
        "a single GET carries kind": (single.body.get("kind"), single.body.get("apiVersion")),
        "second page": [i["metadata"]["name"] for i in second.body["items"]],
        "same resourceVersion": second.body["metadata"]["resourceVersion"] == first.body["metadata"]["resourceVersion"],
    }


def probe_consistent_pages(target: Target, pair: Pair) -> Any:
    first = target.call("GET", f"{PODS}?limit=1&labelSelector=app%3Dweb")
    tag = target.name[:4]
    late = pod(f"zz-late-{tag}", labels={"app": "web"}, node=None, nodeSelector={"no-such": "node"})
    target.call("POST", PODS, late)
    target.call("PATCH", f"{PODS}/web-2", {"metadata": {"labels": {"changed": "yes"}}}, content_type=MERGE)
    rest = target.call("GET", f"{PODS}?limit=10&labelSelector=app%3Dweb&continue={first.body['metadata']['continue']}")
    target.call("DELETE", f"{PODS}/zz-late-{tag}")
    return {
        "later pages": [i["metadata"]["name"] for i in rest.body["items"]],
        "the first page's snapshot": [i["metadata"].get("labels", {}).get("changed") for i in rest.body["items"]],
    }


def probe_label_selectors(target: Target, pair: Pair) -> Any:
    found = {}
    for selector in (
        "app=web",
        "app==web",
        "app!=web",
        "app in (web,solo)",
        "app notin (web)",
        "app",
        "!app",
        "app,app!=solo",
    ):
        answer = target.call("GET", f"{PODS}?labelSelector={urllib.parse.quote(selector)}")
        found[selector] = (
            sorted(i["metadata"]["name"] for i in answer.body["items"]) if answer.status == 200 else status_of(answer)
        )
    return found


POD_FIELDS = (
    "metadata.name=web-1",
    "metadata.namespace=claims",
    f"spec.nodeName={NODE}",
    "spec.nodeName=",
    "spec.restartPolicy=Always",
    "spec.schedulerName=default-scheduler",
    "spec.serviceAccountName=default",
    "spec.hostNetwork=false",
    "status.phase=Running",
    "status.phase!=Succeeded,status.phase!=Failed",
    "status.podIP!=",
    "status.nominatedNodeName=",
    "spec.nodeName==" + NODE,
    "metadata.labels=web",
    "spec.containers=app",
)


def probe_field_selectors(target: Target, pair: Pair) -> Any:
    found: dict[str, Any] = {}
    for selector in POD_FIELDS:
        answer = target.call("GET", f"{PODS}?fieldSelector={urllib.parse.quote(selector)}")
        found[f"pods {selector}"] = (
            sorted(i["metadata"]["name"] for i in answer.body["items"]) if answer.status == 200 else status_of(answer)
        )
    for path, selector in (
        ("/api/v1/nodes", f"metadata.name={NODE}"),
        ("/api/v1/nodes", "spec.unschedulable=false"),
        ("/api/v1/nodes", "status.phase=Running"),
        (EVENTS, "involvedObject.kind=Pod,reason=Probe,type=Normal,source=x,reportingComponent=x"),
        (NEW_EVENTS, "regarding.kind=Pod,reportingController=x"),
        (PDBS, "metadata.name=web"),
        (PDBS, "spec.minAvailable=1"),
        (REPLICA_SETS, "status.replicas=0"),
        (LEASES, "spec.holderIdentity=probe"),
    ):
        answer = target.call("GET", f"{path}?fieldSelector={urllib.parse.quote(selector)}")
        found[f"{path} {selector}"] = answer.status if answer.status == 200 else status_of(answer)
    return found


def probe_evictions(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    target.call(
        "POST", PODS, pod(f"pending-{tag}", labels={"app": "solo"}, node=None, nodeSelector={"no-such": "node"})
    )
    mismatch = eviction("web-1")
    mismatch["metadata"]["name"] = "web-2"
    answers = [
        target.call("POST", f"{PODS}/missing/eviction", eviction("missing")),
        target.call("POST", f"{PODS}/web-1/eviction", mismatch),
        target.call("POST", f"{PODS}/solo-1/eviction", eviction("solo-1")),
        target.call("POST", f"{PODS}/double-1/eviction", eviction("double-1")),
        target.call("POST", f"{PODS}/pending-{tag}/eviction", eviction(f"pending-{tag}")),
        target.call("POST", f"{PODS}/web-1/eviction", eviction("web-1")),
    ]
    return [_unnamed(status_of(answer), tag) for answer in answers] + [
        target.call("GET", f"{PODS}/pending-{tag}").status,
        target.call("GET", f"{PODS}/solo-1").status,
        target.call("GET", f"{PODS}/double-1").status,
    ]


def probe_lease_micro_time(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    stamps = (
        "2026-11-21T12:00:00.000000Z",
        "2026-11-21T12:00:00.000000+01:00",
        "2026-11-21T12:00:00+00:00",
        "2026-11-21T12:00:00.123Z",
        "2026-11-21T12:00:00.1234567Z",
        "2026-11-21t12:00:00.000000Z",
        "2026-11-21 12:00:00.000000Z",
        "2026-02-30T12:00:00.000000Z",
        "2024-02-29T12:00:00.000000Z",
        "2026-13-01T12:00:00.000000Z",
        "2026-11-21T24:00:00.000000Z",
        "2026-11-21T12:00:00.000000Zjunk",
        "2026-11-21T12:00:00.000000+25:00",
        "",
        "26-11-21T12:00:00.000000Z",
    )
    found = []
    for index, stamp in enumerate(stamps):
        answer = target.call("POST", LEASES, lease(f"micro-{index}-{tag}", renewTime=stamp))
        found.append(_unnamed(status_of(answer), tag) if answer.status >= 400 else answer.status)
    return found


def probe_event_validation(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    involved = {"kind": "Node", "name": NODE, "apiVersion": "v1"}
    core = {"apiVersion": "v1", "kind": "Event", "involvedObject": involved, "reason": "Probe", "message": "m"}
    wrong_namespace = {**core, "metadata": {"name": f"ev1-{tag}", "namespace": NS}, "type": "Normal"}
    at = "2026-11-21T12:00:00.000000Z"
    series = {**core, "metadata": {"name": f"ev2-{tag}", "namespace": "default"}, "type": "Normal", "eventTime": at}
    bad_component = {
        **series,
        "metadata": {"name": f"ev4-{tag}", "namespace": "default"},
        "reportingComponent": "node compactor!",
        "reportingInstance": "i",
        "action": "Drain",
    }
    regarding = {"kind": "Pod", "name": "web-1", "namespace": NS}
    new = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "regarding": regarding, "reason": "Probe", "note": "m"}
    new_odd = {**new, "metadata": {"name": f"ev3-{tag}", "namespace": NS}, "type": "Odd"}
    new_timed = {**new, "metadata": {"name": f"ev5-{tag}", "namespace": NS}, "type": "Normal", "eventTime": at}
    return [
        _unnamed(status_of(target.call("POST", EVENTS, wrong_namespace)), tag),
        _unnamed(status_of(target.call("POST", "/api/v1/namespaces/default/events", series)), tag),
        _unnamed(status_of(target.call("POST", "/api/v1/namespaces/default/events", bad_component)), tag),
        _unnamed(status_of(target.call("POST", NEW_EVENTS, new_odd)), tag),
        _unnamed(status_of(target.call("POST", NEW_EVENTS, new_timed)), tag),
    ]


def probe_workload_status_subresources(target: Target, pair: Pair) -> Any:
    hpa = target.call(
        "PATCH", f"{HPAS}/web", {"status": {"currentReplicas": 9}, "spec": {"minReplicas": 2}}, content_type=MERGE
    )
    unconditional = target.call("GET", f"{HPAS}/web").body
    del unconditional["metadata"]["resourceVersion"]
    return [
        (hpa.status, (hpa.body.get("status") or {}).get("currentReplicas"), hpa.body["spec"]["minReplicas"]),
        target.call("PUT", f"{HPAS}/web", unconditional).status,
    ]


def probe_cordon_taint(target: Target, pair: Pair) -> Any:
    target.call("PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"unschedulable": True}}, content_type=MERGE)

    def taints() -> list[str]:
        return [t["key"] for t in target.call("GET", f"/api/v1/nodes/{NODE}").body["spec"].get("taints") or []]

    # kube-controller-manager's node lifecycle controller adds it a moment later; the fake at once.
    cordoned = wait_for(
        "the cordon taint", lambda: "node.kubernetes.io/unschedulable" in taints() and taints(), timeout=15
    )
    target.call("PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"unschedulable": None}}, content_type=MERGE)
    uncordoned = wait_for(
        "the cordon taint goes", lambda: "node.kubernetes.io/unschedulable" not in taints(), timeout=15
    )
    return [cordoned, uncordoned]


def probe_graceful_termination(target: Target, pair: Pair) -> Any:
    deleted = target.call("DELETE", f"{PODS}/grace-1")
    evicted = target.call("POST", f"{PODS}/grace-2/eviction", eviction("grace-2"))
    metadata = deleted.body.get("metadata") or {}
    return [
        (deleted.status, deleted.body.get("kind"), "deletionTimestamp" in metadata),
        metadata.get("deletionGracePeriodSeconds"),
        status_of(evicted),
    ]


def probe_events_through_both_apis(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    at = "2026-11-21T12:00:00.000000Z"
    new = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"both-{tag}", "namespace": NS},
        "eventTime": at,
        "regarding": {"kind": "Pod", "name": "web-1", "namespace": NS},
        "reason": "Probe",
        "note": "through events.k8s.io",
        "type": "Warning",
        "action": "Probe",
        "reportingController": "node-compactor",
        "reportingInstance": "probe-1",
    }
    old = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"old-{tag}", "namespace": NS},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": NS},
        "reason": "Probe",
        "message": "through core/v1",
        "type": "Normal",
        "source": {"component": "node-compactor"},
        "firstTimestamp": "2026-11-21T12:00:00Z",
        "lastTimestamp": "2026-11-21T12:00:00Z",
        "count": 1,
    }
    created = [target.call("POST", NEW_EVENTS, new).status, target.call("POST", EVENTS, old).status]
    views = [
        {k: v for k, v in target.call("GET", path).body.items() if k != "metadata"}
        for path in (
            f"{EVENTS}/both-{tag}",
            f"{NEW_EVENTS}/old-{tag}",
            f"{EVENTS}/old-{tag}",
            f"{NEW_EVENTS}/both-{tag}",
        )
    ]
    return [created, *(_unnamed(view, tag) for view in views)]


def probe_deployment_generation(target: Target, pair: Pair) -> Any:
    tag = target.name[:4]
    labels = {"app": f"gen-{tag}"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"gen-{tag}", "namespace": NS},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    created = target.call("POST", DEPLOYMENTS, deployment).body["metadata"].get("generation")
    path = f"{DEPLOYMENTS}/gen-{tag}"
    scaled = target.call("PATCH", path, {"spec": {"replicas": 0, "paused": True}}, content_type=MERGE)
    labelled = target.call("PATCH", path, {"metadata": {"labels": {"x": "y"}}}, content_type=MERGE)
    return [created, scaled.body["metadata"].get("generation"), labelled.body["metadata"].get("generation")]


PROBES: dict[str, Probe] = {
    "errors are Status objects (not found)": probe_not_found,
    "authentication": probe_unauthorized,
    "writes: POST conflicts, generateName, namespace": probe_create_conflicts_and_names,
    "resourceVersion": probe_resource_version,
    "writes: PUT": probe_put,
    "writes: PATCH": probe_patches,
    "writes keep status; uid and creationTimestamp": probe_status_is_kept_on_main_resource_writes,
    "writes: DELETE": probe_deletes,
    "lists: pagination": probe_pagination,
    "lists: later pages serve the first page's snapshot": probe_consistent_pages,
    "lists: label selectors": probe_label_selectors,
    "lists: field selectors": probe_field_selectors,
    "eviction": probe_evictions,
    "leases: MicroTime": probe_lease_micro_time,
    "events: validation": probe_event_validation,
    "HPA status subresource": probe_workload_status_subresources,
    "cordon and the unschedulable taint": probe_cordon_taint,
    "graceful termination": probe_graceful_termination,
    "events: one store, both APIs": probe_events_through_both_apis,
    "deployments: generation": probe_deployment_generation,
}


@pytest.mark.parametrize("claim", list(PROBES))
def test_the_fake_answers_as_kube_apiserver_does(pair: Pair, claim: str) -> None:
    probe = PROBES[claim]
    real = probe(pair.real_target, pair)
    fake = probe(pair.fake_target, pair)
    # Both observations, for whoever reads a failure: <control plane's workdir>/claims/<claim>.json
    kept = pair.cluster.workdir / "claims"
    kept.mkdir(exist_ok=True)
    (kept / f"{re.sub(r'[^a-z0-9]+', '-', claim.lower())}.json").write_text(
        json.dumps({"kube-apiserver": real, "fake": fake}, indent=1)
    )
    assert fake == real, f"the fake differs from kube-apiserver ({claim}):\n" + "\n".join(differences(real, fake))


def differences(real: Any, fake: Any, where: str = "") -> list[str]:
    """Each place two observations differ, as `where: kube-apiserver ... / fake ...`."""
    if isinstance(real, dict) and isinstance(fake, dict):
        found = []
        for key in dict.fromkeys([*real, *fake]):
            found += differences(real.get(key, "<absent>"), fake.get(key, "<absent>"), f"{where}.{key}")
        return found
    if isinstance(real, list | tuple) and isinstance(fake, list | tuple) and len(real) == len(fake):
        return [
            line
            for index, pair in enumerate(zip(real, fake, strict=True))
            for line in differences(*pair, f"{where}[{index}]")
        ]
    if real == fake:
        return []
    return [f"{where or '.'}:\n  kube-apiserver: {json.dumps(real)}\n  fake:           {json.dumps(fake)}"]


def test_the_fakes_discovery_is_a_subset_of_kube_apiservers(pair: Pair) -> None:
    """Every resource the fake lists, kube-apiserver lists with the same kind and scope and at least its verbs."""
    problems = []
    for path in ("/api/v1", *(f"/apis/{gv}" for gv in _fake_group_versions(pair))):
        fake = pair.fake_target.call("GET", path).body
        real = pair.real_target.call("GET", path).body
        real_resources = {r["name"]: r for r in real.get("resources", [])} if isinstance(real, dict) else {}
        for resource in fake.get("resources", []):
            found = real_resources.get(resource["name"])
            if found is None:
                problems.append(f"{path} {resource['name']}: not served by kube-apiserver")
                continue
            for key in ("kind", "namespaced"):
                if resource.get(key) != found.get(key):
                    problems.append(f"{path} {resource['name']} {key}: fake {resource.get(key)}, real {found.get(key)}")
            missing = set(resource.get("verbs", [])) - set(found.get("verbs", []))
            if missing:
                problems.append(f"{path} {resource['name']}: verbs {sorted(missing)} not served by kube-apiserver")
    assert problems == []


def _fake_group_versions(pair: Pair) -> list[str]:
    """The fake's group versions but GKE's CRDs (cloud.google.com), which kube-apiserver serves only once
    their CRD is created: tests/e2e/test_compute_classes.py compares that one with the CRD installed."""
    groups = pair.fake_target.call("GET", "/apis").body["groups"]
    return [
        version["groupVersion"]
        for group in groups
        if group["name"] != "cloud.google.com"
        for version in group["versions"]
    ]


def test_a_streaming_list_ends_with_the_initial_events_bookmark_on_both(pair: Pair) -> None:
    query = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    found = {}
    for target in pair.targets:
        request = urllib.request.Request(
            f"{target.url}{PDBS}?{query}", headers={"Authorization": f"Bearer {target.token}"}
        )
        with urllib.request.urlopen(request, context=target.context, timeout=30) as answer:
            events = [json.loads(line) for line in answer.read().splitlines() if line.strip()]
        found[target.name] = [
            (e["type"], e["object"]["metadata"].get("name") or (e["object"]["metadata"].get("annotations") or {}))
            for e in events
        ]
    assert found["fake"] == found["kube-apiserver"]


def test_a_pod_no_node_can_hold_is_left_pending_with_the_schedulers_condition_on_both(pair: Pair) -> None:
    """The fake's scheduler words an unschedulable replacement as kube-scheduler does (less the preemption part)."""
    selector = {"no-such": "node"}
    pair.cluster.create(PODS, pod("unfit-real", node=None, nodeSelector=selector))

    def real_condition() -> dict[str, Any] | None:
        conditions = (pair.cluster.get(f"{PODS}/unfit-real").get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "PodScheduled"), None)

    real = wait_for("kube-scheduler gives up on the pod", real_condition)
    # The fake schedules only replacements: a ReplicaSet's pod, evicted, comes back with this selector.
    fake_pod = builders.pod("unfit-fake", namespace=NS, node=NODE, node_selector=selector, cpu="10m")
    pair.fake.add(fake_pod)
    pair.fake.recreate_evicted(0.0)
    try:
        pair.fake_target.call("POST", f"{PODS}/unfit-fake/eviction", eviction("unfit-fake"))
        pair.fake.wait_idle()
    finally:
        pair.fake.recreate_evicted(None)
    replacements = [
        p
        for p in pair.fake.objects("Pod", NS)
        if (p.get("spec") or {}).get("nodeSelector") == selector and p["metadata"]["name"] != "unfit-fake"
    ]
    assert len(replacements) == 1, [p["metadata"]["name"] for p in pair.fake.objects("Pod", NS)]
    [replacement] = replacements
    [fake] = [c for c in replacement["status"]["conditions"] if c["type"] == "PodScheduled"]

    def shape(condition: dict[str, Any]) -> tuple[Any, ...]:
        first = re.sub(r"\d+", "<n>", re.split(r"\.(?: |$)", condition["message"])[0])
        return condition["status"], condition["reason"], first

    assert shape(fake) == shape(real), f"kube-scheduler: {real['message']}\nfake: {fake['message']}"
