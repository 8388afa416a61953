"""Pipelined removal over real HTTP: a drain starts while an emptied node awaits removal, the newest
emptied node is given back when pods need the room, and a run killed between the two leaves a state
the next run finishes.

The autouse invariant (conftest) checks after each test that at most one node is being drained
(carries drain-started-at with pods left to move) and that no pod was deleted.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from compactor.core.model import DRAIN_FAILED_AT, DRAIN_STARTED_AT
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import cordoned, event_reasons, later, light_cluster, node_annotations, run_once
from tests.integration.test_crash_recovery import after_the_dead_runs_lease, cordon_sent, kill_when, start_run


def with_emptied_node(api: FakeApiServer, started: str = "2026-11-21T11:55:00Z") -> None:
    """light_cluster plus e1: drained by an earlier run, only its DaemonSet pod left, awaiting removal."""
    light_cluster(api)
    api.add(k8s.node("e1", unschedulable=True, annotations={DRAIN_STARTED_AT: started}))
    api.add(k8s.pod("fluentbit-e1", namespace="kube-system", node="e1", owner_kind="DaemonSet", cpu="50m"))


def test_a_drain_starts_while_an_emptied_node_waits_for_the_autoscaler(api: FakeApiServer) -> None:
    with_emptied_node(api)
    result = run_once(api)
    assert result.report["decision"]["action"] == "drain"
    assert result.report["decision"]["node"] == "n1"
    assert result.report["awaitingRemoval"] == ["e1"]
    assert result.outcome.drain_completed
    assert cordoned(api, "e1") and cordoned(api, "n1")


def test_pods_that_need_room_get_the_newest_emptied_node_back(api: FakeApiServer) -> None:
    with_emptied_node(api)
    run_once(api)  # drains n1: now e1 (older) and n1 (newer) await removal
    waiting = "0/3 nodes are available: 3 Insufficient cpu."
    api.add(k8s.pod("checkout-x", cpu="500m", phase="Pending", unschedulable_message=waiting))
    given_back = run_once(api, at=later(300))
    assert given_back.report["decision"]["action"] == "rollback"
    assert given_back.report["decision"]["node"] == "n1"
    assert given_back.report["decision"]["reason"].startswith("capacity needed again")
    assert not cordoned(api, "n1") and cordoned(api, "e1")
    assert DRAIN_FAILED_AT in node_annotations(api, "n1") and DRAIN_STARTED_AT not in node_annotations(api, "n1")
    assert "NodeCompactorRollback" in event_reasons(api, "n1")


def test_killed_after_a_pipelined_cordon_the_next_run_continues_and_keeps_the_waiting_node(
    api: FakeApiServer, tmp_path: Path
) -> None:
    started = (datetime.now(UTC) - timedelta(seconds=300)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with_emptied_node(api, started=started)
    api.add_fault(Fault(method="POST", path_regex=r"/eviction$", delay=20, times=-1))
    kill_when(start_run(api, tmp_path), lambda: cordon_sent(api, "n1"))
    assert cordoned(api, "n1") and DRAIN_STARTED_AT in node_annotations(api, "n1")
    api.clear_faults()
    time.sleep(0.5)  # let the fake finish requests the dead run left behind
    result = run_once(api, at=after_the_dead_runs_lease())
    assert result.report["decision"]["action"] in ("continue-drain", "none")
    assert api.get("Pod", "web-a1") is None and api.get("Pod", "web-a2") is None
    assert cordoned(api, "e1") and DRAIN_STARTED_AT in node_annotations(api, "e1")
