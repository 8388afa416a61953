"""`python -m compactor cleanup` against the fake API server: every trace goes, what a person set stays."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from compactor import cleanup, cli, permissions
from compactor.core.model import (
    CREATED_AT,
    DELETION_COST,
    DISABLED,
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    PLACEHOLDER_LABEL,
    REPLACEABLE_SINCE,
    REPLACED_BY,
    REPLACEMENT_FAILED_AT,
    REPLACES,
    RESERVED_TAINT,
    SOFT_TAINT,
    STEERED_COST,
    UNDERUTILIZED_SINCE,
)
from compactor.hpa.model import BASE_MIN_REPLICAS, ENABLED, MIN_REPLICAS_REASON
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import TOKEN

STAMP = "2026-11-21T11:00:00Z"
SOFT = k8s.taint(SOFT_TAINT, "true", "PreferNoSchedule")
RESERVED = k8s.taint(RESERVED_TAINT, "true", "PreferNoSchedule")
A_PERSONS_TAINT = k8s.taint("dedicated", "db")
PLACEHOLDERS = permissions.DEFAULT_PLACEHOLDER_NAMESPACE
PLACEHOLDER = "node-compactor-placeholder-0123456789"


def placeholder(name: str = PLACEHOLDER, namespace: str = PLACEHOLDERS, *, labelled: bool = True) -> dict[str, Any]:
    """A bare pod as node replacement writes one (`compactor.actuation.placeholders`), or, unlabelled, a look-alike."""
    pod = k8s.pod(name, namespace=namespace, owner_kind=None, phase="Pending")
    pod["metadata"]["labels"] = {PLACEHOLDER_LABEL: "true"} if labelled else {"app": "pause"}
    pod["metadata"]["annotations"] = {REPLACES: "replaced", CREATED_AT: STAMP}
    return pod


def every_trace(api: FakeApiServer) -> None:
    """A cluster holding every trace node-compactor can leave, beside a person's cordon, opt-out,
    taint, pod-deletion-cost and HPA minimum."""
    api.add(k8s.node("marked", annotations={UNDERUTILIZED_SINCE: STAMP}, taints=[SOFT, A_PERSONS_TAINT]))
    api.add(k8s.node("draining", annotations={UNDERUTILIZED_SINCE: STAMP, DRAIN_STARTED_AT: STAMP}, unschedulable=True))
    api.add(k8s.node("rolled-back", annotations={DRAIN_FAILED_AT: STAMP}, taints=[RESERVED]))
    api.add(k8s.node("cordoned-by-a-person", unschedulable=True, annotations={DISABLED: "true"}))
    api.add(k8s.node("untouched"))
    # Node replacement: a node pointing at its placeholder, one whose replacement failed, and the placeholder;
    # beside pods that look like one but are not node-compactor's (a name or the label missing).
    api.add(k8s.node("replaced", annotations={REPLACED_BY: PLACEHOLDER}))
    api.add(k8s.node("replacement-failed", annotations={REPLACEMENT_FAILED_AT: STAMP}))
    api.add(k8s.node("replaceable", annotations={REPLACEABLE_SINCE: STAMP}))
    api.add(placeholder())
    api.add(placeholder("a-persons-pause-pod"))
    api.add(placeholder("node-compactor-placeholder-unlabelled", labelled=False))
    api.add(k8s.pod("steered", node="marked", annotations={DELETION_COST: "-1", STEERED_COST: "-1"}))
    api.add(k8s.pod("changed-since", node="marked", annotations={DELETION_COST: "5", STEERED_COST: "-1"}))
    api.add(k8s.pod("a-persons-cost", node="untouched", annotations={DELETION_COST: "10"}))
    floor = {ENABLED: "true", BASE_MIN_REPLICAS: "2", MIN_REPLICAS_REASON: "7: query floor 7 (...)"}
    api.add(k8s.hpa("raised", min_replicas=7, annotations=floor))
    api.add(k8s.hpa("edited-since", min_replicas=4, annotations=floor))
    api.add(k8s.hpa("a-persons-minimum", min_replicas=5))
    expired = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    api.add(k8s.lease("node-compactor", duration_seconds=1, renew_time=expired))
    api.add(k8s.lease("node-compactor-hpa", holder="node-compactor-hpa-old", renew_time=expired))
    api.reset_counters()


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_LEASE_NAMESPACE", "KUBECONFIG"):
        monkeypatch.delenv(variable, raising=False)
    every_trace(api)
    return str(api.write_kubeconfig(tmp_path / "kubeconfig"))


def annotations_of(api: FakeApiServer, kind: str, name: str, namespace: str | None = None) -> dict[str, str]:
    found = api.get(kind, name, namespace)
    assert found is not None
    notes: dict[str, str] = found["metadata"].get("annotations") or {}
    return notes


def node_spec(api: FakeApiServer, name: str) -> dict[str, Any]:
    found = api.get("Node", name)
    assert found is not None
    spec: dict[str, Any] = found.get("spec") or {}
    return spec


def hpa_min(api: FakeApiServer, name: str) -> int:
    found = api.get("HorizontalPodAutoscaler", name, "default")
    assert found is not None
    value: int = found["spec"]["minReplicas"]
    return value


def cleanup_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = cli.main(["cleanup", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def removed_of(report: dict[str, Any], kind: str, name: str) -> list[str]:
    return next((entry["what"] for entry in report["removed"] if (entry["kind"], entry["name"]) == (kind, name)), [])


def left_of(report: dict[str, Any], kind: str, name: str) -> list[str]:
    return next((entry["what"] for entry in report["left"] if (entry["kind"], entry["name"]) == (kind, name)), [])


def test_cleanup_removes_every_trace_and_leaves_what_a_person_set(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, _ = cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert code == 0
    # Nodes: no annotation or taint of node-compactor's on any node; its own cordon undone.
    for name in ("marked", "draining", "rolled-back", "cordoned-by-a-person", "untouched", "replaced", "replaceable"):
        notes = annotations_of(api, "Node", name)
        ours = {
            UNDERUTILIZED_SINCE,
            DRAIN_STARTED_AT,
            DRAIN_FAILED_AT,
            REPLACED_BY,
            REPLACEMENT_FAILED_AT,
            REPLACEABLE_SINCE,
        }
        assert not ours & notes.keys(), name
        keys = {taint["key"] for taint in node_spec(api, name).get("taints") or []}
        assert not {SOFT_TAINT, RESERVED_TAINT} & keys, name
    assert not node_spec(api, "draining").get("unschedulable")
    # A person's: the cordon, the opt-out, the taint.
    assert node_spec(api, "cordoned-by-a-person")["unschedulable"] is True
    assert annotations_of(api, "Node", "cordoned-by-a-person")[DISABLED] == "true"
    assert node_spec(api, "marked")["taints"] == [A_PERSONS_TAINT]
    # Pods: our cost and record gone; a cost changed since stays, without our record; a person's stays.
    assert not {DELETION_COST, STEERED_COST} & annotations_of(api, "Pod", "steered", "default").keys()
    assert annotations_of(api, "Pod", "changed-since", "default") == {DELETION_COST: "5"}
    assert annotations_of(api, "Pod", "a-persons-cost", "default") == {DELETION_COST: "10"}
    # HPAs: the base restored where minReplicas is still ours; an owner's edit and a person's minimum stay.
    assert hpa_min(api, "raised") == 2
    assert hpa_min(api, "edited-since") == 4
    assert hpa_min(api, "a-persons-minimum") == 5
    for name in ("raised", "edited-since"):
        notes = annotations_of(api, "HorizontalPodAutoscaler", name, "default")
        assert notes == {ENABLED: "true"}, name
    # Leases: both gone.
    assert api.get("Lease", "node-compactor", "kube-system") is None
    assert api.get("Lease", "node-compactor-hpa", "kube-system") is None
    # Placeholders: node-compactor's gone; the look-alikes stay.
    assert api.get("Pod", PLACEHOLDER, PLACEHOLDERS) is None
    assert api.get("Pod", "a-persons-pause-pod", PLACEHOLDERS) is not None
    assert api.get("Pod", "node-compactor-placeholder-unlabelled", PLACEHOLDERS) is not None
    # Nothing deleted but the Leases and the placeholder; no pod evicted.
    deletes = api.writes_of(method="DELETE")
    assert sorted(write.name for write in deletes) == ["node-compactor", "node-compactor-hpa", PLACEHOLDER]
    assert [(write.namespace, write.name) for write in api.pod_deletes] == [(PLACEHOLDERS, PLACEHOLDER)]
    assert api.evictions == []
    # The report says what went and what stayed.
    assert "cordon (node-compactor's drain: uncordoned)" in removed_of(report, "Node", "draining")
    assert any("someone else cordoned it" in text for text in left_of(report, "Node", "cordoned-by-a-person"))
    assert any(DISABLED in text for text in left_of(report, "Node", "cordoned-by-a-person"))
    assert any("minReplicas 7 -> 2" in text for text in removed_of(report, "HorizontalPodAutoscaler", "raised"))
    assert any("the owner's" in text for text in left_of(report, "HorizontalPodAutoscaler", "edited-since"))
    assert any("pod-deletion-cost 5" in text for text in left_of(report, "Pod", "changed-since"))
    assert removed_of(report, "Lease", "node-compactor") == ["deleted"]
    assert removed_of(report, "Pod", PLACEHOLDER) == [
        "placeholder pod deleted (it asked for a node to replace replaced)"
    ]
    assert removed_of(report, "Node", "replaced") == [f"annotation {REPLACED_BY}"]
    assert removed_of(report, "Node", "replacement-failed") == [f"annotation {REPLACEMENT_FAILED_AT}"]
    assert report["failed"] == [] and report["refused"] is None


def test_every_write_is_guarded_by_the_resource_version_it_was_planned_from(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup_json(capsys, "--kubeconfig", kubeconfig)
    patches = api.writes_of(method="PATCH")
    assert patches
    assert all(write.body["metadata"].get("resourceVersion") for write in patches)


def test_a_second_cleanup_finds_nothing_left(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup_json(capsys, "--kubeconfig", kubeconfig)
    api.reset_counters()
    code, report, _ = cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert code == 0
    assert report["removed"] == [] and report["failed"] == []
    assert api.writes_of(method="PATCH") == []
    # Only the Leases cleanup held while it worked were written, and none is left.
    assert {write.kind for write in api.writes} == {"Lease"}
    assert api.objects("Lease") == []


def test_a_dry_run_reports_everything_and_writes_nothing(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = api.snapshot()
    code, report, _ = cleanup_json(capsys, "--kubeconfig", kubeconfig, "--dry-run")
    assert code == 0
    assert report["dryRun"] is True
    assert api.writes == []
    assert api.snapshot() == before
    assert "cordon (node-compactor's drain: uncordoned)" in removed_of(report, "Node", "draining")
    assert removed_of(report, "Lease", "node-compactor-hpa") == ["deleted"]
    assert removed_of(report, "Pod", PLACEHOLDER)
    assert removed_of(report, "Node", "replaced") == [f"annotation {REPLACED_BY}"]


def test_the_human_report_lists_what_went_and_what_stayed(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["cleanup", "--kubeconfig", kubeconfig, "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("Would remove (dry run: nothing was written):\n")
    assert "  Node draining: annotation node-compactor.dev/underutilized-since" in out
    assert f"  Pod {PLACEHOLDERS}/{PLACEHOLDER}: placeholder pod deleted" in out
    assert f"  Node replaced: annotation {REPLACED_BY}" in out
    assert "Left as they are (not node-compactor's):" in out
    assert "  HorizontalPodAutoscaler default/a-persons-minimum" not in out


def test_a_held_lease_refuses_with_exit_1_and_changes_nothing(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    api.add(k8s.lease("node-compactor", holder="node-compactor-run", renew_time=renewed, duration_seconds=600))
    api.reset_counters()
    code, report, err = cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert code == 1
    assert api.writes == []
    assert "held by node-compactor-run" in report["refused"]
    assert "a node-compactor run is in progress" in err


def test_a_conflict_reads_the_node_again_and_keeps_what_changed_meanwhile(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def a_person_cordons_it() -> None:
        node = api.get("Node", "marked")
        assert node is not None
        node["spec"]["unschedulable"] = True
        node["metadata"]["labels"]["team"] = "db"
        api.add(node)

    api.on_request("GET", r"/api/v1/nodes$", a_person_cordons_it)  # after cleanup read the nodes
    code, report, _ = cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert code == 0
    statuses = [r.status for r in api.requests if r.method == "PATCH" and r.path.endswith("/nodes/marked")]
    assert statuses == [409, 200]
    assert UNDERUTILIZED_SINCE not in annotations_of(api, "Node", "marked")
    assert node_spec(api, "marked")["unschedulable"] is True  # the person's cordon, made meanwhile, stays
    assert any("someone else cordoned it" in text for text in left_of(report, "Node", "marked"))


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Fault(method="PATCH", path_regex=r"/nodes/draining$", status=429), id="node"),
        pytest.param(Fault(method="PATCH", path_regex=r"/pods/steered$", status=429), id="pod"),
        pytest.param(Fault(method="PATCH", path_regex=r"/horizontalpodautoscalers/raised$", status=429), id="hpa"),
        pytest.param(Fault(method="DELETE", path_regex=r"/leases/node-compactor$", status=429), id="lease"),
        pytest.param(Fault(method="DELETE", path_regex=f"/pods/{PLACEHOLDER}$", status=429), id="placeholder"),
    ],
)
def test_a_429_once_on_a_write_is_waited_out_and_cleanup_completes(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str], fault: Fault
) -> None:
    api.add_fault(fault)  # API Priority and Fairness refused the request before carrying it out
    code, report, err = cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert code == 0, err
    assert [r.status for r in api.requests if r.status == 429] == [429]
    assert report["failed"] == []
    assert not node_spec(api, "draining").get("unschedulable")
    assert not {DELETION_COST, STEERED_COST} & annotations_of(api, "Pod", "steered", "default").keys()
    assert hpa_min(api, "raised") == 2
    assert api.get("Pod", PLACEHOLDER, PLACEHOLDERS) is None
    assert api.objects("Lease") == []


def test_a_placeholder_gone_meanwhile_is_no_failure(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add_fault(Fault(method="DELETE", path_regex=f"/pods/{PLACEHOLDER}$", status=404))
    code, report, err = cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert code == 0, err
    assert report["failed"] == []
    assert removed_of(report, "Pod", PLACEHOLDER) == []  # someone else deleted it: not cleanup's doing


def test_a_placeholder_that_cannot_be_deleted_fails_the_cleanup_naming_it(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add_fault(Fault(method="DELETE", path_regex=f"/pods/{PLACEHOLDER}$", status=403, times=-1))
    code, report, err = cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert code == 1
    (failed,) = report["failed"]
    assert (failed["kind"], failed["namespace"], failed["name"]) == ("Pod", PLACEHOLDERS, PLACEHOLDER)
    assert PLACEHOLDER in err
    # Everything else was still cleaned up, the Leases last.
    assert REPLACED_BY not in annotations_of(api, "Node", "replaced")
    assert api.objects("Lease") == []


def test_placeholders_are_deleted_in_the_namespace_cleanup_is_given_and_only_reported_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With placeholderNamespace `ops-placeholders`, `--placeholder-namespace` names it; a placeholder left in the
    default namespace is reported, never deleted. (Its own server: the suite's invariant knows the default only.)"""
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_LEASE_NAMESPACE", "KUBECONFIG"):
        monkeypatch.delenv(variable, raising=False)
    with FakeApiServer(token=TOKEN) as api:
        api.add(placeholder(namespace="ops-placeholders"))
        api.add(placeholder("node-compactor-placeholder-elsewhere"))
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code, report, _ = cleanup_json(
            capsys, "--kubeconfig", kubeconfig, "--placeholder-namespace", "ops-placeholders"
        )
        assert code == 0
        assert [(write.namespace, write.name) for write in api.pod_deletes] == [("ops-placeholders", PLACEHOLDER)]
        assert api.get("Pod", "node-compactor-placeholder-elsewhere", PLACEHOLDERS) is not None
        (left,) = left_of(report, "Pod", "node-compactor-placeholder-elsewhere")
        assert f"--placeholder-namespace {PLACEHOLDERS}" in left


