"""The PreferNoSchedule taint on marked nodes, written over real HTTP against the fake API server."""

from __future__ import annotations

from typing import Any

from compactor.core.model import PREFER_NO_SCHEDULE, SOFT_TAINT, UNDERUTILIZED_SINCE
from tests.fakeapi import builders as k8s
from tests.fakeapi.server import FakeApiServer
from tests.integration.conftest import MARKED, light_cluster, node_taints, run_once

OURS = {"key": SOFT_TAINT, "value": "true", "effect": PREFER_NO_SCHEDULE}
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-11-21T11:00:00Z"}


def taint_patches(api: FakeApiServer) -> list[Any]:
    return [w for w in api.writes_of("Node", "PATCH") if "taints" in ((w.body or {}).get("spec") or {})]


def test_a_newly_marked_node_gets_the_taint_beside_its_own_taints_unchanged(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", taints=[GPU, NOT_READY]))
    api.add(k8s.node("n2"))
    api.add(k8s.pod("busy", node="n2", cpu="3900m"))
    result = run_once(api)
    assert result.outcome.marks_added == ["n1"]
    assert result.outcome.soft_taints_added == ["n1"]
    # The other taints are sent back exactly as read, timeAdded included.
    assert node_taints(api, "n1") == [GPU, NOT_READY, OURS]
    patches = [
        w for w in api.writes_of("Node", "PATCH") if w.name == "n1" and "taints" in (w.body or {}).get("spec", {})
    ]
    assert len(patches) == 1
    body = patches[0].body
    assert body is not None and body["metadata"]["resourceVersion"], "guarded by the node's resourceVersion"


def test_a_node_that_is_no_longer_underutilized_loses_the_taint_and_keeps_the_others(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: MARKED}, taints=[GPU, OURS]))
    api.add(k8s.pod("busy", node="n1", cpu="3900m"))
    result = run_once(api)
    assert result.outcome.soft_taints_removed == ["n1"]
    assert node_taints(api, "n1") == [GPU]


def test_a_cordoned_node_keeps_its_taints_untouched(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", unschedulable=True, taints=[GPU]))
    api.add(k8s.node("n2", unschedulable=True, annotations={UNDERUTILIZED_SINCE: MARKED}, taints=[OURS]))
    api.add(k8s.pod("busy", node="n2", cpu="3900m"))
    before = {name: node_taints(api, name) for name in ("n1", "n2")}
    run_once(api)
    assert {name: node_taints(api, name) for name in ("n1", "n2")} == before
    assert OURS in before["n2"] and OURS not in before["n1"]
    assert not taint_patches(api)


def test_a_dry_run_writes_no_taint(api: FakeApiServer) -> None:
    light_cluster(api)
    run_once(api, dry_run=True)
    assert node_taints(api, "n1") == []
    assert not api.writes_of("Node", "PATCH")


def test_the_drain_still_runs_with_the_taint_written_first(api: FakeApiServer) -> None:
    light_cluster(api)
    result = run_once(api)
    assert result.report["decision"]["action"] == "drain"
    assert result.outcome.drain_completed
    assert OURS in node_taints(api, "n1")
