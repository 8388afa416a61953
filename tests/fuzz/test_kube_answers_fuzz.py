"""Fuzz: hostile answers of the Kubernetes API server to the cluster read of a run.

The fake API server (real HTTP) answers one list (nodes, pods or PDBs) with a page
that is broken: a mutated item (wrong types, missing `metadata`, wrong kinds, odd
quantities, unicode, huge lists, deep nesting), a page of another kind, a page
cut short, a continue token that never ends, or text that is no JSON. The run
either plans with what it read or fails with a CompactorError that names what it
was reading; never another exception, never a write but the run's own Lease
(dry runs: no write at all), never longer than the time bound.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from kubernetes import client

from compactor import service
from compactor.errors import CompactorError
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.fuzz import mutations, profiles
from tests.fuzz.mutations import Mutation

TOKEN = "fuzz-token"
# Pools left disabled: an accepted read plans and reports, and never marks or drains,
# so the only write a run may make is its Lease.
CONFIG = {"nodePools": {"default-pool": {"enabled": False}}}
LISTS = {
    "Node": ("list nodes", r"^/api/v1/nodes$", "NodeList", "v1"),
    "Pod": ("list pods", r"^/api/v1/pods$", "PodList", "v1"),
    "PodDisruptionBudget": (
        "list PodDisruptionBudgets",
        r"^/apis/policy/v1/poddisruptionbudgets$",
        "PodDisruptionBudgetList",
        "policy/v1",
    ),
}


@pytest.fixture(scope="module")
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        server.add(k8s.node("n1"))  # no mark: a run would remove a mark in a disabled pool
        server.add(k8s.node("n2", taints=[k8s.taint("dedicated", "batch")]))
        server.add(k8s.pod("web-1", node="n1", cpu="300m", labels={"app": "web"}))
        server.add(
            k8s.pod(
                "db-0",
                node="n2",
                owner_kind="StatefulSet",
                cpu="1",
                volumes=[k8s.persistent_volume_claim("data", "data-db-0"), k8s.empty_dir("tmp")],
                tolerations=[k8s.toleration("dedicated", "batch")],
            )
        )
        server.add(k8s.pdb("web", match_labels={"app": "web"}, disruptions_allowed=1))
        yield server


def real_page(api: FakeApiServer, kind: str) -> dict[str, Any]:
    """The list answer as kube-apiserver sends it: items without kind and apiVersion.

    Read once per module: hypothesis needs the same page in every example.
    """
    if kind not in _PAGES:
        _PAGES[kind] = _read_page(api, kind)
    page: dict[str, Any] = json.loads(json.dumps(_PAGES[kind]))
    return page


_PAGES: dict[str, dict[str, Any]] = {}


def _read_page(api: FakeApiServer, kind: str) -> dict[str, Any]:
    _, _, list_kind, api_version = LISTS[kind]
    items = []
    for item in api.objects(kind):
        item.pop("kind", None)
        item.pop("apiVersion", None)
        items.append(item)
    return {"kind": list_kind, "apiVersion": api_version, "metadata": {"resourceVersion": "42"}, "items": items}


def connector_for(api: FakeApiServer) -> service.Connector:
    def connect() -> service.ClusterConnection:
        api_client = client.ApiClient(api.client_configuration())
        return service.ClusterConnection(api_client, None, api_client.close)

    return connect


def run_against(api: FakeApiServer, *, dry_run: bool) -> tuple[service.RunResult | None, CompactorError | None]:
    env = {"COMPACTOR_CONFIG": json.dumps(CONFIG), "COMPACTOR_RUN_BUDGET_SECONDS": "30"}
    try:
        return service.run(env, connector=connector_for(api), force_dry_run=dry_run), None
    except CompactorError as error:
        return None, error


def assert_nothing_but_the_lease_was_written(api: FakeApiServer, *, dry_run: bool) -> None:
    writes = api.writes
    if dry_run:
        assert writes == [], f"a dry run wrote: {writes}"
    assert all(write.kind == "Lease" for write in writes), f"a run wrote more than its Lease: {writes}"


def assert_names_the_list(error: CompactorError, kind: str) -> None:
    what = LISTS[kind][0]
    text = "\n".join([error.message, *error.problems])
    assert error.problems and all(isinstance(p, str) and p.strip() for p in error.problems)
    assert "Traceback" not in text
    assert what in text or kind in text, f"the error does not say what was read: {text}"


@st.composite
def broken_answers(draw: st.DrawFn, api: FakeApiServer) -> tuple[str, str, Any]:
    """(kind, how it is broken, the answer's body: a dict sent as JSON, or bytes)."""
    kind = draw(st.sampled_from(sorted(LISTS)))
    page = real_page(api, kind)
    how = draw(st.sampled_from(["mutated", "mutated", "mutated", "cut-short", "other-kind", "not-json"]))
    if how == "mutated":
        places = mutations.paths(page)
        mutation = draw(mutations.mutations_at(places[draw(st.integers(0, len(places) - 1))]))
        return kind, f"mutated: {mutation.describe()}", _mutated_body(page, mutation)
    if how == "cut-short":
        text = json.dumps(page).encode()
        cut = draw(st.integers(0, len(text) - 1))
        return kind, f"cut short at byte {cut} of {len(text)}", text[:cut]
    if how == "other-kind":
        other = draw(st.sampled_from(sorted(set(LISTS) - {kind})))
        return kind, f"a page of {other} items", real_page(api, other)
    body = draw(st.sampled_from([b"<html>502 Bad Gateway</html>", b"", b"null", b"[]", b'"items"', b"\xff\xfe"]))
    return kind, f"not JSON: {body!r}", body


def _mutated_body(page: dict[str, Any], mutation: Mutation) -> bytes:
    # As text: deep nesting is written out, and integers beyond 64 bits go as JSON allows.
    return mutations.encode(mutations.apply(page, mutation))


@profiles.fuzz_settings(examples=120)
@given(data=st.data())
def test_a_broken_list_answer_is_planned_or_fails_naming_the_list(data: st.DataObject, api: FakeApiServer) -> None:
    kind, how, body = data.draw(broken_answers(api))
    dry_run = data.draw(st.booleans())
    profiles.tried["kubernetes"] += 1
    api.clear_faults()
    api.reset_counters()
    path = LISTS[kind][1]
    api.add_fault(Fault(method="GET", path_regex=path, status=200, body=body, times=-1))
    started = time.monotonic()
    _, error = run_against(api, dry_run=dry_run)
    elapsed = time.monotonic() - started
    api.clear_faults()
    event(f"{how.split(':')[0]}: {'refused' if error is not None else 'planned'}")
    if error is not None:
        assert_names_the_list(error, kind)
    assert_nothing_but_the_lease_was_written(api, dry_run=dry_run)
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{kind} {how} took {elapsed:.1f} s"


@pytest.mark.parametrize("kind", sorted(LISTS))
def test_a_continue_token_that_comes_back_ends_the_read_at_once(api: FakeApiServer, kind: str) -> None:
    profiles.tried["kubernetes"] += 1
    api.clear_faults()
    api.reset_counters()
    page = real_page(api, kind)
    page["metadata"]["continue"] = "the-same-token"
    api.add_fault(Fault(method="GET", path_regex=LISTS[kind][1], status=200, body=page, times=-1))
    started = time.monotonic()
    result, error = run_against(api, dry_run=False)
    api.clear_faults()
    assert result is None and error is not None
    assert "continue token 'the-same-token' a second time" in error.message
    assert_names_the_list(error, kind)
    assert len([r for r in api.requests if r.method == "GET" and "continue" in r.query]) == 1
    assert_nothing_but_the_lease_was_written(api, dry_run=False)
    assert time.monotonic() - started < profiles.TIME_BOUND_SECONDS


@profiles.fuzz_settings(examples=40)
@given(kind=st.sampled_from(sorted(LISTS)), token=mutations.hostile_values())
def test_a_page_whose_continue_token_is_unreadable_is_never_taken_for_the_last_page(
    api: FakeApiServer, kind: str, token: mutations.Json
) -> None:
    profiles.tried["kubernetes"] += 1
    api.clear_faults()
    api.reset_counters()
    page = real_page(api, kind)
    page["metadata"]["continue"] = token
    body = mutations.encode(page)
    api.add_fault(Fault(method="GET", path_regex=LISTS[kind][1], status=200, body=body, times=1))
    result, error = run_against(api, dry_run=True)
    api.clear_faults()
    if token is None or token == "":
        assert error is None, error  # no token: the last page, as the API server says it
    else:
        # The page says more follows: either it is fetched (and the fake API server refuses the
        # unknown token) or the read fails; it never ends here with the items seen so far.
        assert result is None and error is not None, f"continue={token!r} was read as the last page"
        assert_names_the_list(error, kind)
    assert api.writes == []


# -- the re-read before a drain ----------------------------------------------------------------
#
# A run that decides to drain re-reads the node and its pods first (Karpenter's validation).
# A broken answer there must make the drain a no-op (or the run fail), never a cordon.

DRAINING_CONFIG = {
    "nodePools": {
        "default-pool": {
            "enabled": True,
            "scaleDownCPURequestRatioLimit": 0.75,
            "neededMarkedTimeSeconds": 300,
            "minimumNodeAgeSeconds": 1200,
            "scaleUpCooldownSeconds": 600,
        }
    }
}


def light_cluster(api: FakeApiServer) -> None:
    """n1 is light and marked long ago, so a run decides to drain it; n2 and n3 have room."""
    api.add(k8s.node("n1", annotations={"node-compactor.dev/underutilized-since": "2026-01-01T00:00:00Z"}))
    api.add(k8s.node("n2"))
    api.add(k8s.node("n3"))
    api.add(k8s.pod("web-a1", node="n1", cpu="300m"))
    api.add(k8s.pod("web-a2", node="n1", cpu="300m"))
    api.add(k8s.pod("busy-b2", node="n2", cpu="3"))
    api.add(k8s.pod("busy-b3", node="n3", cpu="3"))


_REREAD: dict[str, dict[str, Any]] = {}


def reread_answer(target: str) -> dict[str, Any]:
    """What the API server answers to the re-read: node n1, or the pods on n1 (read once)."""
    if not _REREAD:
        with FakeApiServer(token=TOKEN) as server:
            light_cluster(server)
            node = server.get("Node", "n1")
            assert node is not None
            pods = [pod for pod in server.objects("Pod") if pod["spec"].get("nodeName") == "n1"]
        _REREAD["node"] = node
        _REREAD["pods"] = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": pods}
    answer: dict[str, Any] = json.loads(json.dumps(_REREAD[target]))
    return answer


@st.composite
def broken_rereads(draw: st.DrawFn) -> tuple[str, Mutation]:
    target = draw(st.sampled_from(["node", "pods"]))
    places = mutations.paths(reread_answer(target))
    if draw(st.booleans()):  # half at the top: the object itself, metadata, spec, status, items
        places = [path for path in places if len(path) <= 2] + [()]
    path = places[draw(st.integers(0, len(places) - 1))]
    if path == ():
        return target, Mutation(("answer",), "replace", draw(mutations.hostile_values()))
    return target, draw(mutations.mutations_at(path))


@profiles.fuzz_settings(examples=40)
@given(case=broken_rereads())
def test_a_broken_answer_to_the_re_read_before_a_drain_never_cordons(case: tuple[str, Mutation]) -> None:
    target, mutation = case
    profiles.tried["kubernetes"] += 1
    if mutation.path == ("answer",):
        body = mutations.encode(mutation.value)  # the whole answer replaced
    else:
        body = mutations.encode(mutations.apply(reread_answer(target), mutation))
    with FakeApiServer(token=TOKEN) as api:
        light_cluster(api)
        if target == "node":
            # Every read of n1: the soft taint's, then the re-read before the drain.
            api.add_fault(Fault(method="GET", path_regex=r"^/api/v1/nodes/n1$", status=200, body=body, times=-1))
        else:
            # The pods are listed twice (the whole cluster, then those on n1): break the second.
            arm = Fault(method="GET", path_regex=r"^/api/v1/pods$", status=200, body=body)
            api.on_request("GET", r"^/api/v1/nodes/n1$", lambda: api.add_fault(arm))
        started = time.monotonic()
        env = {"COMPACTOR_CONFIG": json.dumps(DRAINING_CONFIG), "COMPACTOR_RUN_BUDGET_SECONDS": "30"}
        try:
            result: service.RunResult | None = service.run(env, connector=connector_for(api))
            error = None
        except CompactorError as failed:
            result, error = None, failed
        elapsed = time.monotonic() - started
        node = api.get("Node", "n1")
        cordoned = bool(node and (node.get("spec") or {}).get("unschedulable"))
        refused = error is not None or (result is not None and result.outcome.stale is not None)
        event(f"{target}: {'refused' if refused else 'drained' if cordoned else 'no drain'}")
        if refused:
            assert not cordoned and api.evictions == [], f"{mutation.describe()} was refused but n1 was drained"
        assert api.pod_deletes == []
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{target} {mutation.describe()} took {elapsed:.1f} s"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"<html>200 OK</html>", id="not-json"),
        pytest.param(b"[]", id="a-list"),
        pytest.param(b"null", id="null"),
        pytest.param(b'{"metadata": 5}', id="metadata-a-number"),
    ],
)
def test_an_unreadable_answer_to_a_node_patch_is_taken_as_applied(body: bytes) -> None:
    """The status says the patch was applied; the body only names the node for the Event."""
    profiles.tried["kubernetes"] += 1
    with FakeApiServer(token=TOKEN) as api:
        light_cluster(api)
        api.add_fault(Fault(method="PATCH", path_regex=r"^/api/v1/nodes/", status=200, body=body, times=-1))
        env = {"COMPACTOR_CONFIG": json.dumps(DRAINING_CONFIG), "COMPACTOR_RUN_BUDGET_SECONDS": "30"}
        result = service.run(env, connector=connector_for(api))
        assert result.report["decision"]["node"] == "n1"
        assert result.outcome.drain_started
        assert [event["involvedObject"]["name"] for event in api.objects("Event")].count("n1") >= 1