def test_without_a_placeholder_namespace_cleanup_looks_in_the_configurations_default() -> None:
    from compactor.settings.config import Config

    default = Config.model_validate({"nodePools": {}}).placeholder_namespace
    assert cli.build_parser().parse_args(["cleanup"]).placeholder_namespace == default == PLACEHOLDERS


def _meta(pod: dict[str, Any], **changes: Any) -> dict[str, Any]:
    pod["metadata"].update(changes)
    return pod


@pytest.mark.parametrize(
    ("pod", "deleted", "left"),
    [
        pytest.param(placeholder(), True, False, id="labelled-named-in-its-namespace"),
        pytest.param(placeholder("web-0"), False, False, id="not-named-as-one"),
        pytest.param(placeholder(labelled=False), False, False, id="not-labelled"),
        pytest.param(_meta(placeholder(), labels={PLACEHOLDER_LABEL: "false"}), False, False, id="label-not-true"),
        pytest.param(placeholder(namespace="default"), False, True, id="in-another-namespace"),
        pytest.param(_meta(placeholder(), deletionTimestamp=STAMP), False, False, id="going-away-already"),
    ],
)
def test_only_a_labelled_and_named_pod_in_the_placeholder_namespace_is_deleted(
    pod: dict[str, Any], deleted: bool, left: bool
) -> None:
    change = cleanup.plan_placeholder(pod, PLACEHOLDERS)
    assert (change is not None and change.delete) is deleted
    assert (change is not None and bool(change.left)) is left
    if change is not None:
        assert change.patch is None  # a placeholder is deleted or left, never changed