# -- the Lease -----------------------------------------------------------------------------------


@st.composite
def broken_leases(draw: st.DrawFn) -> tuple[Mutation, bytes]:
    """The run's Lease as another run left it (expired or not), with one thing broken."""
    renewed = draw(st.sampled_from(["2026-01-01T00:00:00.000000Z", "2999-01-01T00:00:00.000000Z"]))
    lease = k8s.lease(holder="another-run", renew_time=renewed, acquire_time=renewed, duration_seconds=60)
    lease["metadata"]["resourceVersion"] = "7"
    places = mutations.paths(lease)
    mutation = draw(mutations.mutations_at(places[draw(st.integers(0, len(places) - 1))]))
    return mutation, mutations.encode(mutations.apply(lease, mutation))


@profiles.fuzz_settings(examples=60)
@given(case=broken_leases())
def test_a_broken_lease_answer_is_taken_refused_or_held_never_a_traceback(
    api: FakeApiServer, case: tuple[Mutation, bytes]
) -> None:
    mutation, body = case
    profiles.tried["kubernetes"] += 1
    api.clear_faults()
    api.reset_counters()
    api.add_fault(Fault(method="GET", path_regex=r"/leases/node-compactor$", status=200, body=body, times=-1))
    started = time.monotonic()
    _, error = run_against(api, dry_run=False)
    api.clear_faults()
    event("refused" if error is not None else "taken")
    if error is not None:
        assert "Lease" in error.message, error.message
    assert_nothing_but_the_lease_was_written(api, dry_run=False)
    assert time.monotonic() - started < profiles.TIME_BOUND_SECONDS, mutation.describe()


@pytest.mark.parametrize("kind", sorted(LISTS))
def test_a_list_item_without_metadata_is_named_by_its_kind_and_index(api: FakeApiServer, kind: str) -> None:
    """Items of a live list carry no `kind`: the error says which list and which item."""
    profiles.tried["kubernetes"] += 1
    api.clear_faults()
    page = real_page(api, kind)
    page["items"][0]["metadata"] = 5
    api.add_fault(Fault(method="GET", path_regex=LISTS[kind][1], status=200, body=mutations.encode(page)))
    _, error = run_against(api, dry_run=True)
    api.clear_faults()
    assert error is not None
    assert f"{kind} list item 0: metadata: expected an object" in "\n".join(error.problems), error.problems