def test_the_pure_plan_never_touches_a_node_without_traces() -> None:
    assert cleanup.plan_node(k8s.node("plain")) is None
    assert cleanup.plan_pod(k8s.pod("plain", node="n", annotations={DELETION_COST: "3"})) is None
    assert cleanup.plan_hpa(k8s.hpa("plain")) is None


def test_an_hpa_whose_record_of_our_value_is_missing_keeps_its_minimum() -> None:
    change = cleanup.plan_hpa(k8s.hpa("h", min_replicas=7, annotations={BASE_MIN_REPLICAS: "2"}))
    assert change is not None and change.patch is not None
    assert "spec" not in change.patch
    assert any("may be the owner's" in text for text in change.left)


def _rbac_request(method: str, path: str) -> tuple[str, str, str, str | None, str | None]:
    """(apiGroup, resource, verb, name, namespace) of one request, as RBAC authorizes it."""
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = None
    if rest[:1] == ["namespaces"]:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
    verbs = {"GET": "get" if name else "list", "PATCH": "patch", "PUT": "update", "DELETE": "delete", "POST": "create"}
    return group, resource, verbs[method], name, namespace


def test_cleanup_needs_only_the_rules_it_declares_and_the_function_has_none_of_them(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup_json(capsys, "--kubeconfig", kubeconfig)
    assert api.requests
    assert any(request.method == "DELETE" and PLACEHOLDER in request.path for request in api.requests)
    for request in api.requests:
        group, resource, verb, name, namespace = _rbac_request(request.method, request.path)
        assert any(
            rule.api_group == group
            and rule.resource == resource
            and verb in rule.verbs
            and (not rule.resource_names or name in rule.resource_names)
            and (not rule.lease_namespace or namespace == permissions.DEFAULT_LEASE_NAMESPACE)
            and (not rule.placeholder_namespace or namespace == permissions.DEFAULT_PLACEHOLDER_NAMESPACE)
            for rule in permissions.CLEANUP_RBAC_RULES
        ), f"{request.method} {request.path} needs ({group!r}, {resource}, {verb}, {name}, {namespace})"
    # The function never deletes a Lease: its roles stay as small as before.
    for rules in (permissions.RBAC_RULES, permissions.HPA_FLOOR_RBAC_RULES, permissions.PLACEHOLDER_RBAC_RULES):
        assert not any(rule.resource == "leases" and "delete" in rule.verbs for rule in rules)
    assert "container.leases.delete" not in permissions.IAM_PERMISSIONS + permissions.HPA_FLOOR_IAM_PERMISSIONS
    # Cleanup deletes pods in the placeholder namespace only.
    deleting = [rule for rule in permissions.CLEANUP_RBAC_RULES if rule.resource == "pods" and "delete" in rule.verbs]
    assert deleting and all(rule.placeholder_namespace for rule in deleting)


def test_only_node_compactors_own_taint_effect_goes_and_the_others_keep_their_order() -> None:
    theirs = k8s.taint(SOFT_TAINT, "true", "NoSchedule")
    node = k8s.node("n", taints=[A_PERSONS_TAINT, SOFT, theirs, {"key": RESERVED_TAINT}])
    change = cleanup.plan_node(node)
    assert change is not None and change.patch is not None
    assert change.patch["spec"]["taints"] == [A_PERSONS_TAINT, theirs, {"key": RESERVED_TAINT}]
    assert change.removed == (f"taint {SOFT_TAINT}:PreferNoSchedule",)
    assert any("an effect node-compactor never sets" in text for text in change.left)
